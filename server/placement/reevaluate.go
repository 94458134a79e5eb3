package placement

import (
	"math"
	"sort"
	"strconv"

	"github.com/google/btree"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// Default re-evaluation thresholds: a held chunk is worth moving only when
// another provider is better per chunk by MORE than these (the broker's
// --reevaluate-*-threshold flags; a consumer may set its own).
const (
	DefaultCostThreshold   = 0.01 // currency per hour
	DefaultCarbonThreshold = 1.0  // gCO2eq per hour
	DefaultRTTThreshold    = 10.0 // ms
)

// Thresholds are the per-chunk thresholds the rule applies.
type Thresholds struct {
	CostPerHour   float64
	CarbonPerHour float64
	RTTMillis     float64
}

// DefaultThresholds returns the default thresholds.
func DefaultThresholds() Thresholds {
	return Thresholds{CostPerHour: DefaultCostThreshold, CarbonPerHour: DefaultCarbonThreshold, RTTMillis: DefaultRTTThreshold}
}

// With returns t with the consumer's own thresholds applied over it (nil
// fields keep t's).
func (t Thresholds) With(own *api.Thresholds) Thresholds {
	if own == nil {
		return t
	}
	for _, f := range []struct {
		v   *float64
		dst *float64
	}{{own.CostPerHour, &t.CostPerHour}, {own.CarbonPerHour, &t.CarbonPerHour}, {own.RTTMillis, &t.RTTMillis}} {
		if f.v != nil {
			*f.dst = *f.v
		}
	}
	return t
}

// Standing is what one provider offers a chunk of one type under each
// metric the rule can compare, per chunk; nil when it lacks the metric.
type Standing struct {
	ProviderID    string
	CostPerHour   *float64
	CarbonPerHour *float64
	RTTMillis     *float64
}

// reevalMetric is one metric the rule compares: how it reads a standing
// and a threshold, and how a reason names it.
type reevalMetric struct {
	of        func(Standing) *float64
	threshold func(Thresholds) float64
	words     string // "<provider> has no <words>"
	unit      string // "better by 0.03 <unit> per chunk"
}

var reevalMetrics = map[api.ExplainMetric]reevalMetric{
	api.MetricCost:          {func(s Standing) *float64 { return s.CostPerHour }, func(t Thresholds) float64 { return t.CostPerHour }, "price", "per hour"},
	api.MetricCarbonPerHour: {func(s Standing) *float64 { return s.CarbonPerHour }, func(t Thresholds) float64 { return t.CarbonPerHour }, "carbon data", "gCO2eq/h"},
	api.MetricRTT:           {func(s Standing) *float64 { return s.RTTMillis }, func(t Thresholds) float64 { return t.RTTMillis }, "measured RTT", "ms"},
}

// ReevaluationMetric is what the consumer's policy compares when it
// re-evaluates held capacity: Price the cost per hour, Eco the carbon per
// hour, Latency the measured RTT; Weighted the metric of its largest
// weight among price, carbon and distance (ties in that order; distance
// compares the RTT); Standard nothing ("": it ranks by free capacity,
// which a move would only shift). An unknown policy is Standard.
func ReevaluationMetric(p api.Placement) api.ExplainMetric {
	policy, _ := NormalizePolicy(p.Type)
	switch policy {
	case api.PlacementPrice:
		return api.MetricCost
	case api.PlacementEco:
		return api.MetricCarbonPerHour
	case api.PlacementLatency:
		return api.MetricRTT
	case api.PlacementWeighted:
		w := normWeights(p.Weights)
		switch {
		case w.Price >= w.Carbon && w.Price >= w.Distance && w.Price > 0:
			return api.MetricCost
		case w.Carbon >= w.Distance && w.Carbon > 0:
			return api.MetricCarbonPerHour
		case w.Distance > 0:
			return api.MetricRTT
		}
	}
	return ""
}

// Reevaluate is the re-evaluation rule, a pure function: whether the
// consumer's chunks held on held should move to one of others (the
// providers where it could take a chunk of the type now: available,
// sharing with it, with room) under policy p. The best other provider is
// the lowest value of the policy's metric (ties by provider id; providers
// without the metric and held itself are skipped); the decision is "move"
// when held's value minus the best one is MORE than the policy's threshold,
// else "keep", with the reason. A held provider without the metric is kept
// (nothing to compare against).
func Reevaluate(p api.Placement, held Standing, others []Standing, th Thresholds) api.Reevaluation {
	m := ReevaluationMetric(p)
	out := api.Reevaluation{ProviderClusterID: held.ProviderID, Decision: api.DecisionKeep, Metric: m}
	rm, ok := reevalMetrics[m]
	if !ok {
		out.Reason = "the Standard policy ranks by free capacity; a move would save nothing"
		return out
	}
	out.Threshold = rm.threshold(th)
	cur := rm.of(held)
	out.Current = cur
	var best *Standing
	for i := range others {
		o := &others[i]
		v := rm.of(*o)
		if o.ProviderID == held.ProviderID || v == nil || !finite(*v) {
			continue
		}
		if best == nil || *v < *rm.of(*best) || *v == *rm.of(*best) && o.ProviderID < best.ProviderID {
			best = o
		}
	}
	switch {
	case cur == nil || !finite(*cur):
		out.Reason = held.ProviderID + " has no " + rm.words + "; nothing to compare"
		return out
	case best == nil:
		out.Reason = "no other provider with room has a " + rm.words
		return out
	}
	bv := *rm.of(*best)
	saving := *cur - bv
	out.Target, out.Best, out.SavingPerChunk = best.ProviderID, &bv, &saving
	by := num(saving) + " " + rm.unit + " per chunk"
	switch {
	case saving > out.Threshold:
		out.Decision = api.DecisionMove
		out.Reason = best.ProviderID + " is better by " + by + ", more than the threshold of " + num(out.Threshold)
	case saving <= 0:
		out.Reason = held.ProviderID + " is still the best with room (" + best.ProviderID + ": " + num(bv) + " " + rm.unit + " per chunk)"
	default:
		out.Reason = best.ProviderID + " is better by only " + by + ", not more than the threshold of " + num(out.Threshold)
	}
	return out
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

func num(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }

// Reevaluate re-evaluates every group consumerID holds live chunks in,
// under its heartbeated policy, against the providers where it could take
// a chunk of the type now. rtts are its measured RTTs by provider id; th
// its thresholds. The result is sorted by node-group id. Under the read
// lock it walks, per held group, the type's price or Eco order only up to
// the first provider the consumer could grow on (the best one), or the
// providers it measured an RTT to.
func (ix *Index) Reevaluate(consumerID string, rtts map[string]float64, th Thresholds) []api.Reevaluation {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	held := ix.held[consumerID]
	if len(held) == 0 {
		return nil
	}
	v := ix.newViewCtx(consumerID, nil, nil)
	m := ReevaluationMetric(v.c.Placement)
	var out []api.Reevaluation
	for k, u := range held {
		if u.Live == 0 {
			continue
		}
		r := Reevaluate(v.c.Placement, ix.standing(ix.providers[k.provider], k.t, rtts), ix.bestOthers(v, m, k, rtts), th)
		r.ProviderClusterID, r.ChunkType, r.Chunks = k.provider, chunkTypes[k.t], u.Live
		r.NodeGroupID = api.NodeGroupID(k.provider, chunkTypes[k.t])
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].NodeGroupID < out[j].NodeGroupID })
	return out
}

