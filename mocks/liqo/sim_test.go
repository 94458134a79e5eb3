package liqosim_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqotech/liqo/apis/authentication/v1beta1"
	liqocorev1beta1 "github.com/liqotech/liqo/apis/core/v1beta1"
	offloadingv1beta1 "github.com/liqotech/liqo/apis/offloading/v1beta1"

	"github.com/federation-autoscaler/federation-autoscaler/agent/liqo"
	"github.com/federation-autoscaler/federation-autoscaler/deploy/testcluster"
	"github.com/federation-autoscaler/federation-autoscaler/deploy/testpoll"
	liqosim "github.com/federation-autoscaler/federation-autoscaler/mocks/liqo"
)

const (
	consumerID = "cons-1"
	providerID = "prov-1"
	nodeDelay  = 700 * time.Millisecond
	waitFor    = 20 * time.Second
)

var chunk = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi")}

// runController starts a simulation and returns a function that stops it and
// waits until it has stopped (also registered as cleanup).
func runController(t *testing.T, env *testcluster.Env) (stop func()) {
	t.Helper()
	ctrl, err := liqosim.NewController(env.Config, liqosim.ControllerOptions{NodeDelay: nodeDelay})
	if err != nil {
		t.Fatalf("NewController: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ctrl.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("controller Run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("controller did not stop within 30s; goroutines:\n%s", goroutines())
		}
	}
	t.Cleanup(stop)
	return stop
}

// eventually waits for cond (called with a background context) for up to
// waitFor; cond's message says what was last seen.
func eventually(t *testing.T, what string, cond func(ctx context.Context) (bool, string)) {
	t.Helper()
	testpoll.UntilSeen(t, waitFor, what, func() (bool, string) { return cond(context.Background()) })
}

func readyVirtualNode(c client.Client, name string) func(ctx context.Context) (bool, string) {
	return func(ctx context.Context) (bool, string) {
		var n corev1.Node
		if err := c.Get(ctx, client.ObjectKey{Name: name}, &n); err != nil {
			return false, err.Error()
		}
		for _, cnd := range n.Status.Conditions {
			if cnd.Type == corev1.NodeReady && cnd.Status == corev1.ConditionTrue {
				return true, ""
			}
		}
		return false, fmt.Sprintf("node %s not Ready: %v", name, n.Status.Conditions)
	}
}

func gone(c client.Client, obj client.Object) func(ctx context.Context) (bool, string) {
	return func(ctx context.Context) (bool, string) {
		err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		return false, fmt.Sprintf("%T %s still there (err %v)", obj, client.ObjectKeyFromObject(obj), err)
	}
}

func sliceCondition(rs *authv1beta1.ResourceSlice, typ authv1beta1.ResourceSliceConditionType) *authv1beta1.ResourceSliceCondition {
	for i := range rs.Status.Conditions {
		if rs.Status.Conditions[i].Type == typ {
			return &rs.Status.Conditions[i]
		}
	}
	return nil
}

func peer(t *testing.T, env *testcluster.Env, d *liqosim.Driver, provider string) {
	t.Helper()
	kc, err := liqosim.NewDriver(nil, liqosim.DriverOptions{LocalClusterID: provider}).GeneratePeeringUser(context.Background(), consumerID)
	if err != nil {
		t.Fatalf("GeneratePeeringUser: %v", err)
	}
	if err := d.Peer(context.Background(), provider, kc); err != nil {
		t.Fatalf("Peer: %v", err)
	}
}

func TestGeneratePeeringUserIsAKubeconfigWithoutSecrets(t *testing.T) {
	d := liqosim.NewDriver(nil, liqosim.DriverOptions{LocalClusterID: providerID})
	kc, err := d.GeneratePeeringUser(context.Background(), consumerID)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.Load([]byte(kc))
	if err != nil {
		t.Fatalf("generated kubeconfig does not parse: %v\n%s", err, kc)
	}
	u, ok := cfg.AuthInfos["liqo-peering-"+consumerID]
	if !ok || cfg.CurrentContext != "liqo-peering-"+consumerID {
		t.Errorf("kubeconfig does not name the consumer's peering user: %s", kc)
	}
	if ok && (u.Token != "" || len(u.ClientKeyData) != 0 || u.Password != "") {
		t.Errorf("kubeconfig holds secret material: %+v", u)
	}
	if _, err := d.GeneratePeeringUser(context.Background(), "Not A Cluster"); err == nil {
		t.Errorf("GeneratePeeringUser accepted an invalid cluster id")
	}
	if err := d.DeletePeeringUser(context.Background(), consumerID); err != nil {
		t.Errorf("DeletePeeringUser: %v", err)
	}
}

