// Package demo assembles a whole federation in one process: the real broker
// (brokercmd's wiring: mTLS Broker API, bbolt store, dashboard), mock-geo and
// mock-eco, provider clusters and one consumer cluster whose agents are
// built by the agent subcommand's own assembly (agentcmd.Assemble, with
// the simulated seams), the real externalgrpc adapter and a CA-like
// autoscaler (mocks/autoscaler). Who is in the federation and how the
// simulated world behaves (cities, prices, delays, sizes, cadences) is data:
// the embedded scenario.yaml (Scenario).
//
// Only the clusters (mocks/cluster: a simulated Kubernetes API speaking the
// real REST protocol, a scheduler and a kubelet stand-in), Liqo (mocks/liqo)
// and the demo's workload (mocks/demo/workload) are simulated. Every cluster listens on its own
// loopback address from the mock-geo table, so location, carbon and the
// measured latency differ per cluster. See docs/demo.md.
package demo

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	"github.com/federation-autoscaler/federation-autoscaler/adapter/externalgrpc"
	"github.com/federation-autoscaler/federation-autoscaler/adapter/externalgrpc/protos"
	"github.com/federation-autoscaler/federation-autoscaler/adapter/localapi"
	"github.com/federation-autoscaler/federation-autoscaler/agent/agentcmd"
	fav1alpha1 "github.com/federation-autoscaler/federation-autoscaler/agent/apis/v1alpha1"
	"github.com/federation-autoscaler/federation-autoscaler/agent/choice"
	"github.com/federation-autoscaler/federation-autoscaler/agent/console"
	"github.com/federation-autoscaler/federation-autoscaler/agent/consolidate"
	"github.com/federation-autoscaler/federation-autoscaler/agent/consumer"
	"github.com/federation-autoscaler/federation-autoscaler/agent/location"
	"github.com/federation-autoscaler/federation-autoscaler/agent/probe"
	"github.com/federation-autoscaler/federation-autoscaler/agent/provider"
	"github.com/federation-autoscaler/federation-autoscaler/mocks/autoscaler"
	"github.com/federation-autoscaler/federation-autoscaler/mocks/cluster"
	"github.com/federation-autoscaler/federation-autoscaler/mocks/demo/workload"
	"github.com/federation-autoscaler/federation-autoscaler/mocks/eco"
	"github.com/federation-autoscaler/federation-autoscaler/mocks/geo"
	liqosim "github.com/federation-autoscaler/federation-autoscaler/mocks/liqo"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/brokercmd"
	"github.com/federation-autoscaler/federation-autoscaler/server/netguard"
	"github.com/federation-autoscaler/federation-autoscaler/server/pki"
	"github.com/federation-autoscaler/federation-autoscaler/server/placement"
	"github.com/federation-autoscaler/federation-autoscaler/server/reservations"
	"github.com/federation-autoscaler/federation-autoscaler/web"
	"github.com/federation-autoscaler/federation-autoscaler/web/auth"
)

// ProviderSpec describes one simulated provider (the scenario's cities
// give the defaults: DefaultProviders).
type ProviderSpec struct {
	// ID is the cluster id (its certificate CN).
	ID string
	// Region is a mock-geo region code (NSW, QC, IDF, …): the cluster gets
	// an address in that region's loopback range.
	Region string
	// Nodes and NodeCPU/NodeMemory size the cluster's workers.
	Nodes      int
	NodeCPU    string
	NodeMemory string
	// CPUPrice (per core-hour) and MemoryPrice (per GiB-hour).
	CPUPrice, MemoryPrice string
	Renewable             bool
	// ProbeDelay is added to every latency-probe echo (the network distance
	// to the consumer).
	ProbeDelay time.Duration
	// DeniedConsumers never borrow from this provider.
	DeniedConsumers []string
}

// ConsumerID is the demo consumer's cluster id (London).
const ConsumerID = "london"

// ConsumerSpec describes one simulated consumer (default: the scenario's
// one consumer, ConsumerID).
type ConsumerSpec struct {
	// ID is the cluster id (its certificate CN).
	ID string
	// Region is a mock-geo region code: the cluster gets an address in
	// that region's loopback range, host Host.
	Region string
	// Host is the last byte of the consumer's loopback address (the
	// scenario's consumer: 10; providers use 10 + their index, so extra
	// consumers take MinExtraConsumerHost and up).
	Host byte
}

// MinExtraConsumerHost is the first loopback host byte of consumers
// beyond the scenario's own (MaxConsumers of them fit below 255).
const MinExtraConsumerHost = 200

// MaxConsumers bounds Options.Consumers: each is a simulated cluster, an
// agent, an adapter and an autoscaler in the demo's process.
const MaxConsumers = 255 - MinExtraConsumerHost

