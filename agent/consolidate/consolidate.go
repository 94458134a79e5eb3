// Package consolidate moves a consumer's autoscaled capacity to a better
// provider through the Cluster Autoscaler, never behind its back
// (docs/placement.md, Consolidation). From the broker's "move" decisions it
// runs one move per worse node group, in two phases:
//
//   - placing: one low-priority placeholder pod per pod running on the
//     group's autoscaled nodes, sized like it and pinned to the better
//     provider's virtual nodes (node selector on Liqo's remote-cluster-id
//     label), so that CA's own scale-up grows the better group;
//   - surging: once every placeholder is bound to a Ready node of the
//     better group, the placeholders are deleted (the room they held is the
//     moving pods' now), the worse nodes are tainted NoSchedule and the
//     workloads there are replaced before anything stops (surge.go): their
//     owners are scaled up, and back once the new pods are available, the
//     ReplicaSet controller deleting the worse nodes' pods (lowest
//     pod-deletion-cost); both groups have the role "keep" meanwhile, so CA
//     removes neither's nodes;
//   - draining: the worse group gets the role "drain", the better one
//     "keep": the adapter answers NodeGroupGetOptions from these roles, so
//     CA's own scale-down finds the worse nodes unneeded (empty, or holding
//     the pods the surge could not replace), drains them (respecting
//     PodDisruptionBudgets) and calls NodeGroupDeleteNodes, while none of
//     the better group's nodes is unneeded meanwhile.
//
// A move that cannot place in time is abandoned (its placeholders deleted;
// CA shrinks what grew for it); a surge not available in time is scaled
// back and the move drains; one that cannot drain in time ends and its
// roles and taints go. The broker hands out only the moves the consumer's
// one disruption budget has room for (Started reports the moves under way
// in every heartbeat, so the broker counts them); Budget caps them locally
// on top.
package consolidate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/federation-autoscaler/federation-autoscaler/adapter/localapi"
	"github.com/federation-autoscaler/federation-autoscaler/agent/liqo"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// Names on the placeholder pods.
const (
	// LabelPlaceholder marks a placeholder pod; its value is the move's
	// key (a hash of the worse group's id, a valid label value).
	LabelPlaceholder = "consolidation.federation-autoscaler.io/placeholder"
	// AnnotationFrom and AnnotationTo name the move's groups;
	// AnnotationFor the pod (namespace/name) a placeholder makes room for.
	AnnotationFrom = "consolidation.federation-autoscaler.io/from"
	AnnotationTo   = "consolidation.federation-autoscaler.io/to"
	AnnotationFor  = "consolidation.federation-autoscaler.io/for"
)

// Defaults (Config).
const (
	// DefaultPriorityClass is the placeholders' PriorityClass, created
	// when missing with PlaceholderPriority: below every default pod (0),
	// so real pods preempt placeholders, and above CA's default
	// --expendable-pods-priority-cutoff (-10), so CA scales up for them
	// (CA FAQ, "How can I configure overprovisioning").
	DefaultPriorityClass       = "fa-consolidation-placeholder"
	PlaceholderPriority  int32 = -1
	DefaultImage               = "registry.k8s.io/pause:3.10"
	DefaultPlaceTimeout        = 10 * time.Minute
	DefaultDrainTimeout        = 15 * time.Minute
	DefaultMaxMoves            = 1
	DefaultMoveWindow          = 10 * time.Minute
)

// Budget is the agent's local cap on moves: at most Max start per Window
// (--consolidation-max-moves per --consolidation-window), on top of the
// consumer's one disruption budget, which the broker enforces by handing
// out only the moves it has room for (docs/placement.md).
type Budget struct {
	Max    int
	Window time.Duration
}

// Config configures a Consolidator. Kube and Namespace are required.
type Config struct {
	Kube kubernetes.Interface
	// Namespace holds the placeholder pods (the agent's own: the agent
	// may create pods only there; a placeholder only has to be bound to a
	// node of the better group, never to run).
	Namespace string
	// PriorityClass, Image: the placeholders' (defaults above).
	PriorityClass, Image string
	// PlaceTimeout bounds the placing phase, DrainTimeout the draining one.
	// SurgeTimeout the surging one.
	PlaceTimeout, DrainTimeout, SurgeTimeout time.Duration
	Clock                                    clock.PassiveClock
	Logger                                   *slog.Logger
}

