// Package democmd provides the `demo` subcommand: a whole federation on one
// machine (mocks/demo).
package democmd

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/federation-autoscaler/federation-autoscaler/agent/choice"
	"github.com/federation-autoscaler/federation-autoscaler/cli"
	"github.com/federation-autoscaler/federation-autoscaler/mocks/demo"
)

// NewCommand returns the `demo` subcommand.
func NewCommand() *cobra.Command {
	var (
		o         demo.Options
		providers int
	)
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run a whole federation on this machine: broker, providers, a consumer, the adapter and an autoscaler",
		Long: `Run a whole federation in one process, with no Kubernetes, no Docker and no
network beyond loopback: the broker (mTLS, its database and PKI in --data-dir),
mock-geo and mock-eco, --providers provider clusters (Sydney: cheapest, coal
grid; Montreal: hydro, greenest; Paris: nearest to the consumer; then further
cities), each on its own loopback address with its agent, UDP echo and console,
and the London consumer with its agent, the externalgrpc adapter, a CA-like
autoscaler and its console. The clusters are simulated Kubernetes API servers;
everything else is the product's code. See docs/demo.md.

Open the consumer console, pick a policy, switch the workload on and watch
the dashboard. Ctrl-C stops everything.

The demo logs at warn (the broker's access log at info would bury the
addresses it prints), whatever the --log-level default below says; pass
--log-level info or debug for more.`,
		Example: `  make demo
  federation-autoscaler demo --providers 5 --base-port 18000 --peering-delay 0s --scan-interval 1s`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Every component logs to stderr; at info the broker's access
			// log alone would bury the URLs printed above it. The demo logs
			// warnings unless --log-level says otherwise.
			if f := cmd.Flags().Lookup("log-level"); f != nil && !f.Changed {
				if err := f.Value.Set("warn"); err != nil {
					return err
				}
			}
			log, err := cli.Logger(cmd)
			if err != nil {
				return err
			}
			if providers < 1 || providers > demo.MaxProviders() {
				return fmt.Errorf("--providers %d: use 1 to %d", providers, demo.MaxProviders())
			}
			if err := o.Model.Validate(); err != nil {
				return fmt.Errorf("--model-*: %w", err)
			}
			o.Providers = demo.DefaultProviders(providers)
			o.Logger = log
			out := cmd.OutOrStdout()
			o.Progress = func(s string) { fmt.Fprintf(out, "… %s\n", s) }
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return Run(ctx, o, out)
		},
	}
	f := cmd.Flags()
	f.IntVar(&providers, "providers", 3, fmt.Sprintf("number of provider clusters (1–%d); the first three are Sydney, Montreal and Paris", demo.MaxProviders()))
	f.IntVar(&o.BasePort, "base-port", 18440, "first port: broker API +0, dashboard +1, mock-geo +2, mock-eco +3, consumer console +4, local API +5, adapter +6, provider consoles +10…; 0 picks free ports")
	f.StringVar(&o.DataDir, "data-dir", "demo-data", "folder of the demo's PKI, join bundles, providers' sharing files, the consumer's saved policy, location and workload (consumer/settings.yaml) and console token (created on first run, reused later) and of the broker database (emptied at every start: the simulated clusters do not outlive a run)")
	f.StringVar(&o.ListenHost, "listen-host", "127.0.0.1", "address of the broker, dashboard and consoles (the clusters always use their cities' loopback addresses)")
	f.DurationVar(&o.PeeringDelay, "peering-delay", 2*time.Second, "simulated Liqo: delay before a borrowed virtual node becomes Ready")
	f.DurationVar(&o.ScanInterval, "scan-interval", 2*time.Second, "the autoscaler's scan interval")
	f.BoolVar(&o.Workload, "workload", false, "start with the demo workload switched on (6 pods of 1 CPU / 1 GiB; the consumer console switches it)")
	f.StringVar(&o.Model.URL, "model-url", "", "base URL of a model endpoint for the Choice policy, e.g. http://127.0.0.1:11434 (Ollama); empty: Choice shows its Weighted fallback")
	f.StringVar((*string)(&o.Model.API), "model-api", string(choice.APIOllama), "protocol of --model-url: Ollama or OpenAI (/v1/chat/completions)")
	f.StringVar(&o.Model.Model, "model-name", "llama3.2:3b", "model --model-url serves")
	f.DurationVar(&o.Model.Timeout, "model-timeout", choice.DefaultTimeout, "longest wait for one model answer; a slower answer falls back")
	f.DurationVar(&o.ScaleDownUnneededTime, "scale-down-unneeded-time", 10*time.Second, "a borrowed node idle this long is given back")
	return cmd
}

// Run starts the federation, prints where everything is and runs until ctx
// ends or a component fails.
func Run(ctx context.Context, o demo.Options, out io.Writer) error {
	start := time.Now()
	f, err := demo.Start(ctx, o)
	if err != nil {
		return fmt.Errorf("starting the demo: %w", err)
	}
	fmt.Fprintf(out, "\nFederation Autoscaler demo is running (started in %s).\n\n", time.Since(start).Round(time.Millisecond))
	fmt.Fprintf(out, "  Broker dashboard   %s\n", f.DashboardURL)
	fmt.Fprintf(out, "  Consumer console   %s   (%s)\n", f.Consumer.ConsoleURL, f.Consumer.ID)
	for _, p := range f.Providers {
		fmt.Fprintf(out, "  Provider console   %s   (%s, %s, probe delay %s)\n", p.ConsoleURL, p.Spec.ID, p.Address, p.Spec.ProbeDelay)
	}
	fmt.Fprintf(out, "\n  Console login token: %s\n", f.ConsoleToken)
	fmt.Fprintf(out, "  Broker API (mTLS) %s, mock-geo %s, mock-eco %s, adapter (gRPC) %s\n", f.BrokerURL, f.GeoURL, f.EcoURL, f.Consumer.AdapterAddr)
	fmt.Fprintf(out, "\nPick a policy and switch the workload on in the consumer console. Ctrl-C stops.\n")
	select {
	case <-ctx.Done():
	case <-f.Done():
	}
	fmt.Fprintln(out, "Stopping…")
	return f.Stop()
}
