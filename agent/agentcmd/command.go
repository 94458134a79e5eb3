// Package agentcmd provides the `agent` subcommand and the one assembly of
// an agent (Assemble): the provider or the consumer agent of one member
// cluster, built from a join bundle (mTLS to the broker), a Kubernetes API
// and a Liqo driver. The subcommand turns its flags into Deps (Run); the
// demo and the tests pass their simulated seams to the same Assemble. The
// package links no Liqo implementation but liqoctl: others are registered
// by the binary (NewCommand's drivers).
package agentcmd

import (
	"io"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/federation-autoscaler/federation-autoscaler/agent/choice"
	"github.com/federation-autoscaler/federation-autoscaler/agent/consolidate"
	"github.com/federation-autoscaler/federation-autoscaler/agent/consumer"
	"github.com/federation-autoscaler/federation-autoscaler/agent/liqo"
	"github.com/federation-autoscaler/federation-autoscaler/agent/provider"
	"github.com/federation-autoscaler/federation-autoscaler/cli"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/netguard"
	"github.com/federation-autoscaler/federation-autoscaler/web"
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
	// Model is the consumer's default model endpoint for the Choice
	// policy (--model-api, --model-url, --model-name, --model-timeout);
	// ChoiceAuditSize and ChoiceMaxCandidates bound its selector.
	Model                                choice.Endpoint
	ChoiceAuditSize, ChoiceMaxCandidates int
	// Consolidation tunes a consumer's moves of autoscaled capacity
	// (--consolidation-*).
	Consolidation consumer.Consolidation
	InstallCRDs   bool
	LiqoClusterID string
	// LiqoNamespace is where Liqo is installed (--liqo-namespace).
	LiqoNamespace string
	NodeName      string
	// LiqoDrivers are the --liqo-driver values besides liqoctl that the
	// binary registered (NewCommand's arguments).
	LiqoDrivers []liqo.DriverChoice
	// Places are the cities the consoles' location picker offers (the
	// binary's choice: mock-geo's table).
	Places []api.Topology
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

// NewCommand returns the `agent` subcommand. places are the cities the
// consoles' location picker offers; drivers are the --liqo-driver
// values besides liqoctl, with their flags: the binary registers the Liqo
// implementations it links (main.go registers the simulated one).
func NewCommand(places []api.Topology, drivers ...liqo.DriverChoice) *cobra.Command {
	o := Options{LiqoDrivers: drivers, Places: places}
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
		RunE: cli.WithLogger(func(cmd *cobra.Command, log *slog.Logger) error {
			return Run(cmd.Context(), o, log)
		}),
	}
	f := cmd.Flags()
	f.StringVar(&o.Role, "role", "", "provider or consumer (required; must match the bundle's role when it records one)")
	f.StringVar(&o.Bundle, "bundle", "", "join bundle from 'federation-autoscaler pki join' (required)")
	f.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig of the member cluster (default: in-cluster configuration)")
	f.StringVar(&o.Namespace, "namespace", "federation-autoscaler", "namespace of the agent's objects (ConsumerPolicy, VirtualNodeStates, kubeconfig Secrets)")
	f.StringVar(&o.LiqoDriver, "liqo-driver", "liqoctl", "Liqo driver: "+o.driverNames())
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
	o.Model.API = choice.APIOllama
	f.StringVar((*string)(&o.Model.API), "model-api", string(choice.APIOllama), "consumer: protocol of the Choice policy's model endpoint: Ollama (POST /api/generate) or OpenAI (POST /v1/chat/completions: llama.cpp server, vLLM, LM Studio)")
	f.StringVar(&o.Model.URL, "model-url", "", "consumer: base URL of the Choice policy's model endpoint, e.g. http://127.0.0.1:11434 (empty: Choice uses its Weighted fallback); the ConsumerPolicy's spec.model overrides it")
	f.StringVar(&o.Model.Model, "model-name", "", "consumer: model the Choice policy asks, e.g. llama3.2:3b")
	f.DurationVar(&o.Model.Timeout, "model-timeout", choice.DefaultTimeout, "consumer: longest wait for one model answer (at most 2m); a slower answer falls back")
	f.IntVar(&o.ChoiceAuditSize, "choice-audit-size", choice.DefaultAuditSize, "consumer: Choice decisions kept in the audit log the console shows (1 to 4096)")
	f.IntVar(&o.Consolidation.Budget.Max, "consolidation-max-moves", consolidate.DefaultMaxMoves, "consumer: most moves of autoscaled capacity to a better provider that start per --consolidation-window (0: none); a local cap on top of the consumer's one disruption budget, which the broker enforces (ConsumerPolicy lifecycle.migrations)")
	f.DurationVar(&o.Consolidation.Budget.Window, "consolidation-window", consolidate.DefaultMoveWindow, "consumer: the window of --consolidation-max-moves (the local cap)")
	f.DurationVar(&o.Consolidation.PlaceTimeout, "consolidation-place-timeout", consolidate.DefaultPlaceTimeout, "consumer: how long a move waits for the better node group to grow before it is abandoned")
	f.DurationVar(&o.Consolidation.SurgeTimeout, "consolidation-surge-timeout", consolidate.DefaultSurgeTimeout, "consumer: how long a move waits for the surged workloads' new pods on the better node group to be available before it scales them back and leaves the rest to the Cluster Autoscaler's eviction")
	f.DurationVar(&o.Consolidation.DrainTimeout, "consolidation-drain-timeout", consolidate.DefaultDrainTimeout, "consumer: how long a move keeps the worse node group draining before it ends")
	f.IntVar(&o.ChoiceMaxCandidates, "choice-max-candidates", choice.DefaultMaxCandidates, "consumer: most providers the Choice model is shown, the best by the fallback order (1 to 256)")
	f.BoolVar(&o.InstallCRDs, "install-crds", true, "install or update the agent's CRDs at start")
	f.StringVar(&o.LiqoClusterID, "liqo-cluster-id", "", "the cluster's Liqo cluster id as the operator expects it: the agent reads the id from Liqo and refuses to start when this disagrees (empty: no check; --liqo-driver sim: the id the simulated Liqo is installed with, default the bundle's cluster id)")
	f.StringVar(&o.LiqoNamespace, "liqo-namespace", "", "the namespace Liqo is installed in, where its clusterid ConfigMap names the cluster's Liqo id (default: liqo; --liqo-driver sim: the agent's --namespace)")
	f.StringVar(&o.NodeName, "node-name", os.Getenv("NODE_NAME"), "node whose address locates the cluster (default $NODE_NAME, else the first node)")
	for _, d := range drivers {
		if d.AddFlags != nil {
			d.AddFlags(f)
		}
	}
	o.Limits.AddFlags(f)
	return cmd
}

// driverNames lists the --liqo-driver values for help and errors.
func (o *Options) driverNames() string {
	s := "liqoctl (the real Liqo)"
	for i, d := range o.LiqoDrivers {
		sep := ", "
		if i == len(o.LiqoDrivers)-1 {
			sep = " or "
		}
		s += sep + d.Name + " (" + d.Usage + ")"
	}
	return s
}

// driverChoice is the registered --liqo-driver choice named name.
func (o *Options) driverChoice(name string) (liqo.DriverChoice, bool) {
	for _, d := range o.LiqoDrivers {
		if d.Name == name {
			return d, true
		}
	}
	return liqo.DriverChoice{}, false
}
