// Package demo assembles a whole federation in one process: the real broker
// (brokercmd's wiring: mTLS Broker API, bbolt store, dashboard), mock-geo and
// mock-eco, provider clusters with their real provider agents and UDP echo
// responders, and one consumer cluster with its real consumer agent, the
// real externalgrpc adapter and a CA-like autoscaler (mocks/autoscaler).
//
// Only the clusters (mocks/cluster: a simulated Kubernetes API speaking the
// real REST protocol, a scheduler and a kubelet stand-in) and Liqo's data
// plane (mocks/liqo) are simulated. Every cluster listens on its own
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
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	"github.com/federation-autoscaler/federation-autoscaler/adapter/externalgrpc"
	"github.com/federation-autoscaler/federation-autoscaler/adapter/externalgrpc/protos"
	"github.com/federation-autoscaler/federation-autoscaler/adapter/localapi"
	"github.com/federation-autoscaler/federation-autoscaler/agent/agentcmd"
	fav1alpha1 "github.com/federation-autoscaler/federation-autoscaler/agent/apis/v1alpha1"
	"github.com/federation-autoscaler/federation-autoscaler/agent/brokerclient"
	"github.com/federation-autoscaler/federation-autoscaler/agent/console"
	"github.com/federation-autoscaler/federation-autoscaler/agent/consumer"
	"github.com/federation-autoscaler/federation-autoscaler/agent/location"
	"github.com/federation-autoscaler/federation-autoscaler/agent/probe"
	"github.com/federation-autoscaler/federation-autoscaler/agent/provider"
	"github.com/federation-autoscaler/federation-autoscaler/deploy/crds"
	"github.com/federation-autoscaler/federation-autoscaler/mocks/autoscaler"
	"github.com/federation-autoscaler/federation-autoscaler/mocks/cluster"
	"github.com/federation-autoscaler/federation-autoscaler/mocks/eco"
	"github.com/federation-autoscaler/federation-autoscaler/mocks/geo"
	simliqo "github.com/federation-autoscaler/federation-autoscaler/mocks/liqo"
	liqocrds "github.com/federation-autoscaler/federation-autoscaler/mocks/liqo/crds"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/brokercmd"
	"github.com/federation-autoscaler/federation-autoscaler/server/netguard"
	"github.com/federation-autoscaler/federation-autoscaler/server/pki"
	"github.com/federation-autoscaler/federation-autoscaler/server/reservations"
	"github.com/federation-autoscaler/federation-autoscaler/web"
)

// ProviderSpec describes one simulated provider.
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

// cities are the providers in order; DefaultProviders takes the first n.
var cities = []ProviderSpec{
	{ID: "sydney", Region: "NSW", CPUPrice: "0.020", MemoryPrice: "0.002", ProbeDelay: 120 * time.Millisecond},
	{ID: "montreal", Region: "QC", CPUPrice: "0.035", MemoryPrice: "0.004", Renewable: true, ProbeDelay: 40 * time.Millisecond},
	{ID: "paris", Region: "IDF", CPUPrice: "0.050", MemoryPrice: "0.005", ProbeDelay: 4 * time.Millisecond},
	{ID: "frankfurt", Region: "HE", CPUPrice: "0.045", MemoryPrice: "0.005", ProbeDelay: 8 * time.Millisecond},
	{ID: "milan", Region: "LOM", CPUPrice: "0.042", MemoryPrice: "0.004", ProbeDelay: 12 * time.Millisecond},
	{ID: "tokyo", Region: "13", CPUPrice: "0.040", MemoryPrice: "0.004", ProbeDelay: 110 * time.Millisecond},
	{ID: "calgary", Region: "AB", CPUPrice: "0.030", MemoryPrice: "0.003", ProbeDelay: 50 * time.Millisecond},
	{ID: "san-francisco", Region: "CA", CPUPrice: "0.055", MemoryPrice: "0.006", ProbeDelay: 70 * time.Millisecond},
	{ID: "sao-paulo", Region: "SP", CPUPrice: "0.032", MemoryPrice: "0.003", Renewable: true, ProbeDelay: 95 * time.Millisecond},
	{ID: "mumbai", Region: "MH", CPUPrice: "0.025", MemoryPrice: "0.002", ProbeDelay: 60 * time.Millisecond},
	{ID: "singapore", Region: "SG", CPUPrice: "0.038", MemoryPrice: "0.004", ProbeDelay: 85 * time.Millisecond},
}

