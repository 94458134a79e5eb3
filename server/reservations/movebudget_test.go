package reservations

import (
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/store"
)

// TestBudgetOfAliases: the one budget is lifecycle.migrations, field by
// field over its deprecated aliases maxMovesPerWindow / moveWindowSeconds,
// over the broker's --migration-budget / --migration-window.
func TestBudgetOfAliases(t *testing.T) {
	i := func(v int32) *int32 { return &v }
	s := &Service{cfg: Config{MigrationBudget: 2, MigrationWindow: time.Hour}}
	for _, tc := range []struct {
		name       string
		l          *api.Lifecycle
		wantLimit  int
		wantWindow time.Duration
		wantSource string
	}{
		{"no lifecycle: the broker's", nil, 2, time.Hour, "broker"},
		{"thresholds only: the broker's", &api.Lifecycle{Thresholds: &api.Thresholds{}}, 2, time.Hour, "broker"},
		{"migrations", &api.Lifecycle{Migrations: &api.MigrationBudget{MaxPerWindow: i(5), WindowSeconds: i(600)}}, 5, 10 * time.Minute, "migrations"},
		{"migrations' count, the broker's window", &api.Lifecycle{Migrations: &api.MigrationBudget{MaxPerWindow: i(0)}}, 0, time.Hour, "migrations+broker"},
		{"aliases when migrations is unset", &api.Lifecycle{MaxMovesPerWindow: i(3), MoveWindowSeconds: i(60)}, 3, time.Minute, "maxMovesPerWindow+moveWindowSeconds"},
		{"migrations wins over the aliases", &api.Lifecycle{Migrations: &api.MigrationBudget{MaxPerWindow: i(1), WindowSeconds: i(120)}, MaxMovesPerWindow: i(3), MoveWindowSeconds: i(60)}, 1, 2 * time.Minute, "migrations"},
		{"field by field: migrations' count, the alias' window", &api.Lifecycle{Migrations: &api.MigrationBudget{MaxPerWindow: i(4)}, MoveWindowSeconds: i(60)}, 4, time.Minute, "migrations+moveWindowSeconds"},
		{"an empty migrations block: the aliases", &api.Lifecycle{Migrations: &api.MigrationBudget{}, MaxMovesPerWindow: i(0)}, 0, time.Hour, "maxMovesPerWindow+broker"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &consumer{rec: store.Consumer{Heartbeat: api.HeartbeatRequest{Lifecycle: tc.l}}}
			n, w, src := s.budgetOf(c)
			if n != tc.wantLimit || w != tc.wantWindow || src != tc.wantSource {
				t.Fatalf("budget %d per %s from %q, want %d per %s from %q", n, w, src, tc.wantLimit, tc.wantWindow, tc.wantSource)
			}
		})
	}
}

// TestCountBudget: hand-computed counts of one ledger at one instant, both
// kinds and the held slots; a start exactly one window old is out.
func TestCountBudget(t *testing.T) {
	now := time.Date(2026, 7, 22, 12, 0, 0, 0, time.UTC)
	h := time.Hour
	ch := func(ago time.Duration) store.ConsolidationCharge {
		return store.ConsolidationCharge{NodeGroupID: "ng-a-standard", StartedAt: now.Add(-ago - time.Second), At: now.Add(-ago)}
	}
	for _, tc := range []struct {
		name                  string
		l                     *store.MoveLedger
		mig, cons, held, used int
		nextAt                time.Time
	}{
		{"no ledger", nil, 0, 0, 0, 0, time.Time{}},
		{"a migration 59 min ago", &store.MoveLedger{Starts: []time.Time{now.Add(-59 * time.Minute)}}, 1, 0, 0, 1, now.Add(time.Minute)},
		{"a migration exactly one window ago is out", &store.MoveLedger{Starts: []time.Time{now.Add(-h)}}, 0, 0, 0, 0, time.Time{}},
		{"a migration 1 ns inside the window", &store.MoveLedger{Starts: []time.Time{now.Add(-h + time.Nanosecond)}}, 1, 0, 0, 1, now.Add(time.Nanosecond)},
		{"a consolidation charged 10 min ago", &store.MoveLedger{Consolidations: []store.ConsolidationCharge{ch(10 * time.Minute)}}, 0, 1, 0, 1, now.Add(50 * time.Minute)},
		{"a consolidation charged exactly one window ago is out", &store.MoveLedger{Consolidations: []store.ConsolidationCharge{ch(h)}}, 0, 0, 0, 0, time.Time{}},
		{"held slots count, with no next time", &store.MoveLedger{Held: []string{"ng-a-standard", "ng-b-standard"}}, 0, 0, 2, 2, time.Time{}},
		{"both kinds and a hold; the oldest sets the next time", &store.MoveLedger{
			Starts:         []time.Time{now.Add(-30 * time.Minute), now.Add(-2 * h)},
			Consolidations: []store.ConsolidationCharge{ch(40 * time.Minute), ch(5 * time.Minute)},
			Held:           []string{"ng-b-standard"},
		}, 1, 2, 1, 4, now.Add(20 * time.Minute)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := countBudget(tc.l, now, h)
			if u.migrations != tc.mig || u.consolidations != tc.cons || u.held != tc.held || u.used() != tc.used || !u.nextAt.Equal(tc.nextAt) {
				t.Fatalf("counted %+v (used %d), want %d migrations, %d consolidations, %d held, used %d, next %s",
					u, u.used(), tc.mig, tc.cons, tc.held, tc.used, tc.nextAt)
			}
		})
	}
}

