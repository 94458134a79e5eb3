package agentcmd

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/tools/clientcmd"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/federation-autoscaler/federation-autoscaler/agent/liqo"
	"github.com/federation-autoscaler/federation-autoscaler/agent/location"
	"github.com/federation-autoscaler/federation-autoscaler/agent/provider"
	"github.com/federation-autoscaler/federation-autoscaler/cli"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/pki"
)

// Run runs the agent until ctx ends. In order, so that a mistake is
// reported before anything is changed: every flag is validated
// (Options.Validate), then the local inputs are read into Deps (the bundle,
// the provider's sharing files, liqoctl, the console token), then Assemble
// touches the cluster (CRDs, the consumer's namespace, what each agent
// reads: package preflight), and only then do the listeners and loops
// start.
func Run(ctx context.Context, o Options, log *slog.Logger) error {
	if err := o.Validate(); err != nil {
		return err
	}
	role := api.Role(o.Role)
	d, err := o.deps(role, log)
	if err != nil {
		return err
	}
	// controller-runtime (the client, a Liqo backend's controller) logs
	// through its global logr sink; route it to slog.
	crlog.SetLogger(logr.FromSlogHandler(log.Handler()))
	agent, err := Assemble(ctx, role, d)
	if err != nil {
		return err
	}
	a := agent.Addrs
	log.Info("Agent started", "cluster", agent.ClusterID, "role", role, "broker", agent.BrokerURL, "health", a.Health, "localAPI", a.LocalAPI, "probe", a.Probe, "console", a.Console)
	if o.Ready != nil {
		o.Ready(a)
	}
	if err := agent.Run(ctx); err != nil {
		return err
	}
	log.Info("Agent stopping")
	return nil
}

// LoadBundle reads a join bundle and checks that it was issued for role
// (a bundle that records no role fits either).
func LoadBundle(path string, role api.Role) (*pki.Bundle, error) {
	b, err := pki.LoadBundle(path)
	if err != nil {
		return nil, fmt.Errorf("loading --bundle %s: %w", path, err)
	}
	if b.Role != "" && b.Role != role {
		return nil, fmt.Errorf("--role %s, but the bundle %s was issued for a %s", role, path, b.Role)
	}
	if _, err := b.ClientTLSConfig(); err != nil {
		return nil, fmt.Errorf("bundle %s: %w", path, err)
	}
	return b, nil
}

// deps reads the local inputs the flags name into Deps; it touches no
// cluster and no network.
func (o *Options) deps(role api.Role, log *slog.Logger) (Deps, error) {
	b, err := LoadBundle(o.Bundle, role)
	if err != nil {
		return Deps{}, err
	}
	d := Deps{
		Bundle: b, LiqoClusterID: o.LiqoClusterID, LiqoNamespace: o.LiqoNamespace, Namespace: o.Namespace, InstallCRDs: o.InstallCRDs,
		NodeName: o.NodeName, AdvertisedIP: o.AdvertisedIP,
		HealthListen: o.HealthListen, ConsoleListen: o.ConsoleListen, Limits: o.Limits,
		Console:    ConsoleDeps{Currency: o.Currency, Places: o.Places},
		WrapDriver: o.WrapDriver, TuneProvider: o.TuneProvider, TuneConsumer: o.TuneConsumer, Logger: log,
	}
	if role == api.RoleProvider {
		d.ProbeListen = o.ProbeListen
	} else {
		d.LocalAPIListen, d.LocalAPIHosts = o.LocalAPIListen, o.LocalAPIAllowedHosts
		d.Model, d.ChoiceAuditSize, d.ChoiceMaxCandidates = o.Model, o.ChoiceAuditSize, o.ChoiceMaxCandidates
		d.Consolidation = o.Consolidation
	}
	if d.Liqo, err = o.liqoFactory(); err != nil {
		return Deps{}, err
	}
	if role == api.RoleProvider {
		if d.Sharing, err = provider.NewStore(provider.Sources{SharingFile: o.SharingFile, PriceFile: o.PriceFile, CapacityFile: o.CapacityFile, RenewableFile: o.RenewableFile}, log); err != nil {
			return Deps{}, err
		}
	}
	if d.Kube, err = clientcmd.BuildConfigFromFlags("", o.Kubeconfig); err != nil {
		return Deps{}, fmt.Errorf("reading the Kubernetes configuration (--kubeconfig %q, else in-cluster): %w", o.Kubeconfig, err)
	}
	d.Kube.UserAgent = "federation-autoscaler-agent/" + cli.Version
	if err := o.locationClients(&d); err != nil {
		return Deps{}, err
	}
	if o.ConsoleListen != "" {
		stderr := o.Stderr
		if stderr == nil {
			stderr = os.Stderr
		}
		if d.Console.Token, err = consoleVerifier(*o, role, stderr); err != nil {
			return Deps{}, err
		}
	}
	return d, nil
}

// liqoFactory is the Liqo implementation --liqo-driver selects; liqoctl
// must be installed.
func (o *Options) liqoFactory() (liqo.Factory, error) {
	if o.LiqoDriver == "liqoctl" {
		if _, err := exec.LookPath(o.LiqoctlPath); err != nil {
			return nil, fmt.Errorf("--liqo-driver liqoctl: %w: install liqoctl (Liqo v1.1.2), point --liqoctl-path at it, or pick another --liqo-driver: %s", err, o.driverNames())
		}
		return liqo.LiqoctlFactory(liqo.LiqoctlOptions{Path: o.LiqoctlPath, Kubeconfig: o.Kubeconfig}), nil
	}
	c, ok := o.driverChoice(o.LiqoDriver)
	if !ok {
		return nil, fmt.Errorf("--liqo-driver %q: use %s", o.LiqoDriver, o.driverNames())
	}
	return c.Factory, nil
}

// locationClients builds the geolocation and carbon clients of
// --mock-geo-url and --mock-eco-url.
func (o *Options) locationClients(d *Deps) error {
	if o.MockGeoURL != "" {
		geo, err := location.NewGeoClient(o.MockGeoURL, nil)
		if err != nil {
			return fmt.Errorf("--mock-geo-url: %w", err)
		}
		d.Geo = geo
	}
	if o.MockEcoURL != "" {
		eco, err := location.NewEcoClient(o.MockEcoURL, nil, time.Now)
		if err != nil {
			return fmt.Errorf("--mock-eco-url: %w", err)
		}
		d.Carbon = eco
	}
	return nil
}
