package agentcmd

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqotech/liqo/apis/authentication/v1beta1"
	liqocorev1beta1 "github.com/liqotech/liqo/apis/core/v1beta1"
	offloadingv1beta1 "github.com/liqotech/liqo/apis/offloading/v1beta1"

	fav1alpha1 "github.com/federation-autoscaler/federation-autoscaler/agent/apis/v1alpha1"
	"github.com/federation-autoscaler/federation-autoscaler/agent/brokerclient"
	"github.com/federation-autoscaler/federation-autoscaler/agent/choice"
	"github.com/federation-autoscaler/federation-autoscaler/agent/console"
	"github.com/federation-autoscaler/federation-autoscaler/agent/consumer"
	"github.com/federation-autoscaler/federation-autoscaler/agent/health"
	"github.com/federation-autoscaler/federation-autoscaler/agent/liqo"
	"github.com/federation-autoscaler/federation-autoscaler/agent/location"
	"github.com/federation-autoscaler/federation-autoscaler/agent/preflight"
	"github.com/federation-autoscaler/federation-autoscaler/agent/probe"
	"github.com/federation-autoscaler/federation-autoscaler/agent/provider"
	"github.com/federation-autoscaler/federation-autoscaler/deploy/crds"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/netguard"
	"github.com/federation-autoscaler/federation-autoscaler/server/pki"
	"github.com/federation-autoscaler/federation-autoscaler/web"
	"github.com/federation-autoscaler/federation-autoscaler/web/auth"
)

// Deps are what an agent is assembled from: its identity and every seam to
// the world outside the process. Run fills them from the flags; the demo and
// the tests fill them from their simulated world. Nothing else differs.
type Deps struct {
	// Bundle is the cluster's join bundle: its id, its role (checked
	// against the role assembled), its client certificate and the broker.
	Bundle *pki.Bundle
	// BrokerURL overrides the bundle's broker URLs ("" keeps them): one URL
	// or a comma-separated list of an HA broker's replicas.
	BrokerURL string
	// LiqoClusterID is what the operator expects the cluster's Liqo id to
	// be (--liqo-cluster-id; "": no expectation). The agent reads the id
	// from Liqo (liqo.ResolveClusterID) and refuses a disagreeing one.
	LiqoClusterID string
	// LiqoNamespace is where Liqo is installed (--liqo-namespace; "": the
	// Liqo implementation's default).
	LiqoNamespace string
	// Namespace holds the agent's objects (ConsumerPolicy,
	// VirtualNodeStates, kubeconfig Secrets).
	Namespace string
	// Kube reaches the member cluster's Kubernetes API (required).
	Kube *rest.Config
	// InstallCRDs installs or updates the agent's CRDs (and asks the Liqo
	// backend to install its own) before anything else.
	InstallCRDs bool
	// Liqo builds the Liqo driver (required): liqo.LiqoctlFactory for the
	// real Liqo.
	Liqo liqo.Factory
	// WrapDriver, when set, wraps the Liqo driver (tests count calls).
	WrapDriver func(liqo.Driver) liqo.Driver
	// Clock drives the agents, the carbon cache and the console (default:
	// the real clock).
	Clock clock.WithTicker
	// Geo locates the cluster from its address (nil: no location); Carbon
	// gives a provider's grid carbon intensity (nil: no carbon data).
	Geo    GeoLocator
	Carbon CarbonSource
	// NodeName and AdvertisedIP pick the address that locates the cluster
	// (and, on a provider, the advertised probe endpoint).
	NodeName, AdvertisedIP string
	// Sharing is a provider's sharing configuration (required there).
	Sharing *provider.Store
	// HealthListen (/healthz, /readyz, /metrics), LocalAPIListen (a
	// consumer's local API), ConsoleListen (the web console) and
	// ProbeListen (a provider's UDP echo
	// responder) are listen addresses; "" disables each.
	HealthListen, LocalAPIListen, ConsoleListen, ProbeListen string
	// LocalAPIHosts are extra Host names the local API answers to.
	LocalAPIHosts []string
	// Model is a consumer's default model endpoint for the Choice policy;
	// ChoiceAuditSize and ChoiceMaxCandidates bound its selector (0:
	// defaults).
	Model                                choice.Endpoint
	ChoiceAuditSize, ChoiceMaxCandidates int
	// Consolidation tunes a consumer's moves of autoscaled capacity (zero:
	// defaults).
	Consolidation consumer.Consolidation
	// ProbeDelay is added to every probe echo: a simulated network
	// distance (0 for a real network).
	ProbeDelay time.Duration
	// Guard guards the TCP listeners. Nil: the agent's own guard with
	// Limits, sized for its listeners; an embedding program that opens
	// listeners of its own passes one guard for all.
	Guard  *netguard.Guard
	Limits netguard.Limits
	// Console configures the web console (with ConsoleListen).
	Console ConsoleDeps
	// TuneProvider and TuneConsumer, when set, may adjust the agent's
	// configuration before it is built (intervals of tests and the demo).
	TuneProvider func(*provider.Config)
	TuneConsumer func(*consumer.Config)
	Logger       *slog.Logger
}

