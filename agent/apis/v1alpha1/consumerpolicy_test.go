package v1alpha1

import (
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

func TestActivePolicyLowestNameWins(t *testing.T) {
	named := func(names ...string) []ConsumerPolicy {
		out := make([]ConsumerPolicy, len(names))
		for i, n := range names {
			out[i] = ConsumerPolicy{ObjectMeta: metav1.ObjectMeta{Name: n}}
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		items []ConsumerPolicy
		want  string
	}{
		{"none", nil, ""},
		{"one", named("default"), "default"},
		{"lowest first", named("a", "b"), "a"},
		{"lowest last", named("zeta", "default", "beta"), "beta"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ActivePolicy(tc.items)
			switch {
			case tc.want == "" && got != nil:
				t.Fatalf("ActivePolicy = %q, want none", got.Name)
			case tc.want != "" && (got == nil || got.Name != tc.want):
				t.Fatalf("ActivePolicy = %v, want %q", got, tc.want)
			}
			if got != nil && got != &tc.items[indexOf(tc.items, tc.want)] {
				t.Errorf("ActivePolicy returned a copy; callers update the element in place")
			}
		})
	}
}

func indexOf(items []ConsumerPolicy, name string) int {
	for i := range items {
		if items[i].Name == name {
			return i
		}
	}
	return -1
}

func TestPlacementConversionRoundTrips(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   api.Placement
	}{
		{"type only", api.Placement{Type: api.PlacementPrice}},
		{"weighted", api.Placement{Type: api.PlacementWeighted, Weights: &api.Weights{Price: 1, Carbon: 2.5, Distance: 3, FreeCapacity: 1000}}},
		{"latency with its own shortlist", api.Placement{Type: api.PlacementLatency, LatencyCandidates: 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := PlacementFromAPI(tc.in).API()
			if got == nil || !reflect.DeepEqual(*got, tc.in) {
				t.Fatalf("round trip of %+v = %+v", tc.in, got)
			}
		})
	}
	if p := (Placement{}).API(); p != nil {
		t.Errorf("an empty placement converts to %+v, want nil (the broker's default)", p)
	}
	// The agent's default shortlist is sent under Latency only.
	if p := (Placement{Type: PlacementLatency}).API(); p == nil || p.LatencyCandidates != DefaultLatencyCandidates {
		t.Errorf("Latency without a shortlist size converts to %+v, want latencyCandidates %d", p, DefaultLatencyCandidates)
	}
	if p := (Placement{Type: PlacementPrice}).API(); p == nil || p.LatencyCandidates != 0 {
		t.Errorf("Price converts to %+v, want no latencyCandidates", p)
	}
}

func TestSetPlacementKeepsTheShortlistSize(t *testing.T) {
	five, three := int32(5), int32(3)
	s := ConsumerPolicySpec{Placement: Placement{Type: PlacementLatency, LatencyCandidates: &five}}
	// A placement without a shortlist size (the consoles' forms, the demo's
	// policy switch) keeps the spec's own.
	s.SetPlacement(Placement{Type: PlacementPrice})
	if s.Placement.Type != PlacementPrice || s.Placement.LatencyCandidates == nil || *s.Placement.LatencyCandidates != 5 {
		t.Fatalf("after a change without a shortlist size: %+v, want Price with latencyCandidates 5", s.Placement)
	}
	// One that says replaces it.
	s.SetPlacement(Placement{Type: PlacementLatency, LatencyCandidates: &three})
	if n := s.Placement.LatencyCandidates; n == nil || *n != 3 {
		t.Fatalf("latencyCandidates %v, want 3", n)
	}
}
