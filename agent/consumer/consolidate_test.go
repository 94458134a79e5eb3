package consumer

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fav1alpha1 "github.com/federation-autoscaler/federation-autoscaler/agent/apis/v1alpha1"
	"github.com/federation-autoscaler/federation-autoscaler/agent/consolidate"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// TestHeartbeatMovesDriveConsolidation: the broker's move decision in the
// heartbeat's answer makes the agent place a placeholder for the pod on its
// autoscaled node of the worse group; once it is bound to a Ready node of
// the better group, the local API serves the drain/keep roles the adapter
// answers NodeGroupGetOptions from. Under the ConsumerPolicy's budget of 0
// moves nothing is placed.
func TestHeartbeatMovesDriveConsolidation(t *testing.T) {
	for _, tc := range []struct {
		name   string
		budget *int32
		want   int
	}{{"the agent's default budget", nil, 1}, {"the policy allows no move", new(int32(0)), 0}} {
		t.Run(tc.name, func(t *testing.T) {
			vns := func(res, group, node string) *fav1alpha1.VirtualNodeState {
				v := &fav1alpha1.VirtualNodeState{ObjectMeta: metav1.ObjectMeta{Name: "vns-" + res, Namespace: "fa"},
					Spec: fav1alpha1.VirtualNodeStateSpec{ReservationID: res, NodeGroupID: group}}
				v.Status.Phase, v.Status.VirtualNodeName = fav1alpha1.VirtualNodeRunning, node
				return v
			}
			pol := &fav1alpha1.ConsumerPolicy{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "fa"},
				Spec: fav1alpha1.ConsumerPolicySpec{Lifecycle: &fav1alpha1.Lifecycle{MaxMovesPerWindow: tc.budget}}}
			b := &stubBroker{
				moves: []api.Reevaluation{{NodeGroupID: "ng-dear-standard", ChunkType: api.ChunkStandard, Decision: api.DecisionMove, Target: "cheap"}},
				view: api.NodeGroupListResponse{NodeGroups: []api.NodeGroupView{
					{ID: "ng-cheap-standard", ProviderClusterID: "cheap", ProviderLiqoClusterID: "liqo-cheap", Type: api.ChunkStandard, MaxSize: 3},
				}},
			}
			a := newTestAgent(t, b, pol, vns("res-1", "ng-dear-standard", "vn-dear"), vns("res-2", "ng-cheap-standard", "vn-cheap"))
			ctx := context.Background()
			for _, n := range []string{"vn-dear", "vn-cheap"} {
				node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
				if _, err := a.cfg.Kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			web := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"}, Spec: corev1.PodSpec{NodeName: "vn-dear",
				Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}}}
			if _, err := a.cfg.Kube.CoreV1().Pods("shop").Create(ctx, web, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			resync := false
			a.heartbeat(ctx, true, &resync)
			ph, err := a.cfg.Kube.CoreV1().Pods("fa").List(ctx, metav1.ListOptions{LabelSelector: consolidate.LabelPlaceholder})
			if err != nil {
				t.Fatal(err)
			}
			if len(ph.Items) != tc.want {
				t.Fatalf("placeholders %d, want %d", len(ph.Items), tc.want)
			}
			if tc.want == 0 {
				return
			}
			p := ph.Items[0]
			p.Spec.NodeName = "vn-cheap"
			if _, err := a.cfg.Kube.CoreV1().Pods("fa").Update(ctx, &p, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			a.heartbeat(ctx, true, &resync)
			rec := do(t, a.LocalAPI(), http.MethodGet, "/local/nodegroups", "", nil)
			var view api.NodeGroupListResponse
			if err := json.Unmarshal(rec.Body.Bytes(), &view); err != nil {
				t.Fatal(err)
			}
			want := map[string]api.ConsolidationRole{"ng-dear-standard": api.RoleDrain, "ng-cheap-standard": api.RoleKeep}
			if !maps.Equal(view.Consolidation, want) {
				t.Fatalf("local API consolidation %v, want %v", view.Consolidation, want)
			}
		})
	}
}
