package autoscaler

// This file is CA's scale-down in miniature, as the Cluster Autoscaler FAQ
// describes it ("How does scale-down work?", "What types of pods can
// prevent CA from removing a node?"):
//
//   - per node group, the options NodeGroupGetOptions answers (CA's
//     defaults sent along; UNIMPLEMENTED or an error: the defaults);
//   - a borrowed node is a candidate when its utilization — the larger of
//     its CPU and memory requests over allocatable — is below the group's
//     scale-down utilization threshold;
//   - a candidate is removable when every pod on it can move: it has a
//     built-in controller (a bare pod, or one of a custom controller,
//     blocks: CA's --skip-nodes-with-custom-controller-pods default), its
//     PodDisruptionBudgets allow its eviction, and it fits (the scheduler's
//     own rule, mocks/cluster.Fits) on another Ready node not removed in
//     this pass, simulated in turn;
//     DaemonSet pods and expendable pods (priority below the cutoff) never
//     block;
//   - a node removable for the group's unneeded time is removed: empty ones
//     together, at most one non-empty one per loop (CA's
//     --max-drain-parallelism 1), drained first: tainted
//     ToBeDeletedByClusterAutoscaler:NoSchedule so the evicted pods land
//     elsewhere, its pods evicted, then NodeGroupDeleteNodes.
//
// The simulated cluster runs no disruption controller, so a budget's
// allowed disruptions are computed here from the live pods, as that
// controller would (healthy = Running and Ready), and an eviction is a
// delete once the budget allowed it (the Eviction API's check).

import (
	"context"
	"fmt"
	"sort"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/federation-autoscaler/federation-autoscaler/adapter/externalgrpc/protos"
	"github.com/federation-autoscaler/federation-autoscaler/mocks/cluster"
)

// replicated reports whether CA moves the pods of a controller of kind:
// the built-in ones (its --skip-nodes-with-custom-controller-pods
// default: others block).
func replicated(kind string) bool {
	switch kind {
	case "ReplicaSet", "ReplicationController", "StatefulSet", "Job":
		return true
	}
	return false
}

// ToBeDeletedTaint is the taint CA puts on a node it drains.
const ToBeDeletedTaint = "ToBeDeletedByClusterAutoscaler"

// groupOptions are a group's scale-down options.
type groupOptions struct {
	threshold float64
	unneeded  time.Duration
}

// options asks the adapter for group id's options, CA's defaults sent
// along (every duration set, in the 1.35 shape the loop reads).
func (a *Autoscaler) options(ctx context.Context, id string) groupOptions {
	def := groupOptions{threshold: a.cfg.ScaleDownUtilizationThreshold, unneeded: a.cfg.ScaleDownUnneededTime}
	c, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	r, err := a.cfg.Client.NodeGroupGetOptions(c, &protos.NodeGroupAutoscalingOptionsRequest{Id: id, Defaults: &protos.NodeGroupAutoscalingOptions{
		ScaleDownUtilizationThreshold: def.threshold, ScaleDownGpuUtilizationThreshold: def.threshold,
		ScaleDownUnneededDuration: durationpb.New(def.unneeded),
		ScaleDownUnreadyDuration:  durationpb.New(a.cfg.MaxNodeProvisionTime),
		MaxNodeProvisionDuration:  durationpb.New(a.cfg.MaxNodeProvisionTime),
	}})
	if err != nil {
		if status.Code(err) != codes.Unimplemented {
			a.log.Warn("NodeGroupGetOptions failed; using the defaults", "group", id, "err", err)
		}
		return def
	}
	o := r.GetNodeGroupAutoscalingOptions()
	if o == nil {
		return def
	}
	out := groupOptions{threshold: o.GetScaleDownUtilizationThreshold(), unneeded: def.unneeded}
	if d := o.GetScaleDownUnneededDuration(); d != nil {
		out.unneeded = d.AsDuration()
	}
	return out
}

