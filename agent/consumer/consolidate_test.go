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
// answers NodeGroupGetOptions from, and the next heartbeat reports the
// consolidation under way (the broker charges it to the one budget). The
// ConsumerPolicy's budget is the broker's to enforce (it hands out only the
// moves it has room for): the agent starts the move it is handed even under
// the deprecated alias maxMovesPerWindow 0. Under the agent's local cap of
// 0 (--consolidation-max-moves 0) nothing is placed.
func TestHeartbeatMovesDriveConsolidation(t *testing.T) {
	for _, tc := range []struct {
		name     string
		budget   *int32
		localCap int
		want     int
	}{
		{"the agent's default local cap", nil, 1, 1},
		{"the policy's budget is the broker's to enforce", new(int32(0)), 1, 1},
		{"the local cap allows no move", nil, 0, 0},
	} {
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
			a.cfg.Consolidation.Budget = consolidate.Budget{Max: tc.localCap, Window: consolidate.DefaultMoveWindow}
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
				a.heartbeat(ctx, true, &resync)
				b.mu.Lock()
				defer b.mu.Unlock()
				if len(b.last.Consolidations) != 0 {
					t.Fatalf("no move started, yet the heartbeat reports %+v", b.last.Consolidations)
				}
				return
			}
			p := ph.Items[0]
			p.Spec.NodeName = "vn-cheap"
			if _, err := a.cfg.Kube.CoreV1().Pods("fa").Update(ctx, &p, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			a.heartbeat(ctx, true, &resync)
			b.mu.Lock()
			reported := b.last.Consolidations
			b.mu.Unlock()
			if len(reported) != 1 || reported[0].NodeGroupID != "ng-dear-standard" || reported[0].TargetNodeGroupID != "ng-cheap-standard" || reported[0].StartedAt.IsZero() {
				t.Fatalf("the heartbeat after the start reports %+v, want the consolidation ng-dear-standard → ng-cheap-standard", reported)
			}
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

// oldBroker refuses heartbeats with consolidations as a broker older than
// the field does (it decodes strictly).
type oldBroker struct {
	*stubBroker
	refused int
	// refusal, when set, is what it answers instead (any heartbeat).
	refusal error
}

func (b *oldBroker) Heartbeat(ctx context.Context, req api.HeartbeatRequest) (api.HeartbeatResponse, error) {
	if b.refusal != nil {
		b.refused++
		return api.HeartbeatResponse{}, b.refusal
	}
	if req.Consolidations != nil {
		b.refused++
		return api.HeartbeatResponse{}, api.Errorf(api.CodeInvalidRequest, "decode body: json: unknown field \"consolidations\"")
	}
	return b.stubBroker.Heartbeat(ctx, req)
}

// TestHeartbeatWithoutConsolidationsForAnOldBroker: a broker that refuses
// the consolidations field gets the heartbeat again without it (the
// leases are renewed); other refusals are not retried.
func TestHeartbeatWithoutConsolidationsForAnOldBroker(t *testing.T) {
	cons := []api.Consolidation{{NodeGroupID: "ng-dear-standard", StartedAt: metav1.Now()}}
	for _, tc := range []struct {
		name        string
		req         api.HeartbeatRequest
		refusal     error
		wantErr     bool
		wantRefused int
		wantBeats   int
	}{
		{"with consolidations: sent again without", api.HeartbeatRequest{ClusterID: "consumer-1", Consolidations: cons}, nil, false, 1, 1},
		{"without: sent once", api.HeartbeatRequest{ClusterID: "consumer-1"}, nil, false, 0, 1},
		{"another field refused: not retried", api.HeartbeatRequest{ClusterID: "consumer-1", Consolidations: cons},
			api.Errorf(api.CodeInvalidRequest, "placement.latencyCandidates: must be 0 to 16"), true, 1, 0},
		{"the broker unavailable: not retried", api.HeartbeatRequest{ClusterID: "consumer-1", Consolidations: cons},
			api.Errorf(api.CodeServiceUnavailable, "consolidations are fine; the broker is not"), true, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &oldBroker{stubBroker: &stubBroker{}, refusal: tc.refusal}
			a := newTestAgent(t, b)
			_, err := a.sendHeartbeat(context.Background(), tc.req)
			if (err != nil) != tc.wantErr || b.refused != tc.wantRefused || b.heartbeats != tc.wantBeats {
				t.Fatalf("err %v, refused %d, accepted %d; want error %v, refused %d, accepted %d", err, b.refused, b.heartbeats, tc.wantErr, tc.wantRefused, tc.wantBeats)
			}
			if b.last.Consolidations != nil {
				t.Fatalf("the accepted heartbeat carries %+v", b.last.Consolidations)
			}
		})
	}
}