// MaxProviders is how many distinct cities DefaultProviders can give.
var MaxProviders = len(cities)

// DefaultProviders returns the first n cities: Sydney (cheapest, coal
// grid), Montreal (hydro, the greenest), Paris (nearest to London), then
// further cities. Each has one 8 CPU / 16 GiB worker: four standard chunks.
func DefaultProviders(n int) []ProviderSpec {
	n = max(0, min(n, len(cities)))
	out := make([]ProviderSpec, n)
	for i := range n {
		out[i] = cities[i]
		out[i].Nodes, out[i].NodeCPU, out[i].NodeMemory = 1, "8", "16Gi"
	}
	return out
}

// ConsumerID is the demo consumer's cluster id (London).
const ConsumerID = "london"

// consumerRegion is the demo consumer's mock-geo region (London, England).
const consumerRegion = "ENG"

// Options configure Start. Zero values take the defaults.
type Options struct {
	// DataDir holds the PKI, the join bundles, the providers' sharing files,
	// the consumer's saved settings (consumer/settings.yaml: policy,
	// location, workload) and the console token (created on first run,
	// reused later) and the broker's database (emptied at every start: the simulated clusters do
	// not outlive a run).
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
	// AdvertiseInterval is the providers' advertisement period (default
	// 10 s; also sent at once on every change).
	AdvertiseInterval time.Duration
	// ConsumerNodeCPU/Memory size the consumer's one local worker (default
	// 2 CPU / 4 GiB).
	ConsumerNodeCPU, ConsumerNodeMemory string
	// NoConsoles skips the web consoles.
	NoConsoles bool
	// Workload starts with the demo workload switched on (the consumer
	// console switches it later either way).
	Workload bool
	Logger   *slog.Logger
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
}

