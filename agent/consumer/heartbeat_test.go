package consumer

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fav1alpha1 "github.com/federation-autoscaler/federation-autoscaler/agent/apis/v1alpha1"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

func TestHeartbeatCarriesPolicyAndReservations(t *testing.T) {
	pol := func(ns, name string, p fav1alpha1.Placement) *fav1alpha1.ConsumerPolicy {
		return &fav1alpha1.ConsumerPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: fav1alpha1.ConsumerPolicySpec{Placement: p}}
	}
	vns := func(res string) *fav1alpha1.VirtualNodeState {
		return &fav1alpha1.VirtualNodeState{ObjectMeta: metav1.ObjectMeta{Name: "vns-" + res, Namespace: "fa"}, Spec: fav1alpha1.VirtualNodeStateSpec{ReservationID: res}}
	}
	a := newTestAgent(t, &stubBroker{},
		pol("fa", "zeta", fav1alpha1.Placement{Type: fav1alpha1.PlacementPrice}),
		pol("fa", "beta", fav1alpha1.Placement{Type: fav1alpha1.PlacementWeighted, Weights: &fav1alpha1.PlacementWeights{Price: 1, Carbon: 2}}),
		pol("elsewhere", "aaa", fav1alpha1.Placement{Type: fav1alpha1.PlacementEco}), // another namespace: ignored
		vns("res-b"), vns("res-a"))
	req, err := a.heartbeatRequest(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if req.ClusterID != "consumer-1" || req.LiqoClusterID != "consumer-1" {
		t.Errorf("ids %q %q", req.ClusterID, req.LiqoClusterID)
	}
	// The lowest name in the agent's namespace wins, weights included.
	if req.Placement == nil || req.Placement.Type != api.PlacementWeighted || req.Placement.Weights == nil || req.Placement.Weights.Carbon != 2 || req.Placement.Weights.Price != 1 {
		t.Fatalf("placement %+v, want beta's Weighted policy", req.Placement)
	}
	if len(req.Reservations) != 2 || req.Reservations[0] != "res-a" || req.Reservations[1] != "res-b" {
		t.Errorf("reservations %v, want the held ids sorted", req.Reservations)
	}
	if !equalHeartbeat(req, req) {
		t.Error("a heartbeat differs from itself")
	}
	changed := req
	changed.Reservations = []string{"res-a"}
	if equalHeartbeat(req, changed) {
		t.Error("a released chunk does not change the heartbeat")
	}
}

func TestResyncRemovesOrphansAndReportsMissing(t *testing.T) {
	b := &stubBroker{reserveStatus: []int{201}, phases: map[string]api.Phase{"res-live": api.PhasePeered}}
	orphan := &fav1alpha1.VirtualNodeState{ObjectMeta: metav1.ObjectMeta{Name: "vns-res-gone", Namespace: "fa"},
		Spec: fav1alpha1.VirtualNodeStateSpec{ReservationID: "res-gone", ProviderLiqoClusterID: "liqo-p"}}
	live := &fav1alpha1.VirtualNodeState{ObjectMeta: metav1.ObjectMeta{Name: "vns-res-live", Namespace: "fa"},
		Spec: fav1alpha1.VirtualNodeStateSpec{ReservationID: "res-live", ProviderLiqoClusterID: "liqo-p"}}
	a := newTestAgent(t, b, orphan, live)
	// A reservation made through the local API whose chunk vanished locally.
	if rec := do(t, a.LocalAPI(), "POST", "/local/reservations", `{"providerClusterId":"p","chunkCount":1,"chunkType":"standard"}`,
		map[string]string{api.HeaderReservationID: "res-lost"}); rec.Code != 201 {
		t.Fatalf("reserve %d", rec.Code)
	}
	b.mu.Lock()
	b.phases["res-lost"] = api.PhasePeered
	b.mu.Unlock()
	ctx := context.Background()
	if err := a.Resync(ctx); err != nil {
		t.Fatal(err)
	}
	var got fav1alpha1.VirtualNodeStateList
	if err := a.cfg.Client.List(ctx, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Items) != 1 || got.Items[0].Name != "vns-res-live" {
		t.Fatalf("after resync: %v, want only vns-res-live", got.Items)
	}
	if n := a.MissingReports(); n != 1 {
		t.Errorf("missing reports %d, want 1 (res-lost)", n)
	}
	// Once the broker has released it, it is no longer reported.
	b.mu.Lock()
	b.phases["res-lost"] = api.PhaseReleased
	b.mu.Unlock()
	if err := a.Resync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Resync(ctx); err != nil {
		t.Fatal(err)
	}
	if n := a.MissingReports(); n != 1 {
		t.Errorf("missing reports %d after release, want still 1", n)
	}
}

// TestHeartbeatWithoutARefusedPolicy: a ConsumerPolicy whose weights the
// broker refuses (one written before the CRD had its bounds) does not stop
// the heartbeats that renew the leases: they carry no placement, and the
// heartbeat passes the broker's own validation.
func TestHeartbeatWithoutARefusedPolicy(t *testing.T) {
	for _, w := range []float64{1e308, 1001, -1} {
		pol := &fav1alpha1.ConsumerPolicy{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "fa"},
			Spec: fav1alpha1.ConsumerPolicySpec{Placement: fav1alpha1.Placement{Type: fav1alpha1.PlacementWeighted, Weights: &fav1alpha1.PlacementWeights{Price: w}}}}
		a := newTestAgent(t, &stubBroker{}, pol)
		req, err := a.heartbeatRequest(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if req.Placement != nil {
			t.Errorf("weight %v: placement %+v sent, want none", w, req.Placement)
		}
		if err := req.Validate(); err != nil {
			t.Errorf("weight %v: the heartbeat is refused by the broker: %v", w, err)
		}
		if !strings.Contains(a.policyErr, "placement.weights.price") {
			t.Errorf("weight %v: recorded reason %q, want the field", w, a.policyErr)
		}
	}
}
