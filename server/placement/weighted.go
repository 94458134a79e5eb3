package placement

import (
	"math"
	"slices"

	"github.com/google/btree"

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
// weights count as 0, weights above api.MaxWeight as api.MaxWeight (the
// broker refuses both at ingest; this keeps a score finite for any input),
// and missing or all-zero weights mean equal weights.
func normWeights(w *api.Weights) api.Weights {
	clean := func(x float64) float64 {
		if x > 0 && !math.IsInf(x, 0) {
			return min(x, api.MaxWeight)
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
func (n *weightedNorm) score(v *viewCtx, ps *provState, ti int) float64 {
	vals, ok := v.weightedValues(ps, ti)
	s := 0.0
	for i, w := range n.w {
		if w == 0 {
			continue
		}
		norm := 1.0 // missing: worst
		if ok[i] {
			norm = n.norm(i, vals[i])
		}
		s += w * norm
	}
	return s
}

// norm normalises one metric value of a group that has it.
func (n *weightedNorm) norm(i int, val float64) float64 {
	switch {
	case !n.has[i] || n.hi[i] == n.lo[i]:
		if !n.has[i] || val <= n.lo[i] {
			return 0
		}
		return 1
	default:
		return min(max((val-n.lo[i])/(n.hi[i]-n.lo[i]), 0), 1)
	}
}

// wList is one metric's sorted access for the threshold walk: open
// providers of a chunk type, best value first; has is false once the
// providers without the metric start (they all count as the worst).
type wList interface {
	next() (ps *provState, val float64, has bool, ok bool)
}

// treeList reads a ranking tree ascending in batches (O(log n) per batch).
type treeList struct {
	v     *viewCtx
	cur   *rankCursor
	value func(ps *provState) float64
}

func (l *treeList) next() (*provState, float64, bool, bool) {
	it, ok := l.cur.next()
	if !ok {
		return nil, 0, false, false
	}
	ps := l.v.ix.providers[it.id]
	if it.class != 0 {
		return ps, 0, false, true
	}
	return ps, l.value(ps), true, true
}

// distList reads providers nearest first, then reports the end of the
// valued part (providers without coordinates are not in it).
type distList struct{ it *nearIter }

func (l *distList) next() (*provState, float64, bool, bool) {
	ps, d, ok := l.it.next()
	if !ok {
		return nil, 0, false, false
	}
	return ps, d, true, true
}

// rankBatch is how many items a cursor reads per tree descent.
const rankBatch = 16

// rankCursor reads a rank tree ascending in batches.
type rankCursor struct {
	tree    *btree.BTreeG[rankItem]
	from    rankItem
	started bool
	done    bool
	buf     []rankItem
}

func (c *rankCursor) next() (rankItem, bool) {
	if len(c.buf) == 0 && !c.done {
		c.buf = c.buf[:0]
		skip := c.started
		collect := func(it rankItem) bool {
			if skip {
				skip = false
				if it == c.from {
					return true
				}
			}
			c.buf = append(c.buf, it)
			return len(c.buf) < rankBatch
		}
		if c.started {
			c.tree.AscendGreaterOrEqual(c.from, collect)
		} else {
			c.tree.Ascend(collect)
		}
		c.started = true
		if len(c.buf) < rankBatch {
			c.done = true
		}
		if len(c.buf) > 0 {
			c.from = c.buf[len(c.buf)-1]
		}
	}
	if len(c.buf) == 0 {
		return rankItem{}, false
	}
	it := c.buf[0]
	c.buf = c.buf[1:]
	return it, true
}

// weightedPick makes the best-scoring candidate of chunk type ti growable
// (ties by provider id). The candidates are the open providers with
// head-room for this consumer; each metric is min-max normalised over them.
//
// It does not scan the federation: the bounds come from the ends of the
// per-metric orders (weightedBounds), and the winner from a threshold walk
// over the same orders (thresholdWalk). A full provider with this
// consumer's peerings in flight that scores at least as well as the winner
// masks the type. See docs/placement.md.
func (v *viewCtx) weightedPick(ti int) {
	n := v.weightedBounds(ti)
	v.weighted[ti] = n
	winner, best := v.thresholdWalk(ti, n, v.weightedWalks(ti, n))
	for _, ps := range v.heldBlockers(ti) {
		if beats(ps, n.score(v, ps, ti), winner, best) {
			v.blockedBy[ti] = ps.p.ID
			return
		}
	}
	if winner != nil {
		v.growable[groupKey{winner.p.ID, ti}] = struct{}{}
	}
}

// beats reports whether ps, scoring s, ranks before winner, scoring best
// (nil: none yet): a lower score, ties by provider id.
func beats(ps *provState, s float64, winner *provState, best float64) bool {
	return winner == nil || s < best || (s == best && ps.p.ID < winner.p.ID)
}

// usable reports whether a provider is a Weighted candidate of type ti.
func (v *viewCtx) usable(ps *provState, ti int) bool { return v.classify(ps, ti) == usable }

// Values per metric as the ranking trees hold them.
func priceOf(ti int) func(*provState) float64 {
	return func(ps *provState) float64 { return ps.costF[ti] }
}
func carbonOf(ps *provState) float64 { return ps.carbon }
func freeOf(ti int) func(*provState) float64 {
	return func(ps *provState) float64 { return ps.freeKey[ti] }
}

// weightedBounds returns the normalisation of chunk type ti: per metric the
// first and last candidate with a value in its order (price, carbon and
// free trees, the distance index nearest and farthest first).
func (v *viewCtx) weightedBounds(ti int) *weightedNorm {
	n := &weightedNorm{w: weightArray(v.weights)}
	tr := &v.ix.trees[ti]
	firstLast := func(tree *btree.BTreeG[rankItem], i int, value func(*provState) float64) {
		tree.Ascend(func(it rankItem) bool {
			if it.class != 0 {
				return false
			}
			if ps := v.ix.providers[it.id]; v.usable(ps, ti) {
				n.lo[i], n.has[i] = value(ps), true
				return false
			}
			return true
		})
		if !n.has[i] {
			return
		}
		tree.DescendLessOrEqual(rankItem{class: 1}, func(it rankItem) bool {
			if ps := v.ix.providers[it.id]; v.usable(ps, ti) {
				n.hi[i] = value(ps)
				return false
			}
			return true
		})
	}
	firstLast(tr.price, wPrice, priceOf(ti))
	firstLast(tr.eco, wCarbon, carbonOf)
	firstLast(tr.free, wFree, freeOf(ti))
	if !v.located {
		return n
	}
	nearestUsable := func(farthestFirst bool) (float64, bool) {
		for it := v.newNearIter(ti, farthestFirst); ; {
			ps, d, ok := it.next()
			if !ok {
				return 0, false
			}
			if v.usable(ps, ti) {
				return d, true
			}
		}
	}
	n.lo[wDistance], n.has[wDistance] = nearestUsable(false)
	if n.has[wDistance] {
		n.hi[wDistance], _ = nearestUsable(true)
	}
	return n
}

// metricWalk is one metric's sorted access in the threshold walk.
type metricWalk struct {
	i     int // metric index; -1 for the order added only to read everyone
	l     wList
	bound float64 // normalised value last read
	done  bool    // valued part read
	full  bool    // the order holds every open provider
}

// weightedWalks returns the orders the threshold walk reads: one per
// weighted metric some candidate has (metrics with no weight, or that no
// candidate has, add the same to every candidate), plus a full order when
// none of them holds every open provider, so ties at the threshold are
// still read.
func (v *viewCtx) weightedWalks(ti int, n *weightedNorm) []*metricWalk {
	tr := &v.ix.trees[ti]
	var walks []*metricWalk
	for i, w := range n.w {
		if w == 0 || !n.has[i] {
			continue
		}
		switch i {
		case wPrice:
			walks = append(walks, &metricWalk{i: i, l: &treeList{v, &rankCursor{tree: tr.price}, priceOf(ti)}, full: true})
		case wCarbon:
			walks = append(walks, &metricWalk{i: i, l: &treeList{v, &rankCursor{tree: tr.eco}, carbonOf}, full: true})
		case wFree:
			walks = append(walks, &metricWalk{i: i, l: &treeList{v, &rankCursor{tree: tr.free}, freeOf(ti)}, full: true})
		case wDistance:
			walks = append(walks, &metricWalk{i: i, l: &distList{v.newNearIter(ti, false)}})
		}
	}
	if !slices.ContainsFunc(walks, func(w *metricWalk) bool { return w.full }) {
		walks = append(walks, &metricWalk{i: -1, l: &treeList{v, &rankCursor{tree: tr.free}, freeOf(ti)}, full: true})
	}
	return walks
}

// thresholdWalk is Fagin's threshold algorithm: read one provider from each
// order in turn, score it exactly, and stop as soon as the best score is
// below Σ weight × (normalised value last read in each order), which no
// unread provider can beat. It returns the best candidate (ties by id) and
// its score. With an explainer it reads every open provider (recording
// each); the winner is the same.
func (v *viewCtx) thresholdWalk(ti int, n *weightedNorm, walks []*metricWalk) (winner *provState, best float64) {
	seen := map[string]struct{}{}
	for {
		allSeen := false
		for _, w := range walks {
			if w.done {
				continue
			}
			ps, ok := w.advance(n)
			if !ok {
				allSeen = allSeen || w.full
				continue
			}
			if _, ok := seen[ps.p.ID]; ok {
				continue
			}
			seen[ps.p.ID] = struct{}{}
			v.ex.meet(ti, ps)
			if !v.usable(ps, ti) {
				continue
			}
			if s := n.score(v, ps, ti); beats(ps, s, winner, best) {
				winner, best = ps, s
			}
		}
		if allSeen || !slices.ContainsFunc(walks, func(w *metricWalk) bool { return !w.done }) {
			return winner, best
		}
		if v.ex == nil && winner != nil && best < n.threshold(walks) {
			return winner, best
		}
	}
}

// advance reads the walk's next provider and lowers its bound to the
// provider's normalised value (the worst, 1, once the providers without
// the metric start); ok is false when the order is read to its end.
func (w *metricWalk) advance(n *weightedNorm) (ps *provState, ok bool) {
	ps, val, has, ok := w.l.next()
	if !ok {
		w.done, w.bound = true, 1
		return nil, false
	}
	if w.i >= 0 {
		w.bound = 1 // the rest lack the metric: worst
		if has {
			w.bound = n.norm(w.i, val)
		}
	}
	if !has && w.i >= 0 && !w.full {
		w.done = true
	}
	return ps, true
}

// threshold is the lowest score an unread provider can still have.
func (n *weightedNorm) threshold(walks []*metricWalk) float64 {
	t := 0.0
	for i, w := range n.w {
		if w == 0 {
			continue
		}
		b := 1.0
		if n.has[i] {
			for _, wk := range walks {
				if wk.i == i {
					b = wk.bound
				}
			}
		}
		t += w * b
	}
	return t
}
