package brokercmd

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/federation-autoscaler/federation-autoscaler/cli"
	"github.com/federation-autoscaler/federation-autoscaler/server/store"
	"github.com/federation-autoscaler/federation-autoscaler/server/store/bolt"
	"github.com/federation-autoscaler/federation-autoscaler/server/store/kube"
	"github.com/federation-autoscaler/federation-autoscaler/web"
)

// Store backends (--store).
const (
	StoreBolt       = "bolt"
	StoreKubernetes = "kubernetes"
)

// Defaults of the Kubernetes store's client (--kube-api-qps,
// --kube-api-burst): one commit is one journal write plus one write per
// record, so client-go's default of 5 QPS would cap the broker at a few
// commits per second.
const (
	DefaultKubeQPS   = 200
	DefaultKubeBurst = 400
)

// serviceAccountNamespace holds the pod's namespace when the broker runs
// in a cluster.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// DefaultNamespace is the Kubernetes store's namespace outside a pod.
const DefaultNamespace = "federation-autoscaler"

// StoreOptions choose and configure the store (--store and the Kubernetes
// store's flags).
type StoreOptions struct {
	// Backend is StoreBolt or StoreKubernetes; empty means StoreBolt (an
	// Options literal of a library caller, like the demo, needs no store).
	Backend string
	// Kubeconfig is the Kubernetes store's kubeconfig (empty: in-cluster).
	Kubeconfig string
	// Namespace holds the Kubernetes store's objects (empty: the pod's
	// namespace in a cluster, else DefaultNamespace).
	Namespace string
	// QPS and Burst limit the Kubernetes store's client.
	QPS   float64
	Burst int
}

func (so *StoreOptions) addFlags(f *pflag.FlagSet) {
	f.StringVar(&so.Backend, "store", StoreBolt, "where the broker keeps its state: bolt (a file in --data-dir; one replica) or kubernetes (custom resources and Secrets in --namespace of a Kubernetes API server; see docs/operations.md)")
	f.StringVar(&so.Kubeconfig, "kubeconfig", "", "with --store kubernetes: kubeconfig of the cluster holding the state (default: in-cluster configuration)")
	f.StringVar(&so.Namespace, "namespace", "", "with --store kubernetes: namespace of the state's objects (default: the pod's namespace in a cluster, else "+DefaultNamespace+")")
	f.Float64Var(&so.QPS, "kube-api-qps", DefaultKubeQPS, "with --store kubernetes: sustained requests per second to the API server")
	f.IntVar(&so.Burst, "kube-api-burst", DefaultKubeBurst, "with --store kubernetes: request burst to the API server")
}

// errors checks the store flags; dataDir is --data-dir.
func (so *StoreOptions) errors(dataDir string) []error {
	var errs []error
	switch so.Backend {
	case StoreBolt, "":
		if dataDir == "" {
			errs = append(errs, errors.New("--data-dir is required: the directory that holds the broker's database"))
		}
	case StoreKubernetes:
		if !(so.QPS > 0) || so.Burst < 1 {
			errs = append(errs, fmt.Errorf("--kube-api-qps must be > 0 and --kube-api-burst >= 1, got %v and %d", so.QPS, so.Burst))
		}
	default:
		errs = append(errs, fmt.Errorf("--store %q: want %s or %s", so.Backend, StoreBolt, StoreKubernetes))
	}
	return errs
}

// namespace is the Kubernetes store's namespace.
func (so *StoreOptions) namespace() string {
	if so.Namespace != "" {
		return so.Namespace
	}
	if b, err := os.ReadFile(serviceAccountNamespace); err == nil && strings.TrimSpace(string(b)) != "" {
		return strings.TrimSpace(string(b))
	}
	return DefaultNamespace
}

// kubeConfig is the Kubernetes store's client configuration.
func (so *StoreOptions) kubeConfig() (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", so.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("--store kubernetes: reading the Kubernetes configuration (--kubeconfig %q, else in-cluster): %w", so.Kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = float32(so.QPS), so.Burst
	cfg.UserAgent = "federation-autoscaler-broker/" + cli.Version
	return cfg, nil
}

// openStore opens the chosen store. The bbolt store also keeps the
// dashboard's history; with the Kubernetes store it stays in memory (hist
// is nil).
func openStore(o Options, log *slog.Logger) (st store.Store, hist web.HistoryStore, err error) {
	if o.Leader.store != nil {
		return o.Leader.store, nil, nil // opened by the standby, kept warm
	}
	if o.Store.Backend == StoreKubernetes {
		ks, err := openKube(o, log)
		if err != nil {
			return nil, nil, err
		}
		return ks, nil, nil
	}
	bs, err := openBolt(o, log)
	if err != nil {
		return nil, nil, err
	}
	return bs, bs, nil
}

// openKube opens the Kubernetes store (--store kubernetes).
func openKube(o Options, log *slog.Logger) (*kube.Store, error) {
	cfg, err := o.Store.kubeConfig()
	if err != nil {
		return nil, err
	}
	ks, err := kube.Open(cfg, kube.Options{Namespace: o.Store.namespace(), Logger: log})
	if err != nil {
		return nil, fmt.Errorf("--store kubernetes: %w", err)
	}
	log.Info("State in the Kubernetes API server", "host", cfg.Host, "namespace", o.Store.namespace())
	return ks, nil
}

// openBolt opens the bbolt store in --data-dir (a damaged one is refused
// with what to do, or moved aside with --reset-damaged-store).
func openBolt(o Options, log *slog.Logger) (*bolt.Store, error) {
	st, err := bolt.Open(o.DataDir, bolt.Options{
		ResetDamaged: o.ResetDamagedStore,
		OnReset: func(movedTo string, cause *bolt.DamagedError) {
			log.Warn("The store was damaged: moved it aside and starting with an empty one (--reset-damaged-store); "+
				"agents re-advertise and heartbeat within seconds, reservations and credentials it held are gone",
				"movedTo", movedTo, "damage", cause.Reason)
		},
	})
	var damaged *bolt.DamagedError
	if errors.As(err, &damaged) {
		return nil, fmt.Errorf("--data-dir: %w. Nothing was changed. Restore %s from a backup (see docs/operations.md, "+
			"\"Data directory and backup\"), or start once with --reset-damaged-store to move it aside and start with an empty store", err, damaged.Path)
	}
	if err != nil {
		return nil, fmt.Errorf("--data-dir: %w", err)
	}
	return st, nil
}
