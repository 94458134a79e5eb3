// Package autoscaler is the demo's stand-in for the Cluster Autoscaler: a
// compact loop that talks to the adapter only over the externalgrpc protocol
// (through the project's proto) and to the consumer cluster only through
// client-go.
//
// Per scan it does what CA's core does, in miniature:
//   - scale-up: pods marked PodScheduled=False/Unschedulable are packed
//     first-fit (by CPU, memory and pod count) onto the template node of the
//     groups; the nodes they need beyond the ones already on their way
//     (target above registered) become IncreaseSize on the groups with
//     head-room, in NodeGroups order (the broker's policy-masked order);
//   - scale-down: a borrowed node (one that maps to a node group) with no
//     running or pending pod for ScaleDownUnneededTime is deleted through
//     DeleteNodes;
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
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/federation-autoscaler/federation-autoscaler/adapter/externalgrpc/protos"
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
	// MaxNodeProvisionTime is CA's --max-node-provision-time (default
	// 2 min).
	MaxNodeProvisionTime time.Duration
	// Now is the clock (default time.Now).
	Now    func() time.Time
	Logger *slog.Logger
}

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
		out = append(out, Node{Name: n.Name, ProviderID: n.Spec.ProviderID, NotReady: !ready(n)})
	}
	return out, nil
}

// scan is what one RunOnce saw.
type scan struct {
	groups    []*protos.NodeGroup
	instances map[string]string // live instance id → group
	// targets sums the target sizes; failed counts failed instances.
	targets, failed int32
	// busy names nodes with a bound pod, used sums their requests;
	// pending are the unschedulable pods.
	busy    map[string]bool
	used    map[string][3]int64
	pending []*corev1.Pod
	// registered and unready count borrowed nodes; unneeded are the idle
	// ones past ScaleDownUnneededTime; free is the room left on the ready
	// ones.
	registered, unready int32
	unneeded            []*corev1.Node
	free                [][3]int64
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
	s, err := a.readGroups(ctx)
	if err != nil {
		return err
	}
	s.readPods(pods.Items)
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
	s := &scan{groups: ngs.GetNodeGroups(), instances: map[string]string{}, busy: map[string]bool{}, used: map[string][3]int64{}}
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

// readPods finds the busy nodes and the unschedulable pods.
func (s *scan) readPods(pods []corev1.Pod) {
	for i := range pods {
		p := &pods[i]
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || p.DeletionTimestamp != nil {
			continue
		}
		if p.Spec.NodeName != "" {
			s.busy[p.Spec.NodeName] = true
			s.used[p.Spec.NodeName] = plus(s.used[p.Spec.NodeName], requests(p))
		} else if unschedulable(p) {
			s.pending = append(s.pending, p)
		}
	}
}

// readNodes counts the borrowed nodes and finds the unneeded ones (idle
// for ScaleDownUnneededTime); it forgets nodes that are gone.
func (a *Autoscaler) readNodes(s *scan, nodes []corev1.Node, now time.Time) {
	seen := map[string]bool{}
	for i := range nodes {
		n := &nodes[i]
		if _, ok := s.instances[n.Spec.ProviderID]; !ok {
			continue
		}
		seen[n.Name] = true
		s.registered++
		if !ready(n) {
			s.unready++
			continue
		}
		s.free = append(s.free, minus(amounts(n.Status.Allocatable), s.used[n.Name]))
		if s.busy[n.Name] {
			delete(a.unneededSince, n.Name)
			continue
		}
		since, ok := a.unneededSince[n.Name]
		if !ok {
			a.unneededSince[n.Name] = now
		} else if now.Sub(since) >= a.cfg.ScaleDownUnneededTime {
			s.unneeded = append(s.unneeded, n)
		}
	}
	for name := range a.unneededSince {
		if !seen[name] {
			delete(a.unneededSince, name)
		}
	}
}

// scaleDown deletes the unneeded borrowed nodes.
func (a *Autoscaler) scaleDown(ctx context.Context, s *scan) error {
	for _, n := range s.unneeded {
		gid := s.instances[n.Spec.ProviderID]
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := a.cfg.Client.NodeGroupDeleteNodes(c, &protos.NodeGroupDeleteNodesRequest{Id: gid, Nodes: []*protos.ExternalGrpcNode{{Name: n.Name, ProviderID: n.Spec.ProviderID}}})
		cancel()
		if err != nil {
			return fmt.Errorf("DeleteNodes %s %s: %w", gid, n.Name, err)
		}
		delete(a.unneededSince, n.Name)
		a.log.Info("Autoscaler scale-down: node unneeded", "group", gid, "node", n.Name, "for", a.cfg.ScaleDownUnneededTime)
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
	if len(s.pending) > 0 {
		var err error
		if need, err = a.nodesFor(ctx, s.groups, s.pending, s.free); err != nil {
			return err
		}
	}
	upcoming := max(0, s.targets-s.registered-s.failed)
	want := s.targets - s.failed - s.unready
	if need > upcoming {
		want += need - upcoming
	}
	loop, err := a.ca.RunOnce(ctx, int(want))
	if err != nil {
		return err
	}
	for id, d := range loop.Increased {
		a.log.Info("Autoscaler scale-up", "group", id, "delta", d, "pendingPods", len(s.pending))
	}
	return nil
}

// nodesFor packs pods first-fit-decreasing onto the room left on existing
// nodes (free), then onto copies of the first group's template (the chunk
// shapes of one type are equal), and returns how many new nodes they take.
// Pods that do not fit even an empty node are left out, as CA does.
func (a *Autoscaler) nodesFor(ctx context.Context, groups []*protos.NodeGroup, pods []*corev1.Pod, free [][3]int64) (int32, error) {
	if len(groups) == 0 {
		return 0, nil
	}
	c, cancel := context.WithTimeout(ctx, 5*time.Second)
	r, err := a.cfg.Client.NodeGroupTemplateNodeInfo(c, &protos.NodeGroupTemplateNodeInfoRequest{Id: groups[0].GetId()})
	cancel()
	if err != nil {
		return 0, fmt.Errorf("TemplateNodeInfo %s: %w", groups[0].GetId(), err)
	}
	var tpl corev1.Node
	if err := tpl.Unmarshal(r.GetNodeBytes()); err != nil {
		return 0, fmt.Errorf("decoding the template of %s: %w", groups[0].GetId(), err)
	}
	capa := amounts(tpl.Status.Allocatable)
	reqs := make([][3]int64, 0, len(pods))
	for _, p := range pods {
		req := requests(p)
		if !fits(req, capa) {
			continue
		}
		reqs = append(reqs, req)
	}
	sort.Slice(reqs, func(i, j int) bool { return reqs[i][0] > reqs[j][0] })
	// Room on existing nodes first, then new nodes; only the new ones count.
	bins := append([][3]int64(nil), free...)
	existing := len(bins)
	for _, r := range reqs {
		placed := false
		for i := range bins {
			if fits(r, bins[i]) {
				bins[i] = minus(bins[i], r)
				placed = true
				break
			}
		}
		if !placed {
			bins = append(bins, minus(capa, r))
		}
	}
	return int32(len(bins) - existing), nil
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

func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
