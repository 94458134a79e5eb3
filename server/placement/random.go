package placement

import (
	"cmp"
	"slices"
	"strings"
)

// The Random policy is the experiments' baseline (docs/experiments.md): it
// picks one provider per chunk type uniformly among those with head-room
// for the consumer, ignoring every metric. It is deterministic for a seed:
// each provider's draw is a hash of (seed, consumer, chunk type, draw
// number, provider id), the lowest draw wins, and the draw number counts
// the reservations the consumer started on the type. So repeated views
// between two reservations agree (the Cluster Autoscaler sees one winner),
// each new reservation is a fresh uniform draw, and two runs with the same
// seed and the same sequence of reservations draw the same providers.
//
// It reads every open provider of the type: O(p) per view, unlike the
// ranking policies' early stops (a baseline, not a production policy).

// drawKey is one consumer's Random draw counter per chunk type.
type drawKey struct {
	consumer string
	t        int
}

// WithRandomSeed seeds the Random policy's draws (the broker's
// --random-seed; default 0).
func WithRandomSeed(seed uint64) Option {
	return func(ix *Index) { ix.seed = seed }
}

// randomPick makes the single growable group of chunk type ti the usable
// provider with the lowest draw. With an explainer it records the usable
// providers in draw order. A full provider with this consumer's peering in
// flight never blocks: Random ranks nothing before anything else.
func (v *viewCtx) randomPick(ti int) {
	type drawn struct {
		ps *provState
		d  float64
	}
	var best drawn
	var all []drawn
	v.ix.trees[ti].std.Ascend(func(it rankItem) bool {
		ps := v.ix.providers[it.id]
		if v.classify(ps, ti) != usable {
			return true
		}
		c := drawn{ps, v.randomDraw(ps, ti)}
		if v.ex != nil {
			all = append(all, c)
		}
		if best.ps == nil || c.d < best.d || (c.d == best.d && ps.p.ID < best.ps.p.ID) {
			best = c
		}
		return true
	})
	slices.SortFunc(all, func(a, b drawn) int {
		if c := cmp.Compare(a.d, b.d); c != 0 {
			return c
		}
		return strings.Compare(a.ps.p.ID, b.ps.p.ID)
	})
	for _, c := range all {
		v.ex.meet(ti, c.ps)
	}
	if best.ps != nil {
		v.growable[groupKey{best.ps.p.ID, ti}] = struct{}{}
	}
}

// randomDraw is provider ps's draw in [0, 1) for this consumer's next
// reservation of chunk type ti.
func (v *viewCtx) randomDraw(ps *provState, ti int) float64 {
	h := fnvHash(14695981039346656037)
	h.num(v.ix.seed)
	h.str(v.c.ID)
	h.num(uint64(ti))
	h.num(v.ix.draws[drawKey{v.c.ID, ti}])
	h.str(ps.p.ID)
	return float64(mix64(uint64(h))>>11) / (1 << 53)
}

// mix64 is SplitMix64's finaliser: it spreads FNV's low-entropy high bits
// so that the draws are uniform.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
