package consumer

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	fav1alpha1 "github.com/federation-autoscaler/federation-autoscaler/agent/apis/v1alpha1"
	"github.com/federation-autoscaler/federation-autoscaler/agent/liqo"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// projector keeps every VirtualNodeState's status in step with its virtual
// Node: Creating until the node is Ready, Running while it is, Deleting once
// the VirtualNodeState is being deleted, Failed when the node never appears
// within NodeWait or disappears while Running. It also gives a virtual node
// without one its providerID.
type projector struct {
	a       *Agent
	factory informers.SharedInformerFactory
	nodes   listersv1.NodeLister
	synced  cache.InformerSynced
	wake    chan struct{}

	ipOnce sync.Mutex
	ip     string
}

func newProjector(a *Agent) *projector {
	f := informers.NewSharedInformerFactoryWithOptions(a.cfg.Kube, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = liqo.TypeLabel + "=" + liqo.VirtualNodeType
	}))
	inf := f.Core().V1().Nodes()
	p := &projector{a: a, factory: f, nodes: inf.Lister(), synced: inf.Informer().HasSynced, wake: make(chan struct{}, 1)}
	_, _ = inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { p.kick() },
		UpdateFunc: func(any, any) { p.kick() },
		DeleteFunc: func(any) { p.kick() },
	})
	return p
}

func (p *projector) start(ctx context.Context) error {
	p.factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), p.synced) {
		return fmt.Errorf("waiting for the virtual-node cache: %w", context.Cause(ctx))
	}
	return nil
}

func (p *projector) shutdown() { p.factory.Shutdown() }

func (p *projector) kick() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// node returns the cached virtual node name, or nil.
func (p *projector) node(name string) *corev1.Node {
	n, err := p.nodes.Get(name)
	if err != nil {
		return nil
	}
	return n
}

// nodeIP returns the address of node name (or of the first node), cached
// once found.
func (p *projector) nodeIP(name string) string {
	p.ipOnce.Lock()
	defer p.ipOnce.Unlock()
	if p.ip != "" {
		return p.ip
	}
	ctx := context.Background()
	if name != "" {
		if n, err := p.a.cfg.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); err == nil {
			p.ip = nodeAddress(n)
		}
		return p.ip
	}
	list, err := p.a.cfg.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 20})
	if err != nil {
		return ""
	}
	for i := range list.Items {
		if list.Items[i].Labels[liqo.TypeLabel] == liqo.VirtualNodeType {
			continue
		}
		if ip := nodeAddress(&list.Items[i]); ip != "" {
			p.ip = ip
			break
		}
	}
	return p.ip
}

func (p *projector) run(ctx context.Context) {
	t := p.a.cfg.Clock.NewTicker(p.a.cfg.Resync)
	defer t.Stop()
	for {
		if err := p.reconcileAll(ctx); err != nil {
			if ctx.Err() == nil {
				p.a.projStreak.Failed(ctx, err)
			}
		} else {
			p.a.projStreak.Succeeded(ctx)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		case <-p.wake:
		}
	}
}

func (p *projector) reconcileAll(ctx context.Context) error {
	list, err := p.a.listVNS(ctx)
	if err != nil {
		return err
	}
	for i := range list {
		if err := p.reconcile(ctx, &list[i]); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			p.a.log.Warn("Projecting a virtual node failed", "vns", list[i].Name, "err", err)
		}
	}
	return nil
}

// observeNode sets the status from the virtual node that exists.
func observeNode(want *fav1alpha1.VirtualNodeStateStatus, node *corev1.Node) {
	want.VirtualNodeName, want.ProviderID, want.Allocatable = node.Name, node.Spec.ProviderID, node.Status.Allocatable.DeepCopy()
	switch {
	case liqo.NodeReady(node):
		want.Phase, want.Message = fav1alpha1.VirtualNodeRunning, "virtual node is Ready"
	case want.Phase == "" || want.Phase == fav1alpha1.VirtualNodeCreating:
		want.Phase, want.Message = fav1alpha1.VirtualNodeCreating, "virtual node is not Ready yet"
	case want.Phase == fav1alpha1.VirtualNodeRunning:
		want.Message = "virtual node is not Ready"
	}
}

// observeMissing sets the status while the virtual node name does not
// exist: lost once it ran, failed once NodeWait passed, else still coming.
func (p *projector) observeMissing(want *fav1alpha1.VirtualNodeStateStatus, v *fav1alpha1.VirtualNodeState, name string, now metav1.Time) {
	switch want.Phase {
	case fav1alpha1.VirtualNodeRunning:
		want.Phase, want.Message = fav1alpha1.VirtualNodeFailed, fmt.Sprintf("virtual node %s disappeared", name)
	case "", fav1alpha1.VirtualNodeCreating:
		if now.Sub(v.CreationTimestamp.Time) > p.a.cfg.NodeWait {
			want.Phase, want.Message = fav1alpha1.VirtualNodeFailed, fmt.Sprintf("virtual node %s did not appear within %s", name, p.a.cfg.NodeWait)
		} else {
			want.Phase, want.Message = fav1alpha1.VirtualNodeCreating, "waiting for the virtual node"
		}
	}
}

// reconcile projects one VirtualNodeState.
func (p *projector) reconcile(ctx context.Context, v *fav1alpha1.VirtualNodeState) error {
	name := v.Status.VirtualNodeName
	if name == "" {
		name = v.Spec.ResourceSliceName
	}
	if name == "" {
		name = sliceName(v.Spec.ReservationID)
	}
	now := metav1.NewTime(p.a.cfg.Clock.Now())
	want := v.Status.DeepCopy()
	want.ResourceSliceName = v.Spec.ResourceSliceName
	want.ObservedGeneration = v.Generation
	node := p.node(name)
	switch {
	case v.DeletionTimestamp != nil:
		want.Phase, want.Message = fav1alpha1.VirtualNodeDeleting, "releasing the chunk"
	case node != nil:
		if node.Spec.ProviderID == "" {
			if err := p.a.ensureProviderID(ctx, node, api.ProviderID(v.Spec.ProviderClusterID, v.Spec.ReservationID)); err != nil {
				return err
			}
			return nil // the node update event brings us back
		}
		observeNode(want, node)
	default:
		p.observeMissing(want, v, name, now)
	}
	ready := metav1.Condition{Type: fav1alpha1.VirtualNodeConditionReady, Status: metav1.ConditionFalse, Reason: string(want.Phase), Message: want.Message, ObservedGeneration: v.Generation, LastTransitionTime: now}
	if want.Phase == fav1alpha1.VirtualNodeRunning && node != nil && liqo.NodeReady(node) {
		ready.Status = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&want.Conditions, ready)
	if want.Phase == fav1alpha1.VirtualNodeFailed {
		meta.SetStatusCondition(&want.Conditions, metav1.Condition{Type: fav1alpha1.VirtualNodeConditionFailed, Status: metav1.ConditionTrue, Reason: "VirtualNodeLost", Message: want.Message, ObservedGeneration: v.Generation, LastTransitionTime: now})
	}
	if want.Phase != v.Status.Phase {
		want.LastTransitionTime = &now
	}
	if equality.Semantic.DeepEqual(*want, v.Status) {
		return nil
	}
	wasLost, wasStarting := lost(v), starting(v)
	v.Status = *want
	if err := p.a.cfg.Client.Status().Update(ctx, v); err != nil {
		return err
	}
	p.a.changes.Notify() // the console shows the virtual node's state
	if lost(v) != wasLost || starting(v) != wasStarting {
		p.a.BeatNow() // the broker's disconnect grace and migrations listen to it
	}
	return nil
}
