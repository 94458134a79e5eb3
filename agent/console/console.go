// Package console adapts the real provider and consumer agents to the web
// consoles' backend interfaces (web.ProviderBackend, web.ConsumerBackend).
// It reads only what the agents already expose, in process (the provider's
// sharing store, last advertisement and broker view; the consumer agent's
// node groups, virtual nodes, reservations and change signal, its
// ConsumerPolicy objects and its Broker API client), so a console shows the
// agent's real state.
package console

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/federation-autoscaler/federation-autoscaler/adapter/localapi"
	fav1alpha1 "github.com/federation-autoscaler/federation-autoscaler/agent/apis/v1alpha1"
	"github.com/federation-autoscaler/federation-autoscaler/agent/brokerclient"
	"github.com/federation-autoscaler/federation-autoscaler/agent/choice"
	"github.com/federation-autoscaler/federation-autoscaler/agent/consumer"
	"github.com/federation-autoscaler/federation-autoscaler/agent/provider"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/placement"
	"github.com/federation-autoscaler/federation-autoscaler/web"
)

// ProviderAgent is what the provider console needs from *provider.Agent.
type ProviderAgent interface {
	Sharing() *provider.Store
	LastAdvertisement() (*api.AdvertisementRequest, api.AdvertisementResponse)
	// BrokerView is the broker's last view of the provider (chunks, loans)
	// and the error of the last read.
	BrokerView() (*api.AdvertisementSnapshot, string)
	// Subscribe signals every change of the above (coalesced) until ctx
	// ends.
	Subscribe(ctx context.Context) <-chan struct{}
}

// Provider implements web.ProviderBackend over a provider agent.
type Provider struct {
	ClusterID string
	Agent     ProviderAgent
}

var _ web.ProviderBackend = (*Provider)(nil)

// Status reports the discovered location, carbon and capacity of the last
// accepted advertisement, and the broker's view of the provider: when it
// last accepted an advertisement, the chunks per type (total, reserved,
// free) and every live loan.
func (p *Provider) Status(context.Context) (web.ProviderStatus, error) {
	st := web.ProviderStatus{ClusterID: p.ClusterID}
	view, viewErr := p.Agent.BrokerView()
	st.BrokerError = viewErr
	req, resp := p.Agent.LastAdvertisement()
	if req == nil {
		if st.BrokerError == "" {
			st.BrokerError = "no advertisement accepted yet"
		}
		return st, nil
	}
	st.Topology = req.Topology
	if store := p.Agent.Sharing(); store != nil {
		st.LocationSet = store.Config().Location != nil
	}
	st.CarbonIntensity = req.CarbonIntensity
	if w, ok := placement.WeightedCarbon(req.CarbonForecast, req.CarbonIntensity); ok {
		st.CarbonWeighted = &w
	}
	st.Resources = req.Resources
	if view != nil {
		st.LastAdvertised = view.LastSeen.Time
		st.Chunks = view.Chunks
		for _, l := range view.Loans {
			since := l.CreatedAt.Time
			if l.ActivatedAt != nil {
				since = l.ActivatedAt.Time
			}
			st.Loans = append(st.Loans, web.Loan{
				ReservationID: l.ReservationID, ConsumerClusterID: l.ConsumerClusterID, ChunkType: l.ChunkType,
				ChunkCount: l.ChunkCount, Phase: l.Status, Since: since, CostPerHour: l.CostPerHour,
			})
		}
		return st, nil
	}
	// Accepted, but the broker's view was not read yet: the totals of the
	// advertisement's answer.
	if len(resp.ChunkCounts) > 0 {
		st.Chunks = map[api.ChunkType]api.ChunkCounts{}
		for t, n := range resp.ChunkCounts {
			st.Chunks[t] = api.ChunkCounts{TotalChunks: n}
		}
	} else if resp.ChunkCount > 0 {
		st.Chunks = map[api.ChunkType]api.ChunkCounts{api.ChunkStandard: {TotalChunks: resp.ChunkCount}}
	}
	return st, nil
}

