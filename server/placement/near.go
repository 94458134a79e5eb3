package placement

import (
	"math"
	"slices"
)

// The distance index: one static k-d tree per chunk type over the unit
// vectors (x, y, z) of the providers with coordinates and chunks of the
// type, shared by every consumer and rebuilt lazily when coordEpoch moves.
// It replaces a per-consumer sorted list of every provider, which cost
// O(consumers × providers) memory and an O(P log P) sort per consumer after
// every coordEpoch move; the tree costs O(P) memory and one O(P log P)
// build per move, and a walk reading k providers costs about O(k log P).
//
// A walk (nearIter) is a best-first search over a priority queue of nodes
// and points, and yields exactly the sequence the sorted list did: points
// are keyed by the exact DistanceKM from the consumer, ties by id; a node
// is keyed by a bound on the great-circle distance of anything in its box
// (a lower bound nearest-first, an upper bound farthest-first), widened by
// nearSlackKM so that rounding can never let a point out before a node
// holding a nearer (farther) point or an equal one with a smaller (larger)
// id. On equal keys nodes come out before points.

// nearLeafSize is the most points a leaf holds.
const nearLeafSize = 8

// nearSlackKM widens node bounds past floating-point rounding. The worst
// case is near the antipode, where asin's slope turns a 1e-15 error of the
// chord (or of the haversine term) into about 6e-4 km (3.3e-4 km seen
// between DistanceKM and the chord over 3 million pairs, half of them
// nearly antipodal); 10 m is far beyond it and costs nothing measurable in
// nodes read. With no slack TestNearIterMatchesSort fails.
const nearSlackKM = 0.01

// nearTree is one chunk type's k-d tree, immutable once built.
type nearTree struct {
	epoch uint64      // coordEpoch it was built at
	ids   []string    // the providers' ids, sorted
	pts   []nearPoint // each node's points are pts[from:to]
	nodes []nearNode  // nodes[0] is the root (none when pts is empty)
}

// nearPoint is a provider's location (no pointers: cheap to move).
type nearPoint struct {
	v        [3]float64 // unit vector
	lat, lon float64
	id       int32 // index in ids, so ids compare as ints
}

// nearNode is a node of the tree: its points' bounding box and either two
// children or, in a leaf (left < 0), its points.
type nearNode struct {
	lo, hi      [3]float64
	from, to    int32
	left, right int32
}

// unitVector returns the point of the unit sphere at lat, lon (degrees).
func unitVector(lat, lon float64) [3]float64 {
	const rad = math.Pi / 180
	la, lo := lat*rad, lon*rad
	return [3]float64{math.Cos(la) * math.Cos(lo), math.Cos(la) * math.Sin(lo), math.Sin(la)}
}

// nearTreeOf returns chunk type ti's tree, rebuilding it if coordEpoch
// moved since it was built. The caller holds mu (a read lock is enough:
// the tree is guarded by cacheMu).
func (ix *Index) nearTreeOf(ti int) *nearTree {
	ix.cacheMu.Lock()
	defer ix.cacheMu.Unlock()
	if t := ix.near[ti]; t != nil && t.epoch == ix.coordEpoch {
		return t
	}
	t := &nearTree{epoch: ix.coordEpoch}
	for id, ps := range ix.providers {
		if ps.hasCoords && ps.total[ti] > 0 {
			t.ids = append(t.ids, id)
		}
	}
	slices.Sort(t.ids)
	t.pts = make([]nearPoint, len(t.ids))
	for i, id := range t.ids {
		ps := ix.providers[id]
		t.pts[i] = nearPoint{v: unitVector(ps.lat, ps.lon), lat: ps.lat, lon: ps.lon, id: int32(i)}
	}
	if len(t.pts) > 0 {
		t.build(0, len(t.pts))
	}
	ix.near[ti] = t
	return t
}

// build makes the node of pts[from:to] (and its subtree) and returns its
// index: split at the median of the box's widest dimension.
func (t *nearTree) build(from, to int) int32 {
	nd := nearNode{from: int32(from), to: int32(to), left: -1, right: -1}
	nd.lo, nd.hi = t.pts[from].v, t.pts[from].v
	for _, p := range t.pts[from+1 : to] {
		for d := range 3 {
			nd.lo[d], nd.hi[d] = min(nd.lo[d], p.v[d]), max(nd.hi[d], p.v[d])
		}
	}
	i := int32(len(t.nodes))
	t.nodes = append(t.nodes, nd)
	if to-from <= nearLeafSize {
		return i
	}
	dim := 0
	for d := 1; d < 3; d++ {
		if nd.hi[d]-nd.lo[d] > nd.hi[dim]-nd.lo[dim] {
			dim = d
		}
	}
	mid := (from + to) / 2
	selectNth(t.pts[from:to], mid-from, dim)
	left := t.build(from, mid)
	right := t.build(mid, to)
	t.nodes[i].left, t.nodes[i].right = left, right
	return i
}