// TestPruneLedger: starts and charges out of the window are dropped, but a
// consolidation still reported stays (so it is never charged twice); an
// unchanged ledger is returned as it is.
func TestPruneLedger(t *testing.T) {
	now := time.Date(2026, 7, 22, 12, 0, 0, 0, time.UTC)
	old := store.ConsolidationCharge{NodeGroupID: "ng-a-standard", StartedAt: now.Add(-3 * time.Hour), At: now.Add(-2 * time.Hour)}
	gone := store.ConsolidationCharge{NodeGroupID: "ng-b-standard", StartedAt: now.Add(-3 * time.Hour), At: now.Add(-2 * time.Hour)}
	fresh := store.ConsolidationCharge{NodeGroupID: "ng-c-standard", StartedAt: now.Add(-time.Minute), At: now.Add(-time.Minute)}
	running := []api.Consolidation{{NodeGroupID: "ng-a-standard", StartedAt: metav1.NewTime(old.StartedAt)}}
	l := &store.MoveLedger{Starts: []time.Time{now.Add(-2 * time.Hour), now.Add(-time.Minute)}, Consolidations: []store.ConsolidationCharge{old, gone, fresh}, Held: []string{"ng-d-standard"}}
	got := pruneLedger(l, now, time.Hour, running)
	if len(got.Starts) != 1 || len(got.Consolidations) != 2 || got.Consolidations[0].NodeGroupID != "ng-a-standard" || got.Consolidations[1].NodeGroupID != "ng-c-standard" || len(got.Held) != 1 {
		t.Fatalf("pruned %+v, want the recent start, the running and the fresh consolidation, the hold", got)
	}
	if len(l.Consolidations) != 3 {
		t.Fatal("pruning changed the ledger it was given (an earlier commit may still encode it)")
	}
	if again := pruneLedger(got, now, time.Hour, running); again != got {
		t.Fatal("a ledger with nothing to drop was copied")
	}
}

// budgetEnv is c1 holding an autoscaled reservation (res-1) and a manual
// one (manual-1) on dear, with cheap better by more than the threshold.
func newBudgetEnv(t *testing.T, budget int) *moveEnv {
	t.Helper()
	e := newMoveEnv(t, budget)
	e.peer("c1", "res-1", "dear")
	e.peer("c1", "manual-1", "dear")
	e.s.sweep(e.ctx) // decides: ng-dear-standard → cheap
	return e
}

// beatWith sends c1's heartbeat reporting consolidations cs.
func (e *moveEnv) beatWith(cs ...api.Consolidation) api.HeartbeatResponse {
	e.t.Helper()
	req := api.HeartbeatRequest{ClusterID: "c1", LiqoClusterID: "liqo-c1", Placement: &api.Placement{Type: api.PlacementPrice}, Consolidations: cs}
	if e.budget != nil {
		req.Lifecycle = &api.Lifecycle{Migrations: e.budget}
	}
	resp, err := e.s.Heartbeat(e.ctx, "c1", req)
	if err != nil {
		e.t.Fatalf("heartbeat: %v", err)
	}
	return resp
}

