package autoscaler

// This file is CA's core loop in miniature (Core), the way the fact sheet
// in docs/adapter.md describes it: Refresh at the start of every loop,
// NodeGroups once per loop, NodeGroupForNode cached per loop (empty answers
// never cached), templates decoded from the field the chosen CA generation
// reads, instance ids matched to node providerIDs, fake nodes (name =
// providerID = instance id) for unregistered instances, DeleteNodes for
// failed and timed-out instances, DecreaseTargetSize with negative deltas
// when the target stays above the registered nodes. The adapter's
// conformance suites drive it against a fake or a real consumer agent; the
// demo's Autoscaler drives it with the target its scale-up computes.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"

	"github.com/federation-autoscaler/federation-autoscaler/adapter/externalgrpc/protos"
)

// Node is a cluster node as CA sees it.
type Node struct {
	Name       string
	ProviderID string
	// NotReady marks a node whose Ready condition is not True.
	NotReady bool
}

// Cluster lists the consumer cluster's nodes.
type Cluster interface {
	Nodes(ctx context.Context) ([]Node, error)
}

// ClusterFunc adapts a function to Cluster.
type ClusterFunc func(ctx context.Context) ([]Node, error)

// Nodes implements Cluster.
func (f ClusterFunc) Nodes(ctx context.Context) ([]Node, error) { return f(ctx) }

// Generation selects which template field the client reads.
type Generation int

// CA generations.
const (
	CA132 Generation = iota // reads NodeGroupTemplateNodeInfoResponse field 1
	CA135                   // reads field 2
)

// Core is a small CA-like loop. Set the exported fields, then call RunOnce
// per scan interval.
type Core struct {
	Client  protos.CloudProviderClient
	Cluster Cluster
	Now     func() time.Time
	// Generation picks the template field read.
	Generation Generation
	// MaxNodeProvisionTime: unregistered instances older than this are
	// deleted, and a target above the registered count that old is
	// decreased (CA's --max-node-provision-time).
	MaxNodeProvisionTime time.Duration
	// CallTimeout is CA's grpc_timeout (default 5 s).
	CallTimeout time.Duration
	// ScaleDownUnreadyTime: registered nodes NotReady for this long are
	// deleted (CA's --scale-down-unready-time); 0 disables it.
	ScaleDownUnreadyTime time.Duration
	// SkipUnregisteredRemoval models a CA whose instance cache is stale:
	// unregistered instances are not deleted, so the size fix
	// (DecreaseTargetSize) is what corrects the target.
	SkipUnregisteredRemoval bool

	unregisteredSince map[string]time.Time
	sizeWrongSince    map[string]time.Time
	unreadySince      map[string]time.Time
	// Calls counts RPCs by name.
	Calls map[string]int
}

// Group is one node group after a loop.
type Group struct {
	ID           string
	Min, Max     int32
	Target       int32
	Registered   []Node
	Unregistered []string // instance ids without a node
	Failed       []string
	Deleting     []string
	// Template is the decoded template node.
	Template *corev1.Node
}

// Loop is what one RunOnce saw and did.
type Loop struct {
	Groups    map[string]*Group
	Order     []string // group ids in NodeGroups order
	Increased map[string]int32
	Deleted   map[string][]string // group → instance ids / node names deleted
	Decreased map[string]int32
	// Rejected holds IncreaseSize calls answered InvalidArgument.
	Rejected map[string]error

	want         int             // the loop's target of borrowed nodes
	first        []string        // groups scale-up tries first
	byProviderID map[string]Node // registered nodes by providerID
}

// Registered counts registered nodes across groups.
func (l *Loop) Registered() int {
	n := 0
	for _, g := range l.Groups {
		n += len(g.Registered)
	}
	return n
}

// Targets sums the target sizes.
func (l *Loop) Targets() int32 {
	var n int32
	for _, g := range l.Groups {
		n += g.Target
	}
	return n
}

