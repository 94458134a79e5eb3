package v1alpha1

import "github.com/federation-autoscaler/federation-autoscaler/server/api"

// ActivePolicy is the ConsumerPolicy that applies among the policies of one
// namespace: the lowest name wins. It is nil when there is none.
func ActivePolicy(items []ConsumerPolicy) *ConsumerPolicy {
	var best *ConsumerPolicy
	for i := range items {
		if best == nil || items[i].Name < best.Name {
			best = &items[i]
		}
	}
	return best
}

// API is the placement as the heartbeat carries it; nil when neither a type,
// weights nor a Latency shortlist size are set (the broker's default then
// applies). Under Latency a shortlist size left out is
// DefaultLatencyCandidates.
func (p Placement) API() *api.Placement {
	if p.Type == "" && p.Weights == nil && p.LatencyCandidates == nil {
		return nil
	}
	out := &api.Placement{Type: api.PlacementType(p.Type)}
	if w := p.Weights; w != nil {
		out.Weights = &api.Weights{Price: w.Price, Carbon: w.Carbon, Distance: w.Distance, FreeCapacity: w.FreeCapacity}
	}
	switch {
	case p.LatencyCandidates != nil:
		out.LatencyCandidates = int(*p.LatencyCandidates)
	case p.Type == PlacementLatency:
		out.LatencyCandidates = DefaultLatencyCandidates
	}
	return out
}

// PlacementFromAPI is p as a ConsumerPolicy's placement (the inverse of
// Placement.API; a shortlist size of 0 is left out).
func PlacementFromAPI(p api.Placement) Placement {
	out := Placement{Type: PlacementStrategy(p.Type)}
	if w := p.Weights; w != nil {
		out.Weights = &PlacementWeights{Price: w.Price, Carbon: w.Carbon, Distance: w.Distance, FreeCapacity: w.FreeCapacity}
	}
	if n := p.LatencyCandidates; n > 0 {
		c := int32(min(n, api.MaxLatencyCandidates))
		out.LatencyCandidates = &c
	}
	return out
}

// SetPlacement makes p the spec's placement; a Latency shortlist size p
// leaves out keeps the spec's own (the consoles' policy forms have none).
func (s *ConsumerPolicySpec) SetPlacement(p Placement) {
	if p.LatencyCandidates == nil {
		p.LatencyCandidates = s.Placement.LatencyCandidates
	}
	s.Placement = p
}

// API is the lifecycle as the heartbeat carries it (nil when l is nil or
// sets nothing: the broker's defaults).
func (l *Lifecycle) API() *api.Lifecycle {
	if l == nil || l.DisconnectGraceSeconds == nil && l.Thresholds == nil && l.Migrations == nil && l.MaxMovesPerWindow == nil && l.MoveWindowSeconds == nil {
		return nil
	}
	out := &api.Lifecycle{DisconnectGraceSeconds: clone(l.DisconnectGraceSeconds), MaxMovesPerWindow: clone(l.MaxMovesPerWindow), MoveWindowSeconds: clone(l.MoveWindowSeconds)}
	if m := l.Migrations; m != nil {
		out.Migrations = &api.MigrationBudget{MaxPerWindow: clone(m.MaxPerWindow), WindowSeconds: clone(m.WindowSeconds)}
	}
	if t := l.Thresholds; t != nil {
		out.Thresholds = &api.Thresholds{CostPerHour: clone(t.CostPerHour), CarbonPerHour: clone(t.CarbonPerHour), RTTMillis: clone(t.RTTMillis)}
	}
	return out
}

// API is the budget as the heartbeat carries it (nil when b is nil or
// sets no limit: no budget).
func (b *Budget) API() *api.Budget {
	if b == nil || b.PerHour == nil && b.PerMonth == nil {
		return nil
	}
	out := &api.Budget{WarnAtPercent: clone(b.WarnAtPercent)}
	if b.PerHour != nil {
		q := b.PerHour.DeepCopy()
		out.PerHour = &q
	}
	if b.PerMonth != nil {
		q := b.PerMonth.DeepCopy()
		out.PerMonth = &q
	}
	return out
}

func clone[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
