package e2e_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/federation-autoscaler/federation-autoscaler/deploy/testcluster"
	liqosim "github.com/federation-autoscaler/federation-autoscaler/mocks/liqo"
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

// TestConformanceRealAPIServerLiqoSim is the same without the stand-in: the
// consumer peers through the simulated Liqo driver and the simulated Liqo
// controller (mocks/liqo) builds the virtual nodes on the real API server.
// The provider-lost step is left out: the simulation keeps virtual nodes
// Ready whatever happens to the provider.
func TestConformanceRealAPIServerLiqoSim(t *testing.T) {
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
	s := startStack(t)
	s.startProvider("p1")
	s.startProvider("p2")
	sim, err := liqosim.NewController(env.Config, liqosim.ControllerOptions{Logger: s.logger})
	if err != nil {
		t.Fatal(err)
	}
	s.run("liqo sim", sim.Run)
	driver := liqosim.NewDriver(env.Client, liqosim.DriverOptions{LocalClusterID: consumerID, Logger: s.logger})
	cl := s.startConsumerWith(kube, env.Client, driver, false)
	scenario(t, s, cl, false)
}
