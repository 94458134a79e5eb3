package reservations

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/store"
)

// Defaults of the migration settings (the broker command's
// --migration-budget, --migration-window and --migration-timeout).
const (
	DefaultMigrationBudget  = 2
	DefaultMigrationWindow  = time.Hour
	DefaultMigrationTimeout = 10 * time.Minute
)

// Migration outcomes, the label of fa_broker_migrations_total.
const (
	moveStarted  = "started"
	moveFinished = api.MigrationFinished
	moveFailed   = api.MigrationFailed
	moveKept     = api.MigrationKept
)

// keptMove is a move a decision asks for that did not start, and why.
type keptMove struct {
	m api.Migration
}

// The migration of manual reservations (docs/placement.md, Migration) is a
// small state machine kept on the moved reservation (store.Migration), so
// a restart mid-move carries on from the store:
//
//	(none) --decision "move", budget left, target admitted--> moving
//	moving --target listed Ready by the consumer--> finished (old released)
//	moving --target failed, expired or released--> failed (old untouched)
//	moving --MigrationTimeout passed--> failed (target released)
//	moving --old reservation released or ended--> failed (target released)
//
// A move the budget or the target refuses is "kept" (in memory, shown
// while the decision stands). Every sweep advances the moves in progress,
// then starts what the latest decisions ask for.

// sweepMigrations advances every move in progress and starts the moves the
// latest decisions ask for. It reports whether the kept moves changed (they
// are in memory only; the overview shows them).
func (s *Service) sweepMigrations(t *txn, next *wake) bool {
	for _, r := range s.sortedReservations() {
		if m := r.Migration; m != nil && m.State == api.MigrationMoving {
			s.advanceMove(t, r, next)
		}
	}
	kept := map[string]keptMove{}
	for _, cn := range sortedKeys(s.decisions) {
		s.startMoves(t, cn, kept, next)
	}
	changed := len(kept) != len(s.kept)
	for id, k := range kept {
		old, seen := s.kept[id]
		if seen && old.m.Reason == k.m.Reason && old.m.To == k.m.To {
			k.m.StartedAt = old.m.StartedAt
			kept[id] = k
			continue
		}
		changed = true
		s.moveCounts[moveKept]++
		s.log.Info("Migration kept", "reservation", id, "from", k.m.From, "to", k.m.To, "reason", k.m.Reason)
	}
	s.kept = kept
	return changed
}

// advanceMove takes r's move in progress one step, as far as the target's
// state allows.
func (s *Service) advanceMove(t *txn, r *store.Reservation, next *wake) {
	m := r.Migration
	tg := s.st.reservations[m.Target]
	switch {
	case r.Phase.Terminal() || r.Phase == api.PhaseUnpeering:
		s.releaseTarget(t, tg, "migration abandoned: "+r.ID+" is "+string(r.Phase))
		s.endMove(t, r, api.MigrationFailed, fmt.Sprintf("%s is %s (%s); the target %s is released", r.ID, r.Phase, r.Message, m.Target))
	case tg == nil:
		s.endMove(t, r, api.MigrationFailed, "the target "+m.Target+" is gone; the reservation stays on "+r.ProviderID)
	case tg.Phase.Terminal() || tg.Phase == api.PhaseUnpeering:
		s.endMove(t, r, api.MigrationFailed, fmt.Sprintf("the target %s on %s is %s (%s); the reservation stays on %s", tg.ID, tg.ProviderID, tg.Phase, tg.Message, r.ProviderID))
	case s.targetReady(tg):
		s.releaseAs(t, r, "moved to "+tg.ProviderID+" ("+tg.ID+"), whose virtual node is Ready")
		s.endMove(t, r, api.MigrationFinished, "the target "+tg.ID+" is Ready on "+tg.ProviderID+"; "+r.ID+" on "+r.ProviderID+" is released")
		s.creditSaving(t, r)
	case !t.now.Before(m.Deadline):
		s.releaseTarget(t, tg, "migration timed out: the virtual node was not Ready within "+s.cfg.MigrationTimeout.String())
		s.endMove(t, r, api.MigrationFailed, fmt.Sprintf("the target %s on %s was not Ready within %s (it is %s); it is released, the reservation stays on %s",
			tg.ID, tg.ProviderID, s.cfg.MigrationTimeout, tg.Phase, r.ProviderID))
	default:
		next.soon(m.Deadline)
	}
}

// targetReady reports whether the consumer's latest heartbeat shows tg's
// virtual node Ready: tg is Peered and the heartbeat listed it, neither
// starting nor NotReady.
func (s *Service) targetReady(tg *store.Reservation) bool {
	c := s.st.consumers[tg.ConsumerID]
	if tg.Phase != api.PhasePeered || c == nil {
		return false
	}
	_, ready := c.ready[tg.ID]
	return ready
}