// Options configure Start. Zero values take the defaults.
type Options struct {
	// DataDir holds the PKI, the join bundles, the providers' sharing files,
	// the consumer's saved settings (consumer/settings.yaml: policy,
	// location, workload) and the console token (created on first run,
	// reused later) and the broker's database (emptied at every start: the
	// simulated clusters do not outlive a run).
	DataDir string
	// ListenHost is the address of the dashboard and the consoles
	// (default 127.0.0.1).
	ListenHost string
	// BasePort numbers the listeners: broker API +0, dashboard +1, mock-geo
	// +2, mock-eco +3, consumer console +4, consumer local API +5, adapter
	// +6, provider i's console +10+i. 0: ephemeral ports (tests).
	BasePort int
	// Providers (default DefaultProviders(3)).
	Providers []ProviderSpec
	// Consumers (default: the scenario's one consumer, ConsumerID). Only
	// the first gets the consoles, the saved settings and the fixed ports
	// of BasePort; more than one needs BasePort 0.
	Consumers []ConsumerSpec
	// Carbon, when set, is each provider's carbon source instead of
	// mock-eco (the experiments' seeded conditions).
	Carbon func(ProviderSpec) agentcmd.CarbonSource
	// ProbeNetwork, when set, carries each consumer's latency probes
	// instead of UDP from the consumer's own loopback address (the
	// experiments' simulated network, answering from their latency model).
	ProbeNetwork func(ConsumerSpec) probe.Network
	// RandomSeed seeds the broker's Random placement policy.
	RandomSeed uint64
	// PeeringDelay is the simulated Liqo's virtual-node start-up delay.
	PeeringDelay time.Duration
	// ScanInterval is the autoscaler's scan interval (default 2 s).
	ScanInterval time.Duration
	// ScaleDownUnneededTime: a borrowed node idle this long is removed
	// (default 10 s).
	ScaleDownUnneededTime time.Duration
	// ProviderStaleAfter is the broker's staleness window (default the
	// broker's, 90 s); tests shorten it.
	ProviderStaleAfter time.Duration
	// DisconnectGrace is the broker's disconnect grace (default the
	// broker's, 5 min; a ConsumerPolicy may set its own).
	DisconnectGrace time.Duration
	// MigrationTimeout is how long the broker waits for a moved manual
	// reservation's new virtual node (default the broker's, 10 min); the
	// migration budget is the broker's default (a ConsumerPolicy may set
	// its own).
	MigrationTimeout time.Duration
	// NoMigration turns the broker's migration of manual reservations
	// off (a migration budget of 0: the one disruption budget, so no
	// consolidation either), for tests that reserve by hand on a chosen
	// provider and look at it there.
	NoMigration bool
	// NoConsolidation turns the consumer agents' consolidation of
	// autoscaled capacity off (a move budget of 0), for runs that measure
	// where scale-ups land (the experiments).
	NoConsolidation bool
	// AdvertiseInterval is the providers' advertisement period (default
	// 10 s; also sent at once on every change).
	AdvertiseInterval time.Duration
	// Scenario is the simulated world: cities, prices, delays, node sizes,
	// the workload, the agents' cadences (default: the embedded
	// scenario.yaml, DefaultScenario).
	Scenario *Scenario
	// Assemble builds each agent (default agentcmd.Assemble, the agent
	// subcommand's own assembly; tests wrap it to watch what it is given).
	Assemble func(context.Context, api.Role, agentcmd.Deps) (*agentcmd.Agent, error)
	// NoConsoles skips the web consoles.
	NoConsoles bool
	// Workload starts with the demo workload switched on (the consumer
	// console switches it later either way).
	Workload bool
	// Model is the consumer's model endpoint for the Choice policy (the
	// demo's --model-url, --model-api, --model-name); without a URL,
	// Choice shows its fallback.
	Model  choice.Endpoint
	Logger *slog.Logger
	// Progress, when set, receives one short line per start-up step.
	Progress func(string)
}

// Provider is a running provider.
type Provider struct {
	Spec ProviderSpec
	// Address is the cluster's loopback address (geolocated by mock-geo).
	Address    string
	ProbeAddr  string
	ConsoleURL string
	Cluster    *cluster.Cluster
	Agent      *provider.Agent
	echo       *probe.Responder
	stop       context.CancelFunc
	done       chan struct{}
	// start starts the agent, echo responder and console.
	start func() error
}

// ProbeResponder is the provider's latency-probe echo (its delays model
// the network distance to the consumers).
func (p *Provider) ProbeResponder() *probe.Responder { return p.echo }

// Stop stops the provider's agent, echo responder and console (the
// cluster keeps running, as a cluster whose agent died would). It waits for
// them.
func (p *Provider) Stop() {
	if p.stop != nil {
		p.stop()
	}
	<-p.done
}

// Restart starts the provider's agent, echo responder and console again
// after Stop, as an agent restarted by its Deployment would be: same
// cluster, same certificate, same sharing file. Not safe for concurrent
// use with Stop.
func (p *Provider) Restart() error {
	return p.start()
}

// Consumer is the running consumer.
type Consumer struct {
	ID          string
	Address     string
	ConsoleURL  string
	LocalAPIURL string
	// AdapterAddr is the adapter's gRPC address (plaintext on loopback).
	AdapterAddr string
	Cluster     *cluster.Cluster
	Agent       *consumer.Agent
	Workload    *workload.Workload
	// Namespace holds the ConsumerPolicy and VirtualNodeStates.
	Namespace string

	clientOnce sync.Once
	client     client.Client // for SetPolicy, built once (discovery is slow)
	clientErr  error
}

