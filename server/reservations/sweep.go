package reservations

import (
	"context"
	"slices"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/store"
)

// sweep expires reservations whose lease ran out, marks stale providers
// unavailable (failing their reservations) and garbage-collects enforced
// instructions and terminal reservations. It returns when it must run
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
	req := s.enqueue(t)
	s.mu.Unlock()
	if err := await(req); err != nil {
		s.log.Error("Persisting the sweep failed; it will run again", "err", err)
		return t.now.Add(time.Second)
	}
	if changed && req == nil {
		s.notify() // an availability change that needed no write
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
// and, once they stayed stale for ProviderStaleAfter since they were last
// fresh, fails their live reservations. It reports whether an availability
// changed.
func (s *Service) sweepProviders(t *txn, next *wake) bool {
	now := t.now
	changed := false
	for _, id := range sortedKeys(s.st.providers) {
		p := s.st.providers[id]
		if p.staleHandled {
			continue
		}
		if deadline := p.rec.LastSeen.Add(s.cfg.ProviderStaleAfter); p.available && !now.Before(deadline) {
			p.available = false
			changed = true
			s.log.Warn("Provider stopped advertising; unavailable", "provider", id, "lastSeen", p.rec.LastSeen)
			s.idx.UpsertProvider(s.placementProvider(id, p))
		} else if p.available {
			next.soon(deadline)
		}
		deadline := p.freshSince.Add(s.cfg.ProviderStaleAfter)
		if now.Before(deadline) {
			next.soon(deadline)
			continue
		}
		p.staleHandled = true
		for _, r := range s.sortedReservations() {
			if r.ProviderID == id && !r.Phase.Terminal() && r.Phase != api.PhaseUnpeering {
				s.setPhase(t, r, api.PhaseFailed, "provider "+id+" stopped advertising")
			}
		}
	}
	return changed
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
	slices.SortFunc(out, func(a, b *store.Reservation) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		if a.ID < b.ID {
			return -1
		}
		return 1
	})
	return out
}
