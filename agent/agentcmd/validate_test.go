package agentcmd

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/federation-autoscaler/federation-autoscaler/agent/choice"
	"github.com/federation-autoscaler/federation-autoscaler/agent/liqo"
	liqosim "github.com/federation-autoscaler/federation-autoscaler/mocks/liqo"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/pki"
)

// validOptions are what the flags' defaults give plus a role and a bundle.
func validOptions(role api.Role) Options {
	return Options{Role: string(role), Bundle: "b.tar.gz", Namespace: "federation-autoscaler", LiqoDriver: "liqoctl", LiqoctlPath: "liqoctl",
		LocalAPIListen: "127.0.0.1:9090", HealthListen: ":8082", LiqoDrivers: []liqo.DriverChoice{simDriver()}}
}

// simDriver is the simulated Liqo as the binary registers it, its flags
// parsed from args.
func simDriver(args ...string) liqo.DriverChoice {
	c := liqosim.DriverChoice()
	fs := pflag.NewFlagSet("agent", pflag.PanicOnError)
	c.AddFlags(fs)
	_ = fs.Parse(args) // PanicOnError
	return c
}

func TestValidateRefusesEveryBadFlag(t *testing.T) {
	tests := []struct {
		name   string
		role   api.Role
		change func(*Options)
		want   string
	}{
		{"defaults", api.RoleConsumer, func(*Options) {}, ""},
		{"defaults provider", api.RoleProvider, func(o *Options) { o.SharingFile, o.ProbeListen = "s.yaml", ":5000" }, ""},
		{"role", api.RoleConsumer, func(o *Options) { o.Role = "borrower" }, `--role "borrower": use provider or consumer`},
		{"bundle", api.RoleConsumer, func(o *Options) { o.Bundle = "" }, "--bundle is required"},
		{"driver", api.RoleConsumer, func(o *Options) { o.LiqoDriver = "magic" }, `--liqo-driver "magic": use liqoctl`},
		{"liqoctl path", api.RoleConsumer, func(o *Options) { o.LiqoctlPath = "" }, "--liqoctl-path is empty"},
		{"namespace", api.RoleConsumer, func(o *Options) { o.Namespace = "Fed_Auto" }, `--namespace "Fed_Auto" is not a namespace name`},
		{"liqo cluster id", api.RoleConsumer, func(o *Options) { o.LiqoClusterID = "../x" }, "--liqo-cluster-id"},
		{"node name", api.RoleProvider, func(o *Options) { o.NodeName = "Node 1" }, `--node-name "Node 1"`},
		{"advertised ip", api.RoleProvider, func(o *Options) { o.AdvertisedIP = "10.0.0" }, `--advertised-ip "10.0.0" is not an IP address`},
		{"sim delay", api.RoleConsumer, func(o *Options) {
			o.LiqoDriver, o.LiqoDrivers = "sim", []liqo.DriverChoice{simDriver("--sim-peering-delay=-1s")}
		}, "--sim-peering-delay must not be negative"},
		{"local api listen", api.RoleConsumer, func(o *Options) { o.LocalAPIListen = "9090" }, `--local-api-listen "9090": want host:port`},
		{"health port", api.RoleConsumer, func(o *Options) { o.HealthListen = ":http-alt" }, `--health-listen ":http-alt": port "http-alt"`},
		{"console port", api.RoleConsumer, func(o *Options) { o.ConsoleListen = ":70000" }, `--console-listen ":70000": port "70000"`},
		{"geo url", api.RoleConsumer, func(o *Options) { o.MockGeoURL = "ftp://geo" }, "--mock-geo-url"},
		{"eco url", api.RoleProvider, func(o *Options) { o.MockEcoURL = "::" }, "--mock-eco-url"},
		{"provider flag on a consumer", api.RoleConsumer, func(o *Options) { o.SharingFile = "s.yaml" }, "--sharing-file is a provider flag"},
		{"probe on a consumer", api.RoleConsumer, func(o *Options) { o.ProbeListen = ":5000" }, "--probe-listen is a provider flag"},
		{"consolidation max moves", api.RoleConsumer, func(o *Options) { o.Consolidation.Budget.Max = -1 }, "--consolidation-max-moves -1"},
		{"consolidation window", api.RoleConsumer, func(o *Options) { o.Consolidation.Budget.Window = 8 * 24 * time.Hour }, "--consolidation-window 192h0m0s"},
		{"consolidation place timeout", api.RoleConsumer, func(o *Options) { o.Consolidation.PlaceTimeout = -time.Second }, "--consolidation-place-timeout -1s"},
		{"allowed hosts", api.RoleConsumer, func(o *Options) { o.LocalAPIAllowedHosts = []string{"fa-agent.fa.svc", "10.0.0.5", "Agent.Example."} }, ""},
		{"bad allowed host", api.RoleConsumer, func(o *Options) { o.LocalAPIAllowedHosts = []string{"evil host:80"} }, `--local-api-allowed-hosts: "evil host:80"`},
		{"consumer flag on a provider", api.RoleProvider, func(o *Options) { o.LocalAPIAllowedHosts = []string{"x"} }, "--local-api-allowed-hosts is a consumer flag"},
		{"model endpoint", api.RoleConsumer, func(o *Options) {
			o.Model = choice.Endpoint{API: choice.APIOpenAI, URL: "http://127.0.0.1:8080", Model: "qwen2.5:3b", Timeout: 30 * time.Second}
		}, ""},
		{"model url", api.RoleConsumer, func(o *Options) { o.Model = choice.Endpoint{API: choice.APIOllama, URL: "127.0.0.1:11434", Model: "m"} }, "--model-*: model URL \"127.0.0.1:11434\""},
		{"model api", api.RoleConsumer, func(o *Options) { o.Model = choice.Endpoint{API: "gpt", URL: "http://h", Model: "m"} }, `--model-*: model API "gpt"`},
		{"model timeout", api.RoleConsumer, func(o *Options) {
			o.Model = choice.Endpoint{API: choice.APIOllama, URL: "http://h", Model: "m", Timeout: time.Hour}
		}, "--model-*: model timeout 1h0m0s"},
		{"audit size", api.RoleConsumer, func(o *Options) { o.ChoiceAuditSize = 5000 }, "--choice-audit-size 5000: use 1 to 4096"},
		{"candidates", api.RoleConsumer, func(o *Options) { o.ChoiceMaxCandidates = -1 }, "--choice-max-candidates -1"},
		{"model on a provider", api.RoleProvider, func(o *Options) { o.Model.URL = "http://h" }, "--model-url is a consumer flag"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := validOptions(tc.role)
			tc.change(&o)
			err := o.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("err = %v, want it to say %q", err, tc.want)
			}
		})
	}
	// Every mistake is reported at once.
	o := validOptions(api.RoleConsumer)
	o.LiqoDriver, o.Namespace = "magic", ""
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "--liqo-driver") || !strings.Contains(err.Error(), "--namespace") {
		t.Fatalf("two mistakes: %v", err)
	}
}