// Federation is a running demo.
type Federation struct {
	BrokerURL    string
	DashboardURL string
	GeoURL       string
	EcoURL       string
	// ConsoleToken logs in to every console.
	ConsoleToken string
	Providers    []*Provider
	// Consumer is the first of Consumers (the demo's one consumer).
	Consumer  *Consumer
	Consumers []*Consumer

	log   *slog.Logger
	guard *netguard.Guard // the demo's own listeners (the broker guards its two)
	// brokerLimits are the broker's two listeners' (every agent dials the
	// broker API; each of the demo's own listeners has one or two clients).
	brokerLimits netguard.Limits
	dashMu       sync.Mutex
	dashboard    *web.Dashboard
	// locMu guards consumerLoc, where the consumer console put the
	// consumer (nil: its city, in consumerRegion), and the probe delays
	// that follow it.
	locMu          sync.Mutex
	consumerLoc    *api.Topology
	consumerRegion string
	cancel         context.CancelFunc
	wg             sync.WaitGroup
	errc           chan error
	closed         chan struct{}
	once           sync.Once
	err            error
}

// AgentNamespace is where the agents keep their objects.
const AgentNamespace = "federation-autoscaler"

// Start starts the federation; it runs until ctx ends or Stop is called.
// On error everything started so far is stopped.
func Start(ctx context.Context, o Options) (*Federation, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	f := &Federation{log: o.Logger, cancel: cancel, errc: make(chan error, 16), closed: make(chan struct{}), consumerRegion: o.Scenario.Consumer.Region}
	crlog.SetLogger(logr.FromSlogHandler(o.Logger.WithGroup("controller-runtime").Handler()))
	if err := f.start(ctx, o); err != nil {
		_ = f.Stop()
		return nil, err
	}
	go func() {
		select {
		case <-ctx.Done():
		case err := <-f.errc:
			f.log.Error("A demo component failed; stopping", "err", err)
			f.err = err
		}
		f.once.Do(func() { close(f.closed) })
	}()
	return f, nil
}

// DropDashboardClients disconnects every browser of the broker dashboard
// (they reconnect by themselves): the browser tests' server-side websocket
// kill.
func (f *Federation) DropDashboardClients(ctx context.Context) {
	f.dashMu.Lock()
	d := f.dashboard
	f.dashMu.Unlock()
	if d != nil {
		d.DropClients(ctx)
	}
}

// Done is closed when the federation stops on its own (a component
// failed) or its context ended.
func (f *Federation) Done() <-chan struct{} { return f.closed }

// Provider is the running provider id (nil when there is none).
func (f *Federation) Provider(id string) *Provider {
	for _, p := range f.Providers {
		if p.Spec.ID == id {
			return p
		}
	}
	return nil
}

// Stop ends every component and waits for all of them.
func (f *Federation) Stop() error {
	f.cancel()
	f.wg.Wait()
	for _, p := range f.Providers {
		if p.Cluster != nil {
			_ = p.Cluster.Stop()
		}
	}
	for _, c := range f.Consumers {
		if c.Cluster != nil {
			_ = c.Cluster.Stop()
		}
	}
	f.once.Do(func() { close(f.closed) })
	return f.err
}

// brokerDefaults gives the broker's durations their defaults.
func (o *Options) brokerDefaults() {
	if o.ProviderStaleAfter <= 0 {
		o.ProviderStaleAfter = reservations.DefaultProviderStaleAfter
	}
	if o.DisconnectGrace <= 0 {
		o.DisconnectGrace = reservations.DefaultDisconnectGrace
	}
	if o.MigrationTimeout <= 0 {
		o.MigrationTimeout = reservations.DefaultMigrationTimeout
	}
}

func (o *Options) defaults() error {
	if o.DataDir == "" {
		o.DataDir = "demo-data"
	}
	if o.ListenHost == "" {
		o.ListenHost = "127.0.0.1"
	}
	if o.Scenario == nil {
		s, err := DefaultScenario()
		if err != nil {
			return err
		}
		o.Scenario = s
	} else if err := o.Scenario.Validate(); err != nil {
		return fmt.Errorf("demo scenario: %w", err)
	}
	if o.Providers == nil {
		o.Providers = o.Scenario.ProviderSpecs(3)
	}
	if len(o.Providers) == 0 {
		return errors.New("a demo needs at least one provider")
	}
	if err := o.consumerDefaults(); err != nil {
		return err
	}
	if top := 65535 - 10 - len(o.Providers); o.BasePort < 0 || o.BasePort > top {
		return fmt.Errorf("base port %d: use 0 (ephemeral) or 1–%d", o.BasePort, top)
	}
	if o.PeeringDelay < 0 {
		return fmt.Errorf("peering delay %s is negative", o.PeeringDelay)
	}
	if o.ScanInterval <= 0 {
		o.ScanInterval = 2 * time.Second
	}
	if o.ScaleDownUnneededTime <= 0 {
		o.ScaleDownUnneededTime = 10 * time.Second
	}
	o.brokerDefaults()
	if o.AdvertiseInterval <= 0 {
		o.AdvertiseInterval = 10 * time.Second
	}
	if o.Assemble == nil {
		o.Assemble = agentcmd.Assemble
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Progress == nil {
		o.Progress = func(string) {}
	}
	return nil
}

// addr is the listen address of port offset i.
func (o *Options) addr(i int) string {
	if o.BasePort == 0 {
		return net.JoinHostPort(o.ListenHost, "0")
	}
	return net.JoinHostPort(o.ListenHost, strconv.Itoa(o.BasePort+i))
}

// urlHost is the host:port to print for a bound address (a wildcard
// listen host is printed as 127.0.0.1).
func urlHost(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return net.JoinHostPort("127.0.0.1", port)
	}
	return addr
}