// Steady reports whether the loop saw n nodes registered, targets summing
// to n, and no instance unregistered, failed or being deleted.
func (l *Loop) Steady(n int) bool {
	if l.Registered() != n || l.Targets() != int32(n) {
		return false
	}
	for _, g := range l.Groups {
		if len(g.Unregistered)+len(g.Failed)+len(g.Deleting) > 0 {
			return false
		}
	}
	return true
}

func (a *Core) call(ctx context.Context, name string) (context.Context, context.CancelFunc) {
	if a.Calls == nil {
		a.Calls = map[string]int{}
	}
	a.Calls[name]++
	to := a.CallTimeout
	if to <= 0 {
		to = 5 * time.Second
	}
	return context.WithTimeout(ctx, to)
}

// RunOnce runs one loop towards want borrowed nodes in total. Scale-up
// picks groups in NodeGroups order, bounded by their max; scale-down
// deletes registered nodes, last group first.
func (a *Core) RunOnce(ctx context.Context, want int) (*Loop, error) {
	return a.RunOnceFirst(ctx, want, nil)
}

// RunOnceFirst is RunOnce with the groups scale-up tries before the
// others (those the pending pods' node selectors need).
func (a *Core) RunOnceFirst(ctx context.Context, want int, first []string) (*Loop, error) {
	if a.unregisteredSince == nil {
		a.unregisteredSince = map[string]time.Time{}
		a.sizeWrongSince = map[string]time.Time{}
		a.unreadySince = map[string]time.Time{}
	}
	now := a.Now()
	loop := &Loop{Groups: map[string]*Group{}, Increased: map[string]int32{}, Deleted: map[string][]string{}, Decreased: map[string]int32{}, Rejected: map[string]error{}, want: want, first: first}
	steps := []func(context.Context, *Loop, time.Time) error{
		a.listGroups,            // 1, 2
		a.mapNodes,              // 3
		a.readGroups,            // 4
		a.removeBroken,          // 5
		a.fixSizes,              // 6
		a.removeUnreadyAndScale, // 7, 8
	}
	for _, step := range steps {
		if err := step(ctx, loop, now); err != nil {
			return nil, err
		}
	}
	return loop, nil
}

// listGroups: 1. Refresh must succeed, or the whole loop aborts; 2.
// NodeGroups, once per loop.
func (a *Core) listGroups(ctx context.Context, loop *Loop, _ time.Time) error {
	c, cancel := a.call(ctx, "Refresh")
	_, err := a.Client.Refresh(c, &protos.RefreshRequest{})
	cancel()
	if err != nil {
		return fmt.Errorf("Refresh failed (CA aborts the loop): %w", err)
	}
	c, cancel = a.call(ctx, "NodeGroups")
	ngs, err := a.Client.NodeGroups(c, &protos.NodeGroupsRequest{})
	cancel()
	if err != nil {
		return fmt.Errorf("NodeGroups: %w", err)
	}
	for _, g := range ngs.GetNodeGroups() {
		if g.GetMinSize() > g.GetMaxSize() {
			return fmt.Errorf("group %s: min %d > max %d", g.GetId(), g.GetMinSize(), g.GetMaxSize())
		}
		loop.Groups[g.GetId()] = &Group{ID: g.GetId(), Min: g.GetMinSize(), Max: g.GetMaxSize()}
		loop.Order = append(loop.Order, g.GetId())
	}
	return nil
}

// mapNodes: 3. Every node → its group (cached per loop; empty answers not
// cached).
func (a *Core) mapNodes(ctx context.Context, loop *Loop, _ time.Time) error {
	nodes, err := a.Cluster.Nodes(ctx)
	if err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	loop.byProviderID = map[string]Node{}
	for _, n := range nodes {
		g, err := a.groupForNode(ctx, &protos.ExternalGrpcNode{Name: n.Name, ProviderID: n.ProviderID})
		if err != nil {
			return err
		}
		if g == "" {
			continue
		}
		grp, ok := loop.Groups[g]
		if !ok {
			return fmt.Errorf("node %s maps to group %s that NodeGroups did not list", n.Name, g)
		}
		grp.Registered = append(grp.Registered, n)
		loop.byProviderID[n.ProviderID] = n
	}
	return nil
}