func TestSimulatedLiqoLifecycle(t *testing.T) {
	env := testcluster.Start(t)
	runController(t, env)
	ctx := context.Background()
	c := env.Client
	d := liqosim.NewDriver(c, liqosim.DriverOptions{LocalClusterID: consumerID})
	tenant := liqo.TenantNamespace(providerID)

	// Peer records a ForeignCluster and the tenant namespace; again is fine.
	peer(t, env, d, providerID)
	peer(t, env, d, providerID)
	if err := d.Peer(ctx, providerID, "not: [a kubeconfig"); err == nil {
		t.Errorf("Peer with a broken kubeconfig succeeded")
	}
	var fc liqocorev1beta1.ForeignCluster
	if err := c.Get(ctx, client.ObjectKey{Name: providerID}, &fc); err != nil {
		t.Fatalf("ForeignCluster after Peer: %v", err)
	}
	if fc.Spec.ClusterID != providerID || fc.Status.Role != liqocorev1beta1.ProviderRole || fc.Status.TenantNamespace.Local != tenant {
		t.Errorf("ForeignCluster = %+v / %+v", fc.Spec, fc.Status)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: tenant}, &corev1.Namespace{}); err != nil {
		t.Fatalf("tenant namespace after Peer: %v", err)
	}

	// A correctly labelled slice gets accepted and, after the delay, a
	// VirtualNode and a Ready Node shaped like Liqo's.
	created := time.Now()
	rs := liqo.NewResourceSlice("rs-r1", tenant, consumerID, providerID, chunk)
	if err := c.Create(ctx, rs); err != nil {
		t.Fatalf("creating the slice: %v", err)
	}
	eventually(t, "virtual node rs-r1 Ready", readyVirtualNode(c, "rs-r1"))
	if el := time.Since(created); el < nodeDelay {
		t.Errorf("virtual node appeared %s after the slice; the configured delay is %s", el, nodeDelay)
	}
	var node corev1.Node
	if err := c.Get(ctx, client.ObjectKey{Name: "rs-r1"}, &node); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"liqo.io/type": "virtual-node", "liqo.io/remote-cluster-id": providerID, "kubernetes.io/hostname": "rs-r1", "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"} {
		if node.Labels[k] != v {
			t.Errorf("node label %s = %q, want %q", k, node.Labels[k], v)
		}
	}
	if len(node.Spec.Taints) != 1 || node.Spec.Taints[0] != (corev1.Taint{Key: "virtual-node.liqo.io/not-allowed", Value: "true", Effect: corev1.TaintEffectNoExecute}) {
		t.Errorf("node taints = %+v", node.Spec.Taints)
	}
	if node.Spec.ProviderID != "" {
		t.Errorf("node providerID = %q; Liqo sets none", node.Spec.ProviderID)
	}
	for _, rl := range []corev1.ResourceList{node.Status.Capacity, node.Status.Allocatable} {
		cpu, mem, pods := rl[corev1.ResourceCPU], rl[corev1.ResourceMemory], rl[corev1.ResourcePods]
		if cpu.String() != "2" || mem.String() != "4Gi" || pods.String() != "110" {
			t.Errorf("node resources = %v, want cpu 2, memory 4Gi, pods 110", rl)
		}
	}
	var vn offloadingv1beta1.VirtualNode
	if err := c.Get(ctx, client.ObjectKeyFromObject(rs), &vn); err != nil {
		t.Fatalf("VirtualNode: %v", err)
	}
	if vn.Spec.ClusterID != providerID {
		t.Errorf("VirtualNode clusterID = %q", vn.Spec.ClusterID)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(rs), rs); err != nil {
		t.Fatal(err)
	}
	for _, typ := range []authv1beta1.ResourceSliceConditionType{authv1beta1.ResourceSliceConditionTypeAuthentication, authv1beta1.ResourceSliceConditionTypeResources} {
		if cnd := sliceCondition(rs, typ); cnd == nil || cnd.Status != authv1beta1.ResourceSliceConditionAccepted {
			t.Errorf("slice condition %s = %+v, want Accepted", typ, cnd)
		}
	}
	if cpu := rs.Status.Resources[corev1.ResourceCPU]; cpu.String() != "2" {
		t.Errorf("slice status.resources = %v", rs.Status.Resources)
	}

	// The consumer gives the node a providerID; the simulation keeps it
	// while it reconciles the node again (an external change to a label
	// it owns triggers that).
	node.Spec.ProviderID = "liqo://p1/r1"
	node.Labels["liqo.io/remote-cluster-id"] = "tampered"
	if err := c.Update(ctx, &node); err != nil {
		t.Fatalf("setting providerID: %v", err)
	}
	eventually(t, "label restored, providerID kept", func(ctx context.Context) (bool, string) {
		var n corev1.Node
		if err := c.Get(ctx, client.ObjectKey{Name: "rs-r1"}, &n); err != nil {
			return false, err.Error()
		}
		if n.Spec.ProviderID != "liqo://p1/r1" {
			t.Fatalf("providerID overwritten: %q", n.Spec.ProviderID)
		}
		return n.Labels["liqo.io/remote-cluster-id"] == providerID, fmt.Sprintf("labels %v", n.Labels)
	})

	// A badly labelled slice is denied and gets no node.
	bad := liqo.NewResourceSlice("rs-bad", tenant, consumerID, providerID, chunk)
	delete(bad.Labels, "liqo.io/replication")
	if err := c.Create(ctx, bad); err != nil {
		t.Fatal(err)
	}
	eventually(t, "bad slice denied", func(ctx context.Context) (bool, string) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(bad), bad); err != nil {
			return false, err.Error()
		}
		cnd := sliceCondition(bad, authv1beta1.ResourceSliceConditionTypeAuthentication)
		return cnd != nil && cnd.Status == authv1beta1.ResourceSliceConditionDenied, fmt.Sprintf("%+v", bad.Status.Conditions)
	})
	if cnd := sliceCondition(bad, authv1beta1.ResourceSliceConditionTypeAuthentication); cnd.Reason != liqosim.ReasonBadLabels {
		t.Errorf("denial reason = %q (%s)", cnd.Reason, cnd.Message)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: "rs-bad"}, &corev1.Node{}); !apierrors.IsNotFound(err) {
		t.Errorf("a node exists for the denied slice (err %v)", err)
	}

	// Deleting the slice removes its VirtualNode and Node.
	if err := c.Delete(ctx, rs); err != nil {
		t.Fatal(err)
	}
	eventually(t, "node of deleted slice gone", gone(c, &corev1.Node{ObjectMeta: node.ObjectMeta}))
	eventually(t, "VirtualNode of deleted slice gone", gone(c, &offloadingv1beta1.VirtualNode{ObjectMeta: vn.ObjectMeta}))

	// Unpeer removes everything of the provider.
	rs2 := liqo.NewResourceSlice("rs-r2", tenant, consumerID, providerID, chunk)
	if err := c.Create(ctx, rs2); err != nil {
		t.Fatal(err)
	}
	eventually(t, "virtual node rs-r2 Ready", readyVirtualNode(c, "rs-r2"))
	if err := d.Unpeer(ctx, providerID, ""); err != nil {
		t.Fatalf("Unpeer: %v", err)
	}
	if err := d.Unpeer(ctx, providerID, ""); err != nil {
		t.Fatalf("Unpeer again: %v", err)
	}
	eventually(t, "ForeignCluster gone", gone(c, &liqocorev1beta1.ForeignCluster{ObjectMeta: objMeta("", providerID)}))
	eventually(t, "everything of the provider gone", func(ctx context.Context) (bool, string) {
		var nodes corev1.NodeList
		var slices authv1beta1.ResourceSliceList
		var vns offloadingv1beta1.VirtualNodeList
		if err := errors.Join(
			c.List(ctx, &nodes, client.MatchingLabels{"liqo.io/remote-cluster-id": providerID}),
			c.List(ctx, &slices, client.InNamespace(tenant)),
			c.List(ctx, &vns, client.InNamespace(tenant)),
		); err != nil {
			return false, err.Error()
		}
		return len(nodes.Items)+len(slices.Items)+len(vns.Items) == 0,
			fmt.Sprintf("%d nodes, %d slices, %d virtual nodes", len(nodes.Items), len(slices.Items), len(vns.Items))
	})

	// A slice for a provider that is not peered is denied.
	late := liqo.NewResourceSlice("rs-late", tenant, consumerID, providerID, chunk)
	if err := c.Create(ctx, late); err != nil {
		t.Fatal(err)
	}
	eventually(t, "slice of an unpeered provider denied", func(ctx context.Context) (bool, string) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(late), late); err != nil {
			return false, err.Error()
		}
		cnd := sliceCondition(late, authv1beta1.ResourceSliceConditionTypeAuthentication)
		return cnd != nil && cnd.Reason == liqosim.ReasonNotPeered, fmt.Sprintf("%+v", late.Status.Conditions)
	})
	// Peering afterwards accepts it and the node follows.
	peer(t, env, d, providerID)
	eventually(t, "virtual node rs-late Ready after peering", readyVirtualNode(c, "rs-late"))
}