// SharingConfig returns the configuration in force.
func (p *Provider) SharingConfig(context.Context) (web.SharingConfig, error) {
	c := p.Agent.Sharing().Config()
	out := web.SharingConfig{UnitPrices: c.UnitPrices, Renewable: c.Renewable, Location: c.Location, Sharing: api.Sharing{
		AllowedConsumers: c.AllowedConsumers, DeniedConsumers: c.DeniedConsumers, MaxChunksPerConsumer: c.MaxChunksPerConsumer,
	}}
	for name, cp := range c.Capacity {
		switch {
		case cp.Percent != nil:
			if out.CapacityScalePercent == nil {
				out.CapacityScalePercent = map[string]int32{}
			}
			out.CapacityScalePercent[string(name)] = *cp.Percent
		case cp.Fixed != nil:
			if out.CapacityFixed == nil {
				out.CapacityFixed = corev1.ResourceList{}
			}
			out.CapacityFixed[name] = *cp.Fixed
		}
	}
	return out, nil
}

// ApplySharing validates and stores cfg; the agent re-advertises at once
// (it watches its store).
func (p *Provider) ApplySharing(_ context.Context, cfg web.SharingConfig) error {
	c := provider.SharingConfig{
		UnitPrices: cfg.UnitPrices, Renewable: cfg.Renewable, Location: cfg.Location,
		AllowedConsumers: cfg.Sharing.AllowedConsumers, DeniedConsumers: cfg.Sharing.DeniedConsumers,
		MaxChunksPerConsumer: cfg.Sharing.MaxChunksPerConsumer,
	}
	for name, pct := range cfg.CapacityScalePercent {
		if c.Capacity == nil {
			c.Capacity = map[corev1.ResourceName]provider.Cap{}
		}
		v := pct
		c.Capacity[corev1.ResourceName(name)] = provider.Cap{Percent: &v}
	}
	for name, q := range cfg.CapacityFixed {
		if c.Capacity == nil {
			c.Capacity = map[corev1.ResourceName]provider.Cap{}
		}
		v := q.DeepCopy()
		c.Capacity[name] = provider.Cap{Fixed: &v}
	}
	if err := c.Validate(); err != nil {
		return web.Classify(web.ErrInvalid, err)
	}
	return p.Agent.Sharing().Apply(c)
}

// Subscribe is the agent's change signal: the console pushes when the
// configuration, the accepted advertisement or the broker's view changes.
func (p *Provider) Subscribe(ctx context.Context) <-chan struct{} { return p.Agent.Subscribe(ctx) }

// BrokerReader reads reservations, the unmasked node groups and the
// placement explanation from the broker (*brokerclient.Client).
type BrokerReader interface {
	Reservation(ctx context.Context, id string) (api.ReservationResponse, error)
	AllNodeGroups(ctx context.Context) (api.NodeGroupListResponse, error)
	Explanation(ctx context.Context) (api.PlacementExplanation, error)
}

// ConsumerAgent is what the console needs from *consumer.Agent, read in
// process (the console runs in the agent; nothing goes over loopback HTTP).
type ConsumerAgent interface {
	Policy(ctx context.Context) (*api.Placement, error)
	BeatNow()
	// LastHeartbeat is when the broker last accepted a heartbeat.
	LastHeartbeat() time.Time
	// Location is the location the last heartbeat carried (nil: unknown)
	// and whether the ConsumerPolicy set it.
	Location() (*consumer.Location, bool)
	// NodeGroups is the policy-masked view the local API serves.
	NodeGroups(ctx context.Context) (api.NodeGroupListResponse, error)
	// VirtualNodes is the consumer's virtual nodes, as the local API lists
	// them.
	VirtualNodes(ctx context.Context) ([]localapi.VirtualNode, error)
	// Reserve and Release are the local API's reservation calls; errors
	// are the broker's (*brokerclient.Error) or the transport's.
	Reserve(ctx context.Context, id string, req api.ReservationRequest) (api.ReservationResponse, int, error)
	Release(ctx context.Context, id string) (api.ReleaseResponse, int, error)
	// Subscribe signals the agent's changes (coalesced) until ctx ends.
	Subscribe(ctx context.Context) <-chan struct{}
	// Intent is the ConsumerPolicy's intent as last read; Decisions the
	// Choice selector's audit log, newest first.
	Intent() string
	Decisions() []choice.Decision
	// Moves is what the broker's latest heartbeat answer says of the
	// migrations of the consumer's manual reservations.
	Moves() consumer.Moves
	// LastBudgetRefusal is the broker's last refusal of a reservation for
	// the consumer's budget, and when ("" when none).
	LastBudgetRefusal() (string, time.Time)
	// MeasuredLatencies is the RTTs (ms per provider) the agent measured
	// last, the ones its heartbeats report (and the dashboard shows).
	MeasuredLatencies() map[string]float64
}