// readGroups: 4. Per group: target, instances, matching.
func (a *Core) readGroups(ctx context.Context, loop *Loop, _ time.Time) error {
	for _, id := range loop.Order {
		g := loop.Groups[id]
		c, cancel := a.call(ctx, "NodeGroupTargetSize")
		ts, err := a.Client.NodeGroupTargetSize(c, &protos.NodeGroupTargetSizeRequest{Id: id})
		cancel()
		if err != nil {
			return fmt.Errorf("TargetSize %s: %w", id, err)
		}
		g.Target = ts.GetTargetSize()
		if g.Target < g.Min || g.Target > g.Max {
			return fmt.Errorf("group %s: target %d outside [%d, %d]", id, g.Target, g.Min, g.Max)
		}
		c, cancel = a.call(ctx, "NodeGroupNodes")
		insts, err := a.Client.NodeGroupNodes(c, &protos.NodeGroupNodesRequest{Id: id})
		cancel()
		if err != nil {
			return fmt.Errorf("NodeGroupNodes %s: %w", id, err)
		}
		for _, in := range insts.GetInstances() {
			st := in.GetStatus()
			switch {
			case st.GetInstanceState() == protos.InstanceStatus_instanceDeleting:
				g.Deleting = append(g.Deleting, in.GetId())
			case st.GetErrorInfo().GetErrorCode() != "":
				g.Failed = append(g.Failed, in.GetId())
			default:
				if _, ok := loop.byProviderID[in.GetId()]; !ok {
					g.Unregistered = append(g.Unregistered, in.GetId())
				}
			}
		}
	}
	return nil
}

// removeBroken: 5. Failed creations and unregistered instances past the
// provision time are deleted through fake nodes.
func (a *Core) removeBroken(ctx context.Context, loop *Loop, now time.Time) error {
	for _, id := range loop.Order {
		g := loop.Groups[id]
		var victims []string
		victims = append(victims, g.Failed...)
		for _, inst := range g.Unregistered {
			since, ok := a.unregisteredSince[inst]
			if !ok {
				a.unregisteredSince[inst] = now
				continue
			}
			if !a.SkipUnregisteredRemoval && now.Sub(since) >= a.MaxNodeProvisionTime && g.Target > g.Min {
				victims = append(victims, inst)
			}
		}
		if len(victims) == 0 {
			continue
		}
		fake := make([]*protos.ExternalGrpcNode, 0, len(victims))
		for _, v := range victims {
			n := &protos.ExternalGrpcNode{Name: v, ProviderID: v}
			// CA resolves the fake node's group first.
			gid, err := a.groupForNode(ctx, n)
			if err != nil {
				return err
			}
			if gid != id {
				return fmt.Errorf("fake node %s resolved to group %q, want %s", v, gid, id)
			}
			fake = append(fake, n)
		}
		if err := a.deleteNodes(ctx, id, "unregistered/failed", fake); err != nil {
			return err
		}
		loop.Deleted[id] = append(loop.Deleted[id], victims...)
		for _, v := range victims {
			delete(a.unregisteredSince, v)
		}
	}
	return nil
}