func TestSimulationConvergesAfterRestart(t *testing.T) {
	env := testcluster.Start(t)
	ctx := context.Background()
	c := env.Client
	d := liqosim.NewDriver(c, liqosim.DriverOptions{})
	tenant := liqo.TenantNamespace(providerID)
	peer(t, env, d, providerID)

	stop := runController(t, env)
	for _, name := range []string{"rs-a", "rs-c"} {
		if err := c.Create(ctx, liqo.NewResourceSlice(name, tenant, consumerID, providerID, chunk)); err != nil {
			t.Fatal(err)
		}
		eventually(t, "virtual node "+name+" Ready", readyVirtualNode(c, name))
	}
	stop()

	// While the simulation is down: a slice is deleted (its node is now an
	// orphan), a node is deleted by someone else, a new slice arrives.
	if err := c.Delete(ctx, &authv1beta1.ResourceSlice{ObjectMeta: objMeta(tenant, "rs-a")}); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, &corev1.Node{ObjectMeta: objMeta("", "rs-c")}); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, liqo.NewResourceSlice("rs-b", tenant, consumerID, providerID, chunk)); err != nil {
		t.Fatal(err)
	}

	runController(t, env)
	eventually(t, "orphan node rs-a removed", gone(c, &corev1.Node{ObjectMeta: objMeta("", "rs-a")}))
	eventually(t, "orphan VirtualNode rs-a removed", gone(c, &offloadingv1beta1.VirtualNode{ObjectMeta: objMeta(tenant, "rs-a")}))
	eventually(t, "new slice rs-b gets its node", readyVirtualNode(c, "rs-b"))
	eventually(t, "deleted node rs-c recreated", readyVirtualNode(c, "rs-c"))

	// Removing the ForeignCluster behind the simulation's back removes the
	// provider's nodes too.
	if err := c.Delete(ctx, &liqocorev1beta1.ForeignCluster{ObjectMeta: objMeta("", providerID)}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"rs-b", "rs-c"} {
		eventually(t, "node "+name+" removed after the ForeignCluster", gone(c, &corev1.Node{ObjectMeta: objMeta("", name)}))
	}
}

