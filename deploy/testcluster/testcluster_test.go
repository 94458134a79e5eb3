package testcluster_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fav1alpha1 "github.com/federation-autoscaler/federation-autoscaler/agent/apis/v1alpha1"
	"github.com/federation-autoscaler/federation-autoscaler/deploy/testcluster"
)

func TestStartServesNodesPodsAndCRDs(t *testing.T) {
	env := testcluster.Start(t)
	ctx := context.Background()
	c := env.Client

	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "worker-1", Labels: map[string]string{"kubernetes.io/hostname": "worker-1"}},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi")},
			Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi")},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
	if err := c.Create(ctx, node); err != nil {
		t.Fatalf("creating a node: %v", err)
	}
	var gotNode corev1.Node
	if err := c.Get(ctx, client.ObjectKey{Name: "worker-1"}, &gotNode); err != nil {
		t.Fatalf("reading the node back: %v", err)
	}
	if cpu := gotNode.Status.Allocatable[corev1.ResourceCPU]; cpu.String() != "4" {
		t.Errorf("node allocatable cpu = %s, want 4 (status kept on create)", cpu.String())
	}
	if len(gotNode.Spec.Taints) != 0 {
		t.Errorf("node taints = %v, want none (TaintNodesByCondition is disabled)", gotNode.Spec.Taints)
	}

	env.EnsureServiceAccount(t, "apps", "default")
	env.EnsureServiceAccount(t, "apps", "default") // idempotent
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web"},
		Spec: corev1.PodSpec{
			NodeName:   "worker-1",
			Containers: []corev1.Container{{Name: "web", Image: "example.invalid/web:1"}},
		},
	}
	if err := c.Create(ctx, pod); err != nil {
		t.Fatalf("creating a pod: %v", err)
	}
	var gotPod corev1.Pod
	if err := c.Get(ctx, client.ObjectKeyFromObject(pod), &gotPod); err != nil {
		t.Fatalf("reading the pod back: %v", err)
	}
	if gotPod.Spec.NodeName != "worker-1" {
		t.Errorf("pod nodeName = %q, want worker-1", gotPod.Spec.NodeName)
	}

	// Our CRDs are installed and validated by the server.
	env.EnsureNamespace(t, "consumer")
	vns := &fav1alpha1.VirtualNodeState{
		ObjectMeta: metav1.ObjectMeta{Namespace: "consumer", Name: fav1alpha1.VirtualNodeStateName("r1")},
		Spec: fav1alpha1.VirtualNodeStateSpec{
			ProviderClusterID: "p1", ProviderLiqoClusterID: "liqo-p1", NodeGroupID: "ng", ReservationID: "r1",
			Resources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
		},
	}
	if err := c.Create(ctx, vns); err != nil {
		t.Fatalf("creating a VirtualNodeState: %v", err)
	}
	vns.Status.Phase = fav1alpha1.VirtualNodeRunning
	if err := c.Status().Update(ctx, vns); err != nil {
		t.Fatalf("updating VirtualNodeState status: %v", err)
	}
	bad := vns.DeepCopy()
	bad.ResourceVersion = ""
	bad.Name = "vns-bad"
	bad.Status = fav1alpha1.VirtualNodeStateStatus{}
	bad.Spec.ProviderClusterID = ""
	if err := c.Create(ctx, bad); err == nil {
		t.Errorf("creating a VirtualNodeState with an empty providerClusterId succeeded, want a validation error")
	}
	policy := &fav1alpha1.ConsumerPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "consumer", Name: "bad"},
		Spec:       fav1alpha1.ConsumerPolicySpec{Placement: fav1alpha1.Placement{Type: "Cheapest"}},
	}
	if err := c.Create(ctx, policy); err == nil {
		t.Errorf("creating a ConsumerPolicy with placement type Cheapest succeeded, want an enum validation error")
	}
	policy.Spec.Placement = fav1alpha1.Placement{Type: fav1alpha1.PlacementWeighted, Weights: &fav1alpha1.PlacementWeights{Price: 0.5, Carbon: 1.5}}
	policy.Name = "good"
	if err := c.Create(ctx, policy); err != nil {
		t.Fatalf("creating a Weighted ConsumerPolicy: %v", err)
	}
	var gotPolicy fav1alpha1.ConsumerPolicy
	if err := c.Get(ctx, client.ObjectKeyFromObject(policy), &gotPolicy); err != nil {
		t.Fatalf("reading the policy back: %v", err)
	}
	if w := gotPolicy.Spec.Placement.Weights; w == nil || w.Price != 0.5 || w.Carbon != 1.5 {
		t.Errorf("policy weights = %+v, want price 0.5 carbon 1.5", w)
	}
}