// Inputs are what one Reconcile works from.
type Inputs struct {
	// Moves are the broker's "move" decisions (heartbeat answer).
	Moves []api.Reevaluation
	// Groups reads the consumer's node-group view (the better group's Liqo
	// cluster id and head-room come from it); called only when a move may
	// start.
	Groups func(ctx context.Context) ([]api.NodeGroupView, error)
	// VirtualNodes reads the consumer's virtual nodes (the local API's
	// view); not called while nothing is to do.
	VirtualNodes func(ctx context.Context) ([]localapi.VirtualNode, error)
	// Budget is the agent's local cap.
	Budget Budget
}

// Phase is a move's phase.
type Phase string

// Move phases.
const (
	PhasePlacing  Phase = "Placing"
	PhaseSurging  Phase = "Surging"
	PhaseDraining Phase = "Draining"
)

// Move is one consolidation under way.
type Move struct {
	From, To string // node-group ids
	Target   string // the better provider
	Phase    Phase
	// StartedAt is when the move started, PhaseAt when its phase did.
	StartedAt, PhaseAt time.Time
	// Placeholders is how many placeholder pods the move made.
	Placeholders int
	// Surges are the owners scaled up for the move (surging phase on).
	Surges []Surge
	// Reason is the broker's.
	Reason string
}

// Consolidator runs the moves. Reconcile it periodically (every
// heartbeat); Roles is what the local API serves the adapter.
type Consolidator struct {
	cfg Config
	log *slog.Logger

	mu     sync.Mutex
	moves  map[string]*Move // by From
	starts []time.Time      // starts within the longest window seen
	// swept is set once orphaned placeholders were looked for: until a
	// move is asked for, later passes read nothing.
	swept bool
}

// New validates cfg and builds a Consolidator.
func New(cfg Config) (*Consolidator, error) {
	if cfg.Kube == nil || cfg.Namespace == "" {
		return nil, errors.New("consolidate: Kube and Namespace are required")
	}
	if cfg.PriorityClass == "" {
		cfg.PriorityClass = DefaultPriorityClass
	}
	if cfg.Image == "" {
		cfg.Image = DefaultImage
	}
	if cfg.PlaceTimeout <= 0 {
		cfg.PlaceTimeout = DefaultPlaceTimeout
	}
	if cfg.DrainTimeout <= 0 {
		cfg.DrainTimeout = DefaultDrainTimeout
	}
	if cfg.SurgeTimeout <= 0 {
		cfg.SurgeTimeout = DefaultSurgeTimeout
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Consolidator{cfg: cfg, log: cfg.Logger, moves: map[string]*Move{}}, nil
}

// Roles returns the node groups' roles in the moves that are surging
// (both "keep": CA removes no node of either while the workloads are
// replaced) or draining (the worse "drain", the better "keep").
func (c *Consolidator) Roles() map[string]api.ConsolidationRole {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out map[string]api.ConsolidationRole
	for _, m := range c.moves {
		if m.Phase != PhaseDraining && m.Phase != PhaseSurging {
			continue
		}
		if out == nil {
			out = map[string]api.ConsolidationRole{}
		}
		out[m.From], out[m.To] = api.RoleDrain, api.RoleKeep
		if m.Phase == PhaseSurging {
			out[m.From] = api.RoleKeep
		}
	}
	return out
}

// Started lists the moves under way as the heartbeat reports them to the
// broker, which charges each to the consumer's disruption budget once (by
// From and StartedAt), sorted by From. A move started by a pass is under
// way when the next heartbeat is built: only a later pass, run after that
// heartbeat was answered, ends it. It copies in-memory state only (no I/O
// under the lock Roles shares).
func (c *Consolidator) Started() []api.Consolidation {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.moves) == 0 {
		return nil
	}
	out := make([]api.Consolidation, 0, len(c.moves))
	for _, k := range slices.Sorted(maps.Keys(c.moves)) {
		m := c.moves[k]
		out = append(out, api.Consolidation{NodeGroupID: m.From, TargetNodeGroupID: m.To, StartedAt: metav1.NewTime(m.StartedAt)})
	}
	return out
}