// fixSizes: 6. Fix node group size (only when nothing was removed above):
// target above the registered nodes for longer than the provision time →
// DecreaseTargetSize(registered − target), a negative delta.
func (a *Core) fixSizes(ctx context.Context, loop *Loop, now time.Time) error {
	if len(loop.Deleted) > 0 {
		return nil
	}
	for _, id := range loop.Order {
		g := loop.Groups[id]
		visible := int32(len(g.Registered))
		if g.Target <= visible {
			delete(a.sizeWrongSince, id)
			continue
		}
		since, ok := a.sizeWrongSince[id]
		if !ok {
			a.sizeWrongSince[id] = now
			continue
		}
		if now.Sub(since) < a.MaxNodeProvisionTime {
			continue
		}
		delta := visible - g.Target
		c, cancel := a.call(ctx, "NodeGroupDecreaseTargetSize")
		_, err := a.Client.NodeGroupDecreaseTargetSize(c, &protos.NodeGroupDecreaseTargetSizeRequest{Id: id, Delta: delta})
		cancel()
		if err != nil {
			return fmt.Errorf("DecreaseTargetSize %s by %d: %w", id, delta, err)
		}
		loop.Decreased[id] = delta
		delete(a.sizeWrongSince, id)
	}
	return nil
}

// removeUnready: 7. Unready nodes are deleted after the unready time;
// until then they do not count as capacity (the pods they held are
// pending elsewhere). It returns the unready count per group.
func (a *Core) removeUnready(ctx context.Context, loop *Loop, now time.Time) (map[string]int32, error) {
	unready := map[string]int32{}
	for _, id := range loop.Order {
		g := loop.Groups[id]
		var victims []*protos.ExternalGrpcNode
		for _, n := range g.Registered {
			if !n.NotReady {
				delete(a.unreadySince, n.Name)
				continue
			}
			unready[id]++
			since, ok := a.unreadySince[n.Name]
			if !ok {
				a.unreadySince[n.Name] = now
				continue
			}
			if a.ScaleDownUnreadyTime > 0 && now.Sub(since) >= a.ScaleDownUnreadyTime {
				victims = append(victims, &protos.ExternalGrpcNode{Name: n.Name, ProviderID: n.ProviderID})
			}
		}
		if len(victims) == 0 {
			continue
		}
		if err := a.deleteNodes(ctx, id, "unready", victims); err != nil {
			return nil, err
		}
		for _, v := range victims {
			loop.Deleted[id] = append(loop.Deleted[id], v.GetName())
			delete(a.unreadySince, v.GetName())
		}
	}
	return unready, nil
}

// removeUnreadyAndScale: 7, then 8. Scale up or down towards the wanted
// count, the unready nodes not counted.
func (a *Core) removeUnreadyAndScale(ctx context.Context, loop *Loop, now time.Time) error {
	unready, err := a.removeUnready(ctx, loop, now)
	if err != nil {
		return err
	}
	have := int32(0)
	for id, g := range loop.Groups {
		have += g.Target - int32(len(g.Failed)) - unready[id]
	}
	switch want := int32(loop.want); {
	case want > have:
		return a.scaleUp(ctx, loop, want-have)
	case want < have:
		return a.scaleDown(ctx, loop, int(have-want))
	}
	return nil
}

// scaleUp grows the groups by need nodes, each up to its max: loop.first
// (those listed), then the rest in NodeGroups order.
func (a *Core) scaleUp(ctx context.Context, loop *Loop, need int32) error {
	order := make([]string, 0, len(loop.Order))
	for _, id := range loop.first {
		if _, ok := loop.Groups[id]; ok && !slices.Contains(order, id) {
			order = append(order, id)
		}
	}
	for _, id := range loop.Order {
		if !slices.Contains(order, id) {
			order = append(order, id)
		}
	}
	for _, id := range order {
		g := loop.Groups[id]
		room := g.Max - g.Target
		if room <= 0 || need <= 0 {
			continue
		}
		tpl, err := a.template(ctx, id)
		if err != nil {
			return err
		}
		g.Template = tpl
		d := min(room, need)
		c, cancel := a.call(ctx, "NodeGroupIncreaseSize")
		_, err = a.Client.NodeGroupIncreaseSize(c, &protos.NodeGroupIncreaseSizeRequest{Id: id, Delta: d})
		cancel()
		if err != nil {
			// CA records a failed scale-up, backs the group off and tries
			// the next option. InvalidArgument means CA's view of the group
			// (from this loop's NodeGroups) was out of date.
			if status.Code(err) == codes.InvalidArgument {
				loop.Rejected[id] = err
			}
			continue
		}
		loop.Increased[id] = d
		need -= d
	}
	return nil
}

