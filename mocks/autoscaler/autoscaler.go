// Package autoscaler is the demo's stand-in for the Cluster Autoscaler: a
// compact loop that talks to the adapter only over the externalgrpc protocol
// (through the project's proto) and to the consumer cluster only through
// client-go.
//
// Per scan it does what CA's core does, in miniature:
//   - scale-up: pods marked PodScheduled=False/Unschedulable (not
//     expendable: priority at or above ExpendablePodsPriorityCutoff) are
//     packed first-fit (by CPU, memory and pod count) onto the room left on
//     the ready borrowed nodes, then onto the template node of the groups —
//     a pod with a node selector only onto nodes and templates whose labels
//     match it; the nodes they need beyond the ones already on their way
//     (target above registered) become IncreaseSize on the groups with
//     head-room, the groups selected pods need first, then in NodeGroups
//     order (the broker's policy-masked order);
//   - scale-down (scaledown.go): a borrowed node whose utilization is below
//     its group's NodeGroupGetOptions threshold, and whose pods can all move
//     (controller, PodDisruptionBudgets, room elsewhere), for the group's
//     unneeded time, is drained and deleted through DeleteNodes;
//   - hygiene (failed or never-registered instances, target fixes, unready
//     nodes) is Core's loop (core.go), called with the computed target.
//
// Core alone is the CA stand-in of the adapter's conformance suites: the one
// Cluster Autoscaler stand-in of the project.
package autoscaler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/federation-autoscaler/federation-autoscaler/adapter/externalgrpc/protos"
	"github.com/federation-autoscaler/federation-autoscaler/agent/liqo"
)

// Config configures an Autoscaler. Client and Kube are required.
type Config struct {
	// Client is the adapter's gRPC client.
	Client protos.CloudProviderClient
	// Kube is the consumer cluster.
	Kube kubernetes.Interface
	// ScanInterval is CA's --scan-interval (default 10 s).
	ScanInterval time.Duration
	// ScaleDownUnneededTime is CA's --scale-down-unneeded-time (default
	// 10 min in CA; here 10 s).
	ScaleDownUnneededTime time.Duration
	// ScaleDownUtilizationThreshold is CA's
	// --scale-down-utilization-threshold (default 0.5 in CA; here 0.01,
	// so that only idle nodes are unneeded unless a group's
	// NodeGroupGetOptions answers otherwise).
	ScaleDownUtilizationThreshold float64
	// ExpendablePodsPriorityCutoff is CA's
	// --expendable-pods-priority-cutoff (default -10): pods below it
	// neither trigger a scale-up nor block a scale-down.
	ExpendablePodsPriorityCutoff *int32
	// MaxNodeProvisionTime is CA's --max-node-provision-time (default
	// 2 min).
	MaxNodeProvisionTime time.Duration
	// Now is the clock (default time.Now).
	Now    func() time.Time
	Logger *slog.Logger
}

// Defaults of Config.
const (
	DefaultScaleDownUtilizationThreshold = 0.01
	DefaultExpendablePodsPriorityCutoff  = -10
)

// Autoscaler is the loop. Run it once.
type Autoscaler struct {
	cfg           Config
	ca            *Core
	log           *slog.Logger
	unneededSince map[string]time.Time
}

