// Package rbac_test checks the agents' RBAC manifests against a real
// kube-apiserver: each agent, impersonated as its ServiceAccount, can do its
// job (the consumer with the simulated Liqo) and nothing it should not.
package rbac_test

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fav1alpha1 "github.com/federation-autoscaler/federation-autoscaler/agent/apis/v1alpha1"
	"github.com/federation-autoscaler/federation-autoscaler/agent/liqo"
	"github.com/federation-autoscaler/federation-autoscaler/agent/preflight"
	"github.com/federation-autoscaler/federation-autoscaler/deploy/crds"
	"github.com/federation-autoscaler/federation-autoscaler/deploy/testcluster"
	"github.com/federation-autoscaler/federation-autoscaler/deploy/testpoll"
	liqosim "github.com/federation-autoscaler/federation-autoscaler/mocks/liqo"
)

const ns = "federation-autoscaler"

func as(t *testing.T, env *testcluster.Env, sa string) (*rest.Config, client.Client) {
	t.Helper()
	cfg, c, _ := env.AsServiceAccount(t, ns, sa)
	return cfg, c
}

func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func forbidden(t *testing.T, what string, err error) {
	t.Helper()
	if !apierrors.IsForbidden(err) {
		t.Errorf("%s: err = %v, want Forbidden", what, err)
	}
}

