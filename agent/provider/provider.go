// Package provider is the provider agent: it advertises what the cluster
// can really lend (free capacity from Node and Pod informers, capped by the
// sharing configuration), with prices, location, carbon and a UDP probe
// endpoint, and mints or revokes the Liqo peering credentials the broker asks
// for.
package provider

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"reflect"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/federation-autoscaler/federation-autoscaler/agent/brokerclient"
	"github.com/federation-autoscaler/federation-autoscaler/agent/health"
	"github.com/federation-autoscaler/federation-autoscaler/internal/signal"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// Broker is what the provider needs from the broker (*brokerclient.Client).
type Broker interface {
	brokerclient.InstructionSource
	Advertise(ctx context.Context, req api.AdvertisementRequest) (api.AdvertisementResponse, error)
	// Advertisement reads the broker's view of this provider, with its
	// live loans (GET /api/v1/advertisements/{clusterId}).
	Advertisement(ctx context.Context, clusterID string) (api.AdvertisementSnapshot, error)
}

// DefaultStatePoll is how often the agent re-reads the broker's view of
// itself (chunks, loans) besides after every accepted advertisement and
// every handled instruction: a consumer's reservation changes the loans
// without the provider taking part.
const DefaultStatePoll = 5 * time.Second

// PeeringUsers mints and revokes peering credentials (liqo.Driver).
type PeeringUsers interface {
	GeneratePeeringUser(ctx context.Context, consumerLiqoClusterID string) (string, error)
	DeletePeeringUser(ctx context.Context, consumerLiqoClusterID string) error
}

// GeoLookup resolves an IP address to a location; nil topology means the
// IP has no known location.
type GeoLookup func(ctx context.Context, ip string) (*api.Topology, error)

// CarbonLookup returns a region's current carbon intensity and hourly
// forecast (current hour first).
type CarbonLookup func(ctx context.Context, region string) (current *float64, forecast []float64, err error)

// Config configures the provider agent.
type Config struct {
	// ClusterID is the broker identity (the certificate CN);
	// LiqoClusterID the cluster's Liqo id.
	ClusterID, LiqoClusterID string
	Kube                     kubernetes.Interface
	Broker                   Broker
	Driver                   PeeringUsers
	Sharing                  *Store
	// NodeName picks the node whose address locates the cluster (its
	// ExternalIP, then InternalIP); empty: the first lendable node by name.
	NodeName string
	// AdvertisedIP overrides the node address.
	AdvertisedIP string
	// ProbePort is the UDP echo responder's port (0: no probe endpoint).
	ProbePort int
	Geo       GeoLookup
	Carbon    CarbonLookup
	// Interval between advertisements (default 30 s); ConfigPoll between
	// checks of the configuration files (default 5 s); Debounce groups a
	// burst of pod events into one advertisement (default 1 s); StatePoll
	// between reads of the broker's view of the provider (default
	// DefaultStatePoll).
	Interval, ConfigPoll, Debounce, StatePoll time.Duration
	Clock                                     clock.WithTicker
	Logger                                    *slog.Logger
	Tracker                                   *health.Tracker
	Metrics                                   *health.Metrics
	// LoopConfig tunes the instruction loop (Source, Handlers, Clock,
	// Logger and Hooks are filled in by the agent).
	LoopConfig brokerclient.LoopConfig
}

// Agent is the provider agent.
type Agent struct {
	cfg  Config
	cap  *Capacity
	loop *brokerclient.Loop
	log  *slog.Logger

	mu       sync.Mutex
	last     *api.AdvertisementRequest // last advertisement the broker accepted
	lastResp api.AdvertisementResponse
	// adStreak follows advertisements the broker refused or did not
	// answer; buildStreak building them from the cluster's nodes and pods
	// (it makes the agent not ready).
	adStreak, buildStreak *health.Streak
	// view is the broker's last answered view of this provider (nil before
	// the first); viewErr the error of the last read ("" when it worked).
	view    *api.AdvertisementSnapshot
	viewErr string
	// refresh asks Run to re-read the view (coalescing).
	refresh chan struct{}
	// changes signals the console after every change it shows (Subscribe).
	changes signal.Signal
}