// copySurges returns m with its own copy of the surges.
func (m Move) copySurges() Move {
	m.Surges = append([]Surge(nil), m.Surges...)
	return m
}

// Moves returns the moves under way, sorted by From.
func (c *Consolidator) Moves() []Move {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Move, 0, len(c.moves))
	for _, k := range slices.Sorted(maps.Keys(c.moves)) {
		out = append(out, c.moves[k].copySurges())
	}
	return out
}

// world is what one Reconcile read of the cluster.
type world struct {
	// autoscaled are the names of the Running virtual nodes of the
	// consumer's autoscaled (res-) reservations, by group; alive counts
	// those not Deleting, by group.
	autoscaled map[string][]string
	alive      map[string]int
	// readyIn is the Ready node names by group.
	readyIn map[string]map[string]bool
	// nodes are the cluster's nodes.
	nodes []corev1.Node
}

// Reconcile advances the moves under way, deletes placeholders no move
// owns any more, and starts the moves in.Moves the budget allows. It is
// meant to be called from one goroutine.
func (c *Consolidator) Reconcile(ctx context.Context, in Inputs) error {
	c.mu.Lock()
	idle := c.swept && len(c.moves) == 0 && len(in.Moves) == 0
	c.mu.Unlock()
	if idle {
		return nil
	}
	vns, err := in.VirtualNodes(ctx)
	if err != nil {
		return fmt.Errorf("listing the virtual nodes: %w", err)
	}
	w, err := c.read(ctx, vns)
	if err != nil {
		return err
	}
	now := c.cfg.Clock.Now()
	var errs []error
	for _, from := range slices.Sorted(maps.Keys(c.snapshot())) {
		if err := c.advance(ctx, from, w, now); err != nil {
			errs = append(errs, err)
		}
	}
	c.mu.Lock()
	swept := c.swept
	c.mu.Unlock()
	if err := c.untaintStale(ctx, w.nodes); err != nil {
		errs = append(errs, err)
	}
	err = c.collectOrphans(ctx)
	if err == nil && !swept {
		err = c.collectSurges(ctx)
	}
	if err != nil {
		errs = append(errs, err)
	} else {
		c.mu.Lock()
		c.swept = true
		c.mu.Unlock()
	}
	var groups []api.NodeGroupView
	for i, d := range in.Moves {
		if !c.wanted(d, w) {
			continue
		}
		if groups == nil && in.Groups != nil {
			if groups, err = in.Groups(ctx); err != nil {
				return errors.Join(append(errs, fmt.Errorf("reading the node groups: %w", err))...)
			}
		}
		if err := c.maybeStart(ctx, in.Moves[i], groups, in.Budget, w, now); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (c *Consolidator) snapshot() map[string]*Move {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.moves)
}

// read indexes the virtual nodes and finds the Ready nodes.
func (c *Consolidator) read(ctx context.Context, vns []localapi.VirtualNode) (*world, error) {
	nodes, err := c.cfg.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	ready := map[string]bool{}
	for i := range nodes.Items {
		if liqo.NodeReady(&nodes.Items[i]) {
			ready[nodes.Items[i].Name] = true
		}
	}
	w := &world{autoscaled: map[string][]string{}, alive: map[string]int{}, readyIn: map[string]map[string]bool{}, nodes: nodes.Items}
	for _, v := range vns {
		if v.NodeGroupID == "" || v.VirtualNodeName == "" {
			continue
		}
		if ready[v.VirtualNodeName] {
			if w.readyIn[v.NodeGroupID] == nil {
				w.readyIn[v.NodeGroupID] = map[string]bool{}
			}
			w.readyIn[v.NodeGroupID][v.VirtualNodeName] = true
		}
		if !strings.HasPrefix(v.ReservationID, api.ReservationIDPrefix) || v.Phase == localapi.PhaseDeleting || v.Phase == localapi.PhaseFailed {
			continue
		}
		w.alive[v.NodeGroupID]++
		if v.Phase == localapi.PhaseRunning {
			w.autoscaled[v.NodeGroupID] = append(w.autoscaled[v.NodeGroupID], v.VirtualNodeName)
		}
	}
	return w, nil
}

// advance moves one move on: placing → draining once every placeholder
// is bound to a Ready node of the better group (or abandoned after
// PlaceTimeout); draining → done once the worse group holds no autoscaled
// node (or after DrainTimeout).
func (c *Consolidator) advance(ctx context.Context, from string, w *world, now time.Time) error {
	c.mu.Lock()
	m := c.moves[from].copySurges()
	c.mu.Unlock()
	switch m.Phase {
	case PhasePlacing:
		bound, total, err := c.placed(ctx, m, w)
		if err != nil {
			return err
		}
		switch {
		case bound == total:
			return c.startSurge(ctx, m, w, now)
		case now.Sub(m.PhaseAt) >= c.cfg.PlaceTimeout:
			if err := c.deletePlaceholders(ctx, key(from)); err != nil {
				return err
			}
			c.log.Warn("Consolidation abandoned: the better group did not get room in time", "from", from, "to", m.To, "bound", bound, "placeholders", total, "timeout", c.cfg.PlaceTimeout)
			c.end(from)
		}
	case PhaseSurging:
		return c.advanceSurge(ctx, m, now)
	case PhaseDraining:
		switch {
		case w.alive[from] == 0:
			c.log.Info("Consolidation done: the worse group holds no autoscaled node", "from", from, "to", m.To, "took", now.Sub(m.StartedAt))
			c.end(from)
		case now.Sub(m.PhaseAt) >= c.cfg.DrainTimeout:
			c.log.Warn("Consolidation ended before the worse group was drained (PodDisruptionBudgets, pods CA may not move, or CA's scale-down delays)", "from", from, "to", m.To, "left", w.alive[from], "timeout", c.cfg.DrainTimeout)
			c.end(from)
		}
	}
	return nil
}

// placed counts the move's placeholders and those bound to a Ready node of
// the better group.
func (c *Consolidator) placed(ctx context.Context, m Move, w *world) (bound, total int, err error) {
	pods, err := c.cfg.Kube.CoreV1().Pods(c.cfg.Namespace).List(ctx, metav1.ListOptions{LabelSelector: LabelPlaceholder + "=" + key(m.From)})
	if err != nil {
		return 0, 0, fmt.Errorf("listing the placeholders of %s: %w", m.From, err)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp != nil {
			continue
		}
		total++
		if w.readyIn[m.To][p.Spec.NodeName] {
			bound++
		}
	}
	if total < m.Placeholders {
		total = m.Placeholders // a deleted placeholder is room not yet made
	}
	return bound, total, nil
}

func (c *Consolidator) setPhase(from string, p Phase, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m := c.moves[from]; m != nil {
		m.Phase, m.PhaseAt = p, now
	}
}

// keysIn returns the keys of the moves in one of phases.
func (c *Consolidator) keysIn(phases ...Phase) map[string]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]bool{}
	for from, m := range c.moves {
		if slices.Contains(phases, m.Phase) {
			out[key(from)] = true
		}
	}
	return out
}

