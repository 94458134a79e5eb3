package reservations

import (
	"slices"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/store"
)

// One disruption budget per consumer (docs/placement.md, "A move decision is
// acted on twice"): the broker's migrations of manual reservations and the
// consumer agent's consolidations of autoscaled capacity count together in
// the consumer's durable ledger (store.MoveLedger):
//
//   - a migration is counted when the sweep starts it (Starts);
//   - a consolidation when a heartbeat first lists it (Consolidations,
//     identified by node group and the agent's start time, so one re-sent
//     every heartbeat is counted once);
//   - a heartbeat answer hands out only as many moves as the budget has
//     room for and holds their slots (Held) until the consumer's next
//     heartbeat, which releases them (or, reporting the consolidation,
//     converts them into a charge): a migration started meanwhile cannot
//     take them, so the budget is never overshot.
//
// used = migrations started in the window + consolidations charged in the
// window + held slots; a move may start (or be handed out) while used <
// limit. A start at t leaves the window at t + window exactly.

// budgetOf is consumer c's disruption budget of moves and where each part
// comes from: lifecycle.migrations, else its deprecated aliases
// maxMovesPerWindow / moveWindowSeconds, else the broker's
// --migration-budget / --migration-window; field by field.
func (s *Service) budgetOf(c *consumer) (limit int, window time.Duration, source string) {
	limit, window = s.cfg.MigrationBudget, s.cfg.MigrationWindow
	ls, ws := "broker", "broker"
	if l := c.rec.Heartbeat.Lifecycle; l != nil {
		switch {
		case l.Migrations != nil && l.Migrations.MaxPerWindow != nil:
			limit, ls = int(*l.Migrations.MaxPerWindow), "migrations"
		case l.MaxMovesPerWindow != nil:
			limit, ls = int(*l.MaxMovesPerWindow), "maxMovesPerWindow"
		}
		switch {
		case l.Migrations != nil && l.Migrations.WindowSeconds != nil:
			window, ws = time.Duration(*l.Migrations.WindowSeconds)*time.Second, "migrations"
		case l.MoveWindowSeconds != nil:
			window, ws = time.Duration(*l.MoveWindowSeconds)*time.Second, "moveWindowSeconds"
		}
	}
	source = ls
	if ws != ls {
		source = ls + "+" + ws
	}
	return limit, window, source
}

// budgetUse is what a consumer's ledger counts at one instant.
type budgetUse struct {
	migrations, consolidations, held int
	// nextAt is when the oldest counted start leaves the window (zero:
	// none counted).
	nextAt time.Time
}

func (u budgetUse) used() int { return u.migrations + u.consolidations + u.held }

// countBudget counts ledger l at now for window (nil l counts nothing).
func countBudget(l *store.MoveLedger, now time.Time, window time.Duration) budgetUse {
	var u budgetUse
	if l == nil {
		return u
	}
	from := now.Add(-window)
	note := func(at time.Time) {
		if u.nextAt.IsZero() || at.Add(window).Before(u.nextAt) {
			u.nextAt = at.Add(window)
		}
	}
	for _, at := range l.Starts {
		if at.After(from) {
			u.migrations++
			note(at)
		}
	}
	for _, ch := range l.Consolidations {
		if ch.At.After(from) {
			u.consolidations++
			note(ch.At)
		}
	}
	u.held = len(l.Held)
	return u
}

// pruneLedger returns l without the migration starts and consolidation
// charges out of the window at now; a consolidation reported in the
// latest heartbeat (still running) stays, so it is never charged twice.
// It returns l itself when nothing is dropped.
func pruneLedger(l *store.MoveLedger, now time.Time, window time.Duration, running []api.Consolidation) *store.MoveLedger {
	if l == nil {
		return nil
	}
	from := now.Add(-window)
	old := func(at time.Time) bool { return !at.After(from) }
	stale := func(ch store.ConsolidationCharge) bool {
		return old(ch.At) && !slices.ContainsFunc(running, func(r api.Consolidation) bool { return sameConsolidation(ch, r) })
	}
	if !slices.ContainsFunc(l.Starts, old) && !slices.ContainsFunc(l.Consolidations, stale) {
		return l
	}
	out := *l
	out.Starts = slices.DeleteFunc(slices.Clone(l.Starts), old)
	out.Consolidations = slices.DeleteFunc(slices.Clone(l.Consolidations), stale)
	out.Held = slices.Clone(l.Held)
	return &out
}

