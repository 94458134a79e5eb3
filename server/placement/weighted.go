package placement

import (
	"math"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// Weighted metrics, each "lower is better".
const (
	wPrice    = iota // cost per chunk
	wCarbon          // weighted carbon
	wDistance        // km from the consumer
	wFree            // 1 − free fraction
	numWeighted
)

// normWeights returns the weights as an array; negative or non-finite
// weights count as 0, and missing or all-zero weights mean equal weights.
func normWeights(w *api.Weights) api.Weights {
	clean := func(x float64) float64 {
		if x > 0 && !math.IsInf(x, 0) {
			return x
		}
		return 0
	}
	if w == nil {
		return api.Weights{Price: 1, Carbon: 1, Distance: 1, FreeCapacity: 1}
	}
	out := api.Weights{Price: clean(w.Price), Carbon: clean(w.Carbon), Distance: clean(w.Distance), FreeCapacity: clean(w.FreeCapacity)}
	if out == (api.Weights{}) {
		return api.Weights{Price: 1, Carbon: 1, Distance: 1, FreeCapacity: 1}
	}
	return out
}

func weightArray(w api.Weights) [numWeighted]float64 {
	return [numWeighted]float64{wPrice: w.Price, wCarbon: w.Carbon, wDistance: w.Distance, wFree: w.FreeCapacity}
}

// weightedNorm is the min-max normalisation of one chunk type's candidates.
type weightedNorm struct {
	w      [numWeighted]float64
	lo, hi [numWeighted]float64
	has    [numWeighted]bool
}

// weightedValues returns a group's raw metrics and which it has.
func (v *viewCtx) weightedValues(ps *provState, ti int) (vals [numWeighted]float64, ok [numWeighted]bool) {
	if ps.cost[ti] != nil {
		vals[wPrice], ok[wPrice] = ps.costF[ti], true
	}
	if ps.hasCarbon {
		vals[wCarbon], ok[wCarbon] = ps.carbon, true
	}
	if v.located && ps.hasCoords {
		vals[wDistance], ok[wDistance] = DistanceKM(v.clat, v.clon, ps.lat, ps.lon), true
	}
	vals[wFree], ok[wFree] = 1-v.ix.freeFraction(ps, ti), true
	return vals, ok
}

// score is the weighted sum of the normalised metrics, in [0, Σweights],
// lower is better. A missing value counts as the worst (1); a value outside
// the candidates' range (a full provider) is clamped to [0, 1].
func (n *weightedNorm) score(_ *Index, v *viewCtx, ps *provState, ti int) float64 {
	vals, ok := v.weightedValues(ps, ti)
	s := 0.0
	for i, w := range n.w {
		if w == 0 {
			continue
		}
		norm := 1.0
		switch {
		case !ok[i]:
		case !n.has[i] || n.hi[i] == n.lo[i]:
			if !n.has[i] || vals[i] <= n.lo[i] {
				norm = 0
			}
		default:
			norm = min(max((vals[i]-n.lo[i])/(n.hi[i]-n.lo[i]), 0), 1)
		}
		s += w * norm
	}
	return s
}

// weightedPick makes the best-scoring candidate of chunk type ti growable
// (ties by provider id). The candidates are the open providers with
// head-room for this consumer; each metric is min-max normalised over them.
// It scans the type's open providers twice (bounds, then scores): O(open
// providers of the type) per call, see docs/placement.md.
func (v *viewCtx) weightedPick(ti int) {
	n := &weightedNorm{w: weightArray(v.weights)}
	v.weighted[ti] = n
	tree := v.ix.trees[ti].std
	tree.Ascend(func(it rankItem) bool {
		ps := v.ix.providers[it.id]
		if usable, _ := v.candidate(ps, ti); !usable {
			return true
		}
		vals, ok := v.weightedValues(ps, ti)
		for i := range vals {
			if !ok[i] {
				continue
			}
			if !n.has[i] {
				n.lo[i], n.hi[i], n.has[i] = vals[i], vals[i], true
				continue
			}
			n.lo[i] = min(n.lo[i], vals[i])
			n.hi[i] = max(n.hi[i], vals[i])
		}
		return true
	})
	var (
		winner *provState
		best   float64
	)
	tree.Ascend(func(it rankItem) bool {
		ps := v.ix.providers[it.id]
		if usable, _ := v.candidate(ps, ti); !usable {
			return true
		}
		s := n.score(v.ix, v, ps, ti)
		if winner == nil || s < best || (s == best && ps.p.ID < winner.p.ID) {
			winner, best = ps, s
		}
		return true
	})
	for _, ps := range v.heldBlockers(ti) {
		s := n.score(v.ix, v, ps, ti)
		if winner == nil || s < best || (s == best && ps.p.ID < winner.p.ID) {
			return
		}
	}
	if winner != nil {
		v.growable[groupKey{winner.p.ID, ti}] = struct{}{}
	}
}