// utilization is the larger of the node's CPU and memory requested over
// its allocatable.
func utilization(n *corev1.Node, used [3]int64) float64 {
	alloc := amounts(n.Status.Allocatable)
	u := 0.0
	for i := range 2 {
		if alloc[i] > 0 {
			u = max(u, float64(used[i])/float64(alloc[i]))
		}
	}
	return u
}

// pdbTracker holds each PodDisruptionBudget's disruptions still allowed
// in this loop.
type pdbTracker struct {
	items []pdbState
}

type pdbState struct {
	namespace string
	sel       labels.Selector
	allowed   int
}

// newPDBTracker computes each budget's allowed disruptions from the live
// pods: healthy = Running and Ready among those it selects; minAvailable:
// healthy − min; maxUnavailable: max − (selected − healthy) (percentages
// of the selected pods, rounded up); neither set: no limit.
func newPDBTracker(pdbs []policyv1.PodDisruptionBudget, pods []corev1.Pod) (*pdbTracker, error) {
	t := &pdbTracker{}
	for i := range pdbs {
		b := &pdbs[i]
		sel, err := metav1.LabelSelectorAsSelector(b.Spec.Selector)
		if err != nil {
			return nil, fmt.Errorf("PodDisruptionBudget %s/%s: %w", b.Namespace, b.Name, err)
		}
		expected, healthy := 0, 0
		for j := range pods {
			p := &pods[j]
			if p.Namespace != b.Namespace || p.DeletionTimestamp != nil || finished(p) || !sel.Matches(labels.Set(p.Labels)) {
				continue
			}
			expected++
			if p.Status.Phase == corev1.PodRunning && podReady(p) {
				healthy++
			}
		}
		allowed := expected
		switch {
		case b.Spec.MinAvailable != nil:
			m, err := intstr.GetScaledValueFromIntOrPercent(b.Spec.MinAvailable, expected, true)
			if err != nil {
				return nil, fmt.Errorf("PodDisruptionBudget %s/%s minAvailable: %w", b.Namespace, b.Name, err)
			}
			allowed = healthy - m
		case b.Spec.MaxUnavailable != nil:
			m, err := intstr.GetScaledValueFromIntOrPercent(b.Spec.MaxUnavailable, expected, true)
			if err != nil {
				return nil, fmt.Errorf("PodDisruptionBudget %s/%s maxUnavailable: %w", b.Namespace, b.Name, err)
			}
			allowed = m - (expected - healthy)
		}
		t.items = append(t.items, pdbState{namespace: b.Namespace, sel: sel, allowed: max(0, allowed)})
	}
	return t, nil
}

// allows reports whether every budget allows evicting pods together.
func (t *pdbTracker) allows(pods []*corev1.Pod) bool {
	for i, n := range t.need(pods) {
		if n > t.items[i].allowed {
			return false
		}
	}
	return true
}

// take counts pods against the budgets.
func (t *pdbTracker) take(pods []*corev1.Pod) {
	for i, n := range t.need(pods) {
		t.items[i].allowed -= n
	}
}

// need counts, per budget, the pods it selects.
func (t *pdbTracker) need(pods []*corev1.Pod) []int {
	out := make([]int, len(t.items))
	for i, b := range t.items {
		for _, p := range pods {
			if p.Namespace == b.namespace && b.sel.Matches(labels.Set(p.Labels)) {
				out[i]++
			}
		}
	}
	return out
}

// world is the cluster one scale-down simulation runs over.
type world struct {
	nodes []*corev1.Node                 // sorted by name
	free  map[string]corev1.ResourceList // room left per node
	pods  map[string][]*corev1.Pod       // live pods per node
	pdbs  *pdbTracker
}

func newWorld(nodes []corev1.Node, pods []corev1.Pod, pdbs []policyv1.PodDisruptionBudget) (*world, error) {
	t, err := newPDBTracker(pdbs, pods)
	if err != nil {
		return nil, err
	}
	w := &world{free: map[string]corev1.ResourceList{}, pods: map[string][]*corev1.Pod{}, pdbs: t}
	for i := range nodes {
		n := &nodes[i]
		w.nodes = append(w.nodes, n)
		w.free[n.Name] = n.Status.Allocatable.DeepCopy()
	}
	sort.Slice(w.nodes, func(i, j int) bool { return w.nodes[i].Name < w.nodes[j].Name })
	for i := range pods {
		p := &pods[i]
		if p.Spec.NodeName == "" || p.DeletionTimestamp != nil || finished(p) {
			continue
		}
		w.pods[p.Spec.NodeName] = append(w.pods[p.Spec.NodeName], p)
		if f, ok := w.free[p.Spec.NodeName]; ok {
			cluster.Subtract(f, cluster.PodRequests(p))
		}
	}
	return w, nil
}