func (c *Consolidator) end(from string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.moves, from)
}

// collectOrphans deletes the placeholders of moves not placing (an agent
// restart forgets its moves; an abandoned delete is retried here).
func (c *Consolidator) collectOrphans(ctx context.Context) error {
	pods, err := c.cfg.Kube.CoreV1().Pods(c.cfg.Namespace).List(ctx, metav1.ListOptions{LabelSelector: LabelPlaceholder})
	if err != nil {
		return fmt.Errorf("listing placeholders: %w", err)
	}
	placing := c.keysIn(PhasePlacing)
	var errs []error
	for i := range pods.Items {
		p := &pods.Items[i]
		if placing[p.Labels[LabelPlaceholder]] || p.DeletionTimestamp != nil {
			continue
		}
		if err := c.deletePod(ctx, p.Namespace, p.Name); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// wanted reports whether d asks to move autoscaled nodes that no move
// involves yet.
func (c *Consolidator) wanted(d api.Reevaluation, w *world) bool {
	return d.Decision == api.DecisionMove && d.Target != "" && len(w.autoscaled[d.NodeGroupID]) > 0 &&
		!c.involved(d.NodeGroupID, api.NodeGroupID(d.Target, d.ChunkType))
}

// maybeStart starts the move decision d asks for (wanted) when the better
// group is in the view with head-room and the budget allows it.
func (c *Consolidator) maybeStart(ctx context.Context, d api.Reevaluation, groups []api.NodeGroupView, b Budget, w *world, now time.Time) error {
	from, to := d.NodeGroupID, api.NodeGroupID(d.Target, d.ChunkType)
	target := findGroup(groups, to)
	if target == nil || target.ProviderLiqoClusterID == "" || target.MaxSize <= target.CurrentReserved || c.involved(from, to) {
		return nil
	}
	if !c.allow(b, now) {
		return nil
	}
	moving, err := c.podsOn(ctx, w.autoscaled[from])
	if err != nil {
		return err
	}
	ph := make([]*corev1.Pod, 0, len(moving))
	for _, p := range moving {
		ph = append(ph, Placeholder(p, c.cfg.Namespace, from, to, target.ProviderLiqoClusterID, c.cfg.PriorityClass, c.cfg.Image))
	}
	if len(ph) > 0 {
		if err := c.ensurePriorityClass(ctx); err != nil {
			return err
		}
	}
	m := &Move{From: from, To: to, Target: d.Target, Phase: PhasePlacing, StartedAt: now, PhaseAt: now, Placeholders: len(ph), Reason: d.Reason}
	if len(ph) == 0 {
		m.Phase = PhaseDraining // nothing to make room for
	}
	c.mu.Lock()
	c.moves[from] = m
	c.starts = append(c.starts, now)
	c.mu.Unlock()
	c.log.Info("Consolidation started: making room on the better group first", "from", from, "to", to, "nodes", len(w.autoscaled[from]), "placeholders", len(ph), "reason", d.Reason)
	var errs []error
	for _, p := range ph {
		if _, err := c.cfg.Kube.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			errs = append(errs, fmt.Errorf("creating placeholder %s/%s: %w", p.Namespace, p.Name, err))
		}
	}
	return errors.Join(errs...)
}

// involved reports whether a move already involves from or to.
func (c *Consolidator) involved(from, to string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.moves {
		if m.From == from || m.To == from || m.From == to || m.To == to {
			return true
		}
	}
	return false
}

// allow reports whether the budget lets one more move start at now (and
// forgets starts older than the longest window a consumer may set).
func (c *Consolidator) allow(b Budget, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	kept := c.starts[:0]
	n := 0
	for _, t := range c.starts {
		if now.Sub(t) < api.MaxMoveWindowSeconds*time.Second {
			kept = append(kept, t)
		}
		if now.Sub(t) < b.Window {
			n++
		}
	}
	c.starts = kept
	return n < b.Max
}

// podsOn lists the pods that would move off nodes: bound there, not
// terminating or finished, not DaemonSet pods (they stay with their node),
// not placeholders.
func (c *Consolidator) podsOn(ctx context.Context, nodes []string) ([]*corev1.Pod, error) {
	var out []*corev1.Pod
	for _, n := range nodes {
		list, err := c.cfg.Kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + n})
		if err != nil {
			return nil, fmt.Errorf("listing the pods on %s: %w", n, err)
		}
		for i := range list.Items {
			p := &list.Items[i]
			if p.Spec.NodeName != n || p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed ||
				p.Labels[LabelPlaceholder] != "" || ownedByDaemonSet(p) {
				continue
			}
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Namespace+"/"+out[i].Name < out[j].Namespace+"/"+out[j].Name })
	return out, nil
}