// Stop stops the provider's agent, echo responder and console (the
// cluster keeps running, as a cluster whose agent died would). It waits for
// them.
func (p *Provider) Stop() {
	p.stop()
	<-p.done
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
	Workload    *cluster.Workload
	// Namespace holds the ConsumerPolicy and VirtualNodeStates.
	Namespace string
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
	Consumer     *Consumer

	log       *slog.Logger
	guard     *netguard.Guard // the demo's own listeners (the broker guards its two)
	dashMu    sync.Mutex
	dashboard *web.Dashboard
	// locMu guards consumerLoc, where the consumer console put the
	// consumer (nil: its city), and the probe delays that follow it.
	locMu       sync.Mutex
	consumerLoc *api.Topology
	cancel      context.CancelFunc
	wg          sync.WaitGroup
	errc        chan error
	closed      chan struct{}
	once        sync.Once
	err         error
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
	f := &Federation{log: o.Logger, cancel: cancel, errc: make(chan error, 16), closed: make(chan struct{})}
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

// Stop ends every component and waits for all of them.
func (f *Federation) Stop() error {
	f.cancel()
	f.wg.Wait()
	for _, p := range f.Providers {
		if p.Cluster != nil {
			_ = p.Cluster.Stop()
		}
	}
	if f.Consumer != nil && f.Consumer.Cluster != nil {
		_ = f.Consumer.Cluster.Stop()
	}
	f.once.Do(func() { close(f.closed) })
	return f.err
}

func (o *Options) defaults() error {
	if o.DataDir == "" {
		o.DataDir = "demo-data"
	}
	if o.ListenHost == "" {
		o.ListenHost = "127.0.0.1"
	}
	if o.BasePort < 0 || o.BasePort > 65535-10-len(cities) {
		return fmt.Errorf("base port %d: use 0 (ephemeral) or 1–%d", o.BasePort, 65535-10-len(cities))
	}
	if o.Providers == nil {
		o.Providers = DefaultProviders(3)
	}
	if len(o.Providers) == 0 {
		return errors.New("a demo needs at least one provider")
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
	if o.ProviderStaleAfter <= 0 {
		o.ProviderStaleAfter = reservations.DefaultProviderStaleAfter
	}
	if o.AdvertiseInterval <= 0 {
		o.AdvertiseInterval = 10 * time.Second
	}
	if o.ConsumerNodeCPU == "" {
		o.ConsumerNodeCPU = "2"
	}
	if o.ConsumerNodeMemory == "" {
		o.ConsumerNodeMemory = "4Gi"
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

// urlHost is the host:port to print for a bound listener (a wildcard
// listen host is printed as 127.0.0.1).
func urlHost(ln net.Listener) string {
	a := ln.Addr().(*net.TCPAddr)
	if a.IP.IsUnspecified() {
		return net.JoinHostPort("127.0.0.1", strconv.Itoa(a.Port))
	}
	return a.String()
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

	guard, err := newGuard(o)
	if err != nil {
		return err
	}
	f.guard = guard

	// The broker, through the broker command's own wiring.
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
	f.BrokerURL = "https://" + urlHost(apiLn)
	f.DashboardURL = "http://" + urlHost(dashLn)
	bo := brokercmd.Options{
		PKIDir: pkiDir, DataDir: brokerDir, Listen: apiLn.Addr().String(), DashboardListen: dashLn.Addr().String(),
		ReservationLease: reservations.DefaultReservationLease, ProviderStaleAfter: o.ProviderStaleAfter,
		// One consumer runs CA loops every scan interval here; the default
		// per-certificate limit is sized for real CA's 10 s.
		RateLimitBurst: 200, RateLimitRPS: 100,
		APIListener: apiLn, DashboardListener: dashLn, Limits: guard.Limits(),
		OnDashboard: func(d *web.Dashboard) { f.dashMu.Lock(); f.dashboard = d; f.dashMu.Unlock() },
	}
	f.run(ctx, "broker", func(ctx context.Context) error { return brokercmd.Run(ctx, bo, o.Logger.With("component", "broker")) })

	// mock-geo and mock-eco.
	geoLn, err := f.guard.Listen(ctx, "mock-geo", o.addr(2))
	if err != nil {
		return fmt.Errorf("mock-geo listener: %w", err)
	}
	f.GeoURL = "http://" + urlHost(geoLn)
	f.serveHTTP(ctx, "mock-geo", geoLn, geo.Handler(geo.DefaultTable()))
	ecoLn, err := f.guard.Listen(ctx, "mock-eco", o.addr(3))
	if err != nil {
		return fmt.Errorf("mock-eco listener: %w", err)
	}
	f.EcoURL = "http://" + urlHost(ecoLn)
	f.serveHTTP(ctx, "mock-eco", ecoLn, eco.Handler(eco.DefaultProfiles(), eco.Options{}))
	geoClient, err := location.NewGeoClient(f.GeoURL, nil)
	if err != nil {
		return err
	}
	ecoClient, err := location.NewEcoClient(f.EcoURL, nil, time.Now)
	if err != nil {
		return err
	}

	for i, spec := range o.Providers {
		o.Progress(fmt.Sprintf("starting provider %d/%d: %s (%s)", i+1, len(o.Providers), spec.ID, spec.Region))
		p, err := f.startProvider(ctx, o, i, spec, pkiDir, geoClient, ecoClient)
		if p != nil {
			f.Providers = append(f.Providers, p) // Stop stops its cluster even after an error
		}
		if err != nil {
			return fmt.Errorf("provider %s: %w", spec.ID, err)
		}
	}
	o.Progress("starting the consumer " + ConsumerID + ", its adapter and the autoscaler")
	c, err := f.startConsumer(ctx, o, pkiDir, geoClient)
	if c != nil {
		f.Consumer = c
	}
	if err != nil {
		return fmt.Errorf("consumer %s: %w", ConsumerID, err)
	}
	return nil
}

// newGuard guards the demo's listeners. Every client of the demo is on
// loopback, one address for all, so a per-address cap below the total would
// refuse the demo's own clients first: it is the total. The broker's two
// listeners get the same limits (Options.Limits), so that all of them
// together hold at most half of the file descriptors.
func newGuard(o Options) (*netguard.Guard, error) {
	listeners := 6 // broker API and dashboard, mock-geo, mock-eco, local API, adapter
	if !o.NoConsoles {
		listeners += 1 + len(o.Providers)
	}
	lim, err := netguard.Limits{}.ForListeners(listeners)
	if err != nil {
		return nil, err
	}
	lim.MaxConnsPerIP = lim.MaxConns
	return netguard.New(netguard.Options{Limits: lim, Listeners: listeners, Logger: o.Logger.With("component", "netguard")})
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

// brokerClient loads (or mints, on first run) the cluster's join bundle and
// returns a Broker API client with its certificate.
func (f *Federation) brokerClient(o Options, pkiDir, id string, role api.Role) (*brokerclient.Client, error) {
	path := filepath.Join(o.DataDir, "bundles", id+".tar.gz")
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, err
		}
		if err := pki.WriteJoinBundle(pkiDir, id, role, f.BrokerURL, path, false, time.Now()); err != nil {
			return nil, fmt.Errorf("join bundle of %s: %w", id, err)
		}
	}
	b, err := pki.LoadBundle(path)
	if err != nil {
		return nil, fmt.Errorf("join bundle %s: %w (delete it to mint a new one)", path, err)
	}
	if b.Role != "" && b.Role != role {
		return nil, fmt.Errorf("join bundle %s is for a %s, want %s (delete it to mint a new one)", path, b.Role, role)
	}
	tlsCfg, err := b.ClientTLSConfig()
	if err != nil {
		return nil, err
	}
	// The bundle's broker URL may name an earlier run's port: dial this run's.
	return brokerclient.New(brokerclient.Config{BaseURL: f.BrokerURL, TLS: tlsCfg, Logger: o.Logger.With("cluster", id)})
}

// startCluster starts a simulated cluster on address with the agent CRDs
// and Liqo's CRDs installed, and returns its controller-runtime client.
func startCluster(ctx context.Context, o Options, name, address string, nodes []cluster.NodeSpec) (*cluster.Cluster, client.Client, error) {
	c, err := cluster.Start(ctx, cluster.Options{Name: name, Addr: net.JoinHostPort(address, "0"), Nodes: nodes, Logger: o.Logger.With("cluster", name)})
	if err != nil {
		return nil, nil, err
	}
	cfg := c.RESTConfig()
	// mocks/kubeapi decodes protobuf bodies with client-go's scheme, which
	// lacks apiextensions in a binary that does not register it: install
	// the CRDs as JSON.
	cfg.ContentType = "application/json"
	if err := crds.Install(ctx, cfg); err != nil {
		_ = c.Stop()
		return nil, nil, fmt.Errorf("installing the agent CRDs: %w", err)
	}
	if err := liqocrds.Install(ctx, cfg); err != nil {
		_ = c.Stop()
		return nil, nil, fmt.Errorf("installing Liqo's CRDs: %w", err)
	}
	scheme, err := agentcmd.Scheme()
	if err != nil {
		_ = c.Stop()
		return nil, nil, err
	}
	cl, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		_ = c.Stop()
		return nil, nil, err
	}
	return c, cl, nil
}

func (f *Federation) startProvider(ctx context.Context, o Options, i int, spec ProviderSpec, pkiDir string, geoClient *location.GeoClient, ecoClient *location.EcoClient) (*Provider, error) {
	address, ok := geo.LoopbackAddress(spec.Region, byte(10+i))
	if !ok {
		return nil, fmt.Errorf("region %q has no loopback range in mock-geo's table (docs/mocks.md)", spec.Region)
	}
	var nodes []cluster.NodeSpec
	for n := range max(1, spec.Nodes) {
		nodes = append(nodes, cluster.NodeSpec{Name: fmt.Sprintf("%s-worker-%d", spec.ID, n+1), CPU: spec.NodeCPU, Memory: spec.NodeMemory})
	}
	c, cl, err := startCluster(ctx, o, spec.ID, address, nodes)
	if err != nil {
		return nil, err
	}
	p := &Provider{Spec: spec, Address: address, Cluster: c, done: make(chan struct{})}
	kube, err := kubernetes.NewForConfig(c.RESTConfig())
	if err != nil {
		return p, err
	}
	bc, err := f.brokerClient(o, pkiDir, spec.ID, api.RoleProvider)
	if err != nil {
		return p, err
	}
	store, err := sharingStore(o, spec)
	if err != nil {
		return p, err
	}
	echo, err := probe.Listen(net.JoinHostPort(address, "0"))
	if err != nil {
		return p, err
	}
	echo.SetDelay(spec.ProbeDelay)
	p.echo = echo
	p.ProbeAddr = echo.Addr().String()
	log := o.Logger.With("provider", spec.ID)
	p.Agent, err = provider.New(provider.Config{
		ClusterID: spec.ID, LiqoClusterID: spec.ID, Kube: kube, Broker: bc,
		Driver:  simliqo.NewDriver(cl, simliqo.DriverOptions{LocalClusterID: spec.ID, Logger: log}),
		Sharing: store, AdvertisedIP: address, ProbePort: echo.Addr().Port,
		Geo: func(ctx context.Context, ip string) (*api.Topology, error) {
			loc, found, err := geoClient.Lookup(ctx, ip)
			if err != nil || !found {
				return nil, err
			}
			return &api.Topology{Region: loc.Region, City: loc.City, Latitude: loc.Latitude, Longitude: loc.Longitude}, nil
		},
		Carbon: func(ctx context.Context, region string) (*float64, []float64, error) {
			cb, err := ecoClient.Carbon(ctx, region)
			if err != nil {
				return nil, nil, err
			}
			v := cb.Intensity
			return &v, cb.Forecast, nil
		},
		Interval: o.AdvertiseInterval, Debounce: 200 * time.Millisecond, Logger: log,
	})
	if err != nil {
		_ = echo.Close()
		return p, err
	}
	pctx, stop := context.WithCancel(ctx)
	p.stop = stop
	var pwg sync.WaitGroup
	for name, fn := range map[string]func(context.Context) error{"probe echo": echo.Serve, "provider agent": p.Agent.Run} {
		pwg.Add(1)
		f.run(pctx, spec.ID+" "+name, func(ctx context.Context) error { defer pwg.Done(); return fn(ctx) })
	}
	if !o.NoConsoles {
		url, err := f.providerConsole(pctx, o, 10+i, p, &pwg)
		if err != nil {
			stop()
			return p, err
		}
		p.ConsoleURL = url
	}
	go func() {
		pwg.Wait()
		bc.Close()
		close(p.done)
	}()
	return p, nil
}

// sharingStore opens the provider's sharing file in the data folder,
// writing the spec's prices and rules on first run; later runs keep what
// the console applied.
func sharingStore(o Options, spec ProviderSpec) (*provider.Store, error) {
	path := filepath.Join(o.DataDir, "providers", spec.ID, "sharing.yaml")
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		cfg := provider.SharingConfig{Renewable: spec.Renewable, DeniedConsumers: spec.DeniedConsumers}
		if spec.CPUPrice != "" || spec.MemoryPrice != "" {
			cfg.UnitPrices = corev1.ResourceList{}
			if spec.CPUPrice != "" {
				cfg.UnitPrices["cpu"] = resource.MustParse(spec.CPUPrice)
			}
			if spec.MemoryPrice != "" {
				cfg.UnitPrices["memory"] = resource.MustParse(spec.MemoryPrice)
			}
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

func (f *Federation) startConsumer(ctx context.Context, o Options, pkiDir string, geoClient *location.GeoClient) (*Consumer, error) {
	address, _ := geo.LoopbackAddress(consumerRegion, 10)
	c, cl, err := startCluster(ctx, o, ConsumerID, address, []cluster.NodeSpec{{Name: ConsumerID + "-worker-1", CPU: o.ConsumerNodeCPU, Memory: o.ConsumerNodeMemory}})
	if err != nil {
		return nil, err
	}
	cons := &Consumer{ID: ConsumerID, Address: address, Cluster: c, Namespace: AgentNamespace}
	cfg := c.RESTConfig()
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return cons, err
	}
	if err := ensureNamespace(ctx, kube, AgentNamespace); err != nil {
		return cons, err
	}
	bc, err := f.brokerClient(o, pkiDir, ConsumerID, api.RoleConsumer)
	if err != nil {
		return cons, err
	}
	log := o.Logger.With("consumer", ConsumerID)
	ctrl, err := simliqo.NewController(cfg, simliqo.ControllerOptions{NodeDelay: o.PeeringDelay, Logger: log, Name: "liqo-sim-" + ConsumerID})
	if err != nil {
		return cons, err
	}
	f.run(ctx, "simulated Liqo", ctrl.Run)
	// What the consumer console changed in an earlier run (the simulated
	// cluster holding the ConsumerPolicy starts empty).
	saved, found, err := loadConsumerSettings(consumerSettingsPath(o))
	if err != nil {
		return cons, err
	}
	if found && (saved.Policy.Placement.Type != "" || saved.Policy.Placement.Weights != nil || saved.Policy.Location != nil) {
		if err := console.UpdatePolicy(ctx, cl, AgentNamespace, func(s *fav1alpha1.ConsumerPolicySpec) { *s = saved.Policy }); err != nil {
			return cons, fmt.Errorf("restoring the consumer's saved policy: %w", err)
		}
		if l := saved.Policy.Location; l != nil {
			f.setConsumerLocation(&api.Topology{City: l.City, Region: l.Region, Latitude: l.Latitude, Longitude: l.Longitude})
		}
	}
	cons.Agent, err = consumer.New(consumer.Config{
		ClusterID: ConsumerID, LiqoClusterID: ConsumerID, Namespace: AgentNamespace, Kube: kube, Client: cl, Broker: bc,
		Driver: simliqo.NewDriver(cl, simliqo.DriverOptions{LocalClusterID: ConsumerID, Logger: log}),
		Prober: probe.NewProber(probe.ProberConfig{TTL: 5 * time.Second}), AdvertisedIP: address,
		Geo: func(ctx context.Context, ip string) (*consumer.Location, error) {
			loc, found, err := geoClient.Lookup(ctx, ip)
			if err != nil || !found {
				return nil, err
			}
			return &consumer.Location{Region: loc.Region, City: loc.City, Latitude: loc.Latitude, Longitude: loc.Longitude}, nil
		},
		Interval: 5 * time.Second, PolicyPoll: 500 * time.Millisecond, Resync: 2 * time.Second, Logger: log,
	})
	if err != nil {
		return cons, err
	}
	f.run(ctx, "consumer agent", cons.Agent.Run)
	go func() { <-ctx.Done(); f.wg.Wait(); bc.Close() }()

	localLn, err := f.guard.Listen(ctx, "local-api", o.addr(5))
	if err != nil {
		return cons, fmt.Errorf("local API listener: %w", err)
	}
	cons.LocalAPIURL = "http://" + localLn.Addr().String()
	f.serveHTTP(ctx, "consumer local API", localLn, cons.Agent.LocalAPI())

	// The adapter, over the local API, serving externalgrpc on loopback.
	agentAPI, err := localapi.NewClient(cons.LocalAPIURL, nil)
	if err != nil {
		return cons, err
	}
	adapter, err := externalgrpc.New(externalgrpc.Config{Agent: agentAPI, CacheTTL: min(o.ScanInterval/2, 2*time.Second), Logger: o.Logger.With("component", "adapter")})
	if err != nil {
		return cons, err
	}
	grpcLn, err := f.guard.Listen(ctx, "adapter", o.addr(6))
	if err != nil {
		adapter.Close()
		return cons, fmt.Errorf("adapter listener: %w", err)
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

	// The autoscaler, talking to the adapter over gRPC only.
	conn, err := grpc.NewClient(cons.AdapterAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return cons, err
	}
	ca, err := autoscaler.New(autoscaler.Config{
		Client: protos.NewCloudProviderClient(conn), Kube: kube, ScanInterval: o.ScanInterval,
		ScaleDownUnneededTime: o.ScaleDownUnneededTime, Logger: o.Logger.With("component", "autoscaler"),
	})
	if err != nil {
		_ = conn.Close()
		return cons, err
	}
	f.run(ctx, "autoscaler", func(ctx context.Context) error { defer conn.Close(); return ca.Run(ctx) })

	cons.Workload = cluster.NewWorkload(kube, "demo", log)
	work := cluster.WorkloadSpec{Enabled: o.Workload, Replicas: 6, CPU: resource.MustParse("1"), Memory: resource.MustParse("1Gi")}
	if found {
		work = saved.workload()
		work.Enabled = work.Enabled || o.Workload
	}
	if err := cons.Workload.Set(work); err != nil {
		return cons, err
	}
	f.run(ctx, "workload", cons.Workload.Run)
	if !o.NoConsoles {
		url, err := f.consumerConsole(ctx, o, cons, cl, kube, bc)
		if err != nil {
			return cons, err
		}
		cons.ConsoleURL = url
	}
	return cons, nil
}

func ensureNamespace(ctx context.Context, kube kubernetes.Interface, ns string) error {
	_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", ns, err)
	}
	return nil
}