// run runs fn until the federation stops; an error stops the demo.
func (f *Federation) run(ctx context.Context, name string, fn func(context.Context) error) {
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		if err := fn(ctx); err != nil && ctx.Err() == nil {
			select {
			case f.errc <- fmt.Errorf("%s: %w", name, err):
			default:
			}
		}
	}()
}

// serveHTTP serves h on ln until ctx ends.
func (f *Federation) serveHTTP(ctx context.Context, name string, ln net.Listener, h http.Handler) {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 60 * time.Second}
	f.run(ctx, name, func(ctx context.Context) error {
		stop := context.AfterFunc(ctx, func() {
			sctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
		})
		defer stop()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
}

// world is what every agent of the demo shares: the simulated seams.
type world struct {
	pkiDir string
	geo    *location.GeoClient
	eco    *location.EcoClient
	token  auth.Verifier
}

func (f *Federation) start(ctx context.Context, o Options) error {
	now := time.Now()
	pkiDir := filepath.Join(o.DataDir, "pki")
	if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
		return fmt.Errorf("creating the data folder %s: %w", o.DataDir, err)
	}
	if _, err := os.Stat(filepath.Join(pkiDir, pki.CACertFile)); errors.Is(err, os.ErrNotExist) {
		o.Progress("creating the federation PKI in " + pkiDir)
		if err := pki.Init(pkiDir, []string{o.ListenHost}, false, now); err != nil {
			return fmt.Errorf("creating the demo PKI: %w", err)
		}
	}
	token, err := consoleToken(filepath.Join(o.DataDir, "console-token"))
	if err != nil {
		return err
	}
	f.ConsoleToken = token

	// The simulated clusters live in memory, so reservations a previous run
	// left in the broker's database would hold capacity that nothing uses
	// (a consumer's heartbeat renews all of its reservations): the broker
	// starts from an empty database on every run.
	brokerDir := filepath.Join(o.DataDir, "broker")
	if err := os.RemoveAll(brokerDir); err != nil {
		return fmt.Errorf("clearing the previous run's broker database %s: %w", brokerDir, err)
	}

	guard, brokerLimits, err := newGuard(o)
	if err != nil {
		return err
	}
	f.guard, f.brokerLimits = guard, brokerLimits
	if err := f.startBroker(ctx, o, pkiDir, brokerDir); err != nil {
		return err
	}
	w, err := f.startLocation(ctx, o)
	if err != nil {
		return err
	}
	w.pkiDir = pkiDir
	if w.token, err = auth.NewStaticToken(f.ConsoleToken); err != nil {
		return err
	}

	if err := startEach(o, o.Providers, &f.Providers, func(i int, spec ProviderSpec) (*Provider, error) {
		return f.startProvider(ctx, o, i, spec, w)
	}); err != nil {
		return err
	}
	if err := startEach(o, o.Consumers, &f.Consumers, func(i int, spec ConsumerSpec) (*Consumer, error) {
		return f.startConsumer(ctx, o, w, i, spec)
	}); err != nil {
		return err
	}
	f.Consumer = f.Consumers[0]
	return nil
}

// memberSpec is a ProviderSpec or a ConsumerSpec: what start-up says of
// the i-th of n members, and the name its error is wrapped with.
type memberSpec interface {
	starting(i, n int) (line, name string)
}