// New validates cfg and builds the agent.
func New(cfg Config) (*Agent, error) {
	switch {
	case cfg.ClusterID == "":
		return nil, errors.New("provider agent: no cluster id")
	case cfg.Kube == nil || cfg.Broker == nil || cfg.Driver == nil:
		return nil, errors.New("provider agent: Kube, Broker and Driver are required")
	}
	if cfg.LiqoClusterID == "" {
		cfg.LiqoClusterID = cfg.ClusterID
	}
	if cfg.Sharing == nil {
		s, err := NewStore(Sources{}, cfg.Logger)
		if err != nil {
			return nil, err
		}
		cfg.Sharing = s
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 30 * time.Second
	}
	if cfg.ConfigPoll <= 0 {
		cfg.ConfigPoll = 5 * time.Second
	}
	if cfg.Debounce <= 0 {
		cfg.Debounce = time.Second
	}
	if cfg.StatePoll <= 0 {
		cfg.StatePoll = DefaultStatePoll
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	c, err := NewCapacity(cfg.Kube, 0)
	if err != nil {
		return nil, err
	}
	a := &Agent{cfg: cfg, cap: c, log: cfg.Logger.With("role", "provider", "cluster", cfg.ClusterID), refresh: make(chan struct{}, 1)}
	a.adStreak = cfg.Tracker.NewStreak("Advertisement", a.log, cfg.Clock, false)
	a.buildStreak = cfg.Tracker.NewStreak("Building the advertisement (Kubernetes API)", a.log, cfg.Clock, true)
	if a.loop, err = brokerclient.NewAgentLoop(cfg.LoopConfig, brokerclient.AgentLoop{
		Source: cfg.Broker, Clock: cfg.Clock, Logger: a.log, Tracker: cfg.Tracker, Metrics: cfg.Metrics,
		Handlers: map[api.InstructionKind]brokerclient.Handler{
			api.KindGenerateKubeconfig: a.handleGenerateKubeconfig,
			api.KindCleanup:            a.handleCleanup,
			api.KindReconcile:          a.handleReconcile,
		},
		Changed: a.refreshView, // a credential minted or revoked: a loan started or ended
	}); err != nil {
		return nil, err
	}
	return a, nil
}

// Run advertises and handles instructions until ctx ends.
func (a *Agent) Run(ctx context.Context) error {
	if err := a.cap.Start(ctx); err != nil {
		return err
	}
	defer a.cap.Shutdown()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = a.loop.Run(ctx)
	}()
	defer wg.Wait()

	tick := a.cfg.Clock.NewTicker(a.cfg.Interval)
	defer tick.Stop()
	cfgTick := a.cfg.Clock.NewTicker(a.cfg.ConfigPoll)
	defer cfgTick.Stop()
	viewTick := a.cfg.Clock.NewTicker(a.cfg.StatePoll)
	defer viewTick.Stop()
	a.advertise(ctx, true)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-viewTick.C():
			a.readView(ctx)
		case <-a.refresh:
			a.readView(ctx)
		case <-tick.C():
			a.advertise(ctx, true)
		case <-cfgTick.C():
			if _, err := a.cfg.Sharing.Reload(); err != nil && a.cfg.Tracker != nil {
				a.cfg.Tracker.SetInput("sharing-config", err)
			} else if a.cfg.Tracker != nil {
				a.cfg.Tracker.SetInput("sharing-config", nil)
			}
		case <-a.cfg.Sharing.Changed():
			a.changes.Notify() // shown at once, even if the broker is away
			a.advertise(ctx, false)
		case <-a.cap.Changed():
			// Group a burst of pod events into one advertisement.
			select {
			case <-ctx.Done():
				return nil
			case <-a.cfg.Clock.After(a.cfg.Debounce):
			}
			a.advertise(ctx, false)
		}
	}
}

// Advertisement builds the advertisement the agent would send now.
func (a *Agent) Advertisement(ctx context.Context) (api.AdvertisementRequest, error) {
	free, err := a.cap.Free()
	if err != nil {
		return api.AdvertisementRequest{}, err
	}
	sc := a.cfg.Sharing.Config()
	capped := ApplyCaps(free, sc.Capacity)
	req := api.AdvertisementRequest{
		ClusterID:            a.cfg.ClusterID,
		LiqoClusterID:        a.cfg.LiqoClusterID,
		Resources:            clampQuantities(capped.Resources),
		UnitPrices:           sc.UnitPrices,
		CapacityScalePercent: capped.ScalePercent,
		CapacityFixed:        capped.Fixed,
		Renewable:            sc.Renewable,
		Sharing:              sc.Sharing(),
	}
	ip := a.cfg.AdvertisedIP
	if ip == "" {
		ip = a.nodeIP()
	}
	if ip != "" && a.cfg.ProbePort > 0 {
		req.ProbeEndpoint = net.JoinHostPort(ip, strconv.Itoa(a.cfg.ProbePort))
	}
	a.locate(ctx, ip, sc.Location, &req)
	return req, nil
}