// scaleDown deletes excess registered nodes (not already deleting), last
// group first, by name within a group.
func (a *Core) scaleDown(ctx context.Context, loop *Loop, excess int) error {
	for i := len(loop.Order) - 1; i >= 0 && excess > 0; i-- {
		id := loop.Order[i]
		g := loop.Groups[id]
		deleting := map[string]bool{}
		for _, d := range g.Deleting {
			deleting[d] = true
		}
		var regs []Node
		for _, n := range g.Registered {
			if !deleting[n.ProviderID] {
				regs = append(regs, n)
			}
		}
		sort.Slice(regs, func(i, j int) bool { return regs[i].Name < regs[j].Name })
		var del []*protos.ExternalGrpcNode
		for _, n := range regs {
			if excess == 0 {
				break
			}
			del = append(del, &protos.ExternalGrpcNode{Name: n.Name, ProviderID: n.ProviderID})
			excess--
		}
		if len(del) == 0 {
			continue
		}
		if err := a.deleteNodes(ctx, id, "scale-down", del); err != nil {
			return err
		}
		for _, n := range del {
			loop.Deleted[id] = append(loop.Deleted[id], n.GetName())
		}
	}
	return nil
}

// deleteNodes calls NodeGroupDeleteNodes; why names the reason in errors.
func (a *Core) deleteNodes(ctx context.Context, id, why string, nodes []*protos.ExternalGrpcNode) error {
	c, cancel := a.call(ctx, "NodeGroupDeleteNodes")
	defer cancel()
	if _, err := a.Client.NodeGroupDeleteNodes(c, &protos.NodeGroupDeleteNodesRequest{Id: id, Nodes: nodes}); err != nil {
		return fmt.Errorf("DeleteNodes (%s) %s: %w", why, id, err)
	}
	return nil
}

func (a *Core) groupForNode(ctx context.Context, n *protos.ExternalGrpcNode) (string, error) {
	c, cancel := a.call(ctx, "NodeGroupForNode")
	defer cancel()
	r, err := a.Client.NodeGroupForNode(c, &protos.NodeGroupForNodeRequest{Node: n})
	if err != nil {
		return "", fmt.Errorf("NodeGroupForNode %s (CA aborts the loop): %w", n.GetName(), err)
	}
	g := r.GetNodeGroup()
	if g.GetMinSize() > g.GetMaxSize() {
		return "", fmt.Errorf("NodeGroupForNode %s: group %s has min %d > max %d", n.GetName(), g.GetId(), g.GetMinSize(), g.GetMaxSize())
	}
	return g.GetId(), nil
}

// template fetches and decodes a group's template the way the chosen CA
// generation does; an empty success is the nil-pointer panic of real CA.
func (a *Core) template(ctx context.Context, id string) (*corev1.Node, error) {
	c, cancel := a.call(ctx, "NodeGroupTemplateNodeInfo")
	defer cancel()
	r, err := a.Client.NodeGroupTemplateNodeInfo(c, &protos.NodeGroupTemplateNodeInfoRequest{Id: id})
	if err != nil {
		return nil, fmt.Errorf("TemplateNodeInfo %s: %w", id, err)
	}
	b := r.GetNodeInfo()
	if a.Generation == CA135 {
		b = r.GetNodeBytes()
	}
	if len(b) == 0 {
		return nil, errors.New("TemplateNodeInfo " + id + ": empty success (real CA panics on this)")
	}
	var n corev1.Node
	if err := n.Unmarshal(b); err != nil {
		return nil, fmt.Errorf("TemplateNodeInfo %s: %w", id, err)
	}
	if _, ok := n.Status.Allocatable[corev1.ResourcePods]; !ok {
		return nil, fmt.Errorf("TemplateNodeInfo %s: no pods in allocatable", id)
	}
	return &n, nil
}