// startEach starts the members specs describe in order, one progress line
// each. A member start returns is kept in *members even with an error (Stop
// stops its cluster); the first error ends the start-up.
func startEach[S memberSpec, M any](o Options, specs []S, members *[]*M, start func(i int, spec S) (*M, error)) error {
	for i, spec := range specs {
		line, name := spec.starting(i, len(specs))
		o.Progress(line)
		m, err := start(i, spec)
		if m != nil {
			*members = append(*members, m)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

func (s ProviderSpec) starting(i, n int) (line, name string) {
	return fmt.Sprintf("starting provider %d/%d: %s (%s)", i+1, n, s.ID, s.Region), "provider " + s.ID
}

func (s ConsumerSpec) starting(i, n int) (line, name string) {
	return fmt.Sprintf("starting consumer %d/%d: %s (%s), its adapter and the autoscaler", i+1, n, s.ID, s.Region), "consumer " + s.ID
}

// consumerDefaults fills the scenario's one consumer when none is given
// and checks the list.
func (o *Options) consumerDefaults() error {
	if o.Consumers == nil {
		o.Consumers = []ConsumerSpec{{ID: ConsumerID, Region: o.Scenario.Consumer.Region, Host: 10}}
	}
	return checkConsumers(o.Consumers, o.BasePort)
}

// checkConsumers: at least one, at most MaxConsumers, distinct ids, each in
// a region of mock-geo's table; several only on ephemeral ports.
func checkConsumers(cs []ConsumerSpec, basePort int) error {
	switch {
	case len(cs) == 0:
		return errors.New("a demo needs at least one consumer")
	case len(cs) > MaxConsumers:
		return fmt.Errorf("%d consumers: at most %d fit in one process (demo.MaxConsumers)", len(cs), MaxConsumers)
	case len(cs) > 1 && basePort != 0:
		return fmt.Errorf("%d consumers need ephemeral ports: use base port 0", len(cs))
	}
	seen := map[string]bool{}
	for _, c := range cs {
		if seen[c.ID] {
			return fmt.Errorf("consumer id %q appears twice", c.ID)
		}
		seen[c.ID] = true
		if _, ok := geo.LoopbackAddress(c.Region, c.Host); !ok {
			return fmt.Errorf("consumer %s: region %q is not a region of mock-geo's table (docs/mocks.md)", c.ID, c.Region)
		}
	}
	return nil
}

// startBroker starts the broker through the broker command's own wiring.
func (f *Federation) startBroker(ctx context.Context, o Options, pkiDir, brokerDir string) error {
	o.Progress("starting the broker (mTLS) and its dashboard")
	apiLn, err := net.Listen("tcp", o.addr(0))
	if err != nil {
		return fmt.Errorf("broker API listener %s: %w (pick another --base-port)", o.addr(0), err)
	}
	dashLn, err := net.Listen("tcp", o.addr(1))
	if err != nil {
		_ = apiLn.Close()
		return fmt.Errorf("dashboard listener %s: %w (pick another --base-port)", o.addr(1), err)
	}
	f.BrokerURL = "https://" + urlHost(apiLn.Addr().String())
	f.DashboardURL = "http://" + urlHost(dashLn.Addr().String())
	bo := brokercmd.Options{
		PKIDir: pkiDir, DataDir: brokerDir, Store: brokercmd.StoreOptions{Backend: brokercmd.StoreBolt},
		Listen: apiLn.Addr().String(), DashboardListen: dashLn.Addr().String(),
		ReservationLease: reservations.DefaultReservationLease, ProviderStaleAfter: o.ProviderStaleAfter,
		DisconnectGrace: o.DisconnectGrace,
		MigrationBudget: migrationBudget(o), MigrationWindow: reservations.DefaultMigrationWindow, MigrationTimeout: o.MigrationTimeout,
		CostThreshold: placement.DefaultCostThreshold, CarbonThreshold: placement.DefaultCarbonThreshold, RTTThreshold: placement.DefaultRTTThreshold,
		// One consumer runs CA loops every scan interval here; the default
		// per-certificate limit is sized for real CA's 10 s.
		RateLimitBurst: 200, RateLimitRPS: 100,
		APIListener: apiLn, DashboardListener: dashLn, Limits: f.brokerLimits,
		OnDashboard: func(d *web.Dashboard) { f.dashMu.Lock(); f.dashboard = d; f.dashMu.Unlock() },
		RandomSeed:  o.RandomSeed,
	}
	f.run(ctx, "broker", func(ctx context.Context) error { return brokercmd.Run(ctx, bo, o.Logger.With("component", "broker")) })
	return nil
}

// startLocation starts mock-geo and mock-eco and returns their clients.
func (f *Federation) startLocation(ctx context.Context, o Options) (*world, error) {
	geoLn, err := f.guard.Listen(ctx, "mock-geo", o.addr(2))
	if err != nil {
		return nil, fmt.Errorf("mock-geo listener: %w", err)
	}
	f.GeoURL = "http://" + urlHost(geoLn.Addr().String())
	f.serveHTTP(ctx, "mock-geo", geoLn, geo.Handler(geo.DefaultTable()))
	ecoLn, err := f.guard.Listen(ctx, "mock-eco", o.addr(3))
	if err != nil {
		return nil, fmt.Errorf("mock-eco listener: %w", err)
	}
	f.EcoURL = "http://" + urlHost(ecoLn.Addr().String())
	f.serveHTTP(ctx, "mock-eco", ecoLn, eco.Handler(eco.DefaultProfiles(), eco.Options{}))
	geoClient, err := location.NewGeoClient(f.GeoURL, nil)
	if err != nil {
		return nil, err
	}
	ecoClient, err := location.NewEcoClient(f.EcoURL, nil, time.Now)
	if err != nil {
		return nil, err
	}
	return &world{geo: geoClient, eco: ecoClient}, nil
}

// newGuard guards the demo's listeners and returns the broker's limits.
// Every client of the demo is on loopback, one address for all, so a
// per-address cap below the total would refuse the demo's own clients
// first: it is the total. The broker's two listeners take half of the
// descriptors the listeners may hold (every agent dials the broker API: a
// 30 × 70 experiment holds several hundred connections there) and the
// demo's own listeners share the other half, so that all of them together
// still hold at most half of the file descriptors.
func newGuard(o Options) (*netguard.Guard, netguard.Limits, error) {
	// mock-geo, mock-eco, and each consumer's local API and adapter
	listeners := 2 + 2*len(o.Consumers)
	if !o.NoConsoles {
		listeners += 1 + len(o.Providers)
	}
	fds := netguard.FDLimit()
	lim, err := netguard.Limits{}.Resolve(2*listeners, fds)
	if err != nil {
		return nil, netguard.Limits{}, err
	}
	lim.MaxConnsPerIP = lim.MaxConns
	broker, err := netguard.Limits{}.Resolve(4, fds)
	if err != nil {
		return nil, netguard.Limits{}, err
	}
	broker.MaxConnsPerIP = broker.MaxConns
	g, err := netguard.New(netguard.Options{Limits: lim, Listeners: listeners, Logger: o.Logger.With("component", "netguard")})
	return g, broker, err
}

// consoleToken reads the demo's console token from path, creating it on
// first run. The demo keeps it in clear (mode 0600) so that it can print it
// at every start; a real agent stores only a hash (web/auth).
func consoleToken(path string) (string, error) {
	if b, err := os.ReadFile(path); err == nil && len(b) >= 16 {
		return string(b), nil
	}
	buf := make([]byte, 24)
	if _, err := rand.Read(buf); err != nil {
		return "", err
	}
	tok := base64.RawURLEncoding.EncodeToString(buf)
	if err := os.WriteFile(path, []byte(tok), 0o600); err != nil {
		return "", fmt.Errorf("writing the console token %s: %w", path, err)
	}
	return tok, nil
}

// bundle loads (or mints, on first run) the cluster's join bundle.
func (f *Federation) bundle(o Options, pkiDir, id string, role api.Role) (*pki.Bundle, error) {
	path := filepath.Join(o.DataDir, "bundles", id+".tar.gz")
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, err
		}
		if err := pki.WriteJoinBundle(pkiDir, id, role, f.BrokerURL, path, false, time.Now()); err != nil {
			return nil, fmt.Errorf("join bundle of %s: %w", id, err)
		}
	}
	b, err := agentcmd.LoadBundle(path, role)
	if err != nil {
		return nil, fmt.Errorf("%w (delete it to mint a new one)", err)
	}
	return b, nil
}

// agentDeps are the seams every demo agent gets: its simulated cluster's
// API, the simulated Liqo, mock-geo, the demo's listener guard, the broker
// of this run (a bundle's broker URL may name an earlier run's port).
func (f *Federation) agentDeps(o Options, w *world, b *pki.Bundle, c *cluster.Cluster, log *slog.Logger) agentcmd.Deps {
	d := agentcmd.Deps{
		Bundle: b, BrokerURL: f.BrokerURL, Namespace: AgentNamespace, Kube: c.RESTConfig(), InstallCRDs: true,
		Liqo: liqosim.Factory(o.PeeringDelay), Geo: w.geo, Guard: f.guard, Logger: log,
	}
	if !o.NoConsoles {
		d.Console = agentcmd.ConsoleDeps{Token: w.token, Refresh: 2 * time.Second, Places: geo.Places()}
	}
	d.Consolidation.Budget = consolidationBudget(o)
	return d
}

// consolidationBudget is the consumer agents' default move budget for o:
// the agent's default (the zero Budget), or none with NoConsolidation.
func consolidationBudget(o Options) consolidate.Budget {
	if o.NoConsolidation {
		return consolidate.Budget{Max: 0, Window: consolidate.DefaultMoveWindow}
	}
	return consolidate.Budget{}
}

// assemble builds an agent with o.Assemble; a port in use gets the demo's
// hint.
func assemble(ctx context.Context, o Options, role api.Role, d agentcmd.Deps) (*agentcmd.Agent, error) {
	a, err := o.Assemble(ctx, role, d)
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, fmt.Errorf("%w (pick another --base-port)", err)
	}
	return a, err
}

