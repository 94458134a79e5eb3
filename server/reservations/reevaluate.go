package reservations

import (
	"maps"
	"slices"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/placement"
)

// DefaultReevaluateInterval is how often the broker re-evaluates every
// consumer's held capacity when nothing relevant happened (prices,
// carbon, room or policies change it sooner).
const DefaultReevaluateInterval = 30 * time.Second

// reevalInput is what re-evaluating one consumer needs from the state.
type reevalInput struct {
	id     string
	policy api.PlacementType
	rtts   map[string]float64
	th     placement.Thresholds
}

// reevaluateDueLocked reports whether the sweep at now must re-evaluate:
// something relevant changed, or the interval passed. While some consumer
// holds chunks (or decisions are still shown) it schedules the next
// periodic run; with nothing held it schedules none.
func (s *Service) reevaluateDueLocked(now time.Time, next *wake) bool {
	due := s.reevalDirty || !now.Before(s.reevalAt)
	if due {
		s.reevalDirty = false
		s.reevalAt = now.Add(s.cfg.ReevaluateInterval)
	}
	if len(s.st.usage) > 0 || len(s.decisions) > 0 {
		next.soon(s.reevalAt)
	}
	return due
}

// reevalInputsLocked snapshots every consumer's policy, RTTs and
// thresholds.
func (s *Service) reevalInputsLocked() []reevalInput {
	out := make([]reevalInput, 0, len(s.st.consumers))
	for _, id := range sortedKeys(s.st.consumers) {
		c := s.st.consumers[id]
		in := reevalInput{id: id, policy: c.policy, rtts: c.rec.Heartbeat.MeasuredLatencies, th: *s.cfg.Thresholds}
		if l := c.rec.Heartbeat.Lifecycle; l != nil {
			in.th = in.th.With(l.Thresholds)
		}
		out = append(out, in)
	}
	return out
}

// reevaluate runs the re-evaluation rule (placement.Reevaluate) over every
// consumer's held groups, outside the state lock (the index has its own),
// then records the decisions for the overview: a decision that changed
// (another outcome or target) is counted and logged. It reports whether any
// changed.
func (s *Service) reevaluate(now time.Time, inputs []reevalInput) bool {
	got := make(map[string][]api.Reevaluation, len(inputs))
	for _, in := range inputs {
		if d := s.idx.Reevaluate(in.id, in.rtts, in.th); len(d) > 0 {
			got[in.id] = d
		}
	}
	policies := make(map[string]api.PlacementType, len(inputs))
	for _, in := range inputs {
		policies[in.id] = in.policy
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	changed := false
	for id, ds := range got {
		old := map[string]api.Reevaluation{}
		for _, d := range s.decisions[id] {
			old[d.NodeGroupID] = d
		}
		for i := range ds {
			d := &ds[i]
			if o, seen := old[d.NodeGroupID]; seen && o.Decision == d.Decision && o.Target == d.Target {
				d.DecidedAt = o.DecidedAt
				continue
			}
			d.DecidedAt = mt(now)
			changed = true
			s.reevalCounts[reevalKey{policy: policies[id], decision: d.Decision}]++
			if d.Decision == api.DecisionMove {
				s.log.Info("Re-evaluation: another provider is better for held chunks", "consumer", id, "nodeGroup", d.NodeGroupID, "chunks", d.Chunks, "target", d.Target, "reason", d.Reason)
			}
		}
	}
	if len(got) != len(s.decisions) || !maps.EqualFunc(got, s.decisions, func(a, b []api.Reevaluation) bool { return slices.EqualFunc(a, b, sameDecision) }) {
		changed = true
	}
	s.decisions = got
	for id, ds := range got {
		if s.moveWanted(id, ds) {
			s.kickSweep() // the next sweep starts the moves
			break
		}
	}
	return changed
}

// sameDecision compares what the overview shows of a decision.
func sameDecision(a, b api.Reevaluation) bool {
	eq := func(x, y *float64) bool { return x == nil && y == nil || x != nil && y != nil && *x == *y }
	return a.NodeGroupID == b.NodeGroupID && a.Chunks == b.Chunks && a.Decision == b.Decision && a.Target == b.Target &&
		a.Reason == b.Reason && eq(a.Current, b.Current) && eq(a.Best, b.Best) && a.Threshold == b.Threshold
}

// reevalKey labels fa_broker_reevaluations_total.
type reevalKey struct {
	policy   api.PlacementType
	decision string
}

// markReevaluate asks for a re-evaluation at the next sweep and wakes the
// sweeper (rate-limited to one sweep per minSweepInterval). Called with
// s.mu held.
func (s *Service) markReevaluate() {
	s.reevalDirty = true
	s.kickSweep()
}
