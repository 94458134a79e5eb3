//go:build simkube

package agentcmd

import (
	"context"
	"path/filepath"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/federation-autoscaler/federation-autoscaler/deploy/crds"
	"github.com/federation-autoscaler/federation-autoscaler/deploy/testcluster"
	"github.com/federation-autoscaler/federation-autoscaler/mocks/kubeapi"
	liqocrds "github.com/federation-autoscaler/federation-autoscaler/mocks/liqo/crds"
)

// kubeEnv is the member cluster of the end-to-end tests. Built with
// -tags simkube (for a machine that cannot build the real control plane) it
// is the project's simulated API server (mocks/kubeapi); otherwise a real
// kube-apiserver + etcd (kubeenv_real_test.go).
func kubeEnv(tb testing.TB) *testcluster.Env {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	srv := kubeapi.New(kubeapi.Options{Name: "e2e"})
	cfg, err := srv.Start(ctx, "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = srv.Close() })
	if err := crds.Install(ctx, cfg); err != nil {
		tb.Fatal(err)
	}
	if err := liqocrds.Install(ctx, cfg); err != nil {
		tb.Fatal(err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["e2e"] = &clientcmdapi.Cluster{Server: cfg.Host}
	kc.AuthInfos["e2e"] = &clientcmdapi.AuthInfo{}
	kc.Contexts["e2e"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: "e2e"}
	kc.CurrentContext = "e2e"
	path := filepath.Join(tb.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		tb.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: testcluster.Scheme()})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Logf("e2e: simulated API server (mocks/kubeapi) at %s", cfg.Host)
	return &testcluster.Env{Config: cfg, Kubeconfig: path, Client: c}
}