// Consumer implements web.ConsumerBackend over a consumer agent.
type Consumer struct {
	ClusterID string
	// Namespace holds the agent's ConsumerPolicy objects.
	Namespace string
	Agent     ConsumerAgent
	Broker    BrokerReader
	// Client writes ConsumerPolicy objects.
	Client client.Client
	// Pods (optional) lists the cluster's pending pods, so the console can
	// name the ones no chunk can fit.
	Pods   PodReader
	Logger *slog.Logger
	// Now is the clock of the manual reservations' retention (default
	// time.Now).
	Now func() time.Time

	mu     sync.Mutex
	manual map[string]*manualReservation
}

// ManualRetention is how long the console keeps showing a manual
// reservation after it ended (Released, Failed, Expired); then it is
// dropped. An ended reservation is read from the broker once, not at every
// render.
const ManualRetention = time.Minute

// manualReservation is a reservation made from the console.
type manualReservation struct {
	// final is the broker's answer once the reservation ended (nil while
	// live); endedAt is when the console saw it end.
	final   *api.ReservationResponse
	endedAt time.Time
}

func (c *Consumer) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

var _ web.ConsumerBackend = (*Consumer)(nil)

// Status gathers the policy, the chosen provider (the growable group of the
// masked view), every node group, the reservations the
// consumer holds (from its virtual nodes and the console's manual ones, read
// from the broker) and the virtual nodes.
func (c *Consumer) Status(ctx context.Context) (web.ConsumerStatus, error) {
	st := web.ConsumerStatus{ClusterID: c.ClusterID, LastHeartbeat: c.Agent.LastHeartbeat()}
	if loc, set := c.Agent.Location(); loc != nil {
		st.Region, st.City, st.LocationSet = loc.Region, loc.City, set
	}
	pl, err := c.Agent.Policy(ctx)
	if err != nil {
		return st, fmt.Errorf("reading the ConsumerPolicy: %w", err)
	}
	if pl != nil {
		// AppliedPlacement comes with the node groups below.
		st.Placement = *pl
	}
	groups, err := c.Agent.NodeGroups(ctx)
	if err != nil {
		return st, fmt.Errorf("reading the node groups: %w", err)
	}
	st.ChosenProvider = growsOn(groups.NodeGroups)
	st.MaskedNodeGroups = groups.NodeGroups
	// Every group, masked or not, so that an operator can reserve anywhere.
	all, err := c.Broker.AllNodeGroups(ctx)
	if err != nil {
		return st, fmt.Errorf("reading every node group from the broker: %w", err)
	}
	st.NodeGroups = all.NodeGroups
	st.AppliedPlacement = all.AppliedPlacement
	st.Budget = all.Budget
	st.BudgetRefusal, st.BudgetRefusalAt = c.Agent.LastBudgetRefusal()
	// Read while the console is rendered (someone watches it); a broker
	// without the extension route leaves the panel empty.
	if ex, err := c.Broker.Explanation(ctx); err == nil {
		st.Explanation = &ex
	} else if c.Logger != nil {
		c.Logger.Debug("Placement explanation unavailable", "err", err)
	}
	// The RTTs the agent measured and reports in its heartbeats: the ones
	// its placement and the dashboard use, not a measurement of the
	// console's own.
	st.RTTs = c.Agent.MeasuredLatencies()
	if c.Pods != nil {
		if st.UnfitPods, err = unfitPods(ctx, c.Pods, all.NodeGroups); err != nil {
			st.UnfitPodsError = "pending pods could not be listed (grant the federation-autoscaler:consumer-console ClusterRole)"
			if c.Logger != nil {
				c.Logger.Debug("Pending pods unavailable", "err", err)
			}
		}
	}
	vns, err := c.Agent.VirtualNodes(ctx)
	if err != nil {
		return st, fmt.Errorf("reading the virtual nodes: %w", err)
	}
	st.VirtualNodes = c.virtualNodes(vns)
	st.Reservations = c.reservations(ctx, vns)
	st.Intent, st.Decisions = c.Agent.Intent(), decisionViews(c.Agent.Decisions())
	mv := c.Agent.Moves()
	st.Migrations, st.Savings = mv.Migrations, mv.Savings
	return st, nil
}

