package consumer

import (
	"context"
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fav1alpha1 "github.com/federation-autoscaler/federation-autoscaler/agent/apis/v1alpha1"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// TestHeartbeatLocation: a location set in the ConsumerPolicy wins over the
// geo service's; without one (or with an unusable one) the address's is
// sent; Location says which.
func TestHeartbeatLocation(t *testing.T) {
	london := &Location{Region: "ENG", City: "London", Latitude: 51.5074, Longitude: -0.1278}
	cases := []struct {
		name     string
		set      *fav1alpha1.Location
		geo      *Location
		geoErr   error
		wantCity string
		wantSet  bool
	}{
		{"the address's", nil, london, nil, "London", false},
		{"set in the policy", &fav1alpha1.Location{City: "Sydney", Region: "NSW", Latitude: -33.8688, Longitude: 151.2093}, london, nil, "Sydney", true},
		{"set, geo service down", &fav1alpha1.Location{City: "Sydney", Region: "NSW", Latitude: -33.8688, Longitude: 151.2093}, nil, errors.New("down"), "Sydney", true},
		{"set without coordinates: the address's", &fav1alpha1.Location{City: "Nowhere"}, london, nil, "London", false},
		{"nothing known", nil, nil, errors.New("down"), "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pol := &fav1alpha1.ConsumerPolicy{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "fa"},
				Spec: fav1alpha1.ConsumerPolicySpec{Placement: fav1alpha1.Placement{Type: fav1alpha1.PlacementLatency}, Location: c.set}}
			a := newTestAgent(t, &stubBroker{}, pol)
			a.cfg.AdvertisedIP = "127.0.4.10"
			a.cfg.Geo = func(context.Context, string) (*Location, error) { return c.geo, c.geoErr }
			req, err := a.heartbeatRequest(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if req.City != c.wantCity {
				t.Fatalf("heartbeat city %q, want %q", req.City, c.wantCity)
			}
			if c.wantSet && (req.Latitude == nil || *req.Latitude != c.set.Latitude || *req.Longitude != c.set.Longitude) {
				t.Fatalf("heartbeat coordinates %v,%v, want the policy's %v,%v", req.Latitude, req.Longitude, c.set.Latitude, c.set.Longitude)
			}
			if req.Placement == nil || req.Placement.Type != api.PlacementLatency {
				t.Fatalf("placement %+v lost next to the location", req.Placement)
			}
			loc, set := a.Location()
			if (loc == nil) != (c.wantCity == "") || set != c.wantSet || loc != nil && loc.City != c.wantCity {
				t.Fatalf("Location() = %+v, %v; want city %q, set %v", loc, set, c.wantCity, c.wantSet)
			}
		})
	}
}

// TestSubscribeSignalsReservations: the console pushes on the agent's
// signal; a reservation made or released through the agent signals it.
func TestSubscribeSignalsReservations(t *testing.T) {
	b := &stubBroker{reserveStatus: []int{201}}
	a := newTestAgent(t, b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := a.Subscribe(ctx)
	wait := func(what string) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("no change signal after %s", what)
		}
	}
	req := api.ReservationRequest{ProviderClusterID: "paris", NodeGroupID: api.NodeGroupID("paris", api.ChunkStandard), ChunkCount: 1, ChunkType: api.ChunkStandard}
	if _, _, err := a.Reserve(ctx, "res-1", req); err != nil {
		t.Fatal(err)
	}
	wait("a reservation")
	if _, _, err := a.Release(ctx, "res-1"); err != nil {
		t.Fatal(err)
	}
	wait("a release")
	select {
	case <-ch:
		t.Fatal("a signal without a change")
	default:
	}
}