// releaseTarget releases a move's target through the release path (nothing
// when it already ended or is being released).
func (s *Service) releaseTarget(t *txn, tg *store.Reservation, msg string) {
	if tg != nil && !tg.Phase.Terminal() && tg.Phase != api.PhaseUnpeering {
		s.releaseAs(t, tg, msg)
	}
}

// endMove records the outcome of r's move.
func (s *Service) endMove(t *txn, r *store.Reservation, state, reason string) {
	// A copy: the record handed to an earlier commit may still be encoding
	// the old one (store mutations copy the reservation, not what it
	// points to).
	m := *r.Migration
	at := t.now
	m.State, m.Reason, m.EndedAt = state, reason, &at
	r.Migration = &m
	t.putRes(r)
	s.moveCounts[state]++
	s.log.Info("Migration "+state, "reservation", r.ID, "consumer", r.ConsumerID, "from", r.ProviderID, "to", m.To, "target", m.Target, "reason", reason)
}

// creditSaving adds what r's finished move saves to its consumer's ledger.
func (s *Service) creditSaving(t *txn, r *store.Reservation) {
	c := s.st.consumers[r.ConsumerID]
	if c == nil {
		return
	}
	l := s.ledger(c)
	if l.Moves == 0 {
		l.Since = t.now
	}
	l.Moves++
	if v := r.Migration.CostSaving; v != nil {
		l.CostPerHour += *v
	}
	if v := r.Migration.CarbonSaving; v != nil {
		l.CarbonPerHour += *v
	}
	s.putConsumer(t, c)
}

// ledger is a copy of c's migration ledger (a new one on first use), put
// in c's record to be changed: the record handed to an earlier commit may
// still be encoding the old one.
func (s *Service) ledger(c *consumer) *store.MoveLedger {
	l := &store.MoveLedger{}
	if c.rec.Moves != nil {
		*l = *c.rec.Moves
		l.Starts = slices.Clone(l.Starts)
	}
	c.rec.Moves = l
	return l
}

// putConsumer writes c's record in t.
func (s *Service) putConsumer(t *txn, c *consumer) {
	t.other = append(t.other, store.PutConsumer(c.rec))
	c.storedSeen = c.rec.LastSeen
}

// startMoves starts the moves consumer cn's latest decisions ask for, as
// far as its disruption budget allows, and notes the others in kept.
func (s *Service) startMoves(t *txn, cn string, kept map[string]keptMove, next *wake) {
	c := s.st.consumers[cn]
	if c == nil {
		return
	}
	limit, window, _ := s.budgetOf(c)
	if limit == 0 {
		return
	}
	use := s.budgetUsed(t, c, window)
	for _, d := range s.decisions[cn] {
		if d.Decision != api.DecisionMove || d.Target == "" {
			continue
		}
		for _, r := range s.movable(c, d) {
			if m := r.Migration; m != nil && m.State == api.MigrationFailed && m.EndedAt != nil {
				// A failed move is not tried again for MigrationTimeout.
				if retry := m.EndedAt.Add(s.cfg.MigrationTimeout); t.now.Before(retry) {
					next.soon(retry)
					continue
				}
			}
			if use.used() >= limit {
				kept[r.ID] = keptNote(t, r, d, budgetUsedUp(limit, window, use))
				if !use.nextAt.IsZero() {
					next.soon(use.nextAt)
				}
				continue
			}
			req := api.ReservationRequest{
				ProviderClusterID: d.Target, NodeGroupID: api.NodeGroupID(d.Target, r.ChunkType),
				ChunkCount: r.ChunkCount, ChunkType: r.ChunkType, Namespaces: slices.Clone(r.Namespaces),
			}
			// The reserve path's own admission: sharing, quota, room.
			_, p, err := s.admitLocked(cn, req, t.now)
			if err != nil {
				kept[r.ID] = keptNote(t, r, d, d.Target+" refuses the reservation: "+errorMessage(err))
				continue
			}
			s.startMove(t, r, c, p, req, d)
			use.migrations++
			if use.nextAt.IsZero() {
				use.nextAt = t.now.Add(window)
			}
		}
	}
}