// selectNth reorders pts so that pts[k] is where a sort by (v[dim], id)
// would put it, with nothing after it before it and nothing before it
// after it (quickselect, median-of-three pivot: O(len) expected). The ids
// break ties, so the tree is the same whatever the map order.
func selectNth(pts []nearPoint, k, dim int) {
	less := func(i, j int) bool {
		if a, b := pts[i].v[dim], pts[j].v[dim]; a != b {
			return a < b
		}
		return pts[i].id < pts[j].id
	}
	swap := func(i, j int) { pts[i], pts[j] = pts[j], pts[i] }
	lo, hi := 0, len(pts)-1
	for lo < hi {
		mid := (lo + hi) / 2
		if less(mid, lo) {
			swap(mid, lo)
		}
		if less(hi, lo) {
			swap(hi, lo)
		}
		if less(mid, hi) {
			swap(mid, hi) // the median of the three is the pivot, at hi
		}
		p := lo
		for i := lo; i < hi; i++ {
			if less(i, hi) {
				swap(i, p)
				p++
			}
		}
		swap(p, hi)
		switch {
		case k < p:
			hi = p - 1
		case k > p:
			lo = p + 1
		default:
			return
		}
	}
}

// nearIter yields the open providers of a chunk type that have
// coordinates by distance from the consumer, nearest first (ties by id),
// or farthest first (ties by descending id): a best-first walk of the
// type's tree, skipping providers that are not open for the type.
type nearIter struct {
	ix       *Index
	ti       int
	t        *nearTree
	lat, lon float64
	q        [3]float64
	rev      bool // farthest first
	heap     []nearEntry
}

// nearEntry is a node or a point in the walk's queue.
type nearEntry struct {
	key   float64 // a point's distance, a node's bound
	i     int32   // index in nodes or pts
	point bool
}

func (v *viewCtx) newNearIter(ti int, farthestFirst bool) *nearIter {
	if v.ix.trees[ti].std.Len() == 0 {
		return &nearIter{} // nothing is open for the type
	}
	n := &nearIter{ix: v.ix, ti: ti, t: v.ix.nearTreeOf(ti), lat: v.clat, lon: v.clon,
		q: unitVector(v.clat, v.clon), rev: farthestFirst, heap: make([]nearEntry, 0, 32)}
	if len(n.t.nodes) > 0 {
		n.push(nearEntry{key: n.bound(&n.t.nodes[0])})
	}
	return n
}

func (n *nearIter) next() (*provState, float64, bool) {
	for len(n.heap) > 0 {
		e := n.pop()
		if e.point {
			return n.ix.providers[n.t.ids[n.t.pts[e.i].id]], e.key, true
		}
		nd := &n.t.nodes[e.i]
		if nd.left >= 0 {
			n.push(nearEntry{key: n.bound(&n.t.nodes[nd.left]), i: nd.left})
			n.push(nearEntry{key: n.bound(&n.t.nodes[nd.right]), i: nd.right})
			continue
		}
		for i := nd.from; i < nd.to; i++ {
			p := &n.t.pts[i]
			if ps := n.ix.providers[n.t.ids[p.id]]; ps != nil && ps.indexed[n.ti] {
				n.push(nearEntry{key: DistanceKM(n.lat, n.lon, p.lat, p.lon), i: i, point: true})
			}
		}
	}
	return nil, 0, false
}

// bound is the lower (nearest first) or upper (farthest first) bound of
// the distance from the consumer to anything in nd's box, widened by
// nearSlackKM: the chord to the box's nearest point (farthest corner) as a
// great-circle distance.
func (n *nearIter) bound(nd *nearNode) float64 {
	var s float64
	for d := range 3 {
		var c float64
		if n.rev {
			c = max(n.q[d]-nd.lo[d], nd.hi[d]-n.q[d])
		} else {
			c = max(nd.lo[d]-n.q[d], 0, n.q[d]-nd.hi[d])
		}
		s += c * c
	}
	km := 2 * earthRadiusKM * math.Asin(math.Min(1, math.Sqrt(s)/2))
	if n.rev {
		return km + nearSlackKM
	}
	return km - nearSlackKM
}

// before orders the queue: by key (descending farthest first), nodes
// before points on equal keys, then points by id (descending farthest
// first).
func (n *nearIter) before(a, b nearEntry) bool {
	switch {
	case a.key != b.key:
		return (a.key < b.key) != n.rev
	case a.point != b.point:
		return !a.point
	case !a.point:
		return false
	}
	return (n.t.pts[a.i].id < n.t.pts[b.i].id) != n.rev
}

func (n *nearIter) push(e nearEntry) {
	n.heap = append(n.heap, e)
	for i := len(n.heap) - 1; i > 0; {
		p := (i - 1) / 2
		if !n.before(n.heap[i], n.heap[p]) {
			break
		}
		n.heap[i], n.heap[p] = n.heap[p], n.heap[i]
		i = p
	}
}

func (n *nearIter) pop() nearEntry {
	h := n.heap
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	for i := 0; ; {
		c := 2*i + 1
		if c >= len(h) {
			break
		}
		if c+1 < len(h) && n.before(h[c+1], h[c]) {
			c++
		}
		if !n.before(h[c], h[i]) {
			break
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
	n.heap = h
	return top
}
