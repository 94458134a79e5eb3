// Package cluster assembles a simulated Kubernetes cluster: the simulated
// API server (mocks/kubeapi) plus what a real cluster runs on top of it —
// a scheduler that places pods by their requests and respects taints,
// tolerations and node selectors, a kubelet stand-in that starts bound pods,
// and a pod garbage collector for pods of vanished nodes. (The demo's
// workload lives beside the demo: mocks/demo/workload.)
//
// Every part talks to the cluster only through client-go, so the same code
// would run against a real API server.
package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/federation-autoscaler/federation-autoscaler/agent/consolidate"
	"github.com/federation-autoscaler/federation-autoscaler/agent/liqo"
)

// Scheduler places pending pods on nodes and plays the kubelet: a bound pod
// becomes Running, a pod whose node is gone is deleted (as the pod garbage
// collector does), and a pod that fits nowhere is marked
// PodScheduled=False/Unschedulable — the signal the Cluster Autoscaler
// reacts to.
type Scheduler struct {
	client kubernetes.Interface
	log    *slog.Logger
	now    func() time.Time
	// Resync bounds how long a change can go unnoticed if a watch event
	// is missed; events normally trigger a pass at once.
	resync time.Duration

	pods  corelisters.PodLister
	nodes corelisters.NodeLister
	kick  chan struct{}
	// assumed remembers binds the informer cache has not shown yet (pod
	// UID → node), so the next pass neither counts that room as free nor
	// binds the pod again — kube-scheduler's "assumed pods".
	assumed map[types.UID]string
}

// NewScheduler returns a scheduler for the cluster behind client.
func NewScheduler(client kubernetes.Interface, log *slog.Logger, now func() time.Time) *Scheduler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if now == nil {
		now = time.Now
	}
	return &Scheduler{client: client, log: log, now: now, resync: 5 * time.Second, kick: make(chan struct{}, 1), assumed: map[types.UID]string{}}
}

// Run schedules until ctx ends.
func (s *Scheduler) Run(ctx context.Context) error {
	factory := informers.NewSharedInformerFactory(s.client, 0)
	podInf := factory.Core().V1().Pods()
	nodeInf := factory.Core().V1().Nodes()
	s.pods, s.nodes = podInf.Lister(), nodeInf.Lister()
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { s.poke() },
		UpdateFunc: func(any, any) { s.poke() },
		DeleteFunc: func(any) { s.poke() },
	}
	if _, err := podInf.Informer().AddEventHandler(handler); err != nil {
		return fmt.Errorf("watching pods: %w", err)
	}
	if _, err := nodeInf.Informer().AddEventHandler(handler); err != nil {
		return fmt.Errorf("watching nodes: %w", err)
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), podInf.Informer().HasSynced, nodeInf.Informer().HasSynced) {
		return ctx.Err()
	}
	ticker := time.NewTicker(s.resync)
	defer ticker.Stop()
	for {
		if err := s.pass(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("Scheduling pass failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-s.kick:
		case <-ticker.C:
		}
	}
}

func (s *Scheduler) poke() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// nodeState is a node's free room during one pass.
type nodeState struct {
	node *corev1.Node
	free corev1.ResourceList
}

// pass runs one scheduling round over every pod.
func (s *Scheduler) pass(ctx context.Context) error {
	nodes, err := s.nodes.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	pods, err := s.pods.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("listing pods: %w", err)
	}
	byName := map[string]*nodeState{}
	var states []*nodeState
	for _, n := range nodes {
		st := &nodeState{node: n, free: n.Status.Allocatable.DeepCopy()}
		byName[n.Name] = st
		states = append(states, st)
	}
	sort.Slice(states, func(i, j int) bool { return states[i].node.Name < states[j].node.Name })
	pending, err := s.account(ctx, pods, byName)
	if err != nil {
		return err
	}
	// Oldest first, as the default scheduler queue does for equal priority.
	sort.Slice(pending, func(i, j int) bool {
		if !pending[i].CreationTimestamp.Equal(&pending[j].CreationTimestamp) {
			return pending[i].CreationTimestamp.Before(&pending[j].CreationTimestamp)
		}
		return pending[i].Namespace+"/"+pending[i].Name < pending[j].Namespace+"/"+pending[j].Name
	})
	for _, p := range pending {
		if err := s.place(ctx, p, states); err != nil {
			return err
		}
	}
	return nil
}