// budgetUsedUp says why a migration waits for the budget: what counts
// and when the next move may start.
func budgetUsedUp(limit int, window time.Duration, u budgetUse) string {
	why := fmt.Sprintf("the disruption budget of %d moves per %s is used up (%d migrations and %d consolidations started in the window, %d slots held for the consolidations its last heartbeat answer handed out)",
		limit, window, u.migrations, u.consolidations, u.held)
	if u.nextAt.IsZero() {
		return why + "; the next move may start when the consumer's next heartbeat does not use a held slot (a slot it does not turn into a consolidation stays free until the heartbeat after)"
	}
	return why + "; the next move may start at " + u.nextAt.UTC().Format(time.RFC3339)
}

// movable lists consumer c's manual reservations in decision d's group
// that may move now: Peered, Ready as far as the consumer reports, not
// moving, and not the target of a move still in progress.
func (s *Service) movable(c *consumer, d api.Reevaluation) []*store.Reservation {
	var out []*store.Reservation
	for _, r := range s.st.byPair[store.PairKey(c.rec.Heartbeat.ClusterID, d.ProviderClusterID)] {
		if !api.IsManualReservation(r.ID) || r.ChunkType != d.ChunkType || r.Phase != api.PhasePeered {
			continue
		}
		if m := r.Migration; m != nil && m.State == api.MigrationMoving {
			continue
		}
		if _, lost := c.notReady[r.ID]; lost {
			continue
		}
		if o := s.st.reservations[r.MigratedFrom]; o != nil && o.Migration != nil && o.Migration.State == api.MigrationMoving && o.Migration.Target == r.ID {
			continue
		}
		out = append(out, r)
	}
	slices.SortFunc(out, byCreation)
	return out
}

// startMove reserves r's chunks on the better provider p through the
// reserve path (createLocked) under a deterministic id, and records the
// move on r.
func (s *Service) startMove(t *txn, r *store.Reservation, c *consumer, p *provider, req api.ReservationRequest, d api.Reevaluation) {
	attempt := int32(1)
	if r.Migration != nil {
		attempt = r.Migration.Attempt + 1
	}
	id := api.MigrationID(r.ID, int(attempt))
	for s.st.reservations[id] != nil || api.CheckReservationID("", id) != nil {
		if api.CheckReservationID("", id) != nil {
			return // the id line is too long to continue (253 characters)
		}
		attempt++
		id = api.MigrationID(r.ID, int(attempt))
	}
	tg := s.createLocked(t, id, r.ConsumerID, c, p, req)
	tg.MigratedFrom = r.ID
	from, to := s.idx.Standing(r.ProviderID, r.ChunkType), s.idx.Standing(req.ProviderClusterID, r.ChunkType)
	r.Migration = &store.Migration{
		Target: id, To: req.ProviderClusterID, Attempt: attempt, State: api.MigrationMoving, Reason: d.Reason,
		CostSaving:   saving(from.CostPerHour, to.CostPerHour, r.ChunkCount),
		CarbonSaving: saving(from.CarbonPerHour, to.CarbonPerHour, r.ChunkCount),
		StartedAt:    t.now, Deadline: t.now.Add(s.cfg.MigrationTimeout),
	}
	t.putRes(r)
	l := s.ledger(c)
	l.Starts = append(l.Starts, t.now)
	s.putConsumer(t, c)
	s.moveCounts[moveStarted]++
	s.log.Info("Migration started", "reservation", r.ID, "consumer", r.ConsumerID, "from", r.ProviderID, "to", req.ProviderClusterID, "target", id, "reason", d.Reason)
}

// saving is (from − to) × n, nil when either is unknown.
func saving(from, to *float64, n int32) *float64 {
	if from == nil || to == nil {
		return nil
	}
	v := (*from - *to) * float64(n)
	return &v
}

// keptNote is the kept move of r that decision d asks for.
func keptNote(t *txn, r *store.Reservation, d api.Reevaluation, why string) keptMove {
	return keptMove{m: api.Migration{
		ReservationID: r.ID, From: r.ProviderID, To: d.Target, ChunkType: r.ChunkType, ChunkCount: r.ChunkCount,
		State: api.MigrationKept, Reason: why, StartedAt: mt(t.now),
	}}
}

// migrationsLocked lists consumer cn's moves: each reservation's last move
// (moving or ended, until the reservation is forgotten), then the kept
// ones, by start.
func (s *Service) migrationsLocked(cn string) []api.Migration {
	var out []api.Migration
	for _, r := range s.st.reservations {
		if r.ConsumerID != cn || r.Migration == nil {
			continue
		}
		out = append(out, s.migrationView(r))
	}
	for _, id := range sortedKeys(s.kept) {
		if k := s.kept[id]; k.m.ReservationID != "" {
			if r := s.st.reservations[id]; r != nil && r.ConsumerID == cn {
				out = append(out, k.m)
			}
		}
	}
	slices.SortStableFunc(out, func(a, b api.Migration) int {
		if c := a.StartedAt.Compare(b.StartedAt.Time); c != 0 {
			return c
		}
		if a.ReservationID < b.ReservationID {
			return -1
		}
		if a.ReservationID > b.ReservationID {
			return 1
		}
		return 0
	})
	return out
}

