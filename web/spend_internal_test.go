package web

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/web/views"
)

type memHistory struct {
	at   []time.Time
	data [][]byte
}

func (m *memHistory) AppendHistory(_ context.Context, at time.Time, data []byte, keepAfter time.Time) error {
	for len(m.at) > 0 && m.at[0].Before(keepAfter) {
		m.at, m.data = m.at[1:], m.data[1:]
	}
	m.at, m.data = append(m.at, at), append(m.data, data)
	return nil
}

func (m *memHistory) LoadHistory(_ context.Context, fn func(time.Time, []byte) error) error {
	for i := range m.at {
		if err := fn(m.at[i], m.data[i]); err != nil {
			return err
		}
	}
	return nil
}

// TestHistorySurvivesRestart stores samples, and a new history restored
// from the store charts the same series.
func TestHistorySurvivesRestart(t *testing.T) {
	st := &memHistory{}
	t0 := time.Date(2026, 12, 1, 13, 0, 0, 0, time.UTC)
	h := newHistory(10*time.Minute, 5*time.Second)
	for i := range 200 { // 1000 s: more than the window
		now := t0.Add(time.Duration(i) * 5 * time.Second)
		h.record(now, []api.AdvertisementSnapshot{ad("paris", int32(i%3), 0.05, now, true)}, nil)
		if err := h.persist(context.Background(), st, now, nil); err != nil {
			t.Fatal(err)
		}
	}
	end := t0.Add(199 * 5 * time.Second)
	if len(st.at) > int(10*time.Minute/(5*time.Second))+1 {
		t.Fatalf("store holds %d samples, more than the window", len(st.at))
	}
	h2 := newHistory(10*time.Minute, 5*time.Second)
	if _, err := h2.restore(context.Background(), st, end); err != nil {
		t.Fatal(err)
	}
	ids1, s1, _ := h.snapshot()
	ids2, s2, _ := h2.snapshot()
	if len(ids1) != 1 || len(ids2) != 1 || len(s2["paris"]) != len(s1["paris"]) {
		t.Fatalf("restored %d samples of %v, had %d of %v", len(s2["paris"]), ids2, len(s1["paris"]), ids1)
	}
	for i := range s1["paris"] {
		a, b := s1["paris"][i], s2["paris"][i]
		if !a.at.Equal(b.at) || a.reserved != b.reserved || a.price != b.price || a.carbon != b.carbon {
			t.Fatalf("sample %d: %+v restored as %+v", i, a, b)
		}
	}
}

// TestBuildTotals: per consumer and federation rows by hand.
func TestBuildTotals(t *testing.T) {
	fp := func(v float64) *float64 { return &v }
	cs := []api.OverviewConsumer{
		{ClusterID: "lyon", Spend: &api.ConsumerSpend{Chunks: map[api.ChunkType]int32{api.ChunkStandard: 3}, CostPerHour: 0.156, CarbonPerHour: 9, SpentToday: 0.5, SpentThisMonth: 2}},
		{ClusterID: "idle", Spend: &api.ConsumerSpend{}},
	}
	exs := []api.PlacementExplanation{{ConsumerClusterID: "lyon", ChunkTypes: []api.ChunkTypeExplanation{{
		ChunkType: api.ChunkStandard, Held: 3,
		MostExpensive:  &api.Alternative{ProviderClusterID: "dear", CostPerHour: fp(0.30), CarbonPerHour: fp(1.5)},
		StandardChoice: &api.Alternative{ProviderClusterID: "milan", CostPerHour: fp(0.24), CarbonPerHour: fp(3)},
	}}}, {ConsumerClusterID: "idle"}}
	rows := buildTotals(cs, exs, "EUR")
	sort.SliceStable(rows, func(i, j int) bool { return !rows[i].Federation && rows[j].Federation })
	l := rows[1]
	if l.Consumer != "lyon" || l.Rate != "0.1560 EUR/h" || l.Today != "0.5000 EUR" || l.Month != "2.0000 EUR" || l.Carbon != "9.0 g/h" ||
		l.Dear != "0.3000 EUR/h" || l.DearOn != "dear" || l.DearSaving != "0.1440 EUR/h" || l.Std != "0.2400 EUR/h" || l.StdSaving != "0.0840 EUR/h" || l.StdCarbon != "3.0 g/h" {
		t.Errorf("lyon %+v", l)
	}
	f := rows[2]
	if !f.Federation || f.Chunks != "3" || f.Rate != "0.1560 EUR/h" || f.DearSaving != "0.1440 EUR/h" || f.Today != "0.5000 EUR" {
		t.Errorf("federation %+v", f)
	}
	if rows[0].Consumer != "idle" || rows[0].Dear != dash {
		t.Errorf("idle %+v", rows[0])
	}
}

