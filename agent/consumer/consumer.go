// Package consumer is the consumer agent: it heartbeats its placement
// policy, location and latencies to the broker, serves the local API the
// Cluster Autoscaler adapter calls, peers with providers through the Liqo
// driver (one ResourceSlice and one VirtualNodeState per reservation), keeps
// each VirtualNodeState in step with its virtual Node, and resyncs its local
// state with the broker at start and after a broker restart.
package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fav1alpha1 "github.com/federation-autoscaler/federation-autoscaler/agent/apis/v1alpha1"
	"github.com/federation-autoscaler/federation-autoscaler/agent/brokerclient"
	"github.com/federation-autoscaler/federation-autoscaler/agent/choice"
	"github.com/federation-autoscaler/federation-autoscaler/agent/consolidate"
	"github.com/federation-autoscaler/federation-autoscaler/agent/health"
	"github.com/federation-autoscaler/federation-autoscaler/internal/signal"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// Broker is what the consumer needs from the broker (*brokerclient.Client).
type Broker interface {
	brokerclient.InstructionSource
	Heartbeat(ctx context.Context, req api.HeartbeatRequest) (api.HeartbeatResponse, error)
	NodeGroups(ctx context.Context) (api.NodeGroupListResponse, error)
	Reserve(ctx context.Context, id string, req api.ReservationRequest) (api.ReservationResponse, int, error)
	Reservation(ctx context.Context, id string) (api.ReservationResponse, error)
	Release(ctx context.Context, id string) (api.ReleaseResponse, int, error)
}

// Peerer peers with providers (liqo.Driver).
type Peerer interface {
	Peer(ctx context.Context, providerLiqoClusterID, kubeconfig string) error
	Unpeer(ctx context.Context, providerLiqoClusterID, kubeconfig string) error
}

// Prober measures the round trip to providers' probe endpoints
// (*probe.Prober, over UDP or a simulated probe.Network): the estimate in
// ms of every endpoint that answered.
type Prober interface {
	Measure(ctx context.Context, endpoints []string) map[string]float64
}

// Location is where the consumer cluster is.
type Location struct {
	Region, City        string
	Latitude, Longitude float64
}

// GeoLookup resolves an IP address to a location (nil: unknown).
type GeoLookup func(ctx context.Context, ip string) (*Location, error)

// Config configures the consumer agent.
type Config struct {
	// ClusterID is the broker identity (certificate CN); LiqoClusterID the
	// cluster's Liqo id (default ClusterID).
	ClusterID, LiqoClusterID string
	// Namespace holds ConsumerPolicies, VirtualNodeStates and the
	// kubeconfig Secrets.
	Namespace string
	Kube      kubernetes.Interface
	// Client reads and writes the CRDs and Liqo's ResourceSlices; its
	// scheme must know fav1alpha1 and Liqo's authentication/v1beta1.
	Client client.Client
	Broker Broker
	Driver Peerer
	// Prober measures providers under the Latency policy (nil: no re-mask).
	Prober Prober
	// Geo locates the cluster from AdvertisedIP or NodeName's address.
	Geo          GeoLookup
	AdvertisedIP string
	NodeName     string
	// Interval between heartbeats (default 15 s); PolicyPoll between checks
	// of the ConsumerPolicy (default 5 s); Resync between projector passes
	// (default 10 s); NodeWait bounds how long Peer waits for the virtual
	// node (default 2 min).
	Interval, PolicyPoll, Resync, NodeWait time.Duration
	Clock                                  clock.WithTicker
	Logger                                 *slog.Logger
	Tracker                                *health.Tracker
	Metrics                                *health.Metrics
	// Registerer receives the consumer's own metrics (nil: none).
	Registerer prometheus.Registerer
	// ObserveReserveToPeer, when set, receives every reserve → Peer-handler
	// start latency (benchmarks).
	ObserveReserveToPeer func(reservationID string, d time.Duration)
	// LoopConfig tunes the instruction loop.
	LoopConfig brokerclient.LoopConfig
	// LocalAPIHosts are Host names the local API answers to besides
	// loopback names and the IP it was called on (e.g. a Service name when
	// it listens beyond loopback).
	LocalAPIHosts []string
	// Model is the model endpoint the Choice policy asks by default (the
	// agent's --model-* flags); the ConsumerPolicy's spec.model overrides
	// each field it sets. No URL: Choice uses its fallback.
	Model choice.Endpoint
	// ModelHTTP sends the model calls (default: an http.Client; each call
	// has the endpoint's timeout).
	ModelHTTP choice.Doer
	// ChoiceAuditSize and ChoiceMaxCandidates bound the Choice selector
	// (0: choice.DefaultAuditSize, choice.DefaultMaxCandidates).
	ChoiceAuditSize, ChoiceMaxCandidates int
	// Consolidation tunes the moves of autoscaled capacity to a better
	// provider (docs/placement.md, Consolidation).
	Consolidation Consolidation
}

