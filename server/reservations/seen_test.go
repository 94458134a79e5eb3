package reservations

import (
	"fmt"
	"testing"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/deploy/testpoll"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// TestUnchangedReportsWriteAtMostEverySeenPeriod: an advertisement or
// heartbeat that repeats what is stored is not written again until the
// stored last-seen time is a third of ProviderStaleAfter old, and then
// within SeenFlushDelay, not before it is answered; any change is written
// before it is answered.
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
		// lazy: the write waits for SeenFlushDelay (only the time moved).
		lazy bool
	}{
		{"same advertisement soon", 10 * time.Second, func(e *env) { e.advertise("p1", 4) }, false, false},
		{"same advertisement just before the period", 29 * time.Second, func(e *env) { e.advertise("p1", 4) }, false, false},
		{"same advertisement after the period", 30 * time.Second, func(e *env) { e.advertise("p1", 4) }, true, true},
		{"new price", time.Second, func(e *env) { e.advertise("p1", 4, priced) }, true, false},
		{"more capacity", time.Second, func(e *env) { e.advertise("p1", 5) }, true, false},
		{"same heartbeat soon", 10 * time.Second, func(e *env) { e.heartbeat("c1") }, false, false},
		{"same heartbeat after the period", 31 * time.Second, func(e *env) { e.heartbeat("c1") }, true, true},
		{"heartbeat listing reservations", time.Second, func(e *env) { e.heartbeat("c1", "res-x") }, false, false},
		{"heartbeat with a location", time.Second, func(e *env) {
			if _, err := e.s.Heartbeat(e.ctx, "c1", located("c1")); err != nil {
				t.Fatal(err)
			}
		}, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.advertise("p1", 4)
			e.heartbeat("c1")
			before := e.st.applies.Load()
			e.clk.Step(tt.after)
			tt.report(e)
			if wrote := e.st.applies.Load() != before; wrote != (tt.writes && !tt.lazy) {
				t.Fatalf("store written before the answer = %v, want %v", wrote, tt.writes && !tt.lazy)
			}
			if tt.lazy {
				// The committer arms its flush timer on the fake clock
				// after the report: step until it has fired.
				testpoll.Until(t, 10*time.Second, "the refreshed last-seen time written", func() bool {
					e.clk.Step(SeenFlushDelay)
					return e.st.applies.Load() != before
				})
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

// TestRefreshedLastSeenTimesShareOneCommit: the unchanged reports of many
// agents due for a refresh of their stored last-seen time are written
// together, in one transaction, within SeenFlushDelay; a restart finds the
// refreshed times.
func TestRefreshedLastSeenTimesShareOneCommit(t *testing.T) {
	e := newEnv(t)
	const n = 20
	for i := range n {
		e.advertise(fmt.Sprint("p", i), 4)
		e.heartbeat(fmt.Sprint("c", i))
	}
	e.clk.Step(DefaultProviderStaleAfter / 3)
	before := e.st.applies.Load()
	for i := range n {
		e.advertise(fmt.Sprint("p", i), 4)
		e.heartbeat(fmt.Sprint("c", i))
	}
	if got := e.st.applies.Load() - before; got != 0 {
		t.Fatalf("%d commits before the flush delay, want 0", got)
	}
	refreshed := e.clk.Now()
	// Poll the store itself: the counter moves when a commit starts.
	stale := func() string {
		snap, err := e.st.Load(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range snap.Advertisements {
			if !a.LastSeen.Equal(refreshed) {
				return fmt.Sprintf("%s last seen %v", a.Request.ClusterID, a.LastSeen)
			}
		}
		for _, c := range snap.Consumers {
			if !c.LastSeen.Equal(refreshed) {
				return fmt.Sprintf("%s last seen %v", c.Heartbeat.ClusterID, c.LastSeen)
			}
		}
		return ""
	}
	testpoll.UntilSeen(t, 10*time.Second, "every refreshed last-seen time stored", func() (bool, string) {
		e.clk.Step(SeenFlushDelay)
		st := stale()
		return st == "", st
	})
	if got := e.st.applies.Load() - before; got != 1 {
		t.Fatalf("%d commits for %d refreshed reports, want 1", got, 2*n)
	}
}
