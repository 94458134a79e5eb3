package placement

import (
	"container/heap"
	"encoding/binary"
	"hash/fnv"
	"math"
	"sort"

	"github.com/google/btree"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// latencyShortlistSize is how many nearest providers per chunk type stay
// growable under Latency.
const latencyShortlistSize = 3

// viewCtx is the state of one View call (under the read lock).
type viewCtx struct {
	ix       *Index
	c        Consumer
	policy   api.PlacementType
	located  bool
	clat     float64
	clon     float64
	weights  api.Weights
	held     map[groupKey]struct{}
	growable map[groupKey]struct{}
	// metric holds the placement metric per listed group, when it has one.
	metric map[groupKey]float64
	// weighted holds the Weighted normalisation per chunk type.
	weighted [numTypes]*weightedNorm
	shortlst bool
}

// View returns consumer consumerID's node-group view.
//
// One group per provider × chunk type, minSize 0, currentReserved = this
// consumer's live chunks there. Growable groups have maxSize =
// currentReserved + head-room, where head-room = min(free chunks, quota −
// this consumer's live chunks); every other group has maxSize =
// currentReserved. Under Standard, Price, Eco and Weighted exactly one group
// per chunk type is growable (none while this consumer's peerings on a
// better-ranked full provider settle); under Latency up to three nearest.
// Providers that do not share with the consumer never appear; unavailable
// providers are never growable.
//
// With all=false the view lists the groups the consumer holds chunks in and
// the growable ones; all=true lists every group it may see. Groups are
// sorted by provider id, then type. A consumer without a heartbeat gets the
// Standard view.
func (ix *Index) View(consumerID string, all bool) api.NodeGroupListResponse {
	ix.mu.RLock()
	defer ix.mu.RUnlock()

	c, ok := ix.consumers[consumerID]
	if !ok {
		c = Consumer{ID: consumerID}
	}
	v := &viewCtx{
		ix:       ix,
		c:        c,
		held:     ix.held[consumerID],
		growable: map[groupKey]struct{}{},
		metric:   map[groupKey]float64{},
	}
	v.policy, _ = NormalizePolicy(c.Placement.Type)
	if c.Latitude != nil && c.Longitude != nil && validCoord(*c.Latitude, *c.Longitude) {
		v.located, v.clat, v.clon = true, *c.Latitude, *c.Longitude
	}
	if v.policy == api.PlacementWeighted {
		v.weights = normWeights(c.Placement.Weights)
	}

	for ti := range chunkTypes {
		switch {
		case v.policy == api.PlacementLatency && v.located:
			v.latency(ti)
		case v.policy == api.PlacementWeighted:
			v.weightedPick(ti)
		default:
			v.ranked(ti)
		}
	}

	// Collect the listed groups.
	listed := make(map[groupKey]struct{}, len(v.held)+len(v.growable))
	for k := range v.held {
		listed[k] = struct{}{}
	}
	for k := range v.growable {
		listed[k] = struct{}{}
	}
	if all {
		for id, ps := range ix.providers {
			if !ps.p.Available {
				continue
			}
			for ti := range chunkTypes {
				if ps.total[ti] > 0 {
					listed[groupKey{id, ti}] = struct{}{}
				}
			}
		}
	}

	resp := api.NodeGroupListResponse{
		NodeGroups:       make([]api.NodeGroupView, 0, len(listed)),
		AppliedPlacement: v.policy,
		ServedAt:         metav1.NewTime(ix.now()),
	}
	for k := range listed {
		ps := ix.providers[k.provider]
		if ps == nil || !MayBorrow(ps.p.Sharing, consumerID) {
			continue
		}
		resp.NodeGroups = append(resp.NodeGroups, v.group(ps, k))
	}
	sort.Slice(resp.NodeGroups, func(i, j int) bool {
		a, b := &resp.NodeGroups[i], &resp.NodeGroups[j]
		if a.ProviderClusterID != b.ProviderClusterID {
			return a.ProviderClusterID < b.ProviderClusterID
		}
		return a.Type < b.Type
	})
	resp.LatencyShortlist = v.shortlst
	resp.Generation = generation(&resp)
	return resp
}

// group builds one view row.
func (v *viewCtx) group(ps *provState, k groupKey) api.NodeGroupView {
	t := chunkTypes[k.t]
	live := v.ix.usageOf(k, v.c.ID).Live
	g := api.NodeGroupView{
		ID:                    api.NodeGroupID(ps.p.ID, t),
		ProviderClusterID:     ps.p.ID,
		ProviderLiqoClusterID: ps.p.LiqoID,
		Type:                  t,
		MaxSize:               live,
		CurrentReserved:       live,
		ChunkResources:        v.ix.cfg.Shape(t).DeepCopy(),
		Cost:                  ps.costStr[k.t],
		ProbeEndpoint:         ps.p.ProbeEndpoint,
	}
	if _, ok := v.growable[k]; ok {
		g.MaxSize = live + v.headroom(ps, k.t)
	}
	if ps.p.Topology != nil {
		topo := *ps.p.Topology
		g.Topology = &topo
	}
	if m, ok := v.metricOf(ps, k.t); ok {
		g.PlacementMetric, g.HasMetric = &m, true
	}
	return g
}

// metricOf returns the placement metric of a group under the consumer's
// policy (never under Standard, as in the reference).
func (v *viewCtx) metricOf(ps *provState, ti int) (float64, bool) {
	switch v.policy {
	case api.PlacementPrice:
		return ps.costF[ti], ps.cost[ti] != nil
	case api.PlacementEco:
		return ps.carbon, ps.hasCarbon
	case api.PlacementLatency:
		if v.located && ps.hasCoords {
			return DistanceKM(v.clat, v.clon, ps.lat, ps.lon), true
		}
	case api.PlacementWeighted:
		if n := v.weighted[ti]; n != nil {
			return n.score(v.ix, v, ps, ti), true
		}
	}
	return 0, false
}

// headroom is how many more chunks of the group this consumer may take now.
func (v *viewCtx) headroom(ps *provState, ti int) int32 {
	if !ps.p.Available {
		return 0
	}
	k := groupKey{ps.p.ID, ti}
	room := v.ix.free(ps, ti)
	if q := Quota(ps.p.Sharing); q > 0 {
		room = min(room, q-v.ix.usageOf(k, v.c.ID).Live)
	}
	return max(room, 0)
}

// candidate classifies a group met in a walk: usable (may borrow, has
// head-room), blocking (may borrow, no head-room, peering in flight) or
// neither.
func (v *viewCtx) candidate(ps *provState, ti int) (usable, blocking bool) {
	if ps == nil || !ps.p.Available || ps.total[ti] == 0 || !MayBorrow(ps.p.Sharing, v.c.ID) {
		return false, false
	}
	if v.headroom(ps, ti) > 0 {
		return true, false
	}
	return false, v.ix.usageOf(groupKey{ps.p.ID, ti}, v.c.ID).InFlight > 0
}

// heldBlockers returns the providers of chunk type ti this consumer has
// in flight that have no head-room for it (at most its held groups).
func (v *viewCtx) heldBlockers(ti int) []*provState {
	var out []*provState
	for k := range v.held {
		if k.t != ti {
			continue
		}
		ps := v.ix.providers[k.provider]
		if _, blocking := v.candidate(ps, ti); blocking {
			out = append(out, ps)
		}
	}
	return out
}

// ranked applies single-winner masking for Standard, Price, Eco (and
// Latency without a consumer location, which has no preference and uses the
// Standard order): walk the type's open providers best-first; the first one
// with head-room for this consumer wins, unless a full provider with this
// consumer's peerings in flight ranks before it, in which case nothing is
// growable so the Cluster Autoscaler waits. Providers without a metric rank
// after every provider with one (last resort), by id.
func (v *viewCtx) ranked(ti int) {
	tr := &v.ix.trees[ti]
	var (
		keyOf func(ps *provState) rankItem
		less  func(a, b rankItem) bool
		tree  = tr.std
	)
	switch v.policy {
	case api.PlacementPrice:
		tree, less = tr.price, lessDec
		keyOf = func(ps *provState) rankItem { return v.ix.priceItem(ps, ti) }
	case api.PlacementEco:
		tree, less = tr.eco, lessFloat
		keyOf = ecoItem
	default:
		less = lessFloat
		keyOf = func(ps *provState) rankItem { return rankItem{f: v.ix.standardKey(ps, ti), id: ps.p.ID} }
	}
	var (
		winner  *provState
		winKey  rankItem
		blocked bool
	)
	tree.Ascend(func(it rankItem) bool {
		ps := v.ix.providers[it.id]
		usable, blocking := v.candidate(ps, ti)
		switch {
		case usable:
			winner, winKey = ps, it
			return false
		case blocking:
			blocked = true
			return false
		}
		return true
	})
	if blocked {
		return
	}
	// Full providers are not in the trees: the consumer's own in-flight
	// ones still block if they rank before the winner.
	for _, ps := range v.heldBlockers(ti) {
		if winner == nil || less(keyOf(ps), winKey) {
			return
		}
	}
	if winner != nil {
		v.growable[groupKey{winner.p.ID, ti}] = struct{}{}
	}
}

// latency keeps up to three nearest providers with head-room growable
// (great-circle distance from the consumer), nearest first; a full
// provider with this consumer's peerings in flight met before anything was
// kept masks the type. When no provider with coordinates has head-room,
// the Standard order picks one last-resort provider.
func (v *viewCtx) latency(ti int) {
	type cand struct {
		ps   *provState
		dist float64
	}
	var kept []cand
	blocked := false
	v.nearest(ti, func(ps *provState, dist float64) bool {
		usable, blocking := v.candidate(ps, ti)
		switch {
		case usable:
			kept = append(kept, cand{ps, dist})
			return len(kept) < latencyShortlistSize
		case blocking && len(kept) == 0:
			blocked = true
			return false
		}
		return true
	})
	if blocked {
		return
	}
	for _, ps := range v.heldBlockers(ti) {
		if !ps.hasCoords {
			continue
		}
		d := DistanceKM(v.clat, v.clon, ps.lat, ps.lon)
		if len(kept) == 0 || d < kept[0].dist || (d == kept[0].dist && ps.p.ID < kept[0].ps.p.ID) {
			return
		}
	}
	if len(kept) == 0 {
		v.ranked(ti)
		return
	}
	for _, c := range kept {
		v.growable[groupKey{c.ps.p.ID, ti}] = struct{}{}
	}
	if len(kept) > 1 {
		v.shortlst = true
	}
}

// nearest calls fn with the open providers of chunk type ti that have
// coordinates, nearest to the consumer first (ties by id), until fn
// returns false. It walks the latitude tree outwards from the consumer's
// latitude in both directions: R·|Δlatitude| is a lower bound of the
// great-circle distance to every provider not yet read, so a provider read
// so far is emitted once its distance is below that bound. The work is
// proportional to the providers in the latitude band the walk has to cover.
func (v *viewCtx) nearest(ti int, fn func(ps *provState, dist float64) bool) {
	tree := v.ix.trees[ti].lat
	pivot := latItem{lat: v.clat}
	up := &latCursor{tree: tree, asc: true, from: pivot}
	down := &latCursor{tree: tree, from: pivot}
	h := &distHeap{}
	for {
		upIt, upOK := up.peek()
		downIt, downOK := down.peek()
		bound := math.Inf(1)
		if upOK {
			bound = latBound(upIt.lat, v.clat)
		}
		if downOK {
			bound = min(bound, latBound(downIt.lat, v.clat))
		}
		for h.Len() > 0 && (*h)[0].less(bound) {
			d := heap.Pop(h).(distItem)
			if !fn(v.ix.providers[d.id], d.dist) {
				return
			}
		}
		if !upOK && !downOK {
			return
		}
		var it latItem
		if upOK && (!downOK || upIt.lat-v.clat <= v.clat-downIt.lat) {
			it = up.next()
		} else {
			it = down.next()
		}
		ps := v.ix.providers[it.id]
		heap.Push(h, distItem{id: it.id, dist: DistanceKM(v.clat, v.clon, ps.lat, ps.lon)})
	}
}

// latBound is the least great-circle distance between two latitudes.
func latBound(a, b float64) float64 {
	return earthRadiusKM * math.Abs(a-b) * math.Pi / 180
}

// latCursor reads a latitude tree in batches from a pivot, ascending
// (inclusive) or descending (exclusive of the pivot, which has an empty id).
type latCursor struct {
	tree    *btree.BTreeG[latItem]
	asc     bool
	from    latItem
	started bool
	done    bool
	buf     []latItem
}

const latBatch = 16

func (c *latCursor) peek() (latItem, bool) {
	if len(c.buf) == 0 && !c.done {
		c.fill()
	}
	if len(c.buf) == 0 {
		return latItem{}, false
	}
	return c.buf[0], true
}

func (c *latCursor) next() latItem {
	it := c.buf[0]
	c.buf = c.buf[1:]
	return it
}

func (c *latCursor) fill() {
	c.buf = c.buf[:0]
	skip := c.started
	collect := func(it latItem) bool {
		if skip && it == c.from {
			skip = false
			return true
		}
		skip = false
		c.buf = append(c.buf, it)
		return len(c.buf) < latBatch
	}
	if c.asc {
		c.tree.AscendGreaterOrEqual(c.from, collect)
	} else {
		c.tree.DescendLessOrEqual(c.from, collect)
	}
	c.started = true
	if len(c.buf) < latBatch {
		c.done = true
	}
	if len(c.buf) > 0 {
		c.from = c.buf[len(c.buf)-1]
	}
}

// distItem is a provider and its distance from the consumer.
type distItem struct {
	id   string
	dist float64
}

// less orders by distance; below a bound means strictly below it.
func (d distItem) less(bound float64) bool { return d.dist < bound || math.IsInf(bound, 1) }

type distHeap []distItem

func (h distHeap) Len() int { return len(h) }
func (h distHeap) Less(i, j int) bool {
	if h[i].dist != h[j].dist {
		return h[i].dist < h[j].dist
	}
	return h[i].id < h[j].id
}
func (h distHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *distHeap) Push(x any)   { *h = append(*h, x.(distItem)) }
func (h *distHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}

// validCoord reports whether a consumer location is usable.
func validCoord(lat, lon float64) bool {
	return lat >= -90 && lat <= 90 && lon >= -180 && lon <= 180 && !(lat == 0 && lon == 0)
}

// generation is a content hash of the view (FNV-1a 64 over every field
// except servedAt), folded into a positive int64 that is never 0.
func generation(r *api.NodeGroupListResponse) int64 {
	h := fnv.New64a()
	var b [8]byte
	str := func(s string) { h.Write([]byte(s)); h.Write([]byte{0}) }
	num := func(n uint64) { binary.LittleEndian.PutUint64(b[:], n); h.Write(b[:]) }
	str(string(r.AppliedPlacement))
	if r.LatencyShortlist {
		num(1)
	} else {
		num(0)
	}
	for i := range r.NodeGroups {
		g := &r.NodeGroups[i]
		str(g.ID)
		str(g.ProviderLiqoClusterID)
		num(uint64(g.MaxSize))
		num(uint64(g.CurrentReserved))
		str(g.Cost)
		str(g.ProbeEndpoint)
		if g.HasMetric {
			num(math.Float64bits(*g.PlacementMetric))
		} else {
			num(1<<64 - 1)
		}
		if t := g.Topology; t != nil {
			str(t.Zone)
			str(t.Region)
			str(t.City)
			num(math.Float64bits(t.Latitude))
			num(math.Float64bits(t.Longitude))
		} else {
			str("-")
		}
	}
	g := int64(h.Sum64() &^ (1 << 63))
	if g == 0 {
		g = 1
	}
	return g
}
