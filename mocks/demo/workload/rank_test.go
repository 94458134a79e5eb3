package workload

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestDeleteFirst: the ReplicaSet controller's scale-down order, one rule
// per row (a is deleted before b; never b before a).
func TestDeleteFirst(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	pod := func(mods ...func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(t0)}, Spec: corev1.PodSpec{NodeName: "n1"},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0)}}}}
		for _, m := range mods {
			m(p)
		}
		return p
	}
	unscheduled := func(p *corev1.Pod) { p.Spec.NodeName, p.Status.Phase, p.Status.Conditions = "", corev1.PodPending, nil }
	phase := func(ph corev1.PodPhase) func(*corev1.Pod) {
		return func(p *corev1.Pod) { p.Status.Phase = ph }
	}
	notReady := func(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionFalse }
	cost := func(v string) func(*corev1.Pod) {
		return func(p *corev1.Pod) { p.Annotations = map[string]string{corev1.PodDeletionCost: v} }
	}
	on := func(n string) func(*corev1.Pod) { return func(p *corev1.Pod) { p.Spec.NodeName = n } }
	readyAt := func(d time.Duration) func(*corev1.Pod) {
		return func(p *corev1.Pod) { p.Status.Conditions[0].LastTransitionTime = metav1.NewTime(t0.Add(d)) }
	}
	restarted := func(p *corev1.Pod) { p.Status.ContainerStatuses = []corev1.ContainerStatus{{RestartCount: 3}} }
	created := func(d time.Duration) func(*corev1.Pod) {
		return func(p *corev1.Pod) { p.CreationTimestamp = metav1.NewTime(t0.Add(d)) }
	}
	colocated := map[string]int{"n1": 1, "n2": 3}
	for _, tc := range []struct {
		name string
		a, b *corev1.Pod
	}{
		{"unscheduled before scheduled, even at a higher cost", pod(unscheduled, cost("100")), pod(cost("-100"))},
		{"Pending before Running", pod(phase(corev1.PodPending)), pod()},
		{"Pending before Unknown", pod(phase(corev1.PodPending)), pod(phase(corev1.PodUnknown))},
		{"Unknown before Running", pod(phase(corev1.PodUnknown)), pod()},
		{"not ready before ready, even at a higher cost", pod(notReady, cost("100")), pod(cost("-2147483648"))},
		{"lower deletion cost first", pod(cost("-2147483648")), pod()},
		{"lower deletion cost first, both set", pod(cost("5")), pod(cost("10"))},
		{"an unparsable cost is 0", pod(cost("x")), pod(cost("1"))},
		{"lower cost first, even when less doubled up", pod(cost("-1")), pod(on("n2"))},
		{"more of the set on its node first", pod(on("n2")), pod()},
		{"ready for less time first", pod(readyAt(time.Minute)), pod()},
		{"more restarts first", pod(restarted), pod()},
		{"newer first", pod(created(time.Second)), pod()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !deleteFirst(tc.a, tc.b, colocated) {
				t.Error("a is not deleted before b")
			}
			if deleteFirst(tc.b, tc.a, colocated) {
				t.Error("b is deleted before a")
			}
		})
	}
}
