package reservations

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// The heartbeat's unknownReservations: every listed id that names no live
// reservation of the caller, once, in the order of its first listing.
func TestHeartbeatUnknownReservations(t *testing.T) {
	e := newEnv(t)
	e.advertise("p1", 4)
	e.heartbeat("c1")
	e.heartbeat("c2")
	e.reserve("c1", "a", "p1")
	e.reserve("c1", "b", "p1")
	e.reserve("c2", "theirs", "p1")
	for _, tt := range []struct {
		name   string
		listed []string
		want   []string
	}{
		{"none listed", nil, nil},
		{"all held", []string{"a", "b"}, nil},
		{"held, unsorted, repeated", []string{"b", "a", "b", "a"}, nil},
		{"unknown repeated keeps first-listed order", []string{"z", "a", "y", "z", "b", "y"}, []string{"z", "y"}},
		{"another tenant's reservation is unknown to the caller", []string{"a", "theirs"}, []string{"theirs"}},
		{"not a reservation id at all", []string{"", "../x", strings.Repeat("x", 300)}, []string{"", "../x", strings.Repeat("x", 300)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := e.heartbeat("c1", tt.listed...).UnknownReservations; !slices.Equal(got, tt.want) {
				t.Fatalf("unknownReservations = %q, want %q", got, tt.want)
			}
		})
	}
	// A released (terminal) reservation is unknown.
	if _, err := e.s.Release(e.ctx, "c1", "a", 0); err != nil {
		t.Fatal(err)
	}
	if got := e.heartbeat("c1", "a", "b").UnknownReservations; !slices.Equal(got, []string{"a"}) {
		t.Fatalf("after release: unknownReservations = %q, want [a]", got)
	}
}

func TestHeartbeatReservationsCap(t *testing.T) {
	e := newEnv(t)
	ids := make([]string, api.MaxHeartbeatReservations+1)
	for i := range ids {
		ids[i] = fmt.Sprintf("r-%d", i)
	}
	req := api.HeartbeatRequest{ClusterID: "c1", LiqoClusterID: "liqo-c1", Reservations: ids}
	_, err := e.s.Heartbeat(e.ctx, "c1", req)
	wantCode(t, err, api.CodeInvalidRequest)
	if !strings.Contains(err.Error(), "reservations lists 10001 ids; at most 10000") {
		t.Fatalf("error %q does not name the field and the cap", err)
	}
	req.Reservations = ids[:api.MaxHeartbeatReservations]
	resp, err := e.s.Heartbeat(e.ctx, "c1", req)
	if err != nil || len(resp.UnknownReservations) != api.MaxHeartbeatReservations {
		t.Fatalf("heartbeat at the cap: %d unknown, %v", len(resp.UnknownReservations), err)
	}
}

func TestDistinct(t *testing.T) {
	for _, tt := range []struct{ in, want []string }{
		{nil, nil},
		{[]string{"a"}, []string{"a"}},
		{[]string{"a", "b", "c"}, []string{"a", "b", "c"}},
		{[]string{"a", "a", "b"}, []string{"a", "b"}},
		{[]string{"c", "a", "c", "b", "a"}, []string{"c", "a", "b"}},
	} {
		in := slices.Clone(tt.in)
		if got := distinct(in); !slices.Equal(got, tt.want) {
			t.Errorf("distinct(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if !slices.Equal(in, tt.in) {
			t.Errorf("distinct(%q) changed its argument to %q", tt.in, in)
		}
	}
}
