package consumer

import (
	"context"
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