func (f *Federation) startProvider(ctx context.Context, o Options, i int, spec ProviderSpec, w *world) (*Provider, error) {
	address, ok := geo.LoopbackAddress(spec.Region, byte(10+i))
	if !ok {
		return nil, fmt.Errorf("region %q has no loopback range in mock-geo's table (docs/mocks.md)", spec.Region)
	}
	var nodes []cluster.NodeSpec
	for n := range max(1, spec.Nodes) {
		nodes = append(nodes, cluster.NodeSpec{Name: fmt.Sprintf("%s-worker-%d", spec.ID, n+1), CPU: spec.NodeCPU, Memory: spec.NodeMemory})
	}
	c, err := cluster.Start(ctx, cluster.Options{Name: spec.ID, Addr: net.JoinHostPort(address, "0"), Nodes: nodes, Logger: o.Logger.With("cluster", spec.ID)})
	if err != nil {
		return nil, err
	}
	p := &Provider{Spec: spec, Address: address, Cluster: c}
	p.start = func() error { return f.startProviderAgent(ctx, o, i, w, p) }
	return p, p.start()
}

// startProviderAgent starts p's agent (with its echo responder and
// console) on p's running cluster.
func (f *Federation) startProviderAgent(ctx context.Context, o Options, i int, w *world, p *Provider) error {
	spec := p.Spec
	log := o.Logger.With("provider", spec.ID)
	p.done = make(chan struct{})
	b, err := f.bundle(o, w.pkiDir, spec.ID, api.RoleProvider)
	if err != nil {
		close(p.done)
		return err
	}
	d := f.agentDeps(o, w, b, p.Cluster, log)
	if d.Sharing, err = sharingStore(o, spec); err != nil {
		close(p.done)
		return err
	}
	d.Carbon, d.AdvertisedIP = w.eco, p.Address
	if o.Carbon != nil {
		d.Carbon = o.Carbon(spec)
	}
	d.ProbeListen, d.ProbeDelay = net.JoinHostPort(p.Address, "0"), spec.ProbeDelay
	if !o.NoConsoles {
		d.ConsoleListen = o.addr(10 + i)
	}
	d.Console.Provider = func(cp *console.Provider) web.ProviderBackend {
		return &movableProvider{Provider: cp, moved: f.retuneProbes}
	}
	debounce := o.Scenario.Agents.ProviderDebounce.Duration
	d.TuneProvider = func(c *provider.Config) { c.Interval, c.Debounce = o.AdvertiseInterval, debounce }
	pctx, stop := context.WithCancel(ctx)
	a, err := assemble(pctx, o, api.RoleProvider, d)
	if err != nil {
		stop()
		close(p.done)
		return err
	}
	p.stop, p.Agent, p.echo, p.ProbeAddr = stop, a.Provider, a.Probe, a.Addrs.Probe
	if a.Addrs.Console != "" {
		p.ConsoleURL = "http://" + urlHost(a.Addrs.Console)
	}
	f.run(pctx, spec.ID+" agent", func(ctx context.Context) error { defer close(p.done); return a.Run(ctx) })
	return nil
}

