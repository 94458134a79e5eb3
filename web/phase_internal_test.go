package web

import (
	"testing"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// TestConsumerReservationGrace: a reservation whose provider is
// disconnected shows its phase with the grace's end, amber, on the
// consumer console (the dashboard uses the same label); others show their
// phase.
func TestConsumerReservationGrace(t *testing.T) {
	now := time.Date(2026, 12, 1, 14, 0, 0, 0, time.Local)
	until := now.Add(3*time.Minute + 10*time.Second)
	st := ConsumerStatus{ClusterID: "lyon", Reservations: []ConsumerReservation{
		{ID: "kept", ProviderClusterID: "paris", ChunkCount: 1, Phase: api.PhasePeered, CreatedAt: now.Add(-time.Minute), GraceUntil: &until},
		{ID: "fine", ProviderClusterID: "milan", ChunkCount: 1, Phase: api.PhasePeered, CreatedAt: now.Add(-2 * time.Minute)},
	}}
	v := consumerStatusView(now, st, "", "EUR")
	want := map[string][2]string{
		"kept": {"Peered, provider disconnected, grace until " + clockTime(until), "warn"},
		"fine": {"Peered", "ok"},
	}
	if len(v.Reservations) != len(want) {
		t.Fatalf("%d rows, want %d", len(v.Reservations), len(want))
	}
	for _, r := range v.Reservations {
		if w := want[r.ID]; r.Phase != w[0] || r.PhaseClass != w[1] {
			t.Errorf("%s: phase %q class %q, want %q %q", r.ID, r.Phase, r.PhaseClass, w[0], w[1])
		}
	}
}