// sameConsolidation reports whether charge ch is of reported consolidation r.
func sameConsolidation(ch store.ConsolidationCharge, r api.Consolidation) bool {
	return ch.NodeGroupID == r.NodeGroupID && ch.StartedAt.Equal(r.StartedAt.Time)
}

// budgetUsed prunes consumer c's ledger (writing it in t when something
// was dropped) and counts it at t.now for window.
func (s *Service) budgetUsed(t *txn, c *consumer, window time.Duration) budgetUse {
	if l := pruneLedger(c.rec.Moves, t.now, window, c.rec.Heartbeat.Consolidations); l != c.rec.Moves {
		c.rec.Moves = l
		s.putConsumer(t, c)
	}
	return countBudget(c.rec.Moves, t.now, window)
}

// settleHeartbeatLocked applies heartbeat c's consolidations to its ledger
// (c.rec.Moves, carried from the previous record) and hands out its moves:
// the slots the previous answer held are released, the consolidations not
// charged yet are charged (at t.now), the ledger pruned, then every "move"
// decision the budget has room for is handed out with a slot held until
// the next heartbeat. A group whose slot was held but which this heartbeat
// does not report (the agent declined or could not start its move: no
// head-room, its local cap, an agent older than the report) gets no move
// in this answer: its slot stays free until the next heartbeat, and the
// sweep is woken, so a migration waiting for the budget can take it. A
// move nobody starts thus holds a slot every other heartbeat at most,
// never for good. It reports the moves and whether the ledger changed.
func (s *Service) settleHeartbeatLocked(t *txn, c *consumer) ([]api.Reevaluation, bool) {
	limit, window, _ := s.budgetOf(c)
	before := c.rec.Moves
	l := &store.MoveLedger{}
	if before != nil {
		*l = *before
		l.Starts = slices.Clone(before.Starts)
		l.Consolidations = slices.Clone(before.Consolidations)
	}
	declined := declinedHolds(before, c.rec.Heartbeat.Consolidations)
	l.Held = nil // released (or converted below)
	s.chargeReported(t, c, l)
	l = pruneLedger(l, t.now, window, c.rec.Heartbeat.Consolidations)
	moves := s.handOut(c, l, limit, countBudget(l, t.now, window), declined)
	if len(declined) > 0 {
		s.kickSweep() // the declined slots are free until the next heartbeat
	}
	if before == nil && len(l.Starts) == 0 && len(l.Consolidations) == 0 && len(l.Held) == 0 {
		return moves, false // nothing to keep: no ledger
	}
	changed := before == nil || !ledgerEqual(before, l)
	if changed {
		c.rec.Moves = l
	}
	return moves, changed
}

// chargeReported adds to ledger l the consolidations heartbeat c reports
// that l has not charged yet, at t.now.
func (s *Service) chargeReported(t *txn, c *consumer, l *store.MoveLedger) {
	for _, r := range c.rec.Heartbeat.Consolidations {
		if slices.ContainsFunc(l.Consolidations, func(ch store.ConsolidationCharge) bool { return sameConsolidation(ch, r) }) {
			continue
		}
		l.Consolidations = append(l.Consolidations, store.ConsolidationCharge{NodeGroupID: r.NodeGroupID, StartedAt: r.StartedAt.Time, At: t.now})
		s.log.Info("Consolidation counted against the disruption budget", "consumer", c.rec.Heartbeat.ClusterID, "nodeGroup", r.NodeGroupID, "target", r.TargetNodeGroupID, "startedAt", r.StartedAt.Time)
	}
}