// migrationView is r's last move as the API shows it.
func (s *Service) migrationView(r *store.Reservation) api.Migration {
	m := r.Migration
	out := api.Migration{
		ReservationID: r.ID, TargetReservationID: m.Target, From: r.ProviderID, To: m.To,
		ChunkType: r.ChunkType, ChunkCount: r.ChunkCount, State: m.State, Reason: m.Reason,
		Saving:    api.MigrationSaving{CostPerHour: m.CostSaving, CarbonPerHour: m.CarbonSaving},
		StartedAt: mt(m.StartedAt), EndedAt: mtp(m.EndedAt),
	}
	if m.State == api.MigrationMoving {
		out.Deadline = mtp(&m.Deadline)
	}
	return out
}

// savingsLocked is what consumer c's finished moves saved (nil before the
// first).
func savingsLocked(c *consumer) *api.MigrationSavings {
	l := c.rec.Moves
	if l == nil || l.Moves == 0 {
		return nil
	}
	return &api.MigrationSavings{Moves: l.Moves, CostPerHour: l.CostPerHour, CarbonPerHour: l.CarbonPerHour, Since: mt(l.Since)}
}

// moveWanted reports whether a sweep may start a move for decisions ds of
// consumer cn: one says "move" for a group with a movable manual
// reservation, and the consumer's budget is not 0 (whether it has room is
// the sweep's to find). Called with s.mu held.
func (s *Service) moveWanted(cn string, ds []api.Reevaluation) bool {
	c := s.st.consumers[cn]
	if c == nil {
		return false
	}
	if n, _, _ := s.budgetOf(c); n == 0 {
		return false
	}
	return slices.ContainsFunc(ds, func(d api.Reevaluation) bool { return d.Decision == api.DecisionMove && len(s.movable(c, d)) > 0 })
}

// readyTargets returns which of ids, the reservations a heartbeat of the
// consumer lists, are move targets whose virtual node it shows Ready (not
// starting, not NotReady). Called with s.mu held.
func (s *Service) readyTargets(ids []string, starting, notReady map[string]struct{}) map[string]struct{} {
	var out map[string]struct{}
	for _, id := range ids {
		r := s.st.reservations[id]
		if r == nil || r.MigratedFrom == "" {
			continue
		}
		if _, no := starting[id]; no {
			continue
		}
		if _, no := notReady[id]; no {
			continue
		}
		if out == nil {
			out = map[string]struct{}{}
		}
		out[id] = struct{}{}
	}
	return out
}

// moveCountsLocked copies the outcome counters.
func (s *Service) moveCountsLocked() map[string]uint64 { return maps.Clone(s.moveCounts) }

// setOf is ids as a set (nil when empty).
func setOf(ids []string) map[string]struct{} {
	if len(ids) == 0 {
		return nil
	}
	out := make(map[string]struct{}, len(ids))
	for _, id := range ids {
		out[id] = struct{}{}
	}
	return out
}

// errorMessage is err's message without its code.
func errorMessage(err error) string {
	var ae *api.Error
	if errors.As(err, &ae) {
		return ae.Message
	}
	return err.Error()
}

// carryMovesLocked keeps the migration ledger of the consumer's previous
// record (old, nil for a new consumer) in its new one, c, and notes which
// move targets the heartbeat listing listed shows Ready, waking the
// sweeper when that changed.
func (s *Service) carryMovesLocked(old, c *consumer, listed []string) {
	var wasReady map[string]struct{}
	if old != nil {
		c.rec.Moves, wasReady = old.rec.Moves, old.ready
	}
	c.ready = s.readyTargets(listed, setOf(c.rec.Heartbeat.StartingReservations), c.notReady)
	if !maps.Equal(wasReady, c.ready) {
		s.kickSweep() // a move's target is Ready (or no longer)
	}
}

// heartbeatMovesLocked is what a heartbeat answer says of consumer c's
// moves. Only a consumer that ever moved (or while some move is kept) pays
// for the walk over the reservations.
func (s *Service) heartbeatMovesLocked(c *consumer) ([]api.Migration, *api.MigrationSavings) {
	if c.rec.Moves == nil && len(s.kept) == 0 {
		return nil, nil
	}
	return s.migrationsLocked(c.rec.Heartbeat.ClusterID), savingsLocked(c)
}
