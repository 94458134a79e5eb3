package experiment

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func testConfig(t *testing.T) *Config {
	t.Helper()
	c, err := ParseConfig([]byte(validYAML + "latency: {refreshInterval: 10s, minMs: 1, maxMs: 10}\n"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestConditionsReplayPerPhase(t *testing.T) {
	cfg := testConfig(t)
	provs := []Site{{ID: "p1", Lat: 48.8, Lon: 2.3}, {ID: "p2", Lat: 51.5, Lon: -0.1}, {ID: "p3", Lat: 35.7, Lon: 139.7}, {ID: "p4", Lat: 45.5, Lon: -73.6}}
	cons := []Site{{ID: "c1", Lat: 45.4, Lon: 9.2}, {ID: "c2", Lat: -33.9, Lon: 151.2}}
	a, b := NewConditions(cfg, provs, cons), NewConditions(cfg, provs, cons)
	t0 := time.Now()
	a.Restart(t0)
	b.Restart(t0.Add(time.Hour)) // a later phase: the same values at the same τ
	greens := 0
	for k := range 5 {
		tau := time.Duration(k)*cfg.Carbon.RefreshInterval.Duration + time.Second
		for p := range provs {
			if a.CarbonAt(tau, p) != b.CarbonAt(a.Tau(t0.Add(tau)), p) {
				t.Fatalf("carbon of p%d at τ=%s differs between phases", p, tau)
			}
			v := a.CarbonAt(tau, p)
			if v < 30 || v > 520 || (v > 70 && v < 480) {
				t.Fatalf("carbon %v outside low±jitter and high±jitter", v)
			}
			if v < 100 {
				greens++
			}
			for c := range cons {
				if a.LatencyAt(tau, c, p) != b.LatencyAt(tau, c, p) {
					t.Fatalf("latency differs between phases")
				}
			}
		}
	}
	// greenFraction [0.25, 0.5] of 4 providers: 1 or 2 green per refresh.
	if greens < 5 || greens > 10 {
		t.Errorf("%d green values over 5 refreshes of 4 providers, want 5–10", greens)
	}
	if a.CarbonAt(time.Second, 0) == a.CarbonAt(time.Second, 1) && a.CarbonAt(time.Second, 1) == a.CarbonAt(time.Second, 2) {
		t.Errorf("every provider has the same carbon: no jitter")
	}
	// Latency: Sydney is ~16 000 km from Milan, so its distance term dominates.
	if a.LatencyAt(0, 0, 2) <= a.LatencyAt(0, 0, 0) {
		t.Errorf("Tokyo (%v ms) not farther than Paris (%v ms) from Milan", a.LatencyAt(0, 0, 2), a.LatencyAt(0, 0, 0))
	}
}

func TestReplayCheck(t *testing.T) {
	labels := func(f func(j int) string) map[int]string {
		m := map[int]string{}
		for j := range 60 {
			m[j] = f(j)
		}
		return m
	}
	base := labels(func(j int) string { return fmt.Sprintf("p%d", j/10) })
	for _, tc := range []struct {
		name   string
		other  map[int]string
		valid  bool
		reason string
	}{
		{"replayed", base, true, ""},
		{"two samples late per refresh", labels(func(j int) string { return fmt.Sprintf("p%d", (j+2)/10) }), true, ""},
		{"not replayed", labels(func(j int) string { return fmt.Sprintf("p%d", (j*7)%6) }), false, "too few instants"},
		{"constant", labels(func(int) string { return "p0" }), false, "too few instants"},
		{"too short", map[int]string{0: "p0"}, false, "fewer than 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rp := replay(base, tc.other, 0.75, 1)
			if rp.Valid != tc.valid || !strings.Contains(rp.Reason, tc.reason) {
				t.Fatalf("%+v, want valid=%v and a reason with %q", rp, tc.valid, tc.reason)
			}
			if tc.valid && rp.Match <= rp.Chance {
				t.Fatalf("match %v not above chance %v", rp.Match, rp.Chance)
			}
		})
	}
}

func TestAnalyzeMultiples(t *testing.T) {
	cfg := testConfig(t)
	rec := &Records{Selections: []Selection{
		{Phase: "A", Value: 500, Best: 50, Worst: 500},
		{Phase: "A", Value: 50, Best: 50, Worst: 500},
		{Phase: "B", Value: 55, Best: 50, Worst: 500},
		{Phase: "B", Value: 50, Best: 50, Worst: 500},
	}}
	res := Analyze(cfg, rec)
	if res[0].Multiple != 5.5 || res[0].WorstMultiple != 10 || res[1].Multiple != 1.05 || res[1].Selections != 2 {
		t.Fatalf("results %+v", res)
	}
	if res[1].Replay == nil || res[1].Replay.Valid {
		t.Fatalf("no observations: the replay check must refuse, got %+v", res[1].Replay)
	}
	s := NewSummary(cfg, res, time.Now(), time.Minute)
	if s.Comparable {
		t.Fatal("summary comparable without a valid replay")
	}
	if md := SummaryMarkdown(s); !strings.Contains(md, "**refused**") || !strings.Contains(md, "5.50×") {
		t.Fatalf("summary.md:\n%s", md)
	}
	if table := HeadlineTable([]*Summary{s}); !strings.Contains(table, "| Eco | carbon | 1.05× (refused: replay) |") {
		t.Fatalf("headline:\n%s", table)
	}
}