func objMeta(ns, name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: ns, Name: name} }

// goroutines is every goroutine's stack, for a stop that came late.
func goroutines() string {
	buf := make([]byte, 1<<20)
	return string(buf[:runtime.Stack(buf, true)])
}

// TestStopWhileReconciling stops the simulation again and again while its
// workers are busy with a burst of slices: a stop must return at once
// (controller-runtime v0.23's priority queue could deadlock here, #3538).
func TestStopWhileReconciling(t *testing.T) {
	env := testcluster.Start(t)
	ctx := context.Background()
	c := env.Client
	d := liqosim.NewDriver(c, liqosim.DriverOptions{})
	tenant := liqo.TenantNamespace(providerID)
	peer(t, env, d, providerID)
	const rounds, slices = 4, 12
	for r := range rounds {
		stop := runController(t, env)
		for i := range slices {
			name := "rs-stop-" + strconv.Itoa(r) + "-" + strconv.Itoa(i)
			if err := c.Create(ctx, liqo.NewResourceSlice(name, tenant, consumerID, providerID, chunk)); err != nil {
				t.Fatal(err)
			}
		}
		// Some of the burst is being reconciled: stop in the middle of it.
		eventually(t, fmt.Sprintf("round %d: a virtual node of the burst", r), func(ctx context.Context) (bool, string) {
			var vns offloadingv1beta1.VirtualNodeList
			if err := c.List(ctx, &vns, client.InNamespace(tenant)); err != nil {
				return false, err.Error()
			}
			return len(vns.Items) > r*slices, fmt.Sprintf("%d VirtualNodes", len(vns.Items))
		})
		began := time.Now()
		stop()
		if t.Failed() {
			return
		}
		t.Logf("round %d: stopped in %v", r, time.Since(began).Round(time.Millisecond))
	}
}
