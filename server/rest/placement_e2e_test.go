package rest_test

import (
	"testing"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// growable returns the providers with head-room per chunk type in the
// consumer's view.
func growable(tb testing.TB, view api.NodeGroupListResponse) []string {
	tb.Helper()
	var out []string
	for _, g := range view.NodeGroups {
		if g.MaxSize > g.CurrentReserved {
			out = append(out, g.ProviderClusterID)
		}
	}
	return out
}

// TestPlacementFollowsPolicyOverMTLS is issue #3's end-to-end check over
// real mTLS: three providers with different prices, carbon and places; one
// consumer switches its policy by heartbeat and the single growable group
// follows it; a provider that denies the consumer is never offered and a
// reservation against it is refused.
func TestPlacementFollowsPolicyOverMTLS(t *testing.T) {
	b := startBroker(t)
	type prov struct {
		id        string
		cpuPrice  string
		carbon    float64
		renewable bool
		lat, lon  float64
		sharing   map[string]any
	}
	// Hand-computed winners (standard chunk = 2 CPU, 4 GiB; memory price 0):
	//   Price:   sydney 2×0.010 = 0.020 < paris 0.060 < montreal 0.080
	//   Eco:     montreal 30 < paris 55 < sydney 720 (flat forecasts)
	//   Latency: from London (51.5, -0.13) paris ~344 km < montreal < sydney
	//   Standard: every provider fully free → renewable montreal wins
	//             (0.8·1 + 0.2·1 = 1.0 against 0.8)
	//   Weighted (carbon only) = Eco.
	provs := []prov{
		{"sydney", "0.010", 720, false, -33.87, 151.21, nil},
		{"montreal", "0.040", 30, true, 45.50, -73.57, nil},
		{"paris", "0.030", 55, false, 48.86, 2.35, nil},
		{"tokyo", "0.001", 10, true, 35.68, 139.69, map[string]any{"deniedConsumers": []string{"london"}}},
	}
	for _, p := range provs {
		c := b.client(t, p.id, api.RoleProvider)
		adv := advertisement(p.id, 4)
		adv["unitPrices"] = map[string]string{"cpu": p.cpuPrice, "memory": "0"}
		adv["carbonIntensity"] = p.carbon
		adv["carbonForecast"] = []float64{p.carbon, p.carbon, p.carbon}
		adv["renewable"] = p.renewable
		adv["topology"] = map[string]any{"latitude": p.lat, "longitude": p.lon, "city": p.id}
		if p.sharing != nil {
			adv["sharing"] = p.sharing
		}
		expect(t, c.Must(t, "POST", "/api/v1/advertisements", adv), 200, "")
	}
	london := b.client(t, "london", api.RoleConsumer)
	lat, lon := 51.5, -0.13

	tests := []struct {
		policy    map[string]any
		want      string
		shortlist bool
	}{
		{map[string]any{"type": "Price"}, "sydney", false},
		{map[string]any{"type": "Eco"}, "montreal", false},
		{map[string]any{"type": "Standard"}, "montreal", false},
		{map[string]any{"type": "Latency"}, "paris", true},
		{map[string]any{"type": "Weighted", "weights": map[string]any{"carbon": 1}}, "montreal", false},
		{map[string]any{"type": "Weighted", "weights": map[string]any{"price": 1}}, "sydney", false},
		{map[string]any{"type": "Cheapest-Please"}, "montreal", false}, // unknown → Standard
	}
	for _, tc := range tests {
		name := tc.policy["type"].(string)
		t.Run(name, func(t *testing.T) {
			hb := heartbeat("london")
			hb["placement"] = tc.policy
			hb["latitude"], hb["longitude"] = lat, lon
			expect(t, london.Must(t, "POST", "/api/v1/heartbeat", hb), 200, "")
			r := london.Must(t, "GET", "/api/v1/nodegroups", nil)
			expect(t, r, 200, "")
			var view api.NodeGroupListResponse
			if err := r.Decode(&view); err != nil {
				t.Fatal(err)
			}
			for _, g := range view.NodeGroups {
				if g.ProviderClusterID == "tokyo" {
					t.Fatalf("the view offers tokyo, which denies london: %+v", g)
				}
			}
			got := growable(t, view)
			if tc.shortlist {
				if !view.LatencyShortlist || len(got) == 0 || got[0] == "" {
					t.Fatalf("Latency: shortlist %v, growable %v", view.LatencyShortlist, got)
				}
				if !containsStr(got, tc.want) {
					t.Fatalf("Latency shortlist %v lacks the nearest provider %s", got, tc.want)
				}
				return
			}
			if len(got) != 1 || got[0] != tc.want {
				t.Fatalf("policy %v: growable %v, want exactly [%s]", tc.policy, got, tc.want)
			}
			applied := view.AppliedPlacement
			if name == "Cheapest-Please" && applied != api.PlacementStandard {
				t.Fatalf("unknown policy applied as %q, want Standard", applied)
			}
		})
	}

	// Reserving on the denying provider is refused; on the winner it works.
	r := london.Must(t, "POST", "/api/v1/reservations", reservation("tokyo"), api.HeaderReservationID, "res-denied")
	expect(t, r, 403, api.CodeForbidden)
	r = london.Must(t, "POST", "/api/v1/reservations", reservation("sydney"), api.HeaderReservationID, "res-ok")
	expect(t, r, 201, "")
}

func containsStr(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
