package rest

import "testing"

func TestPeriodicCallsAreLoggedAtDebug(t *testing.T) {
	for _, tc := range []struct {
		method, route string
		want          bool
	}{
		{"POST", routeAdvertisements, true},
		{"POST", routeHeartbeat, true},
		{"GET", routeNodeGroups, true},
		{"GET", routeInstructions, true},
		{"GET", routeAdvertisements + "/:clusterId", false},
		{"POST", routeReservations, false},
		{"DELETE", routeReservations + "/:id", false},
		{"POST", routeInstructions + "/:id/result", false},
		{"GET", "unmatched", false},
	} {
		if got := periodic(tc.method, tc.route); got != tc.want {
			t.Errorf("periodic(%s %s) = %v, want %v", tc.method, tc.route, got, tc.want)
		}
	}
}
