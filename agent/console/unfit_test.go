package console

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/placement"
)

func pendingPod(name, cpu, mem string, extra corev1.ResourceList, phase corev1.PodPhase, unschedulable bool) *corev1.Pod {
	req := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}
	for k, v := range extra {
		req[k] = v
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: req}}}},
		Status:     corev1.PodStatus{Phase: phase},
	}
	if unschedulable {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
	}
	return p
}

// TestUnfitPods: only pending, unschedulable pods that fit no offered
// chunk shape are reported; a bigger chunk type offered makes them fit.
func TestUnfitPods(t *testing.T) {
	sch := runtime.NewScheme()
	if err := corev1.AddToScheme(sch); err != nil {
		t.Fatal(err)
	}
	gpu := corev1.ResourceList{placement.ResourceGPU: resource.MustParse("1")}
	cl := fake.NewClientBuilder().WithScheme(sch).
		WithIndex(&corev1.Pod{}, "status.phase", func(o client.Object) []string { return []string{string(o.(*corev1.Pod).Status.Phase)} }).
		WithObjects(
			pendingPod("big", "3", "1Gi", nil, corev1.PodPending, true),
			pendingPod("small", "1", "1Gi", nil, corev1.PodPending, true),
			pendingPod("wants-gpu", "1", "1Gi", gpu, corev1.PodPending, true),
			pendingPod("huge-but-running", "64", "1Ti", nil, corev1.PodRunning, false),
			pendingPod("huge-not-yet-tried", "64", "1Ti", nil, corev1.PodPending, false),
		).Build()
	cfg := placement.DefaultChunkConfig()
	std := []api.NodeGroupView{{ID: "ng-p-standard", Type: api.ChunkStandard, ChunkResources: cfg.Standard}}
	names := func(groups []api.NodeGroupView) string {
		t.Helper()
		got, err := unfitPods(context.Background(), cl, groups)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, p := range got {
			out = append(out, p.Namespace+"/"+p.Name)
		}
		return strings.Join(out, ",")
	}
	if got := names(std); got != "shop/big,shop/wants-gpu" {
		t.Errorf("standard chunks only: unfit %q, want shop/big,shop/wants-gpu", got)
	}
	withGPU := append(std, api.NodeGroupView{ID: "ng-g-gpu", Type: api.ChunkGPU, ChunkResources: cfg.GPU})
	if got := names(withGPU); got != "" {
		t.Errorf("with GPU chunks (cpu 4, 1 GPU): unfit %q, want none", got)
	}
	if got := names(nil); got != "" {
		t.Errorf("no group offered: unfit %q, want none (nothing to compare with)", got)
	}
}
