// Package agentcmd provides the `agent` subcommand: the provider or the
// consumer agent of one member cluster, wired from a join bundle (mTLS to
// the broker), a Kubernetes API (kubeconfig or in-cluster) and a Liqo driver
// (liqoctl or the simulated one).
package agentcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"

	authv1beta1 "github.com/liqotech/liqo/apis/authentication/v1beta1"
	liqocorev1beta1 "github.com/liqotech/liqo/apis/core/v1beta1"
	offloadingv1beta1 "github.com/liqotech/liqo/apis/offloading/v1beta1"

	fav1alpha1 "github.com/federation-autoscaler/federation-autoscaler/agent/apis/v1alpha1"
	"github.com/federation-autoscaler/federation-autoscaler/agent/brokerclient"
	"github.com/federation-autoscaler/federation-autoscaler/agent/console"
	"github.com/federation-autoscaler/federation-autoscaler/agent/consumer"
	"github.com/federation-autoscaler/federation-autoscaler/agent/health"
	"github.com/federation-autoscaler/federation-autoscaler/agent/liqo"
	"github.com/federation-autoscaler/federation-autoscaler/agent/location"
	"github.com/federation-autoscaler/federation-autoscaler/agent/preflight"
	"github.com/federation-autoscaler/federation-autoscaler/agent/probe"
	"github.com/federation-autoscaler/federation-autoscaler/agent/provider"
	"github.com/federation-autoscaler/federation-autoscaler/cli"
	"github.com/federation-autoscaler/federation-autoscaler/deploy/crds"
	mockgeo "github.com/federation-autoscaler/federation-autoscaler/mocks/geo"
	simliqo "github.com/federation-autoscaler/federation-autoscaler/mocks/liqo"
	liqocrds "github.com/federation-autoscaler/federation-autoscaler/mocks/liqo/crds"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/netguard"
	"github.com/federation-autoscaler/federation-autoscaler/server/pki"
	"github.com/federation-autoscaler/federation-autoscaler/web"
	"github.com/federation-autoscaler/federation-autoscaler/web/auth"
)

// Options are the agent's flags.
type Options struct {
	Role           string
	Bundle         string
	Kubeconfig     string
	Namespace      string
	LiqoDriver     string
	LiqoctlPath    string
	LocalAPIListen string
	// LocalAPIAllowedHosts are extra Host names the local API answers to.
	LocalAPIAllowedHosts []string
	ConsoleListen        string
	// Currency is the ISO 4217 code the console shows prices in.
	Currency string
	// ConsoleTokenFile holds the console login token (e.g. a mounted
	// Secret); ConsoleTokenStore is where a generated token's hash is kept.
	ConsoleTokenFile  string
	ConsoleTokenStore string
	HealthListen      string
	SharingFile       string
	PriceFile         string
	CapacityFile      string
	RenewableFile     string
	MockGeoURL        string
	MockEcoURL        string
	AdvertisedIP      string
	ProbeListen       string
	InstallCRDs       bool
	LiqoClusterID     string
	NodeName          string
	// SimPeeringDelay is the simulated Liqo's delay before a virtual node
	// appears (--liqo-driver sim).
	SimPeeringDelay time.Duration
	// Limits bound what each listener holds (--max-conns,
	// --max-conns-per-ip, --handshake-timeout; zero: automatic).
	Limits netguard.Limits

	// Stderr receives the console token printed once on first start
	// (default os.Stderr).
	Stderr io.Writer

	// Ready, when set, is called with the bound addresses once every
	// listener is up (tests).
	Ready func(Addrs)
	// TuneProvider and TuneConsumer, when set, may adjust the agent's
	// configuration before it is built (tests and embedding programs).
	TuneProvider func(*provider.Config)
	TuneConsumer func(*consumer.Config)
	// WrapDriver, when set, wraps the Liqo driver (tests count calls).
	WrapDriver func(liqo.Driver) liqo.Driver
}

