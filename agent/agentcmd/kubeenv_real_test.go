//go:build !simkube

package agentcmd

import (
	"testing"

	"github.com/federation-autoscaler/federation-autoscaler/deploy/testcluster"
)

// kubeEnv is the member cluster of the end-to-end tests: a real
// kube-apiserver + etcd. Build with -tags simkube to use the simulated API
// server instead (kubeenv_sim_test.go).
func kubeEnv(tb testing.TB) *testcluster.Env {
	tb.Helper()
	return testcluster.Start(tb)
}