// Consolidation tunes the consolidator (agent/consolidate).
type Consolidation struct {
	// Budget is the agent's local cap on moves (--consolidation-max-moves
	// per --consolidation-window; a zero Window: 1 per 10 minutes), on top
	// of the consumer's one disruption budget, which the broker enforces
	// (ConsumerPolicy lifecycle.migrations, or its deprecated aliases
	// maxMovesPerWindow / moveWindowSeconds).
	Budget consolidate.Budget
	// PlaceTimeout, SurgeTimeout and DrainTimeout bound a move's phases
	// (0: defaults).
	PlaceTimeout, SurgeTimeout, DrainTimeout time.Duration
}

// Agent is the consumer agent.
type Agent struct {
	cfg  Config
	log  *slog.Logger
	loop *brokerclient.Loop
	proj *projector

	beat     chan struct{} // heartbeat now
	resync   chan struct{} // resync now
	reserved sync.Map      // reservation id → time.Time of the reserve call
	// held lists the reservations made through the local API since the
	// agent started (id → struct{}); Resync reports those the broker has
	// peered but that have no local VirtualNodeState.
	held sync.Map
	// missing counts the missing chunks Resync reported.
	missing atomic.Int64

	mu       sync.Mutex
	rtts     map[string]float64 // provider → ms
	chosen   string
	lastBody *api.HeartbeatRequest
	// moves is the latest heartbeat answer's migrations and savings.
	moves  Moves
	beatOK bool
	// lastAck is when the broker last accepted a heartbeat.
	lastAck time.Time
	// loc is the location of the last heartbeat built; locSet says it is
	// the ConsumerPolicy's, not the geo service's.
	loc    *Location
	locSet bool

	// Streaks of repeated failures: heartbeats refused or unanswered by
	// the broker; building the heartbeat and projecting virtual nodes,
	// which read the cluster (these make the agent not ready).
	beatStreak, buildStreak, projStreak *health.Streak
	// policyErr is why the ConsumerPolicy is not sent ("" when it is).
	policyErr string
	// refusal is the broker's last refusal of a reservation for the
	// consumer's budget, and when.
	refusal   string
	refusalAt time.Time

	// choice is the Choice policy's selector; choiceIn its inputs from
	// the ConsumerPolicy; choiceAt the time of the last fresh decision.
	choice   *choice.Selector
	choiceIn choiceSettings
	choiceAt time.Time

	reserveToPeer prometheus.Histogram
	// consol runs the consolidation moves (the broker's "move" decisions
	// of each heartbeat's answer).
	consol *consolidate.Consolidator
	// changes signals the console after every change it shows (Subscribe).
	changes signal.Signal
}

