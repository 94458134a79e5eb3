package reservations

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// moveEnv is the migration tests' federation: c1 (Price) holds manual-1 on
// dear (0.10 per chunk-hour); cheap costs 0.08, a saving of 0.02 per chunk
// that beats the default threshold of 0.01.
type moveEnv struct {
	*env
	budget *api.MigrationBudget
}

func newMoveEnv(t *testing.T, budget int, mod ...func(*api.AdvertisementRequest)) *moveEnv {
	t.Helper()
	e := &moveEnv{env: newEnv(t, func(c *Config) { c.MigrationBudget = budget })}
	e.advertise("dear", 4, priced("0.03", "0.01"))
	e.advertise("cheap", 4, append([]func(*api.AdvertisementRequest){priced("0.02", "0.01")}, mod...)...)
	e.beat(nil, nil)
	return e
}

// beat sends c1's heartbeat under Price, listing ids with the virtual
// nodes of starting not Ready yet.
func (e *moveEnv) beat(ids, starting []string) api.HeartbeatResponse {
	e.t.Helper()
	req := api.HeartbeatRequest{ClusterID: "c1", LiqoClusterID: "liqo-c1", Placement: &api.Placement{Type: api.PlacementPrice},
		Reservations: ids, StartingReservations: starting}
	if e.budget != nil {
		req.Lifecycle = &api.Lifecycle{Migrations: e.budget}
	}
	resp, err := e.s.Heartbeat(e.ctx, "c1", req)
	if err != nil {
		e.t.Fatalf("heartbeat: %v", err)
	}
	return resp
}

// later moves the clock by d with both providers and c1 still fresh.
func (e *moveEnv) later(d time.Duration, ids, starting []string) {
	e.t.Helper()
	e.clk.Step(d)
	e.advertise("dear", 4, priced("0.03", "0.01"))
	e.advertise("cheap", 4, priced("0.02", "0.01"))
	e.beat(ids, starting)
}

// sweeps runs two sweeps: the first decides, the second (the one the
// decision kicks) starts the moves.
func (e *moveEnv) sweeps() {
	e.s.sweep(e.ctx)
	e.s.sweep(e.ctx)
}

// peerTarget drives the move target id on cheap to Peered.
func (e *moveEnv) peerTarget(id string) {
	e.t.Helper()
	if e.phase(id) == api.PhaseGeneratingKubeconfig {
		e.result("cheap", gkName("c1", "cheap"), kubeconfig("kubeconfig-c1-cheap"))
	}
	e.result("c1", peerName(id), peered("vn-"+id))
}