// status is c1's budget as the overview shows it.
func (e *moveEnv) status() api.MoveBudgetStatus {
	e.t.Helper()
	b := e.row().MoveBudget
	if b == nil {
		e.t.Fatal("the overview shows no move budget for c1")
	}
	return *b
}

func wantStatus(t *testing.T, step string, got api.MoveBudgetStatus, used, mig, cons, held int32) {
	t.Helper()
	if got.Used != used || got.Migrations != mig || got.Consolidations != cons || got.Held != held {
		t.Fatalf("%s: budget %+v, want used %d (%d migrations, %d consolidations, %d held)", step, got, used, mig, cons, held)
	}
}

// TestOneBudgetHoldsAndCharges: under a budget of 1 per hour the heartbeat
// hands out the move of the autoscaled group and holds its slot, so the
// sweep keeps the manual reservation's migration; the next heartbeat
// reporting the consolidation converts the hold into one charge, however
// often it is re-sent, and hands out nothing more; the charge outlives a
// restart (bolt) and leaves the window an hour later, while a consolidation
// still reported is never charged twice.
func TestOneBudgetHoldsAndCharges(t *testing.T) {
	e := newBudgetEnv(t, 1)
	resp := e.beatWith()
	if len(resp.Moves) != 1 || resp.Moves[0].NodeGroupID != "ng-dear-standard" || resp.Moves[0].Target != "cheap" {
		t.Fatalf("moves %+v, want ng-dear-standard → cheap", resp.Moves)
	}
	if b := resp.MoveBudget; b == nil || b.Held != 1 || b.Used != 1 || b.Limit != 1 || b.WindowSeconds != 3600 || b.Source != "broker" {
		t.Fatalf("heartbeat answer's budget %+v, want 1 held of 1 per 3600 s from the broker", b)
	}
	e.sweeps()
	if p := e.phase("manual-1.m1"); p != "" {
		t.Fatalf("manual-1 started moving (%s) into the slot held for the consolidation", p)
	}
	var kept *api.Migration
	for _, m := range e.migrations() {
		if m.ReservationID == "manual-1" && m.State == api.MigrationKept {
			kept = &m
		}
	}
	if kept == nil || !strings.Contains(kept.Reason, "1 slots held") || !strings.Contains(kept.Reason, "next heartbeat") {
		t.Fatalf("manual-1's move %+v, want kept by the held slot", kept)
	}
	started := metav1.NewTime(t0.Add(time.Second))
	cons := api.Consolidation{NodeGroupID: "ng-dear-standard", TargetNodeGroupID: "ng-cheap-standard", StartedAt: started}
	for i := range 3 {
		resp = e.beatWith(cons)
		if len(resp.Moves) != 0 {
			t.Fatalf("beat %d: moves %+v while the group's consolidation runs, want none", i, resp.Moves)
		}
		wantStatus(t, "consolidation reported", *resp.MoveBudget, 1, 0, 1, 0)
	}
	e.sweeps()
	if p := e.phase("manual-1.m1"); p != "" {
		t.Fatalf("manual-1 started moving (%s) with the budget used by the consolidation", p)
	}
	e.restart()
	wantStatus(t, "after a restart", e.status(), 1, 0, 1, 0)
	e.sweeps()
	if p := e.phase("manual-1.m1"); p != "" {
		t.Fatalf("manual-1 started moving (%s) after a restart, the consolidation's charge lost", p)
	}
	// An hour later, the consolidation still running: its charge left the
	// window, is not charged again, and the migration starts.
	e.clk.Step(time.Hour)
	e.advertise("dear", 4, priced("0.03", "0.01"))
	e.advertise("cheap", 4, priced("0.02", "0.01"))
	resp = e.beatWith(cons)
	wantStatus(t, "an hour later", *resp.MoveBudget, 0, 0, 0, 0)
	e.sweeps()
	if p := e.phase("manual-1.m1"); p == "" {
		t.Fatal("manual-1 not moving once the consolidation's charge left the window")
	}
	wantStatus(t, "the migration started", e.status(), 1, 1, 0, 0)
}

