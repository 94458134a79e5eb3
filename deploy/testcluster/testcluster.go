// Package testcluster starts a real Kubernetes control plane (kube-apiserver
// and etcd, no scheduler, no controllers, no kubelets) for integration
// tests. The binaries are built from Go modules by build.sh into a cache
// folder outside the repository (FA_KUBE_ASSETS, default
// $HOME/.cache/federation-autoscaler/kube-v1.35.4) once per machine; Start
// runs that build under an exclusive file lock, so test packages running in
// parallel never build twice, then starts the control plane through
// controller-runtime's envtest with this project's CRDs and the simulated
// Liqo CRDs installed.
//
// Set FA_SKIP_KUBE_TESTS=1 to skip every test that needs it (for a machine
// that cannot build or run it); otherwise a failure to build or start fails
// the test loudly. StartSimulated gives the same Env on the project's
// simulated API server (mocks/kubeapi) instead.
package testcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	authv1beta1 "github.com/liqotech/liqo/apis/authentication/v1beta1"
	liqocorev1beta1 "github.com/liqotech/liqo/apis/core/v1beta1"
	offloadingv1beta1 "github.com/liqotech/liqo/apis/offloading/v1beta1"

	fav1alpha1 "github.com/federation-autoscaler/federation-autoscaler/agent/apis/v1alpha1"
	"github.com/federation-autoscaler/federation-autoscaler/deploy/crds"
	"github.com/federation-autoscaler/federation-autoscaler/mocks/kubeapi"
	liqocrds "github.com/federation-autoscaler/federation-autoscaler/mocks/liqo/crds"
)

// KubeVersion is the Kubernetes version of the control plane.
const KubeVersion = "v1.35.4"

// Environment variables read by Start.
const (
	EnvAssets = "FA_KUBE_ASSETS"     // folder holding kube-apiserver and etcd
	EnvSkip   = "FA_SKIP_KUBE_TESTS" // "1" skips the tests that need a control plane
)

// Env is a running control plane. Start stops it in the test's cleanup.
type Env struct {
	// Config authenticates as an administrator (group system:masters).
	Config *rest.Config
	// Kubeconfig is the path of a kubeconfig file for the same administrator
	// (for programs started by the test, e.g. an agent with --kubeconfig).
	Kubeconfig string
	// Client is a controller-runtime client built with Scheme().
	Client client.Client

	env *envtest.Environment
}

// Scheme returns a new scheme with the built-in kinds, this project's CRD
// kinds and the Liqo kinds the agents and the simulated Liqo use.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme,
		apiextensionsv1.AddToScheme,
		fav1alpha1.AddToScheme,
		authv1beta1.AddToScheme,
		liqocorev1beta1.AddToScheme,
		offloadingv1beta1.AddToScheme,
	} {
		if err := add(s); err != nil {
			panic(fmt.Sprintf("testcluster: building the scheme: %v", err)) // static registrations only
		}
	}
	return s
}

// AssetsDir is the folder holding the control-plane binaries: $FA_KUBE_ASSETS
// or $HOME/.cache/federation-autoscaler/kube-<KubeVersion>.
func AssetsDir() (string, error) {
	if d := os.Getenv(EnvAssets); d != "" {
		return d, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no %s and no home folder for the default cache: %w", EnvAssets, err)
	}
	return filepath.Join(home, ".cache", "federation-autoscaler", "kube-"+KubeVersion), nil
}

// SkipIfDisabled skips the test when FA_SKIP_KUBE_TESTS=1 (Start does; a
// test that prepares something slow before Start calls it first).
func SkipIfDisabled(tb testing.TB) {
	tb.Helper()
	if os.Getenv(EnvSkip) == "1" {
		tb.Skipf("%s=1: skipping a test that needs a real kube-apiserver + etcd", EnvSkip)
	}
}

