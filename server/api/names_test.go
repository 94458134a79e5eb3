package api

import (
	"strings"
	"testing"
)

// FuzzParseProviderID: node providerIDs come from the Cluster Autoscaler
// (any node of the cluster); a parsed one names a provider and a
// reservation exactly (it round-trips through ProviderID) and anything else
// is "not ours".
func FuzzParseProviderID(f *testing.F) {
	for _, s := range []string{"liqo://p1/res-1", "liqo://p1/", "liqo:///res-1", "aws:///eu-west-1a/i-0123", "liqo://../p1/x", "liqo://p1/a/b", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		p, r, ok := ParseProviderID(id)
		if !ok {
			return
		}
		if p == "" || r == "" || strings.Contains(p, "/") || ProviderID(p, r) != id {
			t.Fatalf("ParseProviderID(%q) = %q, %q: does not round-trip", id, p, r)
		}
	})
}

func TestReservationIDOr(t *testing.T) {
	gen := func() string { return "00000000-0000-4000-8000-000000000000" }
	for _, tc := range []struct {
		name, in, want string
		wantErr        bool
	}{
		{"generated when empty", "", "res-00000000-0000-4000-8000-000000000000", false},
		{"kept when given", "res-a.b", "res-a.b", false},
		{"manual ids are fine", "manual-1", "manual-1", false},
		{"uppercase is refused", "Res-1", "", true},
		{"too long is refused", strings.Repeat("a", 254), "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReservationIDOr(tc.in, gen)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Fatalf("ReservationIDOr(%q) = %q, %v; want %q, error %v", tc.in, got, err, tc.want, tc.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), HeaderReservationID) {
				t.Errorf("error %q does not name the header", err)
			}
		})
	}
	if id := NewReservationID(); !strings.HasPrefix(id, ReservationIDPrefix) || len(id) != len(ReservationIDPrefix)+36 {
		t.Errorf("NewReservationID() = %q, want res-<uuid>", id)
	}
}