func (c *Consolidator) ensurePriorityClass(ctx context.Context) error {
	pc := &schedulingv1.PriorityClass{
		ObjectMeta:       metav1.ObjectMeta{Name: c.cfg.PriorityClass},
		Value:            PlaceholderPriority,
		PreemptionPolicy: new(corev1.PreemptNever),
		Description:      "Federation Autoscaler consolidation placeholders: room made on a better provider's node group, preempted by any real pod.",
	}
	if _, err := c.cfg.Kube.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating PriorityClass %s: %w", c.cfg.PriorityClass, err)
	}
	return nil
}

func (c *Consolidator) deletePlaceholders(ctx context.Context, k string) error {
	pods, err := c.cfg.Kube.CoreV1().Pods(c.cfg.Namespace).List(ctx, metav1.ListOptions{LabelSelector: LabelPlaceholder + "=" + k})
	if err != nil {
		return fmt.Errorf("listing placeholders: %w", err)
	}
	var errs []error
	for i := range pods.Items {
		if err := c.deletePod(ctx, pods.Items[i].Namespace, pods.Items[i].Name); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (c *Consolidator) deletePod(ctx context.Context, ns, name string) error {
	zero := int64(0)
	err := c.cfg.Kube.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting placeholder %s/%s: %w", ns, name, err)
	}
	return nil
}

// Placeholder is the placeholder pod in namespace ns that makes room for
// pod p on the better group to (of provider Liqo cluster toLiqo): p's
// effective requests (the larger of the
// containers' sum and each init container, plus the overhead), p's node
// selector minus host and provider pins plus Liqo's remote-cluster-id =
// toLiqo, p's tolerations (the virtual-node taint among them), the
// placeholder PriorityClass with its value, no service-account token, and
// a pause container.
func Placeholder(p *corev1.Pod, ns, from, to, toLiqo, priorityClass, image string) *corev1.Pod {
	sel := map[string]string{}
	for k, v := range p.Spec.NodeSelector {
		if k != corev1.LabelHostname && k != liqo.RemoteClusterIDLabel {
			sel[k] = v
		}
	}
	sel[liqo.RemoteClusterIDLabel] = toLiqo
	prio, zero, no := PlaceholderPriority, int64(0), false
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        placeholderName(from, p),
			Namespace:   ns,
			Labels:      map[string]string{LabelPlaceholder: key(from)},
			Annotations: map[string]string{AnnotationFrom: from, AnnotationTo: to, AnnotationFor: p.Namespace + "/" + p.Name},
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "placeholder", Image: image,
				Resources: corev1.ResourceRequirements{Requests: EffectiveRequests(p)},
			}},
			NodeSelector:                  sel,
			Tolerations:                   append([]corev1.Toleration(nil), p.Spec.Tolerations...),
			PriorityClassName:             priorityClass,
			Priority:                      &prio,
			PreemptionPolicy:              new(corev1.PreemptNever),
			TerminationGracePeriodSeconds: &zero,
			AutomountServiceAccountToken:  &no,
		},
	}
}