// declinedHolds is the set of groups whose slot ledger before held and
// which running (the heartbeat's consolidations) does not report.
func declinedHolds(before *store.MoveLedger, running []api.Consolidation) map[string]bool {
	if before == nil || len(before.Held) == 0 {
		return nil
	}
	out := map[string]bool{}
	for _, g := range before.Held {
		if !slices.ContainsFunc(running, func(r api.Consolidation) bool { return r.NodeGroupID == g }) {
			out[g] = true
		}
	}
	return out
}

// handOut returns consumer c's "move" decisions the agent may start, as
// far as the budget (limit, use counted without holds) has room, holding a
// slot in l.Held for each: those of groups holding an autoscaled
// reservation, neither group in a reported consolidation, nor declined
// (their slot was held by the previous answer and not used).
func (s *Service) handOut(c *consumer, l *store.MoveLedger, limit int, use budgetUse, declined map[string]bool) []api.Reevaluation {
	if limit <= 0 {
		return nil
	}
	cn := c.rec.Heartbeat.ClusterID
	busy := map[string]bool{}
	for _, r := range c.rec.Heartbeat.Consolidations {
		busy[r.NodeGroupID], busy[r.TargetNodeGroupID] = true, true
	}
	var moves []api.Reevaluation
	for _, d := range s.decisions[cn] {
		if d.Decision != api.DecisionMove || d.Target == "" {
			continue
		}
		if busy[d.NodeGroupID] || busy[api.NodeGroupID(d.Target, d.ChunkType)] || !s.holdsAutoscaled(cn, d) {
			continue // the agent would not start it: nothing to hold
		}
		if declined[d.NodeGroupID] {
			continue // not started last time: its slot is free until the next heartbeat
		}
		switch {
		case s.noHolds && use.used() < limit:
			moves = append(moves, d)
		case !s.noHolds && use.used()+len(l.Held) < limit:
			l.Held = append(l.Held, d.NodeGroupID)
			moves = append(moves, d)
		}
	}
	return moves
}

// ledgerEqual compares two ledgers (times with Equal).
func ledgerEqual(a, b *store.MoveLedger) bool {
	return slices.EqualFunc(a.Starts, b.Starts, time.Time.Equal) &&
		slices.EqualFunc(a.Consolidations, b.Consolidations, func(x, y store.ConsolidationCharge) bool {
			return x.NodeGroupID == y.NodeGroupID && x.StartedAt.Equal(y.StartedAt) && x.At.Equal(y.At)
		}) &&
		slices.Equal(a.Held, b.Held) && a.Moves == b.Moves && a.CostPerHour == b.CostPerHour && a.CarbonPerHour == b.CarbonPerHour && a.Since.Equal(b.Since)
}

// holdsAutoscaled reports whether consumer cn holds a live autoscaled
// (res-) reservation in decision d's group: only those are the agent's to
// consolidate.
func (s *Service) holdsAutoscaled(cn string, d api.Reevaluation) bool {
	for _, r := range s.st.byPair[store.PairKey(cn, d.ProviderClusterID)] {
		if !api.IsManualReservation(r.ID) && r.ChunkType == d.ChunkType && !r.Phase.Terminal() && r.Phase != api.PhaseUnpeering {
			return true
		}
	}
	return false
}

// moveBudgetStatusLocked is consumer c's budget as the API shows it (nil
// when the budget is 0 and its ledger counts nothing).
func (s *Service) moveBudgetStatusLocked(c *consumer, now time.Time) *api.MoveBudgetStatus {
	limit, window, source := s.budgetOf(c)
	u := countBudget(c.rec.Moves, now, window)
	if limit == 0 && u.used() == 0 {
		return nil
	}
	out := &api.MoveBudgetStatus{
		Limit: int32(limit), WindowSeconds: int64(window / time.Second), Used: int32(u.used()),
		Migrations: int32(u.migrations), Consolidations: int32(u.consolidations), Held: int32(u.held), Source: source,
	}
	if !u.nextAt.IsZero() {
		out.NextAt = mtp(&u.nextAt)
	}
	return out
}
