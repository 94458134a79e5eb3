package reservations

import (
	"reflect"
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

// TestExplanationCarriesTheConsumersSpend: the consumer's own explanation
// carries its spend, equal to its overview row. Hand-computed: p1 costs
// 2 × 0.5 = 1.0 per chunk-hour, p2 2 × 0.75 = 1.5; a standard chunk draws
// 10 W, so p1's 200 g/kWh is 2 g/h per chunk and p2's 50 g/kWh 0.5 g/h.
// c1 holds 2 chunks on p1: 2.0 per hour, 4 g/h; after 30 minutes it spent
// 1.0 today and this month; the same chunks would cost 3.0 per hour and
// emit 1 g/h on p2, the dearest. The dashboard's list carries no spend
// (the overview has it).
func TestExplanationCarriesTheConsumersSpend(t *testing.T) {
	e := newEnv(t)
	keep := func() {
		e.advertise("p1", 4, priced("0.5", "0"), withCarbon(200))
		e.advertise("p2", 4, priced("0.75", "0"), withCarbon(50))
		e.heartbeat("c1", "r1", "r2")
	}
	keep()
	e.reserve("c1", "r1", "p1")
	e.reserve("c1", "r2", "p1")
	e.s.sweep(e.ctx) // the sample the reservations asked for
	e.sweepFor(30*time.Minute, keep)

	ex, err := e.s.Explanation(e.ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	sp := ex.Spend
	if sp == nil {
		t.Fatal("the consumer's explanation carries no spend")
	}
	checks := []struct {
		name      string
		got, want float64
	}{
		{"standard chunks", float64(sp.Chunks[api.ChunkStandard]), 2},
		{"cost per hour", sp.CostPerHour, 2.0},
		{"carbon per hour", sp.CarbonPerHour, 4.0},
		{"spent today", sp.SpentToday, 1.0},
		{"spent this month", sp.SpentThisMonth, 1.0},
	}
	for _, c := range checks {
		if !near(c.got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
		}
	}
	for _, te := range ex.ChunkTypes {
		if te.ChunkType != api.ChunkStandard {
			continue
		}
		if d := te.MostExpensive; d == nil || d.ProviderClusterID != "p2" || d.CostPerHour == nil || !near(*d.CostPerHour, 3.0) ||
			d.CarbonPerHour == nil || !near(*d.CarbonPerHour, 1.0) {
			t.Errorf("the dearest alternative is %+v, want p2 at 3.0 per hour and 1 g/h", d)
		}
	}
	row := e.consumerRow("c1")
	if row.Spend == nil || !reflect.DeepEqual(*row.Spend, *sp) {
		t.Errorf("the explanation's spend %+v differs from the overview's %+v", *sp, row.Spend)
	}
	list, err := e.s.Explanations(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range list {
		if l.Spend != nil {
			t.Errorf("the dashboard's explanation of %s carries a spend: %+v", l.ConsumerClusterID, l.Spend)
		}
	}
}

func withCarbon(g float64) func(*api.AdvertisementRequest) {
	return func(r *api.AdvertisementRequest) { r.CarbonIntensity = &g }
}