// New validates cfg and builds the agent.
func New(cfg Config) (*Agent, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	a := &Agent{
		cfg:    cfg,
		log:    cfg.Logger.With("role", "consumer", "cluster", cfg.ClusterID),
		beat:   make(chan struct{}, 1),
		resync: make(chan struct{}, 1),
		rtts:   map[string]float64{},
		reserveToPeer: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "fa_agent_reserve_to_peer_start_seconds",
			Help:    "From a reservation accepted through the local API to the start of its Peer handler.",
			Buckets: []float64{.01, .025, .05, .1, .2, .5, 1, 2, 5, 10, 30},
		}),
	}
	if err := a.registerMetrics(cfg.Registerer); err != nil {
		return nil, err
	}
	var err error
	if a.choice, err = choice.New(choice.Config{
		HTTP: cfg.ModelHTTP, Clock: cfg.Clock, Logger: a.log, Registerer: cfg.Registerer,
		AuditSize: cfg.ChoiceAuditSize, MaxCandidates: cfg.ChoiceMaxCandidates,
	}); err != nil {
		return nil, err
	}
	a.choiceIn = choiceSettings{ep: cfg.Model, err: cfg.Model.Validate()}
	if a.consol, err = consolidate.New(consolidate.Config{Kube: cfg.Kube, Namespace: cfg.Namespace, PlaceTimeout: cfg.Consolidation.PlaceTimeout, SurgeTimeout: cfg.Consolidation.SurgeTimeout, DrainTimeout: cfg.Consolidation.DrainTimeout, Clock: cfg.Clock, Logger: a.log}); err != nil {
		return nil, err
	}
	a.beatStreak = cfg.Tracker.NewStreak("Heartbeat", a.log, cfg.Clock, false)
	a.buildStreak = cfg.Tracker.NewStreak("Building the heartbeat (reading ConsumerPolicies)", a.log, cfg.Clock, true)
	a.projStreak = cfg.Tracker.NewStreak("Projecting virtual nodes (Kubernetes API)", a.log, cfg.Clock, true)
	a.proj = newProjector(a)
	if a.loop, err = brokerclient.NewAgentLoop(cfg.LoopConfig, brokerclient.AgentLoop{
		Source: cfg.Broker, Clock: cfg.Clock, Logger: a.log, Tracker: cfg.Tracker, Metrics: cfg.Metrics,
		Handlers: map[api.InstructionKind]brokerclient.Handler{
			api.KindPeer:    a.handlePeer,
			api.KindUnpeer:  a.handleUnpeer,
			api.KindCleanup: a.handleCleanup,
			// The broker's new leader asks every consumer after a takeover.
			api.KindReconcile: a.handleReconcile,
		},
		Changed: a.changes.Notify, // a virtual node peered, unpeered or cleaned up
	}); err != nil {
		return nil, err
	}
	return a, nil
}

// validate says which required field of cfg is missing.
func (cfg Config) validate() error {
	switch {
	case cfg.ClusterID == "":
		return errors.New("consumer agent: no cluster id")
	case cfg.Namespace == "":
		return errors.New("consumer agent: no namespace")
	case cfg.Kube == nil || cfg.Client == nil || cfg.Broker == nil || cfg.Driver == nil:
		return errors.New("consumer agent: Kube, Client, Broker and Driver are required")
	}
	return nil
}

// withDefaults fills the optional fields cfg leaves unset.
func (cfg Config) withDefaults() Config {
	if cfg.LiqoClusterID == "" {
		cfg.LiqoClusterID = cfg.ClusterID
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 15 * time.Second
	}
	if cfg.PolicyPoll <= 0 {
		cfg.PolicyPoll = 5 * time.Second
	}
	if cfg.Resync <= 0 {
		cfg.Resync = 10 * time.Second
	}
	if cfg.NodeWait <= 0 {
		cfg.NodeWait = 2 * time.Minute
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return cfg
}

// registerMetrics registers the consumer's own metrics with reg (nil:
// none).
func (a *Agent) registerMetrics(reg prometheus.Registerer) error {
	if reg == nil {
		return nil
	}
	missing := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "fa_agent_missing_virtual_nodes_total",
		Help: "Chunks the broker holds as peered that Resync found without a working local virtual node.",
	}, func() float64 { return float64(a.missing.Load()) })
	for _, c := range []prometheus.Collector{a.reserveToPeer, missing} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("registering consumer metrics: %w", err)
		}
	}
	return nil
}

// MissingReports is how many missing chunks Resync has reported.
func (a *Agent) MissingReports() int64 { return a.missing.Load() }