// growsOn is the provider the consumer grows on in its masked view: the
// first growable standard group's, else the first growable group's (the
// rule of the broker's overview, chosenProvider).
func growsOn(groups []api.NodeGroupView) string {
	first := ""
	for _, g := range groups {
		if g.MaxSize <= g.CurrentReserved {
			continue
		}
		if g.Type == api.ChunkStandard {
			return g.ProviderClusterID
		}
		if first == "" {
			first = g.ProviderClusterID
		}
	}
	return first
}

// decisionViews are the Choice audit log as the console shows it.
func decisionViews(log []choice.Decision) []web.ChoiceDecision {
	var out []web.ChoiceDecision
	for _, d := range log {
		out = append(out, decisionView(d))
	}
	return out
}

// decisionView is a Choice decision as the console shows it.
func decisionView(d choice.Decision) web.ChoiceDecision {
	out := web.ChoiceDecision{
		At: d.At, Model: d.Model, Fallback: d.Fallback, Why: d.Why, Reason: d.Reason, Ranking: d.Ranking,
		Cached: d.Cached, Latency: d.Latency, Prompt: d.Prompt, RawAnswer: d.RawAnswer,
	}
	for _, p := range d.Picks {
		out.Picks = append(out.Picks, web.ChoicePick{ChunkType: p.Type, Provider: p.Provider, ByModel: p.ByModel})
	}
	for _, r := range d.Rejected {
		out.Rejected = append(out.Rejected, r.Entry+": "+r.Reason)
	}
	return out
}

var _ web.IntentSetter = (*Consumer)(nil)

// SetIntent writes the intent into the agent's ConsumerPolicy (checked
// with the selector's rule first) and asks for a heartbeat, which reads it.
func (c *Consumer) SetIntent(ctx context.Context, intent string) error {
	if err := choice.CheckIntent(intent); err != nil {
		return web.Classify(web.ErrInvalid, err)
	}
	return c.updatePolicy(ctx, func(s *fav1alpha1.ConsumerPolicySpec) { s.Intent = intent })
}