// row is c1's row of the overview.
func (e *moveEnv) row() api.OverviewConsumer {
	e.t.Helper()
	ov, err := e.s.Overview(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, c := range ov.Consumers {
		if c.ClusterID == "c1" {
			return c
		}
	}
	return api.OverviewConsumer{}
}

func (e *moveEnv) migrations() []api.Migration { return e.row().Migrations }

func (e *moveEnv) savings() *api.MigrationSavings { return e.row().Savings }

func (e *moveEnv) moves(outcome string) float64 {
	return testutil.ToFloat64(gauge(e.t.(*testing.T), e.s, "fa_broker_migrations_total", `"`+outcome+`"`))
}

// TestMigrationStateMachine drives one move of manual-1 from dear to cheap
// per row and checks where both reservations end, the move's state and
// reason, the savings and the counters.
func TestMigrationStateMachine(t *testing.T) {
	const old, target = "manual-1", "manual-1.m1"
	for _, tc := range []struct {
		name string
		// drive takes the move from "target reserved" to its outcome.
		drive                 func(e *moveEnv)
		oldPhase, targetPhase api.Phase
		state, reason         string
		moved                 int32
	}{{
		name: "target Ready: old released",
		drive: func(e *moveEnv) {
			e.peerTarget(target)
			// Listed but still starting: not Ready yet, nothing released.
			e.beat([]string{old, target}, []string{target})
			e.s.sweep(e.ctx)
			if p := e.phase(old); p != api.PhasePeered {
				t.Fatalf("old is %s while its target's node is starting, want Peered", p)
			}
			e.beat([]string{old, target}, nil)
			e.s.sweep(e.ctx)
		},
		oldPhase: api.PhaseUnpeering, targetPhase: api.PhasePeered,
		state: api.MigrationFinished, reason: "is Ready on cheap", moved: 1,
	}, {
		name: "target fails: old kept",
		drive: func(e *moveEnv) {
			e.result("cheap", gkName("c1", "cheap"), kubeconfig("kubeconfig-c1-cheap"))
			e.result("c1", peerName(target), failed("liqoctl peer: boom"))
			e.s.sweep(e.ctx)
		},
		oldPhase: api.PhasePeered, targetPhase: api.PhaseFailed,
		state: api.MigrationFailed, reason: "peering failed: liqoctl peer: boom",
	}, {
		name: "target never Ready: timed out, target released, old kept",
		drive: func(e *moveEnv) {
			e.peerTarget(target)
			e.beat([]string{old, target}, []string{target})
			e.later(DefaultMigrationTimeout, []string{old, target}, []string{target})
			e.s.sweep(e.ctx)
		},
		oldPhase: api.PhasePeered, targetPhase: api.PhaseUnpeering,
		state: api.MigrationFailed, reason: "was not Ready within 10m0s",
	}, {
		name: "restart mid-move: carries on, one target",
		drive: func(e *moveEnv) {
			e.peerTarget(target)
			e.restart()
			e.beat([]string{old, target}, nil)
			e.sweeps()
		},
		oldPhase: api.PhasePeered, targetPhase: api.PhasePeered, // old: see below
		state: api.MigrationFinished, reason: "is Ready on cheap", moved: 1,
	}, {
		name: "old released by the consumer mid-move: target released",
		drive: func(e *moveEnv) {
			if _, err := e.s.Release(e.ctx, "c1", old, 0); err != nil {
				t.Fatal(err)
			}
			e.s.sweep(e.ctx)
		},
		oldPhase: api.PhaseUnpeering, targetPhase: api.PhaseReleased,
		state: api.MigrationFailed, reason: "manual-1 is Unpeering",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newMoveEnv(t, 2)
			e.peer("c1", old, "dear")
			e.sweeps()
			if p := e.phase(target); p != api.PhaseGeneratingKubeconfig {
				t.Fatalf("target %s is %q after the move decision, want GeneratingKubeconfig (reserved on cheap)", target, p)
			}
			if n := e.moves(moveStarted); n != 1 {
				t.Fatalf("started = %v, want 1", n)
			}
			tc.drive(e)
			want := tc.oldPhase
			if tc.name == "restart mid-move: carries on, one target" {
				want = api.PhaseUnpeering
			}
			if p := e.phase(old); p != want {
				t.Errorf("old %s is %s, want %s", old, p, want)
			}
			if p := e.phase(target); p != tc.targetPhase {
				t.Errorf("target %s is %s, want %s", target, p, tc.targetPhase)
			}
			if p := e.phase(api.MigrationID(old, 2)); p != "" {
				t.Errorf("a second target %s exists (%s), want one target per attempt", api.MigrationID(old, 2), p)
			}
			ms := e.migrations()
			if len(ms) != 1 || ms[0].State != tc.state || !strings.Contains(ms[0].Reason, tc.reason) || ms[0].TargetReservationID != target {
				t.Fatalf("migrations %+v, want one %s with reason containing %q", ms, tc.state, tc.reason)
			}
			if !nearly(ms[0].Saving.CostPerHour, 0.02) {
				t.Errorf("saving %v, want 0.02 per hour", ms[0].Saving.CostPerHour)
			}
			sv := e.savings()
			switch {
			case tc.moved == 0 && sv != nil:
				t.Errorf("savings %+v after no finished move, want none", sv)
			case tc.moved > 0 && (sv == nil || sv.Moves != tc.moved || !nearly(&sv.CostPerHour, 0.02)):
				t.Errorf("savings %+v, want %d move saving 0.02 per hour", sv, tc.moved)
			}
			if tc.name != "restart mid-move: carries on, one target" {
				if n := e.moves(tc.state); n != 1 {
					t.Errorf("%s = %v, want 1", tc.state, n)
				}
			}
		})
	}
}

// TestMigrationSavingsSurviveRestart: the ledger is in the consumer's
// record, so the savings and the budget's starts outlive a restart.
func TestMigrationSavingsSurviveRestart(t *testing.T) {
	e := newMoveEnv(t, 1)
	e.peer("c1", "manual-1", "dear")
	e.sweeps()
	e.peerTarget("manual-1.m1")
	e.beat([]string{"manual-1", "manual-1.m1"}, nil)
	e.s.sweep(e.ctx)
	e.restart()
	e.beat([]string{"manual-1.m1"}, nil)
	if sv := e.savings(); sv == nil || sv.Moves != 1 || !nearly(&sv.CostPerHour, 0.02) || sv.Since.IsZero() {
		t.Fatalf("savings after a restart: %+v, want 1 move saving 0.02 per hour", sv)
	}
	// The budget (1 per hour) was used before the restart: a second
	// manual reservation on dear is kept.
	e.peer("c1", "manual-2", "dear")
	e.sweeps()
	if p := e.phase("manual-2.m1"); p != "" {
		t.Fatalf("manual-2 started moving (%s) with the budget used before the restart", p)
	}
}