// Start builds the control plane if needed, starts kube-apiserver and etcd
// with this project's CRDs and the simulated Liqo CRDs installed, and stops
// them when the test ends. The API server runs with the ServiceAccount and
// TaintNodesByCondition admission plugins disabled, so Pods need no
// ServiceAccount and Nodes created through the API carry no not-ready taint.
// It skips the test when FA_SKIP_KUBE_TESTS=1 and fails it on any error.
func Start(tb testing.TB) *Env {
	tb.Helper()
	SkipIfDisabled(tb)
	assets, err := EnsureBinaries()
	if err != nil {
		tb.Fatalf("testcluster: %v", err)
	}
	defs, err := allCRDs()
	if err != nil {
		tb.Fatalf("testcluster: %v", err)
	}
	// The CRDs are installed below, not by env.Start: envtest waits a fixed
	// 5 s for the default namespace and 10 s for CRDs, and a starved
	// machine can take longer for either while nothing is wrong.
	env := &envtest.Environment{
		BinaryAssetsDirectory:    assets,
		ControlPlaneStartTimeout: startTimeout,
		ControlPlaneStopTimeout:  30 * time.Second,
	}
	env.ControlPlane.GetAPIServer().Configure().
		Set("disable-admission-plugins", "ServiceAccount", "TaintNodesByCondition")
	started := time.Now()
	_, err = env.Start()
	tb.Cleanup(func() {
		if err := env.Stop(); err != nil {
			tb.Errorf("testcluster: stopping the control plane: %v", err)
		}
	})
	if err != nil && !(env.Config != nil && strings.Contains(err.Error(), "default namespace didn't register")) {
		tb.Fatalf("testcluster: starting kube-apiserver + etcd from %s: %v", assets, err)
	}
	if err := waitForDefaultNamespace(env.Config, startTimeout); err != nil {
		tb.Fatalf("testcluster: kube-apiserver at %s is up but %v", env.Config.Host, err)
	}
	if _, err := envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{CRDs: defs, MaxTime: startTimeout}); err != nil {
		tb.Fatalf("testcluster: installing the CRDs: %v", err)
	}
	admin, err := env.AddUser(envtest.User{Name: "fa-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		tb.Fatalf("testcluster: adding the admin user: %v", err)
	}
	kc, err := admin.KubeConfig()
	if err != nil {
		tb.Fatalf("testcluster: rendering the admin kubeconfig: %v", err)
	}
	kcPath := filepath.Join(tb.TempDir(), "kubeconfig")
	if err := os.WriteFile(kcPath, kc, 0o600); err != nil {
		tb.Fatalf("testcluster: writing the kubeconfig: %v", err)
	}
	cfg := admin.Config()
	cfg.QPS, cfg.Burst = 200, 400 // tests create objects in bursts
	c, err := client.New(cfg, client.Options{Scheme: Scheme()})
	if err != nil {
		tb.Fatalf("testcluster: building the client: %v", err)
	}
	tb.Logf("testcluster: kube-apiserver %s + etcd up in %s at %s", KubeVersion, time.Since(started).Round(time.Millisecond), cfg.Host)
	return &Env{Config: cfg, Kubeconfig: kcPath, Client: c, env: env}
}

// startTimeout bounds each step of starting the real control plane: the
// binaries, the default namespace and the CRDs (a starved 2-core machine
// has needed more than envtest's 5 s for the namespace). It is a bound on a
// stuck start, not a speed check: envtest kills the binaries and starts
// them again from scratch after an attempt that passed it, so a bound below
// what a loaded machine needs (1 min 59 s seen at load 45) fails every
// retry the same way.
const startTimeout = 3 * time.Minute

// waitForDefaultNamespace polls until the API server's system namespaces
// controller has created "default", as envtest does but with a deadline
// that a loaded machine meets.
func waitForDefaultNamespace(cfg *rest.Config, timeout time.Duration) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building a client: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err = wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("the default namespace did not appear within %s: %w", timeout, err)
	}
	return nil
}