// reservations reads the reservations behind the virtual nodes and the live
// manual ones from the broker; ended manual ones come from the console's
// memory until ManualRetention has passed.
func (c *Consumer) reservations(ctx context.Context, vns []localapi.VirtualNode) []web.ConsumerReservation {
	now := c.now()
	read := map[string]bool{}
	for _, v := range vns {
		read[v.ReservationID] = true
	}
	var out []web.ConsumerReservation
	add := func(r api.ReservationResponse, manual bool) {
		cr := web.ConsumerReservation{
			ID: r.ReservationID, ProviderClusterID: r.ProviderClusterID, ChunkType: r.ChunkType, ChunkCount: r.ChunkCount,
			Phase: r.Status, Manual: manual, CreatedAt: r.CreatedAt.Time, Message: r.Message,
		}
		if r.GraceUntil != nil {
			g := r.GraceUntil.Time
			cr.GraceUntil = &g
		}
		out = append(out, cr)
	}
	c.mu.Lock()
	for id, m := range c.manual {
		switch {
		case m.final == nil:
			read[id] = true
		case now.Sub(m.endedAt) >= ManualRetention:
			delete(c.manual, id)
		default:
			add(*m.final, true)
		}
	}
	c.mu.Unlock()
	for _, id := range slices.Sorted(maps.Keys(read)) {
		r, err := c.Broker.Reservation(ctx, id)
		if err != nil {
			continue // gone from the broker: nothing to show
		}
		r.ReservationID = id
		c.mu.Lock()
		m := c.manual[id]
		if m != nil && r.Status.Terminal() {
			final := r
			m.final, m.endedAt = &final, now
		}
		c.mu.Unlock()
		// A move's target is as manual as the one it replaced.
		add(r, m != nil || r.MigratedFrom != "")
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out
}

func (c *Consumer) virtualNodes(vns []localapi.VirtualNode) []web.VirtualNode {
	var out []web.VirtualNode
	for _, v := range vns {
		vn := web.VirtualNode{Name: v.Name, ReservationID: v.ReservationID, ProviderClusterID: v.ProviderClusterID, State: state(v.Phase)}
		if v.LastTransitionTime != nil {
			vn.Since = v.LastTransitionTime.Time
		}
		out = append(out, vn)
	}
	return out
}

// state maps a VirtualNodeState phase to the console's states.
func state(p localapi.Phase) string {
	switch p {
	case localapi.PhaseRunning:
		return "Ready"
	case localapi.PhaseDeleting:
		return "Terminating"
	case localapi.PhaseFailed:
		return "NotReady"
	default:
		return "Pending"
	}
}

// PolicyName is the ConsumerPolicy the console creates when there is none.
const PolicyName = "default"

// SetPolicy writes the policy into the agent's ConsumerPolicy (the one the
// agent reads: the lowest name; "default" is created when there is none)
// and asks for a heartbeat at once. A Latency shortlist size p leaves out
// (the console's form has none) keeps the policy's own.
func (c *Consumer) SetPolicy(ctx context.Context, p api.Placement) error {
	if fe := p.Check("placement"); fe != nil {
		return web.Classify(web.ErrInvalid, fe)
	}
	spec := fav1alpha1.PlacementFromAPI(p)
	return c.updatePolicy(ctx, func(s *fav1alpha1.ConsumerPolicySpec) { s.SetPlacement(spec) })
}

// SetLocation sets (nil: clears) the location the consumer's heartbeats
// carry instead of the geo service's, in the agent's ConsumerPolicy, and
// asks for a heartbeat at once: the broker sees it within a heartbeat.
func (c *Consumer) SetLocation(ctx context.Context, loc *api.Topology) error {
	var set *fav1alpha1.Location
	if loc != nil {
		if fe := loc.Check("location"); fe != nil {
			return web.Classify(web.ErrInvalid, fe)
		}
		set = &fav1alpha1.Location{City: loc.City, Region: loc.Region, Latitude: loc.Latitude, Longitude: loc.Longitude}
	}
	return c.updatePolicy(ctx, func(s *fav1alpha1.ConsumerPolicySpec) { s.Location = set })
}

// updatePolicy changes the agent's ConsumerPolicy and asks for a heartbeat.
func (c *Consumer) updatePolicy(ctx context.Context, change func(*fav1alpha1.ConsumerPolicySpec)) error {
	if err := UpdatePolicy(ctx, c.Client, c.Namespace, change); err != nil {
		if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
			return web.Classify(web.ErrInvalid, err)
		}
		return err
	}
	c.Agent.BeatNow()
	return nil
}

// SetPolicy writes spec into the ConsumerPolicy the consumer agent reads in
// namespace (the lowest name), creating PolicyName when there is none; a
// Latency shortlist size spec leaves out keeps the policy's own
// (ConsumerPolicySpec.SetPlacement).
func SetPolicy(ctx context.Context, cl client.Client, namespace string, spec fav1alpha1.Placement) error {
	return UpdatePolicy(ctx, cl, namespace, func(s *fav1alpha1.ConsumerPolicySpec) { s.SetPlacement(spec) })
}

// UpdatePolicy applies change to the spec of the ConsumerPolicy the consumer
// agent reads in namespace (the lowest name), creating PolicyName when there
// is none.
func UpdatePolicy(ctx context.Context, cl client.Client, namespace string, change func(*fav1alpha1.ConsumerPolicySpec)) error {
	var list fav1alpha1.ConsumerPolicyList
	if err := cl.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return fmt.Errorf("listing ConsumerPolicies in %s: %w", namespace, err)
	}
	cp := fav1alpha1.ActivePolicy(list.Items)
	if cp == nil {
		cp := &fav1alpha1.ConsumerPolicy{ObjectMeta: metav1.ObjectMeta{Name: PolicyName, Namespace: namespace}}
		change(&cp.Spec)
		if err := cl.Create(ctx, cp); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating ConsumerPolicy %s/%s: %w", namespace, PolicyName, err)
		} else if err == nil {
			return nil
		}
		return UpdatePolicy(ctx, cl, namespace, change)
	}
	change(&cp.Spec)
	if err := cl.Update(ctx, cp); err != nil {
		return fmt.Errorf("updating ConsumerPolicy %s/%s: %w", namespace, cp.Name, err)
	}
	return nil
}