// locate fills topology and carbon, best effort; every missing input is
// recorded on the health tracker. A location set in the sharing
// configuration (the console's location picker) wins over the geo lookup.
func (a *Agent) locate(ctx context.Context, ip string, set *api.Topology, req *api.AdvertisementRequest) {
	if set != nil {
		a.setInput("geo", nil)
		topo := *set
		a.carbon(ctx, "the location set in the sharing configuration", &topo, req)
		return
	}
	if a.cfg.Geo == nil {
		a.setInput("geo", errors.New("no geo service configured (--mock-geo-url)"))
		return
	}
	if ip == "" {
		a.setInput("geo", errors.New("no node address to locate (set --advertised-ip)"))
		return
	}
	topo, err := a.cfg.Geo(ctx, ip)
	if err != nil || topo == nil {
		if err == nil {
			err = fmt.Errorf("no location known for %s", ip)
		}
		a.setInput("geo", err)
		return
	}
	if fe := topo.Check("topology"); fe != nil {
		a.setInput("geo", fmt.Errorf("the location service answered an unusable location for %s: %w", ip, fe))
		return
	}
	a.setInput("geo", nil)
	a.carbon(ctx, "the location of "+ip, topo, req)
}

// setInput records whether an input of the advertisement is missing (nil:
// it is there) on the health tracker.
func (a *Agent) setInput(name string, err error) {
	if a.cfg.Tracker != nil {
		a.cfg.Tracker.SetInput(name, err)
	}
}

// carbon sets the advertisement's topology and reads the carbon intensity
// of its region (what names the location in the health input's errors).
func (a *Agent) carbon(ctx context.Context, what string, topo *api.Topology, req *api.AdvertisementRequest) {
	req.Topology = topo
	if a.cfg.Carbon == nil {
		a.setInput("carbon", errors.New("no carbon service configured (--mock-eco-url)"))
		return
	}
	if topo.Region == "" {
		a.setInput("carbon", fmt.Errorf("%s has no region", what))
		return
	}
	cur, fc, err := a.cfg.Carbon(ctx, topo.Region)
	if err != nil {
		a.setInput("carbon", err)
		return
	}
	if fe := api.CheckCarbonData(cur, fc); fe != nil {
		a.setInput("carbon", fmt.Errorf("the carbon service answered unusable values for region %s: %w", topo.Region, fe))
		return
	}
	a.setInput("carbon", nil)
	req.CarbonIntensity, req.CarbonForecast = cur, fc
}

// clampQuantities caps every amount at api.MaxQuantity, the most the broker
// accepts: a cluster whose nodes report more (a misreporting node) still
// advertises, as the maximum.
func clampQuantities(l corev1.ResourceList) corev1.ResourceList {
	limit := api.MaxQuantityValue()
	for name, q := range l {
		if q.Cmp(limit) > 0 {
			l[name] = limit.DeepCopy()
		}
	}
	return l
}

// nodeIP is the configured node's ExternalIP, else its InternalIP.
func (a *Agent) nodeIP() string {
	for _, n := range a.cap.Nodes() {
		if a.cfg.NodeName != "" && n.Name != a.cfg.NodeName || a.cfg.NodeName == "" && !Lendable(n) {
			continue
		}
		for _, t := range []corev1.NodeAddressType{corev1.NodeExternalIP, corev1.NodeInternalIP} {
			for _, addr := range n.Status.Addresses {
				if addr.Type == t && addr.Address != "" {
					return addr.Address
				}
			}
		}
		return ""
	}
	return ""
}

// advertise sends the advertisement when force is set or it changed since
// the last accepted one.
func (a *Agent) advertise(ctx context.Context, force bool) {
	req, err := a.Advertisement(ctx)
	if err != nil {
		if ctx.Err() == nil {
			a.buildStreak.Failed(ctx, err)
		}
		return
	}
	a.buildStreak.Succeeded(ctx)
	if len(req.Resources) == 0 {
		a.log.Warn("Nothing to advertise: no Ready, schedulable node")
		return
	}
	a.mu.Lock()
	same := a.last != nil && reflect.DeepEqual(*a.last, req)
	a.mu.Unlock()
	if same && !force {
		return
	}
	resp, err := a.cfg.Broker.Advertise(ctx, req)
	if err != nil {
		if ctx.Err() == nil {
			a.adStreak.Failed(ctx, err)
		}
		a.count("error")
		return
	}
	a.count("ok")
	a.adStreak.Succeeded(ctx)
	a.mu.Lock()
	a.last, a.lastResp = &req, resp
	a.mu.Unlock()
	a.changes.Notify()
	a.log.Debug("Advertised", "resources", req.Resources, "chunks", resp.ChunkCount)
	if len(resp.Instructions) > 0 {
		a.loop.Submit(ctx, resp.Instructions)
	}
	a.readView(ctx)
}

