package reservations

import (
	"testing"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// TestUnchangedReportsWriteAtMostEverySeenPeriod: an advertisement or
// heartbeat that repeats what is stored is not written again until the
// stored last-seen time is a third of ProviderStaleAfter old; any change is
// written at once.
func TestUnchangedReportsWriteAtMostEverySeenPeriod(t *testing.T) {
	priced := func(r *api.AdvertisementRequest) { r.UnitPrices = rl("0.02", "0.002") }
	located := func(c string) api.HeartbeatRequest {
		lat, lon := 45.0, 9.0
		return api.HeartbeatRequest{ClusterID: c, LiqoClusterID: "liqo-" + c, Latitude: &lat, Longitude: &lon}
	}
	tests := []struct {
		name   string
		after  time.Duration // since the first report
		report func(e *env)
		writes bool
	}{
		{"same advertisement soon", 10 * time.Second, func(e *env) { e.advertise("p1", 4) }, false},
		{"same advertisement just before the period", 29 * time.Second, func(e *env) { e.advertise("p1", 4) }, false},
		{"same advertisement after the period", 30 * time.Second, func(e *env) { e.advertise("p1", 4) }, true},
		{"new price", time.Second, func(e *env) { e.advertise("p1", 4, priced) }, true},
		{"more capacity", time.Second, func(e *env) { e.advertise("p1", 5) }, true},
		{"same heartbeat soon", 10 * time.Second, func(e *env) { e.heartbeat("c1") }, false},
		{"same heartbeat after the period", 31 * time.Second, func(e *env) { e.heartbeat("c1") }, true},
		{"heartbeat listing reservations", time.Second, func(e *env) { e.heartbeat("c1", "res-x") }, false},
		{"heartbeat with a location", time.Second, func(e *env) {
			if _, err := e.s.Heartbeat(e.ctx, "c1", located("c1")); err != nil {
				t.Fatal(err)
			}
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.advertise("p1", 4)
			e.heartbeat("c1")
			before := e.st.applies.Load()
			e.clk.Step(tt.after)
			tt.report(e)
			if wrote := e.st.applies.Load() != before; wrote != tt.writes {
				t.Errorf("store written = %v, want %v", wrote, tt.writes)
			}
		})
	}
}

// TestSkippedWritesKeepProvidersAvailableAcrossARestart: after a crash the
// stored last-seen time is at most a third of ProviderStaleAfter behind, so
// a provider that kept advertising is available after the restart and its
// latest content is what was stored.
func TestSkippedWritesKeepProvidersAvailableAcrossARestart(t *testing.T) {
	e := newEnv(t)
	for range 8 { // 8 × 11 s: the stored time is refreshed every 30 s
		e.advertise("p1", 4)
		e.heartbeat("c1")
		e.clk.Step(11 * time.Second)
	}
	e.restart()
	snap, err := e.s.Advertisement(e.ctx, "p1")
	if err != nil {
		t.Fatal(err)
	}
	if !snap.Available {
		t.Fatalf("provider unavailable after a restart (last seen %v, now %v)", snap.LastSeen, e.clk.Now())
	}
	if age := e.clk.Now().Sub(snap.LastSeen.Time); age > DefaultProviderStaleAfter/3+11*time.Second {
		t.Errorf("stored last-seen is %v old, want at most %v", age, DefaultProviderStaleAfter/3+11*time.Second)
	}
	if _, _, err := e.s.Reserve(e.ctx, "c1", "res-1", stdReq("p1")); err != nil {
		t.Errorf("reserve on the provider after the restart: %v", err)
	}
}

// TestSkippedWriteStillMovesTheOverview: a heartbeat that writes nothing
// still moves the overview's version (its last-seen time is shown).
func TestSkippedWriteStillMovesTheOverview(t *testing.T) {
	e := newEnv(t)
	e.heartbeat("c1")
	e.advertise("p1", 4)
	for _, report := range []func(){func() { e.heartbeat("c1") }, func() { e.advertise("p1", 4) }} {
		v := e.s.Version()
		applies := e.st.applies.Load()
		e.clk.Step(time.Second)
		report()
		if e.st.applies.Load() != applies {
			t.Fatalf("an unchanged report was written")
		}
		if e.s.Version() == v {
			t.Errorf("version did not move after an unchanged report")
		}
	}
}