// New validates cfg and builds the loop.
func New(cfg Config) (*Autoscaler, error) {
	if cfg.Client == nil || cfg.Kube == nil {
		return nil, errors.New("autoscaler: Client (the adapter) and Kube (the consumer cluster) are required")
	}
	if cfg.ScanInterval <= 0 {
		cfg.ScanInterval = 10 * time.Second
	}
	if cfg.ScaleDownUnneededTime <= 0 {
		cfg.ScaleDownUnneededTime = 10 * time.Second
	}
	if cfg.MaxNodeProvisionTime <= 0 {
		cfg.MaxNodeProvisionTime = 2 * time.Minute
	}
	if cfg.ScaleDownUtilizationThreshold <= 0 {
		cfg.ScaleDownUtilizationThreshold = DefaultScaleDownUtilizationThreshold
	}
	if cfg.ExpendablePodsPriorityCutoff == nil {
		cfg.ExpendablePodsPriorityCutoff = new(int32(DefaultExpendablePodsPriorityCutoff))
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	a := &Autoscaler{cfg: cfg, log: cfg.Logger, unneededSince: map[string]time.Time{}}
	a.ca = &Core{
		Client: cfg.Client, Cluster: ClusterFunc(a.nodes), Now: cfg.Now, Generation: CA135,
		MaxNodeProvisionTime: cfg.MaxNodeProvisionTime, ScaleDownUnreadyTime: cfg.MaxNodeProvisionTime,
	}
	return a, nil
}

// Run scans every ScanInterval until ctx ends. A failed scan is logged and
// retried at the next one (CA does the same).
func (a *Autoscaler) Run(ctx context.Context) error {
	t := time.NewTicker(a.cfg.ScanInterval)
	defer t.Stop()
	for {
		if err := a.RunOnce(ctx); err != nil && ctx.Err() == nil {
			a.log.Warn("Autoscaler scan failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (a *Autoscaler) nodes(ctx context.Context) ([]Node, error) {
	list, err := a.cfg.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := make([]Node, 0, len(list.Items))
	for i := range list.Items {
		n := &list.Items[i]
		out = append(out, Node{Name: n.Name, ProviderID: n.Spec.ProviderID, NotReady: !liqo.NodeReady(n)})
	}
	return out, nil
}

// scan is what one RunOnce saw.
type scan struct {
	groups    []*protos.NodeGroup
	instances map[string]string // live instance id → group
	// targets sums the target sizes; failed counts failed instances.
	targets, failed int32
	// used sums the requests of the pods bound to each node; pending are
	// the unschedulable pods that are not expendable.
	used    map[string][3]int64
	pending []*corev1.Pod
	// registered and unready count borrowed nodes; unneeded are the
	// removable ones past their group's unneeded time; free is the room
	// left on the ready ones.
	registered, unready int32
	unneeded            []*corev1.Node
	free                []bin
	// opts are the groups' scale-down options; world is the cluster the
	// scale-down simulation runs over.
	opts  map[string]groupOptions
	world *world
}

// bin is room on a node (or a template copy) for the scale-up packing.
type bin struct {
	room   [3]int64
	labels map[string]string
}

// RunOnce runs one scan: scale-down first, and only when nothing waits
// for capacity; otherwise Core's loop towards the nodes the pending pods
// need.
func (a *Autoscaler) RunOnce(ctx context.Context) error {
	nodes, err := a.cfg.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	pods, err := a.cfg.Kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing pods: %w", err)
	}
	pdbs, err := a.cfg.Kube.PolicyV1().PodDisruptionBudgets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing PodDisruptionBudgets: %w", err)
	}
	s, err := a.readGroups(ctx)
	if err != nil {
		return err
	}
	s.readPods(pods.Items, *a.cfg.ExpendablePodsPriorityCutoff)
	if s.world, err = newWorld(nodes.Items, pods.Items, pdbs.Items); err != nil {
		return err
	}
	a.readNodes(s, nodes.Items, a.cfg.Now())
	if len(s.pending) == 0 && len(s.unneeded) > 0 {
		return a.scaleDown(ctx, s)
	}
	return a.scaleUp(ctx, s)
}

// readGroups reads the groups as CA's cloud-provider refresh sees them.
func (a *Autoscaler) readGroups(ctx context.Context) (*scan, error) {
	c, cancel := context.WithTimeout(ctx, 5*time.Second)
	ngs, err := a.cfg.Client.NodeGroups(c, &protos.NodeGroupsRequest{})
	cancel()
	if err != nil {
		return nil, fmt.Errorf("NodeGroups: %w", err)
	}
	s := &scan{groups: ngs.GetNodeGroups(), instances: map[string]string{}, used: map[string][3]int64{}, opts: map[string]groupOptions{}}
	for _, g := range s.groups {
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		ts, err := a.cfg.Client.NodeGroupTargetSize(c, &protos.NodeGroupTargetSizeRequest{Id: g.GetId()})
		if err == nil {
			var in *protos.NodeGroupNodesResponse
			if in, err = a.cfg.Client.NodeGroupNodes(c, &protos.NodeGroupNodesRequest{Id: g.GetId()}); err == nil {
				s.addInstances(g.GetId(), in.GetInstances())
			}
		}
		cancel()
		if err != nil {
			return nil, fmt.Errorf("group %s: %w", g.GetId(), err)
		}
		s.targets += ts.GetTargetSize()
		if ts.GetTargetSize() > 0 {
			s.opts[g.GetId()] = a.options(ctx, g.GetId())
		}
	}
	return s, nil
}

// addInstances records a group's live instances and counts its failed ones.
func (s *scan) addInstances(group string, insts []*protos.Instance) {
	for _, i := range insts {
		if i.GetStatus().GetInstanceState() == protos.InstanceStatus_instanceDeleting {
			continue
		}
		if i.GetStatus().GetErrorInfo().GetErrorCode() != "" {
			s.failed++
			continue
		}
		s.instances[i.GetId()] = group
	}
}

// readPods sums the nodes' requests and finds the unschedulable pods
// that are not expendable.
func (s *scan) readPods(pods []corev1.Pod, cutoff int32) {
	for i := range pods {
		p := &pods[i]
		if finished(p) || p.DeletionTimestamp != nil {
			continue
		}
		if p.Spec.NodeName != "" {
			s.used[p.Spec.NodeName] = plus(s.used[p.Spec.NodeName], requests(p))
		} else if unschedulable(p) && !expendable(p, cutoff) {
			s.pending = append(s.pending, p)
		}
	}
}

// readNodes counts the borrowed nodes and finds the unneeded ones: below
// their group's utilization threshold and removable (scaledown.go) for its
// unneeded time; it forgets nodes that are gone or needed again.
func (a *Autoscaler) readNodes(s *scan, nodes []corev1.Node, now time.Time) {
	var candidates []*corev1.Node
	for i := range nodes {
		n := &nodes[i]
		gid, ok := s.instances[n.Spec.ProviderID]
		if !ok {
			continue
		}
		s.registered++
		if !liqo.NodeReady(n) {
			s.unready++
			continue
		}
		s.free = append(s.free, bin{room: minus(amounts(n.Status.Allocatable), s.used[n.Name]), labels: n.Labels})
		if !hasTaint(n, ToBeDeletedTaint) && utilization(n, s.used[n.Name]) < s.opts[gid].threshold {
			candidates = append(candidates, n)
		}
	}
	sort.Slice(candidates, func(i, j int) bool { return candidates[i].Name < candidates[j].Name })
	removable, _ := s.world.removable(candidates, *a.cfg.ExpendablePodsPriorityCutoff)
	for _, n := range candidates {
		if !removable[n.Name] {
			continue
		}
		since, ok := a.unneededSince[n.Name]
		if !ok {
			a.unneededSince[n.Name] = now
		} else if now.Sub(since) >= s.opts[s.instances[n.Spec.ProviderID]].unneeded {
			s.unneeded = append(s.unneeded, n)
		}
	}
	for name := range a.unneededSince {
		if !removable[name] {
			delete(a.unneededSince, name)
		}
	}
}

// scaleDown deletes the unneeded borrowed nodes, each tainted first: the
// empty ones, and at most one with pods to move, drained first.
func (a *Autoscaler) scaleDown(ctx context.Context, s *scan) error {
	drained := false
	for _, n := range s.unneeded {
		gid := s.instances[n.Spec.ProviderID]
		moving, _ := s.world.toMove(n.Name, *a.cfg.ExpendablePodsPriorityCutoff)
		if len(moving) > 0 {
			if drained {
				continue
			}
			drained = true
		}
		if err := a.drain(ctx, n, moving); err != nil {
			return err
		}
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := a.cfg.Client.NodeGroupDeleteNodes(c, &protos.NodeGroupDeleteNodesRequest{Id: gid, Nodes: []*protos.ExternalGrpcNode{{Name: n.Name, ProviderID: n.Spec.ProviderID}}})
		cancel()
		if err != nil {
			return fmt.Errorf("DeleteNodes %s %s: %w", gid, n.Name, err)
		}
		delete(a.unneededSince, n.Name)
		a.log.Info("Autoscaler scale-down: node unneeded", "group", gid, "node", n.Name, "evicted", len(moving), "for", s.opts[gid].unneeded)
	}
	return nil
}

// scaleUp runs Core's loop towards the nodes the pending pods need beyond
// those on their way. Pods that fit the room left on ready borrowed nodes
// need none: the scheduler has not placed them yet (a node that just
// became ready, a scheduler that lags on a busy machine), as CA's
// filter-out-schedulable step finds before it simulates a scale-up.
func (a *Autoscaler) scaleUp(ctx context.Context, s *scan) error {
	need := int32(0)
	var first []string
	if len(s.pending) > 0 {
		var err error
		if need, first, err = a.nodesFor(ctx, s.groups, s.pending, s.free); err != nil {
			return err
		}
	}
	upcoming := max(0, s.targets-s.registered-s.failed)
	want := s.targets - s.failed - s.unready
	if need > upcoming {
		want += need - upcoming
	}
	loop, err := a.ca.RunOnceFirst(ctx, int(want), first)
	if err != nil {
		return err
	}
	for id, d := range loop.Increased {
		a.log.Info("Autoscaler scale-up", "group", id, "delta", d, "pendingPods", len(s.pending))
	}
	return nil
}

// nodesFor packs pods first-fit-decreasing onto the room left on existing
// nodes (free), then onto copies of a group's template: the first group's
// for a pod without a node selector (the chunk shapes of one type are
// equal), the first group whose template's labels match for one with a
// selector. It returns how many new nodes they take and the groups the
// selected pods need, in NodeGroups order. Pods that fit no node are left
// out, as CA does.
func (a *Autoscaler) nodesFor(ctx context.Context, groups []*protos.NodeGroup, pods []*corev1.Pod, free []bin) (int32, []string, error) {
	if len(groups) == 0 {
		return 0, nil, nil
	}
	tpls := map[string]*corev1.Node{}
	template := func(id string) (*corev1.Node, error) {
		if t, ok := tpls[id]; ok {
			return t, nil
		}
		t, err := a.ca.template(ctx, id)
		tpls[id] = t
		return t, err
	}
	sorted := append([]*corev1.Pod(nil), pods...)
	sort.SliceStable(sorted, func(i, j int) bool { return requests(sorted[i])[0] > requests(sorted[j])[0] })
	bins := append([]bin(nil), free...)
	existing := len(bins)
	var first []string
	for _, p := range sorted {
		req := requests(p)
		if placeOn(bins, p, req) {
			continue
		}
		for i, g := range groups {
			if i > 0 && len(p.Spec.NodeSelector) == 0 {
				break
			}
			tpl, err := template(g.GetId())
			if err != nil {
				return 0, nil, err
			}
			if !selects(p, tpl.Labels) || !fits(req, amounts(tpl.Status.Allocatable)) {
				continue
			}
			bins = append(bins, bin{room: minus(amounts(tpl.Status.Allocatable), req), labels: tpl.Labels})
			if len(p.Spec.NodeSelector) > 0 && !slices.Contains(first, g.GetId()) {
				first = append(first, g.GetId())
			}
			break
		}
	}
	return int32(len(bins) - existing), first, nil
}

// placeOn takes req from the first bin p fits and selects.
func placeOn(bins []bin, p *corev1.Pod, req [3]int64) bool {
	for i := range bins {
		if selects(p, bins[i].labels) && fits(req, bins[i].room) {
			bins[i].room = minus(bins[i].room, req)
			return true
		}
	}
	return false
}

// selects reports whether p's node selector matches labels.
func selects(p *corev1.Pod, labels map[string]string) bool {
	for k, v := range p.Spec.NodeSelector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// requests is what a pod asks of a node: CPU (milli), memory (bytes), one
// pod slot.
func requests(p *corev1.Pod) [3]int64 {
	var cpu, mem resource.Quantity
	for _, ctr := range p.Spec.Containers {
		cpu.Add(ctr.Resources.Requests[corev1.ResourceCPU])
		mem.Add(ctr.Resources.Requests[corev1.ResourceMemory])
	}
	return [3]int64{cpu.MilliValue(), mem.Value(), 1}
}

func fits(req, room [3]int64) bool {
	return req[0] <= room[0] && req[1] <= room[1] && req[2] <= room[2]
}

func plus(a, b [3]int64) [3]int64  { return [3]int64{a[0] + b[0], a[1] + b[1], a[2] + b[2]} }
func minus(a, b [3]int64) [3]int64 { return [3]int64{a[0] - b[0], a[1] - b[1], a[2] - b[2]} }

func amounts(l corev1.ResourceList) [3]int64 {
	cpu, mem, pods := l[corev1.ResourceCPU], l[corev1.ResourceMemory], l[corev1.ResourcePods]
	return [3]int64{cpu.MilliValue(), mem.Value(), pods.Value()}
}

func unschedulable(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable
		}
	}
	return false
}
