package reservations

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/store"
)

// sweep expires reservations whose lease ran out, marks stale providers
// unavailable (failing their reservations after their disconnect grace),
// garbage-collects enforced instructions and terminal reservations, and
// re-evaluates the held capacity when due. It returns when it must run
// again.
func (s *Service) sweep(ctx context.Context) time.Time {
	s.mu.Lock()
	t := s.newTxn()
	// Any deadline created after this sweep lies at least the shortest
	// configured duration ahead, so sleeping until then misses nothing.
	next := &wake{at: t.now.Add(min(s.cfg.ReservationLease, s.cfg.ProviderStaleAfter, s.cfg.EnforcedGC, s.cfg.TerminalGC))}
	// Provider freshness first: a stale provider's reservations fail.
	changed := s.sweepProviders(t, next)
	s.sweepReservations(t, next)
	s.sweepInstructions(t, next)
	if s.sweepMigrations(t, next) {
		changed = true
	}
	book := s.sampleSpendLocked(t.now, next, false)
	req := s.enqueue(t)
	var inputs []reevalInput
	due := s.reevaluateDueLocked(t.now, next)
	if due {
		inputs = s.reevalInputsLocked()
	}
	s.mu.Unlock()
	s.storeSpendBook(book)
	if err := await(req); err != nil {
		s.log.Error("Persisting the sweep failed; it will run again", "err", err)
		return t.now.Add(time.Second)
	}
	if due && s.reevaluate(t.now, inputs) {
		changed = true
	}
	if changed && req == nil {
		s.notify() // an availability change or decisions that needed no write
	}
	return next.at
}

// wake is the earliest deadline a sweep has seen: when it must run again.
type wake struct{ at time.Time }

func (w *wake) soon(d time.Time) {
	if d.Before(w.at) {
		w.at = d
	}
}

// sweepProviders marks the providers that stopped advertising unavailable
// at once and, once they stayed stale for ProviderStaleAfter since they were
// last fresh, starts the disconnect grace of their live reservations: each
// fails when its consumer's grace ran out, or as soon as the consumer
// reports its virtual node NotReady (Liqo lost the provider too). It reports
// whether an availability changed.
func (s *Service) sweepProviders(t *txn, next *wake) bool {
	now := t.now
	changed := false
	var stale map[string]*provider
	for _, id := range sortedKeys(s.st.providers) {
		p := s.st.providers[id]
		if p.staleHandled {
			continue
		}
		if deadline := p.rec.LastSeen.Add(s.cfg.ProviderStaleAfter); p.available && !now.Before(deadline) {
			p.available = false
			changed = true
			s.log.Warn("Provider stopped advertising; unavailable for new reservations", "provider", id, "lastSeen", p.rec.LastSeen)
			s.idx.UpsertProvider(s.placementProvider(id, p))
		} else if p.available {
			next.soon(deadline)
		}
		if deadline := s.staleAt(p); now.Before(deadline) {
			next.soon(deadline)
			continue
		}
		if stale == nil {
			stale = map[string]*provider{}
		}
		stale[id] = p
	}
	if stale == nil {
		return changed
	}
	until := make(map[string]time.Time, len(stale))
	for _, r := range s.sortedReservations() {
		p := stale[r.ProviderID]
		if p == nil || !inGrace(r) {
			continue
		}
		if why := s.graceOver(now, p, r); why != "" {
			s.setPhase(t, r, api.PhaseFailed, why)
			continue
		}
		end := s.graceEnd(p, r)
		next.soon(end)
		if end.After(until[r.ProviderID]) {
			until[r.ProviderID] = end
		}
	}
	for id, p := range stale {
		if !until[id].Equal(p.graceUntil) {
			p.graceUntil = until[id]
			changed = true // the dashboard shows the grace
		}
		// Nobody can reserve on a stale provider, so once no reservation
		// is in grace there is nothing left to do until it advertises.
		p.staleHandled = p.graceUntil.IsZero()
	}
	return changed
}