// refreshView asks Run to re-read the broker's view soon (never blocks).
func (a *Agent) refreshView() {
	select {
	case a.refresh <- struct{}{}:
	default:
	}
}

// readView reads the broker's view of this provider; a failure keeps the
// last view and records the error (the console says since when it is
// stale).
func (a *Agent) readView(ctx context.Context) {
	snap, err := a.cfg.Broker.Advertisement(ctx, a.cfg.ClusterID)
	if err != nil && ctx.Err() != nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	defer a.changes.Notify()
	if err != nil {
		if a.viewErr == "" {
			a.log.Debug("Reading the broker's view of this provider failed", "err", err)
		}
		a.viewErr = err.Error()
		return
	}
	a.view, a.viewErr = &snap, ""
}

// Subscribe returns a channel that receives a value (coalesced) after every
// change of what the console shows: an accepted advertisement, a read of
// the broker's view (or its failure), a new sharing configuration. It is
// closed when ctx ends.
func (a *Agent) Subscribe(ctx context.Context) <-chan struct{} { return a.changes.Subscribe(ctx) }

// BrokerView returns the broker's last view of this provider (nil before
// the first read) and the error of the last read ("" when it worked).
func (a *Agent) BrokerView() (*api.AdvertisementSnapshot, string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.view == nil {
		return nil, a.viewErr
	}
	v := *a.view
	return &v, a.viewErr
}

func (a *Agent) count(outcome string) {
	if a.cfg.Metrics != nil {
		a.cfg.Metrics.Reports.WithLabelValues(outcome).Inc()
	}
}

// LastAdvertisement returns the last advertisement the broker accepted and
// its answer (nil before the first).
func (a *Agent) LastAdvertisement() (*api.AdvertisementRequest, api.AdvertisementResponse) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.last == nil {
		return nil, a.lastResp
	}
	c := *a.last
	return &c, a.lastResp
}

// Sharing returns the configuration store (the provider console applies
// changes through it).
func (a *Agent) Sharing() *Store { return a.cfg.Sharing }

func consumerLiqoID(in api.InstructionView) (string, error) {
	id := in.ConsumerLiqoClusterID
	if id == "" {
		id = in.ConsumerClusterID
	}
	if id == "" {
		return "", api.Errorf(api.CodeInvalidRequest, "instruction %s names no consumer", in.ID)
	}
	return id, nil
}

// handleGenerateKubeconfig mints a peering credential for the consumer's
// Liqo cluster id (not its broker id: reference bug #17).
func (a *Agent) handleGenerateKubeconfig(ctx context.Context, in api.InstructionView) (*api.InstructionPayload, error) {
	id, err := consumerLiqoID(in)
	if err != nil {
		return nil, err
	}
	if sc := a.cfg.Sharing.Config(); in.ConsumerClusterID != "" && !sc.Allows(in.ConsumerClusterID) {
		return nil, api.Errorf(api.CodeForbidden, "the sharing configuration of %s does not lend to %s", a.cfg.ClusterID, in.ConsumerClusterID)
	}
	kc, err := a.cfg.Driver.GeneratePeeringUser(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("generating the peering user for %s: %w", id, err)
	}
	if kc == "" {
		return nil, fmt.Errorf("generating the peering user for %s: the driver returned an empty kubeconfig", id)
	}
	return &api.InstructionPayload{Kind: api.PayloadKubeconfig, Kubeconfig: kc}, nil
}

// handleCleanup revokes the consumer's credential; a missing one is success.
func (a *Agent) handleCleanup(ctx context.Context, in api.InstructionView) (*api.InstructionPayload, error) {
	id, err := consumerLiqoID(in)
	if err != nil {
		return nil, err
	}
	if err := a.cfg.Driver.DeletePeeringUser(ctx, id); err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("deleting the peering user of %s: %w", id, err)
	}
	return nil, nil
}

// handleReconcile reports the current (capped) advertisement.
func (a *Agent) handleReconcile(ctx context.Context, _ api.InstructionView) (*api.InstructionPayload, error) {
	req, err := a.Advertisement(ctx)
	if err != nil {
		return nil, err
	}
	return &api.InstructionPayload{Kind: api.PayloadReconcile, Advertisement: &req}, nil
}
