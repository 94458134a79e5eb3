package rest

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

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

func TestNoInstructionsBody(t *testing.T) {
	b, err := json.Marshal(api.InstructionListResponse{Instructions: []api.InstructionView{}})
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != noInstructions {
		t.Fatalf("noInstructions = %s, json.Marshal gives %s", noInstructions, b)
	}
}

func TestRouteTemplates(t *testing.T) {
	var rt routeTable
	rt.add("GET", routeHealthz)
	rt.add("GET", routeAdvertisement)
	rt.add("DELETE", routeReservation)
	rt.add("GET", routeReservation)
	rt.add("POST", routeResult)
	for _, tc := range []struct {
		method, path string
		want         string
		allow        []string
	}{
		{"GET", "/healthz", routeHealthz, nil},
		{"HEAD", "/healthz/", routeHealthz, nil},
		{"POST", "/healthz", routeUnmatched, []string{"GET", "HEAD"}},
		{"GET", "/api/v1/advertisements/p1", routeAdvertisement, nil},
		{"GET", "/api/v1/advertisements", routeAdvertisement, nil}, // optional trailing parameter
		{"GET", "/api/v1/advertisements/p1/x", routeUnmatched, nil},
		{"DELETE", "/api/v1/reservations/r1", routeReservation, nil},
		{"PUT", "/api/v1/reservations/r1", routeUnmatched, []string{"DELETE", "GET", "HEAD"}},
		{"POST", "/api/v1/instructions/i1/result", routeResult, nil},
		{"POST", "/api/v1/instructions//result", routeResult, nil},
		{"POST", "//api/v1/instructions/i1/result//", routeResult, nil},
		{"POST", "/api/v2/instructions/i1/result", routeUnmatched, nil},
		{"GET", "/", routeUnmatched, nil},
		{"GET", "", routeUnmatched, nil},
	} {
		got, allow := rt.match(tc.method, tc.path)
		if got != tc.want || !slices.Equal(allow, tc.allow) {
			t.Errorf("match(%s %q) = %q %v, want %q %v", tc.method, tc.path, got, allow, tc.want, tc.allow)
		}
		if got := rt.template(tc.method, tc.path); got != tc.want {
			t.Errorf("template(%s %q) = %q, want %q", tc.method, tc.path, got, tc.want)
		}
	}
}