// bestOthers returns the providers other than held's where the consumer
// could take a chunk now that Reevaluate must look at under metric m: the
// first of the type's price (cost) or Eco (carbon per hour is the chunk's
// power times the Eco metric, the same order) tree that the consumer may
// grow on, or every one it measured an RTT to.
func (ix *Index) bestOthers(v *viewCtx, m api.ExplainMetric, held groupKey, rtts map[string]float64) []Standing {
	var out []Standing
	usable := func(id string) (*provState, bool) {
		ps := ix.providers[id]
		return ps, id != held.provider && v.classify(ps, held.t) == usable
	}
	var tree *btree.BTreeG[rankItem]
	switch {
	case m == api.MetricCost:
		tree = ix.trees[held.t].price
	case m == api.MetricCarbonPerHour && ix.watts[held.t] > 0:
		tree = ix.trees[held.t].eco
	case m == api.MetricCarbonPerHour:
		// Zero-watt chunks emit nothing anywhere: every carbon per hour
		// ties, so Reevaluate picks by id among them all.
		for id := range ix.providers {
			if ps, ok := usable(id); ok && ps.hasCarbon {
				out = append(out, ix.standing(ps, held.t, rtts))
			}
		}
		return out
	case m == api.MetricRTT:
		for id := range rtts {
			if ps, ok := usable(id); ok {
				out = append(out, ix.standing(ps, held.t, rtts))
			}
		}
		return out
	default:
		return nil
	}
	tree.Ascend(func(it rankItem) bool {
		if it.class != 0 {
			return false // the rest lack the metric
		}
		ps, ok := usable(it.id)
		if ok {
			out = append(out, ix.standing(ps, held.t, rtts))
		}
		return !ok
	})
	return out
}

// standing is what ps offers one chunk of type ti (a removed provider,
// nil, offers nothing).
func (ix *Index) standing(ps *provState, ti int, rtts map[string]float64) Standing {
	if ps == nil {
		return Standing{}
	}
	s := Standing{ProviderID: ps.p.ID}
	if ps.cost[ti] != nil {
		c := ps.costF[ti]
		s.CostPerHour = &c
	}
	if ps.hasCarbon {
		g := ix.watts[ti] / 1000 * ps.carbon
		s.CarbonPerHour = &g
	}
	if r, ok := rtts[ps.p.ID]; ok {
		s.RTTMillis = &r
	}
	return s
}

// Standing is what provider id offers one chunk of type t now: its cost
// and carbon per hour (the metrics Reevaluate compares; no RTT). An
// unknown provider or chunk type offers nothing.
func (ix *Index) Standing(id string, t api.ChunkType) Standing {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	for ti, ct := range chunkTypes {
		if ct == t {
			return ix.standing(ix.providers[id], ti, nil)
		}
	}
	return Standing{}
}