// TestOneBudgetDeclinedSlotIsFreed: an agent that does not start the move
// it was handed (an agent older than the report, its local cap, no
// head-room) does not hold the slot for good: the next heartbeat hands the
// group nothing, so the sweep can start the waiting migration; with no
// migration waiting, the move is handed out again at the heartbeat after.
func TestOneBudgetDeclinedSlotIsFreed(t *testing.T) {
	t.Run("a waiting migration takes the freed slot", func(t *testing.T) {
		e := newBudgetEnv(t, 1)
		if resp := e.beatWith(); len(resp.Moves) != 1 {
			t.Fatalf("moves %+v, want the group's move handed out", resp.Moves)
		}
		e.sweeps()
		if p := e.phase("manual-1.m1"); p != "" {
			t.Fatalf("manual-1 started moving (%s) into the held slot", p)
		}
		resp := e.beatWith() // the agent did not start it
		if len(resp.Moves) != 0 {
			t.Fatalf("moves %+v right after the agent left its slot unused, want none", resp.Moves)
		}
		wantStatus(t, "declined", *resp.MoveBudget, 0, 0, 0, 0)
		e.sweeps()
		if p := e.phase("manual-1.m1"); p == "" {
			t.Fatal("manual-1 not moving into the slot the agent left unused")
		}
		wantStatus(t, "the migration started", e.status(), 1, 1, 0, 0)
		if resp := e.beatWith(); len(resp.Moves) != 0 {
			t.Fatalf("moves %+v with the budget used by the migration, want none", resp.Moves)
		}
	})
	t.Run("no migration waiting: handed out every other heartbeat", func(t *testing.T) {
		e := newBudgetEnv(t, 1)
		if _, err := e.s.Release(e.ctx, "c1", "manual-1", 0); err != nil {
			t.Fatal(err)
		}
		for i, want := range []int{1, 0, 1, 0} {
			if resp := e.beatWith(); len(resp.Moves) != want {
				t.Fatalf("heartbeat %d: moves %+v, want %d", i, resp.Moves, want)
			}
		}
	})
}

// TestOneBudgetHandsOut: which moves a heartbeat answer hands out.
func TestOneBudgetHandsOut(t *testing.T) {
	zero, two := int32(0), int32(2)
	for _, tc := range []struct {
		name   string
		budget int
		policy *api.MigrationBudget
		setup  func(e *moveEnv)
		report []api.Consolidation
		want   int
	}{
		{"room: handed out and held", 1, nil, nil, nil, 1},
		{"budget 0: none", 0, nil, nil, nil, 0},
		{"the consumer's budget 0: none", 2, &api.MigrationBudget{MaxPerWindow: &zero}, nil, nil, 0},
		{"used up by a migration: none", 1, nil, func(e *moveEnv) {
			e.mu(func(c *consumer) { c.rec.Moves = &store.MoveLedger{Starts: []time.Time{t0}} })
		}, nil, 0},
		{"the consumer's budget of 2 has room beside a migration", 1, &api.MigrationBudget{MaxPerWindow: &two}, func(e *moveEnv) {
			e.mu(func(c *consumer) { c.rec.Moves = &store.MoveLedger{Starts: []time.Time{t0}} })
		}, nil, 1},
		{"only manual reservations in the group: none", 1, nil, func(e *moveEnv) {
			if _, err := e.s.Release(e.ctx, "c1", "res-1", 0); err != nil {
				e.t.Fatal(err)
			}
		}, nil, 0},
		{"the group's consolidation runs: none", 2, nil, nil, []api.Consolidation{{NodeGroupID: "ng-dear-standard", StartedAt: metav1.NewTime(t0)}}, 0},
		{"the target group is in a consolidation: none", 2, nil, nil, []api.Consolidation{{NodeGroupID: "ng-other-standard", TargetNodeGroupID: "ng-cheap-standard", StartedAt: metav1.NewTime(t0)}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newBudgetEnv(t, tc.budget)
			e.budget = tc.policy
			if tc.setup != nil {
				tc.setup(e)
			}
			resp := e.beatWith(tc.report...)
			if len(resp.Moves) != tc.want {
				t.Fatalf("moves %+v, want %d", resp.Moves, tc.want)
			}
			if b := resp.MoveBudget; tc.want > 0 && (b == nil || int(b.Held) != tc.want) {
				t.Fatalf("budget %+v, want %d held", b, tc.want)
			}
		})
	}
}

