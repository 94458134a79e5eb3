package reservations

import (
	"testing"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// TestExplanationsRecomputedOnlyAfterAChange: the periodic advertisements
// and heartbeats of an unchanged federation reuse the computed list (its
// GeneratedAt says when); a reservation, a new price or a new consumer
// recompute it.
func TestExplanationsRecomputedOnlyAfterAChange(t *testing.T) {
	e := newEnv(t)
	e.advertise("p1", 4)
	e.advertise("p2", 4)
	e.heartbeat("c1")
	generated := func() (time.Time, []api.PlacementExplanation) {
		t.Helper()
		list, err := e.s.Explanations(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) == 0 {
			t.Fatal("no explanations")
		}
		return list[0].GeneratedAt.Time, list
	}
	first, _ := generated()

	steps := []struct {
		name       string
		do         func()
		recomputed bool
	}{
		{"nothing happened", func() {}, false},
		{"same advertisements and heartbeat", func() { e.advertise("p1", 4); e.advertise("p2", 4); e.heartbeat("c1") }, false},
		{"a reservation", func() { e.reserve("c1", "res-1", "p1") }, true},
		{"same again", func() { e.heartbeat("c1", "res-1"); e.advertise("p2", 4) }, false},
		{"a new price", func() {
			e.advertise("p2", 4, func(r *api.AdvertisementRequest) { r.UnitPrices = rl("0.01", "0.001") })
		}, true},
		{"a new consumer", func() { e.heartbeat("c2") }, true},
	}
	last := first
	for _, st := range steps {
		e.clk.Step(time.Second) // so a recomputation shows in GeneratedAt
		st.do()
		at, list := generated()
		if got := !at.Equal(last); got != st.recomputed {
			t.Errorf("%s: recomputed = %v (generated %v, before %v), want %v", st.name, got, at, last, st.recomputed)
		}
		last = at
		if st.name == "a new consumer" && len(list) != 2 {
			t.Errorf("after a new consumer: %d explanations, want 2", len(list))
		}
	}
}