// TestBadFlagsAreRefusedBeforeAnyIO: with a valid bundle and a kubeconfig
// pointing at a server that counts requests, a bad flag stops Run before
// the cluster (or the bundle file) is touched — it used to be reported only
// after the CRDs were installed.
func TestBadFlagsAreRefusedBeforeAnyIO(t *testing.T) {
	var requests atomic.Int64
	kubeAPI := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		requests.Add(1)
		http.Error(w, "no", http.StatusServiceUnavailable)
	}))
	defer kubeAPI.Close()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: kubeAPI.URL}
	kc.AuthInfos["c"] = &clientcmdapi.AuthInfo{}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "c"}
	kc.CurrentContext = "c"
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		t.Fatal(err)
	}
	if err := pki.Init(dir, nil, false, time.Now()); err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(dir, "consumer-1.tar.gz")
	if err := pki.WriteJoinBundle(dir, "consumer-1", api.RoleConsumer, "https://127.0.0.1:1", bundle, false, time.Now()); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	o := validOptions(api.RoleConsumer)
	o.Bundle, o.Kubeconfig, o.InstallCRDs, o.HealthListen, o.LocalAPIListen = bundle, kubeconfig, true, "", ""
	o.LiqoDriver = "magic"
	err := Run(context.Background(), o, log)
	if err == nil || !strings.Contains(err.Error(), `--liqo-driver "magic"`) {
		t.Fatalf("Run: %v, want the --liqo-driver mistake", err)
	}
	if n := requests.Load(); n != 0 {
		t.Fatalf("the Kubernetes API got %d requests before the flag was refused", n)
	}
	// A liqoctl that is not there is found before the cluster is touched too.
	o.LiqoDriver, o.LiqoctlPath = "liqoctl", filepath.Join(dir, "no-liqoctl")
	if err := Run(context.Background(), o, log); err == nil || !strings.Contains(err.Error(), "install liqoctl") {
		t.Fatalf("Run without liqoctl: %v", err)
	}
	if n := requests.Load(); n != 0 {
		t.Fatalf("the Kubernetes API got %d requests before liqoctl was looked for", n)
	}
	// With good flags Run does reach the cluster (the counter is live).
	o.LiqoDriver = "sim"
	if err := Run(context.Background(), o, log); err == nil || requests.Load() == 0 {
		t.Fatalf("Run against the failing API: %v after %d requests", err, requests.Load())
	}
}