// Addrs are the bound listener addresses (empty when disabled).
type Addrs struct {
	Health, LocalAPI, Probe, Console string
}

// NewCommand returns the `agent` subcommand.
func NewCommand() *cobra.Command {
	o := Options{}
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run the provider or consumer agent of a member cluster",
		Long: `Run a member cluster's agent. It dials out to the broker over mTLS with the
join bundle's certificate (works behind NAT) and acts on the cluster's
Kubernetes API (--kubeconfig, or the in-cluster configuration).

  provider: advertises the capacity it can lend (free allocatable of Ready,
            schedulable nodes minus the requests of its own running pods,
            capped by the sharing configuration), answers latency probes on
            --probe-listen and mints peering credentials for consumers.
  consumer: heartbeats its ConsumerPolicy, serves the local API the Cluster
            Autoscaler adapter calls on --local-api-listen, peers with
            providers and keeps one VirtualNodeState per borrowed chunk.

See docs/agents.md for every flag, the configuration file formats and the
behaviour.`,
		Example: `  federation-autoscaler agent --role provider --bundle provider-1.tar.gz \
      --sharing-file /etc/fa/sharing.yaml --probe-listen :5000
  federation-autoscaler agent --role consumer --bundle consumer-1.tar.gz --liqo-driver sim`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := cli.Logger(cmd)
			if err != nil {
				return err
			}
			return Run(cmd.Context(), o, log)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Role, "role", "", "provider or consumer (required; must match the bundle's role when it records one)")
	f.StringVar(&o.Bundle, "bundle", "", "join bundle from 'federation-autoscaler pki join' (required)")
	f.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig of the member cluster (default: in-cluster configuration)")
	f.StringVar(&o.Namespace, "namespace", "federation-autoscaler", "namespace of the agent's objects (ConsumerPolicy, VirtualNodeStates, kubeconfig Secrets)")
	f.StringVar(&o.LiqoDriver, "liqo-driver", "liqoctl", "Liqo driver: liqoctl (the real Liqo) or sim (simulated Liqo on the same API)")
	f.StringVar(&o.LiqoctlPath, "liqoctl-path", "liqoctl", "liqoctl binary (--liqo-driver liqoctl)")
	f.StringVar(&o.LocalAPIListen, "local-api-listen", "127.0.0.1:9090", "consumer: address of the local API the adapter calls (plain HTTP, no auth: keep it on loopback)")
	f.StringSliceVar(&o.LocalAPIAllowedHosts, "local-api-allowed-hosts", nil, "consumer: extra Host names the local API answers to besides loopback names and the IP it is called on (e.g. a Service name)")
	f.StringVar(&o.Currency, "currency", web.DefaultCurrency, "ISO 4217 code the console shows prices in (the federation's currency)")
	f.StringVar(&o.ConsoleListen, "console-listen", "", "address of the agent's web console (empty: none); login with the console token")
	f.StringVar(&o.ConsoleTokenFile, "console-token-file", "", "file holding the console login token (e.g. a mounted Secret); default: generate one on first start")
	f.StringVar(&o.ConsoleTokenStore, "console-token-store", "", "where the hash of a generated console token is kept (default: <user config dir>/federation-autoscaler/<role>-console-token)")
	f.StringVar(&o.HealthListen, "health-listen", ":8082", "address of /healthz, /readyz and /metrics (empty: none)")
	f.StringVar(&o.SharingFile, "sharing-file", "", "provider: sharing configuration (unitPrices, capacity caps, renewable, allowed/denied consumers, maxChunksPerConsumer), YAML or JSON")
	f.StringVar(&o.PriceFile, "price-file", "", "provider: reference prices.yaml (resource: price per unit-hour); overrides unitPrices")
	f.StringVar(&o.CapacityFile, "capacity-file", "", "provider: reference capacity.yaml (resource: percent or quantity); overrides capacity")
	f.StringVar(&o.RenewableFile, "renewable-file", "", "provider: reference renewable.yaml ({renewable: bool}); overrides renewable")
	f.StringVar(&o.MockGeoURL, "mock-geo-url", "", "geolocation service (ip-api.com style, e.g. mock-geo); empty: no location")
	f.StringVar(&o.MockEcoURL, "mock-eco-url", "", "provider: carbon-intensity service (e.g. mock-eco); empty: no carbon data")
	f.StringVar(&o.AdvertisedIP, "advertised-ip", "", "IP used for geolocation and the probe endpoint (default: the node's ExternalIP, then InternalIP)")
	f.StringVar(&o.ProbeListen, "probe-listen", "", "provider: UDP address of the latency-probe echo responder, advertised as probeEndpoint (empty: none)")
	f.BoolVar(&o.InstallCRDs, "install-crds", true, "install or update the agent's CRDs at start")
	f.StringVar(&o.LiqoClusterID, "liqo-cluster-id", "", "the cluster's Liqo cluster id (default: the bundle's cluster id)")
	f.StringVar(&o.NodeName, "node-name", os.Getenv("NODE_NAME"), "node whose address locates the cluster (default $NODE_NAME, else the first node)")
	f.DurationVar(&o.SimPeeringDelay, "sim-peering-delay", 500*time.Millisecond, "--liqo-driver sim: delay before the simulated virtual node appears")
	o.Limits.AddFlags(f)
	return cmd
}