func TestAgentRBAC(t *testing.T) {
	env := testcluster.Start(t)
	ctx := context.Background()
	env.EnsureNamespace(t, ns)
	env.EnsureNamespace(t, "other")
	env.ApplyFile(t, "provider-agent.yaml")
	env.ApplyFile(t, "consumer-agent.yaml")

	t.Run("provider", func(t *testing.T) {
		cfg, c := as(t, env, "provider-agent")
		must(t, "list nodes", c.List(ctx, &corev1.NodeList{}))
		must(t, "list pods", c.List(ctx, &corev1.PodList{}))
		// What the agent checks before it starts (agent/preflight).
		must(t, "preflight nodes", preflight.CanList(ctx, c, &corev1.NodeList{}, ""))
		must(t, "preflight pods", preflight.CanList(ctx, c, &corev1.PodList{}, ""))
		must(t, "create configmap", c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sharing"}}))
		must(t, "install CRDs", crds.Install(ctx, cfg))
		// The simulated Liqo's install, then the id read back as with Liqo.
		must(t, "install the simulated Liqo's cluster id", liqosim.InstallClusterID(ctx, c, ns, "prov"))
		must(t, "install again (no change)", liqosim.InstallClusterID(ctx, c, ns, "other-id"))
		if id, err := liqo.ResolveClusterID(ctx, c, ns, ""); err != nil || id != "prov" {
			t.Errorf("the provider's Liqo id = %q, %v; want prov", id, err)
		}
		forbidden(t, "read Liqo's ConfigMaps other than the cluster id", c.Get(ctx, client.ObjectKey{Namespace: "liqo", Name: "other"}, &corev1.ConfigMap{}))
		forbidden(t, "list secrets", c.List(ctx, &corev1.SecretList{}, client.InNamespace(ns)))
		forbidden(t, "configmap in another namespace", c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "x"}}))
		forbidden(t, "delete a node", c.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}))
	})

	t.Run("consumer with the simulated Liqo", func(t *testing.T) {
		cfg, c := as(t, env, "consumer-agent")
		must(t, "install CRDs", crds.Install(ctx, cfg))
		// What the agent checks before it starts (agent/preflight).
		created, err := preflight.EnsureNamespace(ctx, c, ns)
		must(t, "preflight namespace", err)
		if created {
			t.Error("preflight created a namespace that exists")
		}
		must(t, "preflight nodes", preflight.CanList(ctx, c, &corev1.NodeList{}, ""))
		must(t, "preflight VirtualNodeStates", preflight.CanList(ctx, c, &fav1alpha1.VirtualNodeStateList{}, ns))
		must(t, "preflight ConsumerPolicies", preflight.CanList(ctx, c, &fav1alpha1.ConsumerPolicyList{}, ns))
		// The same cluster as the provider above: its id is already there
		// and stays (Liqo-owned); a disagreeing one is refused.
		must(t, "install the simulated Liqo's cluster id", liqosim.InstallClusterID(ctx, c, ns, "cons"))
		if id, err := liqo.ResolveClusterID(ctx, c, ns, ""); err != nil || id != "prov" {
			t.Errorf("the cluster's Liqo id = %q, %v; want prov (installed first)", id, err)
		}
		if _, err := liqo.ResolveClusterID(ctx, c, ns, "cons"); err == nil {
			t.Error("a --liqo-cluster-id disagreeing with Liqo's was accepted")
		}
		forbidden(t, "create a ConfigMap in another namespace", c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "x"}}))
		ctrl, err := liqosim.NewController(cfg, liqosim.ControllerOptions{})
		must(t, "NewController", err)
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- ctrl.Run(runCtx) }()
		defer func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("sim Run: %v", err)
			}
		}()

		d := liqosim.NewDriver(c, liqosim.DriverOptions{})
		kc, err := liqosim.NewDriver(nil, liqosim.DriverOptions{LocalClusterID: "prov"}).GeneratePeeringUser(ctx, "cons")
		must(t, "generate", err)
		must(t, "secret", c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kubeconfig-r1"}, StringData: map[string]string{"kubeconfig": kc}}))
		must(t, "peer", d.Peer(ctx, "prov", kc))
		res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
		must(t, "create slice", liqo.EnsureResourceSlice(ctx, c, liqo.NewResourceSlice("rs-r1", liqo.TenantNamespace("prov"), "cons", "prov", res)))
		must(t, "create slice again (redelivered Peer)", liqo.EnsureResourceSlice(ctx, c, liqo.NewResourceSlice("rs-r1", liqo.TenantNamespace("prov"), "cons", "prov", res)))
		must(t, "create VirtualNodeState", c.Create(ctx, &fav1alpha1.VirtualNodeState{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "vns-r1", Labels: map[string]string{fav1alpha1.ReservationLabel: "r1"}},
			Spec:       fav1alpha1.VirtualNodeStateSpec{ProviderClusterID: "p", ProviderLiqoClusterID: "prov", NodeGroupID: "ng", ReservationID: "r1", Resources: res},
		}))
		var node corev1.Node
		testpoll.UntilNil(t, 20*time.Second, "virtual node rs-r1 created by the sim running as the consumer agent", func() error {
			return c.Get(ctx, client.ObjectKey{Name: "rs-r1"}, &node)
		})
		patch := client.MergeFrom(node.DeepCopy())
		node.Spec.ProviderID = "liqo://p/r1"
		must(t, "patch providerID", c.Patch(ctx, &node, patch))
		var vns fav1alpha1.VirtualNodeState
		must(t, "get vns", c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "vns-r1"}, &vns))
		vns.Status.Phase = fav1alpha1.VirtualNodeRunning
		must(t, "vns status", c.Status().Update(ctx, &vns))
		must(t, "unpeer", d.Unpeer(ctx, "prov", kc))
		must(t, "delete secret", c.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kubeconfig-r1"}}))
		forbidden(t, "secrets in another namespace", c.List(ctx, &corev1.SecretList{}, client.InNamespace("other")))
		forbidden(t, "create a ConsumerPolicy (read only)", c.Create(ctx, &fav1alpha1.ConsumerPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p"}}))
		// Consolidation: pods read everywhere, placeholders only at home.
		must(t, "list pods", c.List(ctx, &corev1.PodList{}))
		placeholder := func(namespace string) *corev1.Pod {
			return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "fa-placeholder-x"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "p", Image: "registry.k8s.io/pause:3.10"}}}}
		}
		must(t, "create a placeholder", c.Create(ctx, placeholder(ns)))
		must(t, "delete a placeholder", c.Delete(ctx, placeholder(ns)))
		forbidden(t, "create a pod in another namespace", c.Create(ctx, placeholder("other")))
		forbidden(t, "delete pods in another namespace", c.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace("other")))
		must(t, "create the placeholders' PriorityClass", c.Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "fa-consolidation-placeholder"}, Value: -1}))
		// The surge: a workload's pods annotated, its ReplicaSet or
		// Deployment scaled (update), HPAs read; never created or deleted.
		must(t, "list ReplicaSets", c.List(ctx, &appsv1.ReplicaSetList{}))
		must(t, "list Deployments", c.List(ctx, &appsv1.DeploymentList{}))
		must(t, "list HorizontalPodAutoscalers", c.List(ctx, &autoscalingv2.HorizontalPodAutoscalerList{}, client.InNamespace("other")))
		forbidden(t, "create a Deployment", c.Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "d"}}))
		forbidden(t, "delete ReplicaSets", c.DeleteAllOf(ctx, &appsv1.ReplicaSet{}, client.InNamespace("other")))
	})
}