// account subtracts every placed pod's requests from its node's room
// (pods this scheduler bound whose binding the cache has not shown yet
// included), starts bound pods that are still Pending, deletes pods whose
// node is gone, and returns the pods still to be placed.
func (s *Scheduler) account(ctx context.Context, pods []*corev1.Pod, byName map[string]*nodeState) ([]*corev1.Pod, error) {
	var pending []*corev1.Pod
	live := map[types.UID]bool{}
	for _, p := range pods {
		live[p.UID] = true
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if p.Spec.NodeName == "" {
			if node, ok := s.assumed[p.UID]; ok {
				// Bound by an earlier pass; the cache lags behind.
				if st, ok := byName[node]; ok {
					subtract(st.free, podRequests(p))
				}
				continue
			}
			pending = append(pending, p)
			continue
		}
		delete(s.assumed, p.UID)
		if err := s.accountBound(ctx, p, byName[p.Spec.NodeName]); err != nil {
			return nil, err
		}
	}
	for uid := range s.assumed {
		if !live[uid] {
			delete(s.assumed, uid)
		}
	}
	return pending, nil
}

// accountBound handles a pod bound to a node (st; nil when the node is
// gone).
func (s *Scheduler) accountBound(ctx context.Context, p *corev1.Pod, st *nodeState) error {
	if st == nil {
		// The node is gone: the pod goes with it (pod GC); its owner
		// recreates it elsewhere.
		if err := s.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting pod %s/%s of vanished node %s: %w", p.Namespace, p.Name, p.Spec.NodeName, err)
		}
		return nil
	}
	subtract(st.free, podRequests(p))
	if p.Status.Phase == corev1.PodPending {
		return s.start(ctx, p)
	}
	return nil
}

// place binds pending pod p to the node with the most room it fits on, or
// marks it unschedulable with the reason.
func (s *Scheduler) place(ctx context.Context, p *corev1.Pod, states []*nodeState) error {
	target, reason := choose(p, states)
	if target == nil {
		return s.markUnschedulable(ctx, p, fmt.Sprintf("0/%d nodes are available: %s.", len(states), reason))
	}
	err := s.client.CoreV1().Pods(p.Namespace).Bind(ctx, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace},
		Target:     corev1.ObjectReference{Kind: "Node", Name: target.node.Name},
	}, metav1.CreateOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil // deleted or bound meanwhile; the next pass sees it
		}
		return fmt.Errorf("binding pod %s/%s to %s: %w", p.Namespace, p.Name, target.node.Name, err)
	}
	subtract(target.free, podRequests(p))
	s.assumed[p.UID] = target.node.Name
	s.log.Debug("Pod scheduled", "pod", p.Namespace+"/"+p.Name, "node", target.node.Name)
	return nil
}

// choose returns the node with the most free CPU that the pod fits on, or
// the reason why none fits.
func choose(p *corev1.Pod, states []*nodeState) (*nodeState, string) {
	req := podRequests(p)
	var best *nodeState
	reasons := map[string]int{}
	for _, st := range states {
		if why := fits(p, req, st); why != "" {
			reasons[why]++
			continue
		}
		if best == nil || st.free.Cpu().Cmp(*best.free.Cpu()) > 0 {
			best = st
		}
	}
	if best != nil {
		return best, ""
	}
	keys := make([]string, 0, len(reasons))
	for k := range reasons {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d %s", reasons[k], k))
	}
	if len(parts) == 0 {
		return nil, "no nodes"
	}
	return nil, strings.Join(parts, ", ")
}