// ConsoleDeps configure the agent's web console.
type ConsoleDeps struct {
	// Token verifies the login token (required with a console).
	Token auth.Verifier
	// Currency is the ISO 4217 code prices are shown in (default
	// web.DefaultCurrency); Refresh the live re-render period (default
	// the console's).
	Currency string
	Refresh  time.Duration
	// Places are the cities the consoles' location picker offers (nil:
	// no picker).
	Places []api.Topology
	// Provider and Consumer, when set, turn the console's backend into
	// the one served (the demo moves probe delays with a provider's
	// location and adds its workload switch).
	Provider func(*console.Provider) web.ProviderBackend
	Consumer func(*console.Consumer) web.ConsumerBackend
}

// GeoLocator resolves an IP address to a location (location.GeoClient).
type GeoLocator interface {
	Lookup(ctx context.Context, ip string) (loc location.Location, found bool, err error)
}

// CarbonSource gives a region's carbon intensity (location.EcoClient).
type CarbonSource interface {
	Carbon(ctx context.Context, region string) (location.Carbon, error)
}

// Addrs are the bound listener addresses (empty when disabled).
type Addrs struct {
	Health, LocalAPI, Probe, Console string
}

// Agent is an assembled agent: its listeners are bound, nothing runs until
// Run.
type Agent struct {
	Role      api.Role
	ClusterID string
	// BrokerURL is the broker it dials (a comma-separated list for the
	// replicas of an HA broker).
	BrokerURL string
	Addrs     Addrs
	// Provider or Consumer is the agent (the other is nil).
	Provider *provider.Agent
	Consumer *consumer.Agent
	// Probe is a provider's echo responder (nil without ProbeListen);
	// SetDelay is safe while it serves.
	Probe *probe.Responder

	tasks   []task
	cleanup []func()
}