// inGrace reports whether r is one a disconnect grace applies to: live and
// not Unpeering (an Unpeering reservation waits for the consumer's Unpeer,
// which needs no provider).
func inGrace(r *store.Reservation) bool {
	return !r.Phase.Terminal() && r.Phase != api.PhaseUnpeering
}

// staleAt is when p's current freshness window ends: from then on its live
// reservations are in their disconnect grace.
func (s *Service) staleAt(p *provider) time.Time {
	return p.freshSince.Add(s.cfg.ProviderStaleAfter)
}

// disconnectGrace is consumer cn's disconnect grace: its heartbeated
// setting, else the broker's.
func (s *Service) disconnectGrace(cn string) time.Duration {
	if c := s.st.consumers[cn]; c != nil && c.grace != nil {
		return *c.grace
	}
	return s.cfg.DisconnectGrace
}

// graceEnd is when r fails unless p advertises again first.
func (s *Service) graceEnd(p *provider, r *store.Reservation) time.Time {
	return s.staleAt(p).Add(s.disconnectGrace(r.ConsumerID))
}

// graceOver says why r, a reservation on the stale provider p, must fail
// now ("" while its grace runs).
func (s *Service) graceOver(now time.Time, p *provider, r *store.Reservation) string {
	base := "provider " + r.ProviderID + " stopped advertising"
	if c := s.st.consumers[r.ConsumerID]; c != nil {
		if _, lost := c.notReady[r.ID]; lost {
			return base + " and consumer " + r.ConsumerID + " reports its virtual node NotReady"
		}
	}
	g := s.disconnectGrace(r.ConsumerID)
	if now.Before(s.graceEnd(p, r)) {
		return ""
	}
	if g == 0 {
		return base
	}
	return base + "; its disconnect grace of " + g.String() + " ran out"
}

// graceUntilLocked is when r's disconnect grace ends, or nil when it is not
// in one.
func (s *Service) graceUntilLocked(r *store.Reservation, now time.Time) *time.Time {
	p := s.st.providers[r.ProviderID]
	if p == nil || p.staleHandled || !inGrace(r) || now.Before(s.staleAt(p)) {
		return nil
	}
	end := s.graceEnd(p, r)
	return &end
}

// sweepReservations deletes terminal reservations after TerminalGC and
// expires the live ones whose lease ran out.
func (s *Service) sweepReservations(t *txn, next *wake) {
	now := t.now
	for _, r := range s.sortedReservations() {
		if r.Phase.Terminal() {
			gc := r.TerminatedAt.Add(s.cfg.TerminalGC)
			if now.Before(gc) {
				next.soon(gc)
				continue
			}
			delete(s.st.reservations, r.ID)
			s.st.unindexPair(r)
			t.delRes(r.ID)
			continue
		}
		deadline := s.leaseDeadline(r)
		if now.Before(deadline) {
			next.soon(deadline)
			continue
		}
		s.setPhase(t, r, api.PhaseExpired, "lease expired: no heartbeat from consumer "+r.ConsumerID+" for "+s.cfg.ReservationLease.String())
	}
}

// sweepInstructions deletes enforced instructions after EnforcedGC.
func (s *Service) sweepInstructions(t *txn, next *wake) {
	for _, id := range sortedKeys(s.st.instructions) {
		in := s.st.instructions[id]
		if !in.Enforced {
			continue
		}
		gc := in.LastUpdate.Add(s.cfg.EnforcedGC)
		if t.now.Before(gc) {
			next.soon(gc)
			continue
		}
		delete(s.st.instructions, id)
		delete(s.st.delivered, id)
		t.delIns(id)
	}
}

func (s *Service) sortedReservations() []*store.Reservation {
	out := make([]*store.Reservation, 0, len(s.st.reservations))
	for _, r := range s.st.reservations {
		out = append(out, r)
	}
	slices.SortFunc(out, byCreation)
	return out
}

// byCreation orders reservations by creation, then id.
func byCreation(a, b *store.Reservation) int {
	if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
		return c
	}
	return strings.Compare(a.ID, b.ID)
}