// Fits explains why pod p cannot run on node n with free room left, or
// returns "": the scheduler's own rule (readiness, schedulability, node
// selector, taints, requests), for stand-ins that simulate scheduling (the
// Cluster Autoscaler's scale-down).
func Fits(p *corev1.Pod, n *corev1.Node, free corev1.ResourceList) string {
	return fits(p, podRequests(p), &nodeState{node: n, free: free})
}

// PodRequests is what the scheduler reserves for p: its containers'
// requests and one pod slot.
func PodRequests(p *corev1.Pod) corev1.ResourceList { return podRequests(p) }

// fits explains why pod cannot run on the node, or returns "".
func fits(p *corev1.Pod, req corev1.ResourceList, st *nodeState) string {
	n := st.node
	if n.Spec.Unschedulable {
		return "node(s) were unschedulable"
	}
	if !liqo.NodeReady(n) {
		return "node(s) were not ready"
	}
	for k, v := range p.Spec.NodeSelector {
		if n.Labels[k] != v {
			return "node(s) didn't match Pod's node affinity/selector"
		}
	}
	for i := range n.Spec.Taints {
		t := &n.Spec.Taints[i]
		if t.Effect == corev1.TaintEffectPreferNoSchedule {
			continue
		}
		if !tolerated(p.Spec.Tolerations, t) {
			return fmt.Sprintf("node(s) had untolerated taint {%s: %s}", t.Key, t.Value)
		}
	}
	for name, q := range req {
		free, ok := st.free[name]
		if !ok || free.Cmp(q) < 0 {
			return "Insufficient " + string(name)
		}
	}
	return ""
}

func tolerated(tols []corev1.Toleration, t *corev1.Taint) bool {
	for i := range tols {
		if tols[i].ToleratesTaint(klog.Background(), t, false) {
			return true
		}
	}
	return false
}

// podRequests is what p takes of a node: its requests as the scheduler
// counts them (consolidate.EffectiveRequests, the consolidator's rule for
// its placeholders) and one pod slot.
func podRequests(p *corev1.Pod) corev1.ResourceList {
	out := consolidate.EffectiveRequests(p)
	out[corev1.ResourcePods] = resource.MustParse("1")
	return out
}

// Subtract takes req from free (resources free lacks stay absent).
func Subtract(free, req corev1.ResourceList) { subtract(free, req) }

func subtract(free, req corev1.ResourceList) {
	for name, q := range req {
		if cur, ok := free[name]; ok {
			cur.Sub(q)
			free[name] = cur
		}
	}
}

// start plays the kubelet for a bound pod: it is Running and Ready.
func (s *Scheduler) start(ctx context.Context, p *corev1.Pod) error {
	now := metav1.NewTime(s.now())
	next := p.DeepCopy()
	next.Status.Phase = corev1.PodRunning
	next.Status.StartTime = &now
	setCondition(next, corev1.PodScheduled, corev1.ConditionTrue, "", "", now)
	setCondition(next, corev1.PodReady, corev1.ConditionTrue, "", "", now)
	if _, err := s.client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, next, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("starting pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	return nil
}

func (s *Scheduler) markUnschedulable(ctx context.Context, p *corev1.Pod, msg string) error {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable && c.Message == msg {
			return nil // unchanged: no write
		}
	}
	next := p.DeepCopy()
	setCondition(next, corev1.PodScheduled, corev1.ConditionFalse, corev1.PodReasonUnschedulable, msg, metav1.NewTime(s.now()))
	if _, err := s.client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, next, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("marking pod %s/%s unschedulable: %w", p.Namespace, p.Name, err)
	}
	return nil
}

func setCondition(p *corev1.Pod, t corev1.PodConditionType, st corev1.ConditionStatus, reason, msg string, now metav1.Time) {
	for i := range p.Status.Conditions {
		c := &p.Status.Conditions[i]
		if c.Type == t {
			if c.Status != st {
				c.LastTransitionTime = now
			}
			c.Status, c.Reason, c.Message = st, reason, msg
			return
		}
	}
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: t, Status: st, Reason: reason, Message: msg, LastTransitionTime: now})
}