// Scheme is the controller-runtime scheme of the agents.
func Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, fav1alpha1.AddToScheme,
		authv1beta1.AddToScheme, liqocorev1beta1.AddToScheme, offloadingv1beta1.AddToScheme,
	} {
		if err := add(s); err != nil {
			return nil, fmt.Errorf("building the scheme: %w", err)
		}
	}
	return s, nil
}

// Run runs the agent until ctx ends. In order, so that a mistake is
// reported before anything is changed: every flag is validated
// (Options.Validate), then the local inputs are read (the bundle, the
// provider's sharing files, liqoctl), then the cluster is touched (CRDs,
// the consumer's namespace, what each agent reads: package preflight), and
// only then do the listeners and loops start.
func Run(ctx context.Context, o Options, log *slog.Logger) error {
	if err := o.Validate(); err != nil {
		return err
	}
	role := api.Role(o.Role)
	b, err := pki.LoadBundle(o.Bundle)
	if err != nil {
		return fmt.Errorf("loading --bundle %s: %w", o.Bundle, err)
	}
	if b.Role != "" && b.Role != role {
		return fmt.Errorf("--role %s, but the bundle %s was issued for a %s", role, o.Bundle, b.Role)
	}
	tlsCfg, err := b.ClientTLSConfig()
	if err != nil {
		return fmt.Errorf("bundle %s: %w", o.Bundle, err)
	}
	liqoID := o.LiqoClusterID
	if liqoID == "" {
		liqoID = b.ClusterID
	}
	if o.LiqoDriver == "liqoctl" {
		if _, err := exec.LookPath(o.LiqoctlPath); err != nil {
			return fmt.Errorf("--liqo-driver liqoctl: %w: install liqoctl (Liqo v1.1.2), point --liqoctl-path at it, or use --liqo-driver sim", err)
		}
	}
	var sharing *provider.Store
	if role == api.RoleProvider {
		if sharing, err = provider.NewStore(provider.Sources{SharingFile: o.SharingFile, PriceFile: o.PriceFile, CapacityFile: o.CapacityFile, RenewableFile: o.RenewableFile}, log); err != nil {
			return err
		}
	}

	// controller-runtime (the client, the simulated Liqo) logs through its
	// global logr sink; route it to slog.
	crlog.SetLogger(logr.FromSlogHandler(log.Handler()))
	cfg, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
	if err != nil {
		return fmt.Errorf("Kubernetes configuration (--kubeconfig %q, else in-cluster): %w", o.Kubeconfig, err)
	}
	cfg.UserAgent = "federation-autoscaler-agent/" + cli.Version
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building the Kubernetes client: %w", err)
	}
	scheme, err := Scheme()
	if err != nil {
		return err
	}
	cl, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("building the Kubernetes client: %w", err)
	}
	if o.InstallCRDs {
		if err := crds.Install(ctx, cfg); err != nil {
			return fmt.Errorf("installing the agent CRDs (--install-crds): %w", err)
		}
		if o.LiqoDriver == "sim" {
			// A cluster without Liqo needs Liqo's CRDs for the simulation.
			if err := liqocrds.Install(ctx, cfg); err != nil {
				return fmt.Errorf("installing the Liqo CRDs for --liqo-driver sim: %w", err)
			}
		}
	}
	if err := checkWorld(ctx, cl, role, o.Namespace, log); err != nil {
		return err
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := health.NewMetrics(reg)
	// Every listener goes through the guard: floods, EMFILE and silent
	// peers never end the agent (server/netguard).
	guard, err := netguard.New(netguard.Options{Limits: o.Limits, Listeners: o.listeners(), Registerer: reg, Logger: log})
	if err != nil {
		return err
	}
	staleness := 30 * time.Second
	if role == api.RoleProvider {
		staleness = 90 * time.Second
	}
	tracker := health.NewTracker(nil, staleness)
	bc, err := brokerclient.New(brokerclient.Config{
		BaseURL:    b.BrokerURL,
		TLS:        tlsCfg,
		OnResponse: tracker.BrokerReached,
		Observe: func(route string, status int, d time.Duration) {
			metrics.BrokerCalls.WithLabelValues(route, strconv.Itoa(status)).Observe(d.Seconds())
		},
		Logger: log,
	})
	if err != nil {
		return err
	}
	defer bc.Close()

	driver, runDriver, err := buildDriver(cfg, cl, liqoID, o, log)
	if err != nil {
		return err
	}
	if o.WrapDriver != nil {
		driver = o.WrapDriver(driver)
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errc := make(chan error, 4)
	goRun := func(name string, fn func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(ctx); err != nil && ctx.Err() == nil {
				errc <- fmt.Errorf("%s: %w", name, err)
			}
		}()
	}
	defer wg.Wait()
	defer cancel()
	if runDriver != nil {
		goRun("simulated Liqo", runDriver)
	}
	var addrs Addrs
	if o.HealthListen != "" {
		a, err := serve(ctx, &wg, guard, "health", "health", o.HealthListen, health.Handler(tracker, reg), errc, log)
		if err != nil {
			return err
		}
		addrs.Health = a
	}
	var consoleToken auth.Verifier
	if o.ConsoleListen != "" {
		stderr := o.Stderr
		if stderr == nil {
			stderr = os.Stderr
		}
		if consoleToken, err = consoleVerifier(o, role, stderr); err != nil {
			return err
		}
	}

	var geo *location.GeoClient
	if o.MockGeoURL != "" {
		if geo, err = location.NewGeoClient(o.MockGeoURL, nil); err != nil {
			return fmt.Errorf("--mock-geo-url: %w", err)
		}
	}
	switch role {
	case api.RoleProvider:
		pc := provider.Config{
			ClusterID: b.ClusterID, LiqoClusterID: liqoID, Kube: kube, Broker: bc, Driver: driver, Sharing: sharing,
			NodeName: o.NodeName, AdvertisedIP: o.AdvertisedIP, Logger: log, Tracker: tracker, Metrics: metrics,
		}
		if o.ProbeListen != "" {
			r, err := probe.Listen(o.ProbeListen)
			if err != nil {
				return err
			}
			pc.ProbePort = r.Addr().Port
			addrs.Probe = r.Addr().String()
			goRun("probe responder", r.Serve)
		}
		if geo != nil {
			pc.Geo = func(ctx context.Context, ip string) (*api.Topology, error) {
				loc, found, err := geo.Lookup(ctx, ip)
				if err != nil || !found {
					return nil, err
				}
				return &api.Topology{Region: loc.Region, City: loc.City, Latitude: loc.Latitude, Longitude: loc.Longitude}, nil
			}
		}
		if o.MockEcoURL != "" {
			eco, err := location.NewEcoClient(o.MockEcoURL, nil, time.Now)
			if err != nil {
				return fmt.Errorf("--mock-eco-url: %w", err)
			}
			pc.Carbon = func(ctx context.Context, region string) (*float64, []float64, error) {
				c, err := eco.Carbon(ctx, region)
				if err != nil {
					return nil, nil, err
				}
				v := c.Intensity
				return &v, c.Forecast, nil
			}
		}
		if o.TuneProvider != nil {
			o.TuneProvider(&pc)
		}
		agent, err := provider.New(pc)
		if err != nil {
			return err
		}
		if o.ConsoleListen != "" {
			pcons, err := web.NewProviderConsole(&console.Provider{ClusterID: b.ClusterID, Agent: agent}, web.ConsoleOptions{Token: consoleToken, Currency: o.Currency, Places: mockgeo.Places(), Log: log.With("component", "console")})
			if err != nil {
				return err
			}
			if addrs.Console, err = serveConsole(ctx, goRun, guard, o.ConsoleListen, pcons.App(), pcons.Run, log); err != nil {
				return err
			}
		}
		goRun("provider agent", agent.Run)
	case api.RoleConsumer:
		cc := consumer.Config{
			ClusterID: b.ClusterID, LiqoClusterID: liqoID, Namespace: o.Namespace, Kube: kube, Client: cl,
			Broker: bc, Driver: driver, Prober: probe.NewProber(probe.ProberConfig{}),
			AdvertisedIP: o.AdvertisedIP, NodeName: o.NodeName, Logger: log, Tracker: tracker, Metrics: metrics, Registerer: reg,
			LocalAPIHosts: o.LocalAPIAllowedHosts,
		}
		if geo != nil {
			cc.Geo = func(ctx context.Context, ip string) (*consumer.Location, error) {
				loc, found, err := geo.Lookup(ctx, ip)
				if err != nil || !found {
					return nil, err
				}
				return &consumer.Location{Region: loc.Region, City: loc.City, Latitude: loc.Latitude, Longitude: loc.Longitude}, nil
			}
		}
		if o.TuneConsumer != nil {
			o.TuneConsumer(&cc)
		}
		agent, err := consumer.New(cc)
		if err != nil {
			return err
		}
		if o.LocalAPIListen != "" {
			a, err := serve(ctx, &wg, guard, "local-api", "local API", o.LocalAPIListen, agent.LocalAPI(), errc, log)
			if err != nil {
				return err
			}
			addrs.LocalAPI = a
		}
		if o.ConsoleListen != "" {
			// The console reads the agent in process (no loopback HTTP).
			backend := &console.Consumer{
				ClusterID: b.ClusterID, Namespace: o.Namespace, Agent: agent, Broker: bc, Client: cl, Pods: cl,
				Prober: cc.Prober, Logger: log,
			}
			ccons, err := web.NewConsumerConsole(backend, web.ConsoleOptions{Token: consoleToken, Currency: o.Currency, Places: mockgeo.Places(), Log: log.With("component", "console")})
			if err != nil {
				return err
			}
			if addrs.Console, err = serveConsole(ctx, goRun, guard, o.ConsoleListen, ccons.App(), ccons.Run, log); err != nil {
				return err
			}
		}
		goRun("consumer agent", agent.Run)
	}
	log.Info("Agent started", "cluster", b.ClusterID, "role", role, "broker", b.BrokerURL, "health", addrs.Health, "localAPI", addrs.LocalAPI, "probe", addrs.Probe, "console", addrs.Console)
	if o.Ready != nil {
		o.Ready(addrs)
	}
	select {
	case <-ctx.Done():
		log.Info("Agent stopping")
		return nil
	case err := <-errc:
		return err
	}
}

