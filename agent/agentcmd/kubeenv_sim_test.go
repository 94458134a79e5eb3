//go:build simkube

package agentcmd

import (
	"testing"

	"github.com/federation-autoscaler/federation-autoscaler/deploy/testcluster"
)

// kubeEnv is the member cluster of the end-to-end tests. Built with
// -tags simkube (for a machine that cannot build the real control plane) it
// is the project's simulated API server (mocks/kubeapi); otherwise a real
// kube-apiserver + etcd (kubeenv_real_test.go).
func kubeEnv(tb testing.TB) *testcluster.Env {
	tb.Helper()
	return testcluster.StartSimulated(tb)
}