// mu runs f on c1's state entry under the state lock.
func (e *moveEnv) mu(f func(c *consumer)) {
	e.s.mu.Lock()
	defer e.s.mu.Unlock()
	f(e.s.st.consumers["c1"])
}

// startedMoves is how many moves of c1 the ledger counts started: its
// migrations and its consolidations (the clock stands still: all in the
// window).
func (e *moveEnv) startedMoves() int {
	e.s.mu.Lock()
	defer e.s.mu.Unlock()
	l := e.s.st.consumers["c1"].rec.Moves
	if l == nil {
		return 0
	}
	return len(l.Starts) + len(l.Consolidations)
}

// agentSim is a consumer agent that starts every move a heartbeat answer
// hands it and reports the consolidations under way in every heartbeat.
type agentSim struct {
	e       *moveEnv
	running []api.Consolidation
}

func (a *agentSim) beat() error {
	req := api.HeartbeatRequest{ClusterID: "c1", LiqoClusterID: "liqo-c1", Placement: &api.Placement{Type: api.PlacementPrice}, Consolidations: a.running}
	resp, err := a.e.s.Heartbeat(a.e.ctx, "c1", req)
	if err != nil {
		return err
	}
	for _, m := range resp.Moves {
		a.running = append(a.running, api.Consolidation{NodeGroupID: m.NodeGroupID, TargetNodeGroupID: api.NodeGroupID(m.Target, m.ChunkType), StartedAt: metav1.NewTime(a.e.clk.Now())})
	}
	return nil
}

func (a *agentSim) mustBeat() {
	a.e.t.Helper()
	if err := a.beat(); err != nil {
		a.e.t.Fatalf("heartbeat: %v", err)
	}
}

// TestOneBudgetHeldSlotsPreventOvershoot: a heartbeat hands out the
// move, a sweep runs before the next heartbeat, the next heartbeat reports
// the consolidation. With the holds the budget of 1 is never overshot;
// with the holds disabled the sweep starts a migration into the slot the
// move was given and two moves start.
func TestOneBudgetHeldSlotsPreventOvershoot(t *testing.T) {
	for _, tc := range []struct {
		name    string
		noHolds bool
		want    int
	}{{"holds", false, 1}, {"holds disabled", true, 2}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newBudgetEnv(t, 1)
			e.s.noHolds = tc.noHolds
			a := &agentSim{e: e}
			a.mustBeat()
			e.sweeps()
			a.mustBeat()
			e.sweeps()
			if got := e.startedMoves(); got != tc.want {
				t.Fatalf("%d moves started under a budget of 1, want %d", got, tc.want)
			}
		})
	}
}

// TestOneBudgetConcurrent: heartbeats (an agent that starts every move it
// is handed) and sweeps (which start migrations) run concurrently on a
// consumer with two autoscaled groups and two manual reservations under a
// budget of 2: never more than 2 moves start.
func TestOneBudgetConcurrent(t *testing.T) {
	for round := range 5 {
		e := newMoveEnv(t, 2)
		e.advertise("dear2", 4, priced("0.03", "0.01"))
		for _, r := range []struct{ id, p string }{{"res-1", "dear"}, {"res-2", "dear2"}, {"manual-1", "dear"}, {"manual-2", "dear2"}} {
			e.peer("c1", r.id, r.p)
		}
		e.s.sweep(e.ctx)
		a := &agentSim{e: e}
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			for range 20 {
				if err := a.beat(); err != nil {
					t.Errorf("heartbeat: %v", err)
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			for range 20 {
				e.s.sweep(e.ctx)
			}
		}()
		wg.Wait()
		a.mustBeat() // the last moves handed out are reported
		if got := e.startedMoves(); got > 2 || got == 0 {
			t.Fatalf("round %d: %d moves started under a budget of 2 (%d consolidations reported)", round, got, len(a.running))
		}
	}
}