// checkWorld makes sure the agent can do its job on its cluster before it
// starts (package preflight): the consumer's namespace exists (created when
// missing) and it may list its objects there and the nodes; the provider
// may list the nodes and pods its capacity comes from.
func checkWorld(ctx context.Context, cl client.Client, role api.Role, ns string, log *slog.Logger) error {
	type listCheck struct {
		list client.ObjectList
		ns   string // "": cluster-wide
	}
	checks := []listCheck{{&corev1.NodeList{}, ""}, {&corev1.PodList{}, ""}}
	if role == api.RoleConsumer {
		created, err := preflight.EnsureNamespace(ctx, cl, ns)
		if err != nil {
			return fmt.Errorf("--namespace %s: %w", ns, err)
		}
		if created {
			log.Info("Created the agent's namespace", "namespace", ns)
		}
		checks = []listCheck{{&corev1.NodeList{}, ""}, {&fav1alpha1.VirtualNodeStateList{}, ns}, {&fav1alpha1.ConsumerPolicyList{}, ns}}
	}
	for _, c := range checks {
		if err := preflight.CanList(ctx, cl, c.list, c.ns); err != nil {
			return err
		}
	}
	return nil
}

// buildDriver builds the Liqo driver selected by --liqo-driver.
func buildDriver(cfg *rest.Config, cl client.Client, liqoID string, o Options, log *slog.Logger) (liqo.Driver, func(context.Context) error, error) {
	switch o.LiqoDriver {
	case "liqoctl":
		return liqo.NewLiqoctl(liqo.LiqoctlOptions{Path: o.LiqoctlPath, Kubeconfig: o.Kubeconfig, Client: cl, Logger: log}), nil, nil
	case "sim":
		// The simulated Liqo acts on this cluster's API: the driver records
		// peerings, the controller turns accepted ResourceSlices into a
		// VirtualNode and a Ready Node after the delay.
		d := simliqo.NewDriver(cl, simliqo.DriverOptions{LocalClusterID: liqoID, Logger: log})
		if o.Role != string(api.RoleConsumer) {
			return d, nil, nil // only a consumer's cluster grows virtual nodes
		}
		ctrl, err := simliqo.NewController(cfg, simliqo.ControllerOptions{NodeDelay: o.SimPeeringDelay, Logger: log, Name: "liqo-sim-" + liqoID})
		if err != nil {
			return nil, nil, err
		}
		return d, ctrl.Run, nil
	default:
		return nil, nil, fmt.Errorf("--liqo-driver %q: use liqoctl or sim", o.LiqoDriver)
	}
}

// listeners is how many TCP listeners the agent opens.
func (o *Options) listeners() int {
	n := 0
	for _, on := range []bool{o.HealthListen != "", o.Role == string(api.RoleConsumer) && o.LocalAPIListen != "", o.ConsoleListen != ""} {
		if on {
			n++
		}
	}
	return n
}

// serve runs an HTTP server on a guarded listener on addr (label names it
// in metrics) until ctx ends and returns the bound address.
func serve(ctx context.Context, wg *sync.WaitGroup, guard *netguard.Guard, label, name, addr string, h http.Handler, errc chan<- error, log *slog.Logger) (string, error) {
	ln, err := guard.Listen(ctx, label, addr)
	if err != nil {
		return "", fmt.Errorf("listening for the %s on %s: %w", name, addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 120 * time.Second}
	wg.Add(2)
	go func() {
		defer wg.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("%s: %w", name, err)
		}
	}()
	go func() {
		defer wg.Done()
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			log.Warn("Stopping the "+name+" listener", "err", err)
		}
	}()
	return ln.Addr().String(), nil
}