// sharingStore opens the provider's sharing file in the data folder,
// writing the spec's prices and rules on first run; later runs keep what
// the console applied.
func sharingStore(o Options, spec ProviderSpec) (*provider.Store, error) {
	path := filepath.Join(o.DataDir, "providers", spec.ID, "sharing.yaml")
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		cfg := provider.SharingConfig{Renewable: spec.Renewable, DeniedConsumers: spec.DeniedConsumers}
		for name, price := range map[corev1.ResourceName]string{corev1.ResourceCPU: spec.CPUPrice, corev1.ResourceMemory: spec.MemoryPrice} {
			if price == "" {
				continue
			}
			q, err := resource.ParseQuantity(price)
			if err != nil {
				return nil, fmt.Errorf("%s price %q of %s: %w", name, price, spec.ID, err)
			}
			if cfg.UnitPrices == nil {
				cfg.UnitPrices = corev1.ResourceList{}
			}
			cfg.UnitPrices[name] = q
		}
		if err := cfg.Validate(); err != nil {
			return nil, fmt.Errorf("sharing configuration of %s: %w", spec.ID, err)
		}
		data, err := yaml.Marshal(cfg)
		if err != nil {
			return nil, err
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, err
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return nil, err
		}
	}
	return provider.NewStore(provider.Sources{SharingFile: path}, o.Logger.With("provider", spec.ID))
}

// startConsumer starts consumer i; the first one (the demo's) gets the
// consoles, the saved settings and BasePort's fixed ports.
func (f *Federation) startConsumer(ctx context.Context, o Options, w *world, i int, spec ConsumerSpec) (*Consumer, error) {
	sc := o.Scenario
	address, _ := geo.LoopbackAddress(spec.Region, spec.Host) // checked by checkConsumers
	log := o.Logger.With("consumer", spec.ID)
	node := cluster.NodeSpec{Name: spec.ID + "-worker-1", CPU: sc.Consumer.Node.CPU.String(), Memory: sc.Consumer.Node.Memory.String()}
	c, err := cluster.Start(ctx, cluster.Options{Name: spec.ID, Addr: net.JoinHostPort(address, "0"), Nodes: []cluster.NodeSpec{node}, Logger: o.Logger.With("cluster", spec.ID)})
	if err != nil {
		return nil, err
	}
	cons := &Consumer{ID: spec.ID, Address: address, Cluster: c, Namespace: AgentNamespace}
	first := i == 0
	kube, err := kubernetes.NewForConfig(c.RESTConfig())
	if err != nil {
		return cons, err
	}
	// What the consumer console changed in an earlier run (the simulated
	// cluster holding the ConsumerPolicy starts empty).
	var saved consumerSettings
	found := false
	if first {
		if saved, found, err = loadConsumerSettings(consumerSettingsPath(o)); err != nil {
			return cons, err
		}
	}
	cons.Workload = workload.New(kube, sc.Workload.Namespace, log)
	work := workload.Spec{Enabled: o.Workload, Replicas: sc.Workload.Replicas, CPU: sc.Workload.CPU, Memory: sc.Workload.Memory}
	if found {
		work = saved.workload()
		work.Enabled = work.Enabled || o.Workload
	}
	if err := cons.Workload.Set(work); err != nil {
		return cons, err
	}
	b, err := f.bundle(o, w.pkiDir, spec.ID, api.RoleConsumer)
	if err != nil {
		return cons, err
	}
	d := f.agentDeps(o, w, b, c, log)
	d.AdvertisedIP, d.LocalAPIListen = address, o.addr(5)
	d.Model = o.Model
	if !first {
		d.Console = agentcmd.ConsoleDeps{}
	}
	if first && !o.NoConsoles {
		d.ConsoleListen = o.addr(4)
		d.Console.Consumer = func(cc *console.Consumer) web.ConsumerBackend {
			return &workloadConsumer{Consumer: cc, w: cons.Workload, kube: kube, f: f, settings: consumerSettingsPath(o)}
		}
	}
	ag := sc.Agents
	source := netip.MustParseAddr(address) // probes leave from the consumer's own address
	d.TuneConsumer = func(c *consumer.Config) {
		c.Interval, c.PolicyPoll, c.Resync = ag.ConsumerHeartbeat.Duration, ag.PolicyPoll.Duration, ag.Resync.Duration
		pc := probe.ProberConfig{TTL: ag.ProbeTTL.Duration, Source: source}
		if o.ProbeNetwork != nil {
			pc.Network = o.ProbeNetwork(spec)
		}
		c.Prober = probe.NewProber(pc)
	}
	a, err := assemble(ctx, o, api.RoleConsumer, d)
	if err != nil {
		return cons, err
	}
	if found {
		if err := f.restorePolicy(ctx, c, saved); err != nil {
			a.Close()
			return cons, err
		}
	}
	cons.Agent, cons.LocalAPIURL = a.Consumer, "http://"+a.Addrs.LocalAPI
	if a.Addrs.Console != "" {
		cons.ConsoleURL = "http://" + urlHost(a.Addrs.Console)
	}
	f.run(ctx, "consumer agent", a.Run)
	if err := f.startAutoscaling(ctx, o, cons, kube); err != nil {
		return cons, err
	}
	f.run(ctx, "workload", cons.Workload.Run)
	return cons, nil
}

