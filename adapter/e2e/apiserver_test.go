package e2e_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/federation-autoscaler/federation-autoscaler/deploy/testcluster"
)

// TestConformanceRealAPIServer runs the scenario with the consumer cluster
// on a real kube-apiserver + etcd (deploy/testcluster; FA_SKIP_KUBE_TESTS=1
// skips it): the consumer agent's CRDs, VirtualNodeStates, ResourceSlices
// and the virtual Nodes live in a real API server.
func TestConformanceRealAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the whole stack on a real kube-apiserver")
	}
	env := testcluster.Start(t)
	kube, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if _, err := kube.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	conformance(t, kube, env.Client)
}