// EffectiveRequests is what the scheduler reserves for p: per resource the
// larger of the containers' sum and each init container's request, plus
// the pod overhead.
func EffectiveRequests(p *corev1.Pod) corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, c := range p.Spec.Containers {
		for name, q := range c.Resources.Requests {
			sum := out[name]
			sum.Add(q)
			out[name] = sum
		}
	}
	for _, c := range p.Spec.InitContainers {
		for name, q := range c.Resources.Requests {
			if cur, ok := out[name]; !ok || q.Cmp(cur) > 0 {
				out[name] = q.DeepCopy()
			}
		}
	}
	for name, q := range p.Spec.Overhead {
		sum := out[name]
		sum.Add(q)
		out[name] = sum
	}
	for name, q := range out {
		if q.IsZero() {
			delete(out, name)
		}
	}
	return out
}

// key is the label value of a move's placeholders: a hash of the worse
// group's id (group ids can exceed the 63 characters of a label value).
func key(from string) string {
	h := sha256.Sum256([]byte(from))
	return hex.EncodeToString(h[:8])
}

// placeholderName is deterministic per move and pod, so a retried create
// never makes a second placeholder.
func placeholderName(from string, p *corev1.Pod) string {
	h := sha256.Sum256([]byte(from + "\x00" + p.Namespace + "/" + p.Name))
	return "fa-placeholder-" + hex.EncodeToString(h[:8])
}

func findGroup(groups []api.NodeGroupView, id string) *api.NodeGroupView {
	for i := range groups {
		if groups[i].ID == id {
			return &groups[i]
		}
	}
	return nil
}

func ownedByDaemonSet(p *corev1.Pod) bool {
	c := metav1.GetControllerOf(p)
	return c != nil && c.Kind == "DaemonSet"
}
