package provider

import (
	"context"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/federation-autoscaler/federation-autoscaler/agent/liqo"
)

// Labels that identify Liqo objects (github.com/liqotech/liqo/pkg/consts).
const (
	// liqoTypeLabel marks Liqo's virtual nodes (value virtual-node).
	liqoTypeLabel       = "liqo.io/type"
	liqoVirtualNodeType = "virtual-node"
	// liqoManagedByLabel = shadowpod marks the pods Liqo runs here on behalf
	// of a consumer (offloaded pods).
	liqoManagedByLabel   = "liqo.io/managed-by"
	liqoShadowPodManaged = "shadowpod"
)

// Capacity watches Nodes and Pods through shared informers and computes
// what the provider can lend right now, without listing per cycle.
//
// The rule (docs/agents.md): free = Σ allocatable of nodes that are Ready,
// schedulable (not cordoned) and not Liqo virtual nodes, minus the requests
// of every pod bound to one of those nodes that is not terminal (Succeeded,
// Failed) and was not offloaded here by a consumer. Offloaded pods run on
// capacity the broker already counts as reserved chunks, so subtracting them
// again would lend it twice over. Every allocatable key is kept, clamped at
// zero.
type Capacity struct {
	factories []informers.SharedInformerFactory
	nodes     listersv1.NodeLister
	pods      listersv1.PodLister
	synced    []cache.InformerSynced
	changed   chan struct{}
}

// NewCapacity builds the informers. resync is the informers' resync period
// (0: none; events are enough).
func NewCapacity(kube kubernetes.Interface, resync time.Duration) (*Capacity, error) {
	nodeFactory := informers.NewSharedInformerFactory(kube, resync)
	// Only pods that can hold capacity: bound and not terminal. The API
	// server filters, so the cache never holds finished jobs.
	podFactory := informers.NewSharedInformerFactoryWithOptions(kube, resync, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"
	}))
	c := &Capacity{factories: []informers.SharedInformerFactory{nodeFactory, podFactory}, changed: make(chan struct{}, 1)}
	nodeInf := nodeFactory.Core().V1().Nodes()
	podsInf := podFactory.Core().V1().Pods()
	notify := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.signal() },
		UpdateFunc: func(any, any) { c.signal() },
		DeleteFunc: func(any) { c.signal() },
	}
	if _, err := nodeInf.Informer().AddEventHandler(notify); err != nil {
		return nil, fmt.Errorf("watching nodes: %w", err)
	}
	if _, err := podsInf.Informer().AddEventHandler(notify); err != nil {
		return nil, fmt.Errorf("watching pods: %w", err)
	}
	c.nodes = nodeInf.Lister()
	c.pods = podsInf.Lister()
	c.synced = []cache.InformerSynced{nodeInf.Informer().HasSynced, podsInf.Informer().HasSynced}
	return c, nil
}

func (c *Capacity) signal() {
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

// Changed is signalled (coalesced) on every node or pod event.
func (c *Capacity) Changed() <-chan struct{} { return c.changed }

// Start starts the informers (they stop when ctx ends; call Shutdown to wait
// for them) and waits for their caches; it returns an error when ctx ends
// first.
func (c *Capacity) Start(ctx context.Context) error {
	for _, f := range c.factories {
		f.Start(ctx.Done())
	}
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return fmt.Errorf("waiting for the node and pod caches: %w", context.Cause(ctx))
	}
	return nil
}

// Shutdown waits for the informers' goroutines after ctx ended.
func (c *Capacity) Shutdown() {
	for _, f := range c.factories {
		f.Shutdown()
	}
}

// Free computes the free capacity from the caches.
func (c *Capacity) Free() (corev1.ResourceList, error) {
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("listing cached nodes: %w", err)
	}
	pods, err := c.pods.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("listing cached pods: %w", err)
	}
	return FreeCapacity(nodes, pods), nil
}

// Nodes returns the cached nodes sorted by name.
func (c *Capacity) Nodes() []*corev1.Node {
	nodes, _ := c.nodes.List(labels.Everything())
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	return nodes
}

// Lendable reports whether node's capacity counts (Ready, schedulable, not
// a virtual node).
func Lendable(n *corev1.Node) bool {
	if n.Spec.Unschedulable || n.Labels[liqoTypeLabel] == liqoVirtualNodeType {
		return false
	}
	return liqo.NodeReady(n)
}

// Offloaded reports whether pod runs here on behalf of a consumer.
func Offloaded(p *corev1.Pod) bool { return p.Labels[liqoManagedByLabel] == liqoShadowPodManaged }

// FreeCapacity applies the free-capacity rule (see Capacity) to nodes and
// pods.
func FreeCapacity(nodes []*corev1.Node, pods []*corev1.Pod) corev1.ResourceList {
	free := corev1.ResourceList{}
	lendable := map[string]bool{}
	for _, n := range nodes {
		if !Lendable(n) {
			continue
		}
		lendable[n.Name] = true
		for k, q := range n.Status.Allocatable {
			sum := free[k]
			sum.Add(q)
			free[k] = sum
		}
	}
	for _, p := range pods {
		if p.Spec.NodeName == "" || !lendable[p.Spec.NodeName] || Offloaded(p) ||
			p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for k, q := range PodRequests(p) {
			sum, ok := free[k]
			if !ok {
				continue
			}
			sum.Sub(q)
			free[k] = sum
		}
	}
	for k, q := range free {
		if q.Sign() < 0 {
			free[k] = *resource.NewQuantity(0, q.Format)
		}
	}
	return free
}

// PodRequests is what the scheduler reserves for pod: the larger of (the
// app containers plus restartable init containers, i.e. sidecars) and each
// regular init container plus the sidecars started before it, plus the pod
// overhead.
func PodRequests(p *corev1.Pod) corev1.ResourceList {
	reqs := corev1.ResourceList{}
	add := func(dst, src corev1.ResourceList) {
		for k, q := range src {
			s := dst[k]
			s.Add(q)
			dst[k] = s
		}
	}
	for _, c := range p.Spec.Containers {
		add(reqs, c.Resources.Requests)
	}
	sidecars := corev1.ResourceList{}
	initMax := corev1.ResourceList{}
	for _, c := range p.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			add(reqs, c.Resources.Requests)
			add(sidecars, c.Resources.Requests)
			continue
		}
		step := sidecars.DeepCopy()
		add(step, c.Resources.Requests)
		for k, q := range step {
			if cur, ok := initMax[k]; !ok || q.Cmp(cur) > 0 {
				initMax[k] = q
			}
		}
	}
	for k, q := range initMax {
		if cur, ok := reqs[k]; !ok || q.Cmp(cur) > 0 {
			reqs[k] = q
		}
	}
	add(reqs, p.Spec.Overhead)
	return reqs
}