// TestEventsSurviveRestart: the events log is stored with the history
// samples, each event once (in the sample after it was logged, again only
// when it changed), and a dashboard restored from the store shows the same
// events, newest first; a failed store write keeps the events for the next.
func TestEventsSurviveRestart(t *testing.T) {
	st := &memHistory{}
	t0 := time.Date(2026, 12, 1, 13, 0, 0, 0, time.UTC)
	h, log := newHistory(10*time.Minute, 5*time.Second), newEventLog(MaxEvents)
	ended := func(id string, at time.Time) api.OverviewReservation {
		return api.OverviewReservation{ReservationResponse: api.ReservationResponse{
			ReservationID: id, ConsumerClusterID: "lyon", ProviderClusterID: "paris", ChunkCount: 1, ChunkType: api.ChunkStandard,
			Status: api.PhaseReleased, CreatedAt: metav1.NewTime(t0),
		}, TerminatedAt: mtp(at)}
	}
	var ov api.Overview
	for i := range 10 {
		now := t0.Add(time.Duration(i) * 5 * time.Second)
		if i%3 == 0 { // a new ended reservation every third sample; the older ones stay in the overview
			ov.Reservations = append(ov.Reservations, ended(fmt.Sprintf("r-%d", i), now))
		}
		log.record(ov)
		if err := h.persist(context.Background(), st, now, log.takeUnsaved()); err != nil {
			t.Fatal(err)
		}
	}
	stored := 0
	for _, data := range st.data {
		var rec historyRecord
		if err := json.Unmarshal(data, &rec); err != nil {
			t.Fatal(err)
		}
		stored += len(rec.Events)
	}
	if stored != 4 {
		t.Fatalf("%d events stored over 10 samples, want each of the 4 once", stored)
	}
	// A write that fails keeps its events for the next one.
	ov.Reservations = append(ov.Reservations, ended("r-late", t0.Add(time.Minute)))
	log.record(ov)
	evs := log.takeUnsaved()
	if len(evs) != 1 {
		t.Fatalf("unsaved %+v, want r-late only", evs)
	}
	log.requeue(evs)
	if err := h.persist(context.Background(), st, t0.Add(time.Minute), log.takeUnsaved()); err != nil {
		t.Fatal(err)
	}

	h2, log2 := newHistory(10*time.Minute, 5*time.Second), newEventLog(MaxEvents)
	restored, err := h2.restore(context.Background(), st, t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	log2.restore(restored)
	want, got := log.snapshot(), log2.snapshot()
	if len(got) != 5 || len(got) != len(want) {
		t.Fatalf("restored %d events, want the 5 logged", len(got))
	}
	for i := range want {
		if !want[i].same(got[i]) {
			t.Errorf("event %d: %+v restored as %+v", i, want[i], got[i])
		}
	}
	if got[0].subject != "r-late" {
		t.Errorf("newest restored event %q, want r-late", got[0].subject)
	}
	if len(log2.takeUnsaved()) != 0 {
		t.Error("restored events are marked unsaved: they would be stored twice")
	}
}

// TestConsoleTotals: the consumer console's totals row, from its own
// explanation, by hand: 2 chunks at 0.116 per hour each = 0.2320 EUR/h;
// 4 g/h; the dearest (0.40) saves 0.40 − 0.232 = 0.1680, the Standard
// choice (0.30) 0.0680. A chunk without a price shows the rate "+ 1
// unpriced" and no saving (the rate is not the whole cost); an unpriced
// Standard choice reads "unpriced". Nothing held: no alternatives. An
// explanation without spend (an older broker): no totals.
func TestConsoleTotals(t *testing.T) {
	fp := func(v float64) *float64 { return &v }
	held := func(n int32, dear, std *api.Alternative) []api.ChunkTypeExplanation {
		return []api.ChunkTypeExplanation{{ChunkType: api.ChunkStandard, Held: n, MostExpensive: dear, StandardChoice: std}}
	}
	sydney := &api.Alternative{ProviderClusterID: "sydney", CostPerHour: fp(0.40), CarbonPerHour: fp(1.2)}
	paris := &api.Alternative{ProviderClusterID: "paris", CostPerHour: fp(0.30), CarbonPerHour: fp(6)}
	unpricedParis := &api.Alternative{ProviderClusterID: "paris", CarbonPerHour: fp(6)}
	two := map[api.ChunkType]int32{api.ChunkStandard: 2}
	cases := []struct {
		name string
		ex   api.PlacementExplanation
		want *views.TotalsRow
	}{
		{"an older broker sends no spend", api.PlacementExplanation{ChunkTypes: held(2, sydney, paris)}, nil},
		{"nothing borrowed", api.PlacementExplanation{Spend: &api.ConsumerSpend{SpentToday: 0.25, SpentThisMonth: 3}, ChunkTypes: held(0, nil, nil)},
			&views.TotalsRow{Consumer: "lyon", Chunks: "0", Rate: "0.0000 EUR/h", Today: "0.2500 EUR", Month: "3.0000 EUR", Carbon: "0.0 g/h",
				Dear: dash, DearCarbon: dash, DearSaving: dash, Std: dash, StdCarbon: dash, StdSaving: dash}},
		{"two priced chunks", api.PlacementExplanation{
			Spend:      &api.ConsumerSpend{Chunks: two, CostPerHour: 0.232, CarbonPerHour: 4, SpentToday: 1.16, SpentThisMonth: 12.3456},
			ChunkTypes: held(2, sydney, paris)},
			&views.TotalsRow{Consumer: "lyon", Chunks: "2", Rate: "0.2320 EUR/h", Today: "1.1600 EUR", Month: "12.3456 EUR", Carbon: "4.0 g/h",
				DearOn: "sydney", Dear: "0.4000 EUR/h", DearCarbon: "1.2 g/h", DearSaving: "0.1680 EUR/h",
				StdOn: "paris", Std: "0.3000 EUR/h", StdCarbon: "6.0 g/h", StdSaving: "0.0680 EUR/h"}},
		{"one chunk unpriced", api.PlacementExplanation{
			Spend:      &api.ConsumerSpend{Chunks: two, CostPerHour: 0.116, UnpricedChunks: 1, CarbonPerHour: 2, NoCarbonChunks: 1},
			ChunkTypes: held(2, sydney, paris)},
			&views.TotalsRow{Consumer: "lyon", Chunks: "2", Rate: "0.1160 EUR/h + 1 unpriced", Today: "0.0000 EUR", Month: "0.0000 EUR",
				Carbon: "2.0 g/h + 1 without carbon data",
				DearOn: "sydney", Dear: "0.4000 EUR/h", DearCarbon: "1.2 g/h", DearSaving: dash,
				StdOn: "paris", Std: "0.3000 EUR/h", StdCarbon: "6.0 g/h", StdSaving: dash}},
		{"the Standard choice unpriced", api.PlacementExplanation{
			Spend:      &api.ConsumerSpend{Chunks: two, CostPerHour: 0.232, CarbonPerHour: 4},
			ChunkTypes: held(2, sydney, unpricedParis)},
			&views.TotalsRow{Consumer: "lyon", Chunks: "2", Rate: "0.2320 EUR/h", Today: "0.0000 EUR", Month: "0.0000 EUR", Carbon: "4.0 g/h",
				DearOn: "sydney", Dear: "0.4000 EUR/h", DearCarbon: "1.2 g/h", DearSaving: "0.1680 EUR/h",
				StdOn: "paris", Std: "unpriced", StdCarbon: "6.0 g/h", StdSaving: dash}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := consoleTotals("lyon", c.ex, "EUR")
			switch {
			case c.want == nil && got != nil:
				t.Fatalf("totals %+v, want none", *got)
			case c.want != nil && got == nil:
				t.Fatalf("no totals, want %+v", *c.want)
			case c.want != nil && *got != *c.want:
				t.Fatalf("totals\n got %+v\nwant %+v", *got, *c.want)
			}
			// The console shows the row it was given.
			v := consumerStatusView(time.Now(), ConsumerStatus{ClusterID: "lyon", Explanation: &c.ex}, "", "EUR")
			if (v.Totals == nil) != (c.want == nil) || (v.Totals != nil && *v.Totals != *c.want) {
				t.Fatalf("the console's status view has totals %+v, want %+v", v.Totals, c.want)
			}
		})
	}
}
