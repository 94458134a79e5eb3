package liqo

import (
	"cmp"
	"context"
	"log/slog"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Env is the member cluster a Backend is built for.
type Env struct {
	// Config and Client reach the cluster's Kubernetes API (Client's
	// scheme has the Liqo kinds and core/v1).
	Config *rest.Config
	Client client.Client
	// LiqoClusterID is the cluster's expected Liqo cluster id: the
	// operator's --liqo-cluster-id, else the bundle's cluster id. Liqo owns
	// the id (the agent reads it back with ResolveClusterID); an
	// implementation that installs a Liqo of its own installs it with this
	// one.
	LiqoClusterID string
	// LiqoNamespace is the agent's --liqo-namespace ("": the
	// implementation's default); Namespace is the agent's own namespace.
	LiqoNamespace, Namespace string
	// Consumer is true on a consumer's cluster: the side that peers and
	// grows virtual nodes.
	Consumer bool
	// InstallCRDs is the agent's --install-crds: a backend that needs CRDs
	// of its own installs them when it is true.
	InstallCRDs bool
	Logger      *slog.Logger
}

// Backend is a Liqo implementation wired to one cluster: the Driver the
// agent calls and, for an implementation that runs beside the agent
// rather than in the cluster, its loop (nil when there is none).
type Backend struct {
	Driver Driver
	Run    func(context.Context) error
	// LiqoNamespace is where this Liqo keeps its clusterid ConfigMap: the
	// agent reads the cluster's Liqo id there (ResolveClusterID).
	LiqoNamespace string
}

// Factory builds a cluster's Backend. It may touch the cluster (to install
// CRDs) but starts nothing: the agent runs Backend.Run.
type Factory func(ctx context.Context, env Env) (Backend, error)

// LiqoctlFactory builds the liqoctl driver: opts with the cluster's client
// (for Unpeer's ForeignCluster clean-up) and logger filled in.
func LiqoctlFactory(opts LiqoctlOptions) Factory {
	return func(_ context.Context, env Env) (Backend, error) {
		o := opts
		o.Client, o.Logger = env.Client, env.Logger
		return Backend{Driver: NewLiqoctl(o), LiqoNamespace: cmp.Or(env.LiqoNamespace, DefaultNamespace)}, nil
	}
}

// DriverChoice is one more value of the agent's --liqo-driver flag besides
// the built-in liqoctl: the binary that links an implementation registers
// it (the agent's own packages never name one).
type DriverChoice struct {
	// Name is the flag value; Usage says in a few words what it is.
	Name, Usage string
	// AddFlags registers the implementation's own flags (nil: none).
	AddFlags func(*pflag.FlagSet)
	// Validate checks those flags before the agent touches anything; it
	// runs only when this choice is selected (nil: nothing to check).
	Validate func() error
	// Factory builds the implementation for the agent's cluster.
	Factory Factory
}