// startAutoscaling starts the adapter (over the consumer's local API,
// serving externalgrpc on loopback) and the autoscaler that talks to it
// over gRPC only.
func (f *Federation) startAutoscaling(ctx context.Context, o Options, cons *Consumer, kube kubernetes.Interface) error {
	agentAPI, err := localapi.NewClient(cons.LocalAPIURL, nil)
	if err != nil {
		return err
	}
	adapter, err := externalgrpc.New(externalgrpc.Config{Agent: agentAPI, CacheTTL: min(o.ScanInterval/2, 2*time.Second), Logger: o.Logger.With("component", "adapter")})
	if err != nil {
		return err
	}
	grpcLn, err := f.guard.Listen(ctx, "adapter", o.addr(6))
	if err != nil {
		adapter.Close()
		return fmt.Errorf("adapter listener: %w", err)
	}
	cons.AdapterAddr = grpcLn.Addr().String()
	gs := grpc.NewServer()
	adapter.Register(gs)
	f.run(ctx, "adapter", func(ctx context.Context) error {
		stop := context.AfterFunc(ctx, func() { gs.GracefulStop() })
		defer stop()
		defer adapter.Close()
		return gs.Serve(grpcLn)
	})
	conn, err := grpc.NewClient(cons.AdapterAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	ca, err := autoscaler.New(autoscaler.Config{
		Client: protos.NewCloudProviderClient(conn), Kube: kube, ScanInterval: o.ScanInterval,
		ScaleDownUnneededTime: o.ScaleDownUnneededTime, Logger: o.Logger.With("component", "autoscaler"),
	})
	if err != nil {
		_ = conn.Close()
		return err
	}
	f.run(ctx, "autoscaler", func(ctx context.Context) error { defer conn.Close(); return ca.Run(ctx) })
	return nil
}

// restorePolicy writes the policy and location the consumer console saved
// in an earlier run into the fresh simulated cluster, before the consumer
// agent's first heartbeat (Assemble installed the CRDs and the namespace).
func (f *Federation) restorePolicy(ctx context.Context, c *cluster.Cluster, saved consumerSettings) error {
	if saved.Policy.Placement.Type == "" && saved.Policy.Placement.Weights == nil && saved.Policy.Location == nil && saved.Policy.Intent == "" && saved.Policy.Model == nil {
		return nil
	}
	scheme, err := agentcmd.Scheme()
	if err != nil {
		return err
	}
	cl, err := client.New(c.RESTConfig(), client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	if err := console.UpdatePolicy(ctx, cl, AgentNamespace, func(s *fav1alpha1.ConsumerPolicySpec) { *s = saved.Policy }); err != nil {
		return fmt.Errorf("restoring the consumer's saved policy: %w", err)
	}
	if l := saved.Policy.Location; l != nil {
		f.setConsumerLocation(&api.Topology{City: l.City, Region: l.Region, Latitude: l.Latitude, Longitude: l.Longitude})
	}
	return nil
}

// SetPolicy writes the consumer's ConsumerPolicy placement, as its
// console's policy form does (a Latency shortlist size set in the policy is
// kept): the agent reads it within its policy poll and heartbeats it to the
// broker.
func (c *Consumer) SetPolicy(ctx context.Context, t api.PlacementType, w *api.Weights) error {
	c.clientOnce.Do(func() {
		scheme, err := agentcmd.Scheme()
		if err != nil {
			c.clientErr = err
			return
		}
		c.client, c.clientErr = client.New(c.Cluster.RESTConfig(), client.Options{Scheme: scheme})
	})
	if c.clientErr != nil {
		return c.clientErr
	}
	placement := fav1alpha1.PlacementFromAPI(api.Placement{Type: t, Weights: w})
	if err := console.SetPolicy(ctx, c.client, c.Namespace, placement); err != nil {
		return fmt.Errorf("setting %s's policy to %s: %w", c.ID, t, err)
	}
	return nil
}

// migrationBudget is the broker's migration budget for o: the broker's
// default, or 0 (no migration) with NoMigration.
func migrationBudget(o Options) int {
	if o.NoMigration {
		return 0
	}
	return reservations.DefaultMigrationBudget
}