// ReserveToPeer is the histogram of reserve → Peer-handler start.
func (a *Agent) ReserveToPeer() prometheus.Histogram { return a.reserveToPeer }

// Run heartbeats, handles instructions and projects virtual nodes until ctx
// ends. It resyncs with the broker first.
func (a *Agent) Run(ctx context.Context) error {
	if err := a.proj.start(ctx); err != nil {
		return err
	}
	defer a.proj.shutdown()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(2)
	go func() {
		defer wg.Done()
		_ = a.loop.Run(ctx)
	}()
	go func() {
		defer wg.Done()
		a.proj.run(ctx)
	}()

	tick := a.cfg.Clock.NewTicker(a.cfg.Interval)
	defer tick.Stop()
	policyTick := a.cfg.Clock.NewTicker(a.cfg.PolicyPoll)
	defer policyTick.Stop()
	resyncDue := true
	a.heartbeat(ctx, true, &resyncDue)
	for {
		if resyncDue && a.beatOKNow() {
			if err := a.Resync(ctx); err != nil {
				a.log.Warn("Resync with the broker failed; will retry", "err", err)
			} else {
				resyncDue = false
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C():
			a.heartbeat(ctx, true, &resyncDue)
		case <-policyTick.C():
			a.heartbeat(ctx, false, &resyncDue)
		case <-a.beat:
			a.heartbeat(ctx, true, &resyncDue)
		case <-a.resync:
			resyncDue = true
		}
	}
}

func (a *Agent) beatOKNow() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.beatOK
}

// LastHeartbeat is when the broker last accepted a heartbeat (zero: never).
func (a *Agent) LastHeartbeat() time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.lastAck
}

// Moves is what the broker's latest heartbeat answer says of this
// consumer's migrations: the moves of its manual reservations it shows and
// what the finished ones saved (nil before the first).
type Moves struct {
	Migrations []api.Migration
	Savings    *api.MigrationSavings
}

func movesOf(resp api.HeartbeatResponse) Moves {
	return Moves{Migrations: resp.Migrations, Savings: resp.Savings}
}

// Moves returns the migrations and savings of the latest heartbeat answer.
func (a *Agent) Moves() Moves {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.moves
}

// MeasuredLatencies returns the RTTs (ms per provider) the agent last
// measured, the ones its heartbeats report to the broker (nil before the
// first measurement).
func (a *Agent) MeasuredLatencies() map[string]float64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.rtts) == 0 {
		return nil
	}
	return maps.Clone(a.rtts)
}

// BeatNow asks for a heartbeat at once (coalesced).
func (a *Agent) BeatNow() {
	select {
	case a.beat <- struct{}{}:
	default:
	}
}

// heartbeat builds the heartbeat and sends it when force is set or it
// changed. A success after a failure schedules a resync: the broker may
// have restarted.
func (a *Agent) heartbeat(ctx context.Context, force bool, resyncDue *bool) {
	req, err := a.heartbeatRequest(ctx)
	if err != nil {
		if ctx.Err() == nil {
			a.buildStreak.Failed(ctx, err)
		}
		return
	}
	a.buildStreak.Succeeded(ctx)
	a.mu.Lock()
	same := a.lastBody != nil && equalHeartbeat(*a.lastBody, req)
	a.mu.Unlock()
	if same && !force {
		return
	}
	resp, err := a.sendHeartbeat(ctx, req)
	if err != nil {
		if ctx.Err() == nil {
			a.beatStreak.Failed(ctx, err)
		}
		a.count("error")
		a.mu.Lock()
		wasOK := a.beatOK
		a.beatOK = false
		a.lastBody = nil
		a.mu.Unlock()
		*resyncDue = true
		if wasOK {
			a.changes.Notify()
		}
		return
	}
	a.count("ok")
	a.beatStreak.Succeeded(ctx)
	a.mu.Lock()
	if !same || !a.beatOK {
		defer a.changes.Notify() // the policy, location or RTTs the broker has changed
	}
	a.beatOK = true
	a.lastBody = &req
	a.moves = movesOf(resp)
	a.lastAck = resp.AckAt.Time
	if a.lastAck.IsZero() {
		a.lastAck = a.cfg.Clock.Now()
	}
	a.mu.Unlock()
	for _, id := range resp.UnknownReservations {
		a.log.Info("The broker holds no live reservation for a local virtual node; cleaning it up", "reservation", id)
		if err := a.removeLocal(ctx, id, "", false); err != nil {
			a.log.Warn("Cleaning up an unknown reservation failed", "reservation", id, "err", err)
		}
	}
	a.consolidate(ctx, resp.Moves)
}