// TestMigrationKept: a move the budget or the target refuses does not
// start and is shown as kept with the reason; an autoscaled reservation
// is never moved by the broker; a consumer's budget 0 turns it off.
func TestMigrationKept(t *testing.T) {
	t.Run("budget used up", func(t *testing.T) {
		e := newMoveEnv(t, 1)
		e.peer("c1", "manual-1", "dear")
		e.peer("c1", "manual-2", "dear")
		e.sweeps()
		if e.phase("manual-1.m1") == "" || e.phase("manual-2.m1") != "" {
			t.Fatalf("targets: manual-1.m1 %q, manual-2.m1 %q; want only the first moving", e.phase("manual-1.m1"), e.phase("manual-2.m1"))
		}
		var kept *api.Migration
		for _, m := range e.migrations() {
			if m.ReservationID == "manual-2" {
				kept = &m
			}
		}
		if kept == nil || kept.State != api.MigrationKept || !strings.Contains(kept.Reason, "disruption budget of 1 moves per 1h0m0s is used up") {
			t.Fatalf("manual-2's move %+v, want kept by the budget", kept)
		}
		e.s.sweep(e.ctx)
		if n := e.moves(moveKept); n != 1 {
			t.Errorf("kept = %v, want 1 (a kept move counts once while its reason stands)", n)
		}
		// An hour later the budget has room again.
		e.later(time.Hour, []string{"manual-1", "manual-1.m1", "manual-2"}, nil)
		e.sweeps()
		if p := e.phase("manual-2.m1"); p == "" {
			t.Fatalf("manual-2 not moving once the window passed")
		}
	})
	t.Run("target's quota refuses", func(t *testing.T) {
		// A decision taken before cheap's room went: the reserve path's
		// own admission (here cheap's quota of 1 chunk per consumer,
		// which res-1 holds) refuses the target.
		e := newMoveEnv(t, 2, func(r *api.AdvertisementRequest) { r.Sharing = &api.Sharing{MaxChunksPerConsumer: 1} })
		e.peer("c1", "manual-1", "dear")
		e.s.sweep(e.ctx)
		e.peer("c1", "res-1", "cheap")
		e.s.sweep(e.ctx) // the re-evaluation after it would say keep, so the
		e.s.mu.Lock()    // stale decision is put back by hand
		e.s.decisions["c1"] = []api.Reevaluation{{NodeGroupID: "ng-dear-standard", ProviderClusterID: "dear", ChunkType: api.ChunkStandard, Chunks: 1, Decision: api.DecisionMove, Target: "cheap"}}
		e.s.mu.Unlock()
		e.s.sweep(e.ctx)
		var kept *api.Migration
		for _, m := range e.migrations() {
			if m.ReservationID == "manual-1" {
				kept = &m
			}
		}
		if e.phase("manual-1.m1") != "" || kept == nil || kept.State != api.MigrationKept || !strings.Contains(kept.Reason, "cheap refuses the reservation: consumer \"c1\" already holds 1 of the 1") {
			t.Fatalf("manual-1's move %+v (target %q), want kept: cheap allows 1 chunk per consumer", kept, e.phase("manual-1.m1"))
		}
	})
	t.Run("autoscaled reservation", func(t *testing.T) {
		e := newMoveEnv(t, 2)
		e.peer("c1", "res-1", "dear")
		e.sweeps()
		if p, ms := e.phase(api.MigrationID("res-1", 1)), e.migrations(); p != "" || len(ms) != 0 {
			t.Fatalf("the autoscaled res-1 moved (%q, %+v); the Cluster Autoscaler moves it", p, ms)
		}
	})
	t.Run("consumer's budget 0", func(t *testing.T) {
		e := newMoveEnv(t, 2)
		zero := int32(0)
		e.budget = &api.MigrationBudget{MaxPerWindow: &zero}
		e.beat(nil, nil)
		e.peer("c1", "manual-1", "dear")
		e.sweeps()
		if p := e.phase("manual-1.m1"); p != "" {
			t.Fatalf("manual-1 moved (%s) with the consumer's budget 0", p)
		}
	})
}

func TestMigrationID(t *testing.T) {
	for _, tc := range []struct {
		id   string
		n    int
		want string
	}{
		{"manual-1", 1, "manual-1.m1"},
		{"manual-1", 3, "manual-1.m3"},
		{"manual-1.m1", 1, "manual-1.m2"},
		{"manual-1.m2", 2, "manual-1.m4"},
		{"a.m0", 1, "a.m0.m1"},
		{"a.m01", 1, "a.m01.m1"},
		{"a.mx", 1, "a.mx.m1"},
	} {
		if got := api.MigrationID(tc.id, tc.n); got != tc.want {
			t.Errorf("MigrationID(%q, %d) = %q, want %q", tc.id, tc.n, got, tc.want)
		}
	}
}