// task is one loop of a running agent.
type task struct {
	name string
	run  func(context.Context) error
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

// Assemble builds the provider or consumer agent from d: the one wiring of
// the agent subcommand, the demo and the tests. It touches the cluster
// (CRDs with InstallCRDs, the consumer's namespace, the preflight checks of
// package preflight) and binds the listeners; on error it releases what it
// took. Run the result once.
func Assemble(ctx context.Context, role api.Role, d Deps) (*Agent, error) {
	if err := d.check(role); err != nil {
		return nil, err
	}
	as := &assembly{d: d, role: role, log: d.Logger, a: &Agent{Role: role, ClusterID: d.Bundle.ClusterID, BrokerURL: d.BrokerURL}}
	if err := as.build(ctx); err != nil {
		as.a.release()
		return nil, err
	}
	return as.a, nil
}

// check fills d's defaults and refuses what cannot be assembled.
func (d *Deps) check(role api.Role) error {
	switch {
	case role != api.RoleProvider && role != api.RoleConsumer:
		return fmt.Errorf("assembling an agent: role %q: use provider or consumer", role)
	case d.Bundle == nil || d.Kube == nil || d.Liqo == nil:
		return errors.New("assembling an agent: Bundle, Kube and Liqo are required")
	case d.Bundle.Role != "" && d.Bundle.Role != role:
		return fmt.Errorf("assembling a %s agent from a bundle issued for a %s", role, d.Bundle.Role)
	case role == api.RoleProvider && d.Sharing == nil:
		return errors.New("assembling a provider agent: Sharing is required")
	case d.ConsoleListen != "" && d.Console.Token == nil:
		return errors.New("assembling an agent: its console needs a login token verifier")
	}
	if d.BrokerURL == "" {
		d.BrokerURL = strings.Join(d.Bundle.BrokerURLs(), ",")
	}
	if d.Clock == nil {
		d.Clock = clock.RealClock{}
	}
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// listenerCount is how many TCP listeners an agent opens: the health
// endpoint, a consumer's local API and the console, each when enabled.
func listenerCount(role api.Role, health, localAPI, console string) int {
	n := 0
	for _, on := range []bool{health != "", role == api.RoleConsumer && localAPI != "", console != ""} {
		if on {
			n++
		}
	}
	return n
}

// assembly is the state of one Assemble.
type assembly struct {
	d    Deps
	role api.Role
	log  *slog.Logger
	a    *Agent

	kube    kubernetes.Interface
	cl      client.Client
	driver  liqo.Driver
	reg     *prometheus.Registry
	metrics *health.Metrics
	tracker *health.Tracker
	guard   *netguard.Guard
	broker  *brokerclient.Client
}

// build assembles in the order of Run's promise: the cluster is prepared
// and checked before any listener is bound or loop built.
func (as *assembly) build(ctx context.Context) error {
	if err := as.cluster(ctx); err != nil {
		return err
	}
	if err := as.plumbing(); err != nil {
		return err
	}
	if as.d.HealthListen != "" {
		ln, err := as.listen(ctx, "health", "health", as.d.HealthListen)
		if err != nil {
			return err
		}
		as.a.Addrs.Health = ln.Addr().String()
		as.serveHTTP("health", ln, health.Handler(as.tracker, as.reg))
	}
	if as.role == api.RoleProvider {
		return as.provider(ctx)
	}
	return as.consumer(ctx)
}

// cluster builds the Kubernetes clients and the Liqo backend, installs the
// CRDs when asked and runs the preflight checks.
func (as *assembly) cluster(ctx context.Context) error {
	d := as.d
	kube, err := kubernetes.NewForConfig(d.Kube)
	if err != nil {
		return fmt.Errorf("building the Kubernetes client: %w", err)
	}
	scheme, err := Scheme()
	if err != nil {
		return err
	}
	cl, err := client.New(d.Kube, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("building the Kubernetes client: %w", err)
	}
	as.kube, as.cl = kube, cl
	if d.InstallCRDs {
		if err := crds.Install(ctx, d.Kube); err != nil {
			return fmt.Errorf("installing the agent CRDs (--install-crds): %w", err)
		}
	}
	// The world first (the consumer's namespace, what each agent reads):
	// a Liqo backend may keep its state in the agent's namespace.
	if err := checkWorld(ctx, cl, as.role, d.Namespace, as.log); err != nil {
		return err
	}
	backend, err := d.Liqo(ctx, liqo.Env{
		Config: d.Kube, Client: cl, LiqoClusterID: cmp.Or(d.LiqoClusterID, d.Bundle.ClusterID), Consumer: as.role == api.RoleConsumer,
		LiqoNamespace: d.LiqoNamespace, Namespace: d.Namespace, InstallCRDs: d.InstallCRDs, Logger: as.log,
	})
	if err != nil {
		return fmt.Errorf("building the Liqo driver: %w", err)
	}
	// Liqo owns the cluster's Liqo id: the agent advertises and heartbeats
	// what Liqo says, and refuses to start without Liqo or on a mismatch.
	id, err := liqo.ResolveClusterID(ctx, cl, backend.LiqoNamespace, d.LiqoClusterID)
	if err != nil {
		return err
	}
	as.d.LiqoClusterID = id
	as.driver = backend.Driver
	if d.WrapDriver != nil {
		as.driver = d.WrapDriver(as.driver)
	}
	if backend.Run != nil {
		as.run("simulated Liqo", backend.Run)
	}
	return nil
}

// plumbing builds what both agents share: metrics, the listener guard,
// the health tracker and the broker client.
func (as *assembly) plumbing() error {
	d := as.d
	as.reg = prometheus.NewRegistry()
	as.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	as.metrics = health.NewMetrics(as.reg)
	// Every listener goes through the guard: floods, EMFILE and silent
	// peers never end the agent (server/netguard).
	as.guard = d.Guard
	if as.guard == nil {
		g, err := netguard.New(netguard.Options{
			Limits: d.Limits, Listeners: listenerCount(as.role, d.HealthListen, d.LocalAPIListen, d.ConsoleListen),
			Registerer: as.reg, Logger: as.log,
		})
		if err != nil {
			return err
		}
		as.guard = g
	}
	staleness := 30 * time.Second
	if as.role == api.RoleProvider {
		staleness = 90 * time.Second
	}
	as.tracker = health.NewTracker(nil, staleness)
	tlsCfg, err := d.Bundle.ClientTLSConfig()
	if err != nil {
		return fmt.Errorf("join bundle of %s: %w", d.Bundle.ClusterID, err)
	}
	urls, err := pki.ParseBrokerURLs(d.BrokerURL)
	if err != nil {
		return fmt.Errorf("broker URLs of %s: %w", d.Bundle.ClusterID, err)
	}
	bc, err := brokerclient.New(brokerclient.Config{
		BaseURL:       urls[0],
		AlternateURLs: urls[1:],
		TLS:           tlsCfg,
		OnResponse:    as.tracker.BrokerReached,
		Observe: func(route string, status int, dur time.Duration) {
			as.metrics.BrokerCalls.WithLabelValues(route, strconv.Itoa(status)).Observe(dur.Seconds())
		},
		Logger: as.log,
	})
	if err != nil {
		return err
	}
	as.broker = bc
	as.a.cleanup = append(as.a.cleanup, bc.Close)
	return nil
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

// listen binds a guarded TCP listener (label names it in metrics, name in
// errors) that the agent closes when it stops or fails to assemble.
func (as *assembly) listen(ctx context.Context, label, name, addr string) (net.Listener, error) {
	ln, err := as.guard.Listen(ctx, label, addr)
	if err != nil {
		return nil, fmt.Errorf("listening for the %s on %s: %w", name, addr, err)
	}
	as.a.cleanup = append(as.a.cleanup, func() { _ = ln.Close() })
	return ln, nil
}

// run adds a loop to the agent.
func (as *assembly) run(name string, fn func(context.Context) error) {
	as.a.tasks = append(as.a.tasks, task{name: name, run: fn})
}