// sendHeartbeat sends req. A broker that refuses its consolidations (one
// older than the field: it decodes strictly) gets it again without them,
// so the leases are renewed whatever the broker's version; the
// consolidations are then not counted in the consumer's budget.
func (a *Agent) sendHeartbeat(ctx context.Context, req api.HeartbeatRequest) (api.HeartbeatResponse, error) {
	resp, err := a.cfg.Broker.Heartbeat(ctx, req)
	if err == nil || len(req.Consolidations) == 0 || !api.IsCode(err, api.CodeInvalidRequest) || !strings.Contains(err.Error(), "consolidations") {
		return resp, err
	}
	a.log.Warn("The broker refused the heartbeat's consolidations; sent again without them, so they are not counted in the consumer's disruption budget: upgrade the broker (brokers first, then agents)", "err", err)
	req.Consolidations = nil
	return a.cfg.Broker.Heartbeat(ctx, req)
}

func equalHeartbeat(a, b api.HeartbeatRequest) bool {
	return a.ClusterID == b.ClusterID && a.LiqoClusterID == b.LiqoClusterID && equalPlacement(a.Placement, b.Placement) &&
		a.Region == b.Region && a.City == b.City && equalFloat(a.Latitude, b.Latitude) && equalFloat(a.Longitude, b.Longitude) &&
		a.ChosenProvider == b.ChosenProvider && slices.Equal(a.Reservations, b.Reservations) && maps.Equal(a.MeasuredLatencies, b.MeasuredLatencies) &&
		equalLifecycle(a.Lifecycle, b.Lifecycle) && equality.Semantic.DeepEqual(a.Budget, b.Budget) &&
		slices.Equal(a.NotReadyReservations, b.NotReadyReservations) &&
		slices.Equal(a.StartingReservations, b.StartingReservations) &&
		slices.EqualFunc(a.Consolidations, b.Consolidations, func(x, y api.Consolidation) bool {
			return x.NodeGroupID == y.NodeGroupID && x.TargetNodeGroupID == y.TargetNodeGroupID && x.StartedAt.Equal(&y.StartedAt)
		})
}

func equalLifecycle(x, y *api.Lifecycle) bool {
	return equality.Semantic.DeepEqual(x, y)
}

// lost reports whether v's virtual node was lost: Failed, or Running while
// the node is not Ready (Liqo lost the provider). A node still coming up
// is not lost.
func lost(v *fav1alpha1.VirtualNodeState) bool {
	switch v.Status.Phase {
	case fav1alpha1.VirtualNodeFailed:
		return true
	case fav1alpha1.VirtualNodeRunning:
		return !meta.IsStatusConditionTrue(v.Status.Conditions, fav1alpha1.VirtualNodeConditionReady)
	}
	return false
}

// starting reports whether v's virtual node is not Ready yet and not lost
// either: still coming up (the broker's migration waits for it).
func starting(v *fav1alpha1.VirtualNodeState) bool {
	return !lost(v) && !(v.Status.Phase == fav1alpha1.VirtualNodeRunning && meta.IsStatusConditionTrue(v.Status.Conditions, fav1alpha1.VirtualNodeConditionReady))
}

func equalFloat(x, y *float64) bool { return x == nil && y == nil || x != nil && y != nil && *x == *y }