// StartSimulated starts the project's simulated API server (mocks/kubeapi)
// instead, with the same CRDs, and stops it when the test ends: for tests
// that need an API but not the real one's behaviour (or a machine that
// cannot build it). Its Env has the same fields.
func StartSimulated(tb testing.TB) *Env {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	srv := kubeapi.New(kubeapi.Options{Name: "testcluster"})
	cfg, err := srv.Start(ctx, "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("testcluster: starting the simulated API server: %v", err)
	}
	tb.Cleanup(func() { _ = srv.Close() })
	if err := crds.Install(ctx, cfg); err != nil {
		tb.Fatalf("testcluster: installing the CRDs: %v", err)
	}
	if err := liqocrds.Install(ctx, cfg); err != nil {
		tb.Fatalf("testcluster: installing the Liqo CRDs: %v", err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["sim"] = &clientcmdapi.Cluster{Server: cfg.Host}
	kc.AuthInfos["sim"] = &clientcmdapi.AuthInfo{}
	kc.Contexts["sim"] = &clientcmdapi.Context{Cluster: "sim", AuthInfo: "sim"}
	kc.CurrentContext = "sim"
	path := filepath.Join(tb.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		tb.Fatalf("testcluster: writing the kubeconfig: %v", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: Scheme()})
	if err != nil {
		tb.Fatalf("testcluster: building the client: %v", err)
	}
	tb.Logf("testcluster: simulated API server (mocks/kubeapi) at %s", cfg.Host)
	return &Env{Config: cfg, Kubeconfig: path, Client: c}
}

func allCRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	ours, err := crds.All()
	if err != nil {
		return nil, err
	}
	liqo, err := liqocrds.All()
	if err != nil {
		return nil, err
	}
	return append(ours, liqo...), nil
}

// EnsureBinaries makes sure kube-apiserver and etcd are in AssetsDir(),
// running build.sh under an exclusive lock on <AssetsDir>.lock (a cold build
// takes 6–11 min on 2 cores), and returns the folder.
func EnsureBinaries() (string, error) {
	assets, err := AssetsDir()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(assets), 0o755); err != nil {
		return "", fmt.Errorf("creating the cache folder: %w", err)
	}
	lock, err := os.OpenFile(assets+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", fmt.Errorf("opening the build lock: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("locking %s: %w", lock.Name(), err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) //nolint:errcheck // released on close anyway

	_, self, _, ok := goruntime.Caller(0)
	if !ok {
		return "", fmt.Errorf("cannot locate build.sh: no caller information")
	}
	script := filepath.Join(filepath.Dir(self), "build.sh")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", script)
	cmd.Env = append(os.Environ(), EnvAssets+"="+assets)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building the control plane with %s (needs `go` on PATH, ~2 GB memory, 6–11 min cold; set %s=1 to skip these tests): %w\n%s",
			script, EnvSkip, err, out.String())
	}
	return assets, nil
}

// EnsureNamespace creates the namespace if it does not exist.
func (e *Env) EnsureNamespace(tb testing.TB, name string) {
	tb.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := e.Client.Create(context.Background(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		tb.Fatalf("testcluster: creating namespace %s: %v", name, err)
	}
}

// EnsureServiceAccount creates the namespace and the ServiceAccount in it if
// they do not exist (no service-account controller runs here; the
// "default" account must be created by hand when a test needs it).
func (e *Env) EnsureServiceAccount(tb testing.TB, namespace, name string) {
	tb.Helper()
	e.EnsureNamespace(tb, namespace)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if err := e.Client.Create(context.Background(), sa); err != nil && !apierrors.IsAlreadyExists(err) {
		tb.Fatalf("testcluster: creating service account %s/%s: %v", namespace, name, err)
	}
}

// AsServiceAccount returns a configuration, a client and a kubeconfig file
// (for programs such as kubectl or liqoctl) that act as the ServiceAccount
// namespace/name: the admin impersonates it with its groups, so every request
// is authorised by RBAC exactly as the account's own would be.
func (e *Env) AsServiceAccount(tb testing.TB, namespace, name string) (*rest.Config, client.Client, string) {
	tb.Helper()
	user := "system:serviceaccount:" + namespace + ":" + name
	groups := []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}
	cfg := rest.CopyConfig(e.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	c, err := client.New(cfg, client.Options{Scheme: Scheme()})
	if err != nil {
		tb.Fatalf("testcluster: client as %s: %v", user, err)
	}
	kc, err := clientcmd.LoadFromFile(e.Kubeconfig)
	if err != nil {
		tb.Fatalf("testcluster: reading the admin kubeconfig: %v", err)
	}
	for _, ai := range kc.AuthInfos {
		ai.Impersonate, ai.ImpersonateGroups = user, groups
	}
	path := filepath.Join(tb.TempDir(), namespace+"-"+name+".kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		tb.Fatalf("testcluster: writing the kubeconfig of %s: %v", user, err)
	}
	return cfg, c, path
}

// ApplyFile creates, as the admin, every object of a multi-document YAML
// file (such as the RBAC manifests in deploy/rbac).
func (e *Env) ApplyFile(tb testing.TB, file string) {
	tb.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		tb.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return
		} else if err != nil {
			tb.Fatalf("testcluster: %s: %v", file, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		if err := e.Client.Create(context.Background(), u); err != nil {
			tb.Fatalf("testcluster: %s: creating %s %s: %v", file, u.GetKind(), u.GetName(), err)
		}
	}
}
