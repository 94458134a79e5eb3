package liqosim

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/federation-autoscaler/federation-autoscaler/agent/liqo"
	liqocrds "github.com/federation-autoscaler/federation-autoscaler/mocks/liqo/crds"
)

// DefaultNodeDelay is the --sim-peering-delay default: the simulated
// virtual kubelet's start-up time.
const DefaultNodeDelay = 500 * time.Millisecond

// Factory builds the simulated Liqo of one agent's cluster: the Driver on
// both sides and, on a consumer's cluster, the Controller that grows the
// virtual nodes after nodeDelay. With env.InstallCRDs it installs Liqo's
// CRDs first (a cluster without Liqo has none).
func Factory(nodeDelay time.Duration) liqo.Factory {
	return func(ctx context.Context, env liqo.Env) (liqo.Backend, error) {
		if env.InstallCRDs {
			if err := liqocrds.Install(ctx, env.Config); err != nil {
				return liqo.Backend{}, fmt.Errorf("installing the Liqo CRDs for the simulated Liqo: %w", err)
			}
		}
		// Installed as Liqo is: its clusterid ConfigMap names the id unless
		// an earlier install wrote one; it lives in the agent's namespace
		// unless --liqo-namespace says otherwise. The id is then read back
		// as from the real Liqo.
		ns := cmp.Or(env.LiqoNamespace, env.Namespace)
		if err := InstallClusterID(ctx, env.Client, ns, env.LiqoClusterID); err != nil {
			return liqo.Backend{}, err
		}
		id, err := liqo.LocalClusterID(ctx, env.Client, ns)
		if err != nil {
			return liqo.Backend{}, err
		}
		d := NewDriver(env.Client, DriverOptions{LocalClusterID: id, Logger: env.Logger})
		if !env.Consumer {
			return liqo.Backend{Driver: d, LiqoNamespace: ns}, nil // only a consumer's cluster grows virtual nodes
		}
		ctrl, err := NewController(env.Config, ControllerOptions{NodeDelay: nodeDelay, Logger: env.Logger, Name: "liqo-sim-" + id})
		if err != nil {
			return liqo.Backend{}, err
		}
		return liqo.Backend{Driver: d, Run: ctrl.Run, LiqoNamespace: ns}, nil
	}
}

// DriverChoice is the simulated Liqo as the agent's --liqo-driver sim, with
// its --sim-peering-delay flag. The binary registers it (main.go); the
// agent's own packages do not link the simulation.
func DriverChoice() liqo.DriverChoice {
	delay := DefaultNodeDelay
	return liqo.DriverChoice{
		Name:  "sim",
		Usage: "simulated Liqo on the same API",
		AddFlags: func(f *pflag.FlagSet) {
			f.DurationVar(&delay, "sim-peering-delay", DefaultNodeDelay, "--liqo-driver sim: delay before the simulated virtual node appears")
		},
		Validate: func() error {
			if delay < 0 {
				return fmt.Errorf("--sim-peering-delay must not be negative, got %s", delay)
			}
			return nil
		},
		Factory: func(ctx context.Context, env liqo.Env) (liqo.Backend, error) { return Factory(delay)(ctx, env) },
	}
}