// CreateReservation reserves as the adapter does through the local API (the
// agent's own code, in process), under a new id.
func (c *Consumer) CreateReservation(ctx context.Context, spec web.ReservationSpec) (string, error) {
	if spec.ChunkType == "" {
		spec.ChunkType = api.ChunkStandard
	}
	if spec.ChunkCount < 1 {
		spec.ChunkCount = 1
	}
	req := api.ReservationRequest{
		ProviderClusterID: spec.ProviderClusterID, NodeGroupID: api.NodeGroupID(spec.ProviderClusterID, spec.ChunkType),
		ChunkCount: spec.ChunkCount, ChunkType: spec.ChunkType,
	}
	if err := req.Validate(); err != nil {
		return "", web.Classify(web.ErrInvalid, err)
	}
	id := "manual-" + uuid.NewString()
	c.mu.Lock()
	if c.manual == nil {
		c.manual = map[string]*manualReservation{}
	}
	c.manual[id] = &manualReservation{}
	c.mu.Unlock()
	if _, _, err := c.Agent.Reserve(ctx, id, req); err != nil {
		c.mu.Lock()
		delete(c.manual, id)
		c.mu.Unlock()
		if c.Logger != nil {
			c.Logger.Info("Manual reservation refused", "reservation", id, "provider", spec.ProviderClusterID, "chunkType", spec.ChunkType, "err", err)
		}
		return "", reserveRefusal(spec, err)
	}
	return id, nil
}

// plainError is an error shown to a person: Error is plain words (no ids,
// no status codes); the original stays in the chain for errors.Is/As.
type plainError struct {
	msg string
	err error
}

func (e *plainError) Error() string { return e.msg }
func (e *plainError) Unwrap() error { return e.err }

// reserveRefusal says in plain words why the broker refused a manual
// reservation, classified for the console's status.
func reserveRefusal(spec web.ReservationSpec, err error) error {
	var le *brokerclient.Error
	if !errors.As(err, &le) {
		return &plainError{msg: "the broker could not be reached; try again in a moment", err: err}
	}
	p, t := spec.ProviderClusterID, spec.ChunkType
	var msg string
	switch le.Code {
	case api.CodeNotFound:
		msg = fmt.Sprintf("%s offers no %s chunks", p, t)
	case api.CodeInsufficientCapacity:
		msg = fmt.Sprintf("%s has no free %s chunk left", p, t)
	case api.CodeBudgetExceeded:
		msg = le.Message // the budget, the spend, the cost and what to do
	case api.CodeForbidden:
		msg = fmt.Sprintf("%s does not lend more %s chunks to this cluster (its sharing rules or its per-consumer quota)", p, t)
	case api.CodeServiceUnavailable:
		msg = fmt.Sprintf("%s has stopped advertising; try again when it is back", p)
	case api.CodePreconditionFailed:
		msg = "the broker has not received this cluster's heartbeat yet; try again in a few seconds"
	case api.CodeTooManyRequests:
		msg = "the broker is busy; try again in a moment"
	case api.CodeTimeout, api.CodeUpstreamError:
		msg = "the broker could not be reached; try again in a moment"
	default:
		msg = "the broker refused the reservation: " + le.Message
	}
	return classify(&plainError{msg: msg, err: err})
}

// ReleaseReservation releases as the local API does (in process).
func (c *Consumer) ReleaseReservation(ctx context.Context, id string) error {
	if fe := api.CheckReservationID("reservation id", id); fe != nil {
		return web.Classify(web.ErrInvalid, fe)
	}
	_, _, err := c.Agent.Release(ctx, id)
	return classify(err)
}

// classify marks the broker's refusals (400, 403, 404, 409, 412) with the
// console's error classes, so the console answers 400, 404 or 409 instead of
// 502.
func classify(err error) error {
	switch brokerclient.StatusOf(err) {
	case http.StatusBadRequest, http.StatusForbidden, http.StatusPreconditionFailed:
		return web.Classify(web.ErrInvalid, err)
	case http.StatusNotFound:
		return web.Classify(web.ErrNotFound, err)
	case http.StatusConflict:
		return web.Classify(web.ErrConflict, err)
	}
	return err
}

// Subscribe is the agent's change signal: the console pushes when the agent
// changed something, not on a timer.
func (c *Consumer) Subscribe(ctx context.Context) <-chan struct{} {
	return c.Agent.Subscribe(ctx)
}