func equalPlacement(x, y *api.Placement) bool {
	if x == nil || y == nil {
		return x == y
	}
	if x.Type != y.Type || x.LatencyCandidates != y.LatencyCandidates || (x.Weights == nil) != (y.Weights == nil) {
		return false
	}
	return x.Weights == nil || *x.Weights == *y.Weights
}

func (a *Agent) count(outcome string) {
	if a.cfg.Metrics != nil {
		a.cfg.Metrics.Reports.WithLabelValues(outcome).Inc()
	}
}

// heartbeatRequest builds the heartbeat from the cluster's state.
func (a *Agent) heartbeatRequest(ctx context.Context) (api.HeartbeatRequest, error) {
	req := api.HeartbeatRequest{ClusterID: a.cfg.ClusterID, LiqoClusterID: a.cfg.LiqoClusterID}
	spec, err := a.policySpec(ctx)
	if err != nil {
		return req, err
	}
	a.noteChoice(ctx, spec)
	// A policy the broker refuses (a ConsumerPolicy written before the CRD
	// had its bounds) must not stop the heartbeats that renew the leases:
	// the refused part is left out (the broker's default applies) and the
	// reason noted.
	p := placementOf(spec)
	var refused []error
	if fe := p.Check("placement"); fe != nil {
		refused, p = append(refused, fe), nil
	}
	req.Placement = p
	if spec != nil {
		req.Lifecycle = spec.Lifecycle.API()
		if fe := req.Lifecycle.Check("lifecycle"); fe != nil {
			refused, req.Lifecycle = append(refused, fe), nil
		}
		req.Budget = spec.Budget.API()
		if fe := req.Budget.Check("budget"); fe != nil {
			refused, req.Budget = append(refused, fe), nil
		}
	}
	a.notePolicy(errors.Join(refused...))
	var set *fav1alpha1.Location
	if spec != nil {
		set = spec.Location
	}
	if loc := a.location(ctx, set); loc != nil {
		lat, lon := loc.Latitude, loc.Longitude
		req.Region, req.City, req.Latitude, req.Longitude = loc.Region, loc.City, &lat, &lon
	}
	vnss, err := a.listVNS(ctx)
	if err != nil {
		return req, err
	}
	for _, v := range vnss {
		req.Reservations = append(req.Reservations, v.Spec.ReservationID)
		switch {
		case lost(&v):
			req.NotReadyReservations = append(req.NotReadyReservations, v.Spec.ReservationID)
		case starting(&v):
			req.StartingReservations = append(req.StartingReservations, v.Spec.ReservationID)
		}
	}
	sort.Strings(req.Reservations)
	sort.Strings(req.NotReadyReservations)
	sort.Strings(req.StartingReservations)
	a.mu.Lock()
	if len(a.rtts) > 0 {
		req.MeasuredLatencies = map[string]float64{}
		for k, v := range a.rtts {
			req.MeasuredLatencies[k] = v
		}
	}
	// The pick of the Latency re-mask or of the Choice selector.
	req.ChosenProvider = a.chosen
	a.mu.Unlock()
	// The consolidations under way, for the broker's disruption budget.
	req.Consolidations = a.consol.Started()
	return req, nil
}

// Policy returns the placement of the ConsumerPolicy with the lowest name in
// the agent's namespace (nil when there is none: the broker's default).
func (a *Agent) Policy(ctx context.Context) (*api.Placement, error) {
	spec, err := a.policySpec(ctx)
	if err != nil {
		return nil, err
	}
	return placementOf(spec), nil
}

// policySpec is the spec of the ConsumerPolicy the agent reads: the lowest
// name in its namespace (nil when there is none).
func (a *Agent) policySpec(ctx context.Context) (*fav1alpha1.ConsumerPolicySpec, error) {
	var list fav1alpha1.ConsumerPolicyList
	if err := a.cfg.Client.List(ctx, &list, client.InNamespace(a.cfg.Namespace)); err != nil {
		return nil, fmt.Errorf("listing ConsumerPolicies in %s: %w", a.cfg.Namespace, err)
	}
	cp := fav1alpha1.ActivePolicy(list.Items)
	if cp == nil {
		return nil, nil
	}
	return &cp.Spec, nil
}