// removable simulates removing the candidates in turn and returns those
// whose pods all move, with why each other one stays.
func (w *world) removable(candidates []*corev1.Node, cutoff int32) (map[string]bool, map[string]string) {
	gone := map[string]bool{}
	why := map[string]string{}
	for _, n := range candidates {
		moving, reason := w.toMove(n.Name, cutoff)
		if reason == "" && !w.pdbs.allows(moving) {
			reason = "a PodDisruptionBudget does not allow evicting its pods"
		}
		if reason == "" {
			reason = w.place(n.Name, moving, gone)
		}
		if reason != "" {
			why[n.Name] = reason
			continue
		}
		w.pdbs.take(moving)
		gone[n.Name] = true
	}
	return gone, why
}

// toMove lists the pods that must move off node, or why one cannot.
func (w *world) toMove(node string, cutoff int32) ([]*corev1.Pod, string) {
	var out []*corev1.Pod
	for _, p := range w.pods[node] {
		ctrl := metav1.GetControllerOf(p)
		switch {
		case ctrl != nil && ctrl.Kind == "DaemonSet", expendable(p, cutoff):
			continue
		case ctrl == nil:
			return nil, "pod " + p.Namespace + "/" + p.Name + " has no controller"
		case !replicated(ctrl.Kind):
			return nil, "pod " + p.Namespace + "/" + p.Name + " has a custom controller (" + ctrl.Kind + ")"
		}
		out = append(out, p)
	}
	return out, ""
}

// place fits the pods on the other Ready nodes (not node, none gone)
// first-fit by name; on success the room they take is kept.
func (w *world) place(node string, pods []*corev1.Pod, gone map[string]bool) string {
	trial := map[string]corev1.ResourceList{}
	room := func(name string) corev1.ResourceList {
		if f, ok := trial[name]; ok {
			return f
		}
		trial[name] = w.free[name].DeepCopy()
		return trial[name]
	}
	for _, p := range pods {
		placed := false
		for _, d := range w.nodes {
			if d.Name == node || gone[d.Name] || hasTaint(d, ToBeDeletedTaint) {
				continue
			}
			if cluster.Fits(p, d, room(d.Name)) == "" {
				cluster.Subtract(room(d.Name), cluster.PodRequests(p))
				placed = true
				break
			}
		}
		if !placed {
			return "pod " + p.Namespace + "/" + p.Name + " fits on no other node"
		}
	}
	for name, f := range trial {
		w.free[name] = f
	}
	return ""
}

// drain taints the node and evicts the pods that must move (DaemonSet
// and expendable pods go with the node).
func (a *Autoscaler) drain(ctx context.Context, n *corev1.Node, pods []*corev1.Pod) error {
	next := n.DeepCopy()
	if !hasTaint(next, ToBeDeletedTaint) {
		next.Spec.Taints = append(next.Spec.Taints, corev1.Taint{Key: ToBeDeletedTaint, Value: fmt.Sprint(a.cfg.Now().Unix()), Effect: corev1.TaintEffectNoSchedule})
		if _, err := a.cfg.Kube.CoreV1().Nodes().Update(ctx, next, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("tainting %s before its drain: %w", n.Name, err)
		}
	}
	for _, p := range pods {
		if err := a.cfg.Kube.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("evicting %s/%s from %s: %w", p.Namespace, p.Name, n.Name, err)
		}
	}
	return nil
}

func expendable(p *corev1.Pod, cutoff int32) bool {
	return p.Spec.Priority != nil && *p.Spec.Priority < cutoff
}

func finished(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func hasTaint(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}