// placementOf is the heartbeat's placement of a ConsumerPolicy spec (nil:
// the broker's default).
func placementOf(spec *fav1alpha1.ConsumerPolicySpec) *api.Placement {
	if spec == nil {
		return nil
	}
	return spec.Placement.API()
}

// notePolicy records whether the ConsumerPolicy is sent: a refused policy
// is logged once per reason and shown as the "consumer-policy" input.
func (a *Agent) notePolicy(err error) {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	a.mu.Lock()
	changed := a.policyErr != msg
	a.policyErr = msg
	a.mu.Unlock()
	if a.cfg.Tracker != nil {
		a.cfg.Tracker.SetInput("consumer-policy", err)
	}
	if changed && err != nil {
		a.log.Warn("The ConsumerPolicy breaks the broker's rules; heartbeats leave the refused part out (the broker's default applies) until it is fixed", "namespace", a.cfg.Namespace, "err", err)
	}
}

// Location is the location the last heartbeat carried (nil: none known)
// and whether it was set in the ConsumerPolicy rather than found from the
// cluster's address.
func (a *Agent) Location() (*Location, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.loc == nil {
		return nil, false
	}
	loc := *a.loc
	return &loc, a.locSet
}

// location is the cluster's location, best effort: the ConsumerPolicy's
// (override, when set), else the geo service's for the cluster's address.
func (a *Agent) location(ctx context.Context, override *fav1alpha1.Location) *Location {
	loc, overridden := a.lookupLocation(ctx, override)
	a.mu.Lock()
	a.loc, a.locSet = loc, overridden
	a.mu.Unlock()
	return loc
}

func (a *Agent) lookupLocation(ctx context.Context, override *fav1alpha1.Location) (*Location, bool) {
	set := func(err error) {
		if a.cfg.Tracker != nil {
			a.cfg.Tracker.SetInput("geo", err)
		}
	}
	if override != nil {
		o := &api.Topology{City: override.City, Region: override.Region, Latitude: override.Latitude, Longitude: override.Longitude}
		if fe := o.Check("location"); fe != nil || !o.HasCoordinates() {
			err := error(fe)
			if fe == nil {
				err = errors.New("location: no coordinates (0, 0)")
			}
			set(fmt.Errorf("the ConsumerPolicy's location is unusable, using the address's: %w", err))
		} else {
			set(nil)
			return &Location{Region: o.Region, City: o.City, Latitude: o.Latitude, Longitude: o.Longitude}, true
		}
	}
	if a.cfg.Geo == nil {
		set(errors.New("no geo service configured (--mock-geo-url)"))
		return nil, false
	}
	ip := a.cfg.AdvertisedIP
	if ip == "" {
		ip = a.proj.nodeIP(a.cfg.NodeName)
	}
	if ip == "" {
		set(errors.New("no node address to locate (set --advertised-ip)"))
		return nil, false
	}
	loc, err := a.cfg.Geo(ctx, ip)
	if err != nil || loc == nil {
		if err == nil {
			err = fmt.Errorf("no location known for %s", ip)
		}
		set(err)
		return nil, false
	}
	set(nil)
	return loc, false
}

// listVNS lists the agent's VirtualNodeStates.
func (a *Agent) listVNS(ctx context.Context) ([]fav1alpha1.VirtualNodeState, error) {
	var list fav1alpha1.VirtualNodeStateList
	if err := a.cfg.Client.List(ctx, &list, client.InNamespace(a.cfg.Namespace)); err != nil {
		return nil, fmt.Errorf("listing VirtualNodeStates in %s: %w", a.cfg.Namespace, err)
	}
	return list.Items, nil
}

// nodeAddress picks a node's ExternalIP, then InternalIP.
func nodeAddress(n *corev1.Node) string {
	for _, t := range []corev1.NodeAddressType{corev1.NodeExternalIP, corev1.NodeInternalIP} {
		for _, addr := range n.Status.Addresses {
			if addr.Type == t && addr.Address != "" {
				return addr.Address
			}
		}
	}
	return ""
}
