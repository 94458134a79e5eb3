package placement

import (
	"cmp"
	"math"
	"slices"
	"strings"

	"github.com/google/btree"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// LatencyShortlistMax bounds a Latency shortlist, distance ties included:
// the consumer agent probes every provider on it. Past it, ties are broken
// by id. The shortlist's size before ties is the consumer's
// Placement.LatencyCandidates (api.DefaultLatencyCandidates when it does
// not say); providers tied at the farthest kept distance (one city) stay
// too, so that the consumer's measured RTT, not the id, decides among
// equal distances.
const LatencyShortlistMax = api.MaxLatencyCandidates

// viewCtx is the state of one View call (under the read lock).
type viewCtx struct {
	ix       *Index
	c        Consumer
	policy   api.PlacementType
	located  bool
	clat     float64
	clon     float64
	weights  api.Weights
	held     map[groupKey]Usage
	growable map[groupKey]struct{}
	// blockers caches heldBlockers per chunk type.
	blockers     [numTypes][]*provState
	blockersDone [numTypes]bool
	// shapes caches one copy of each chunk shape per response.
	shapes [numTypes]corev1.ResourceList
	// blockedBy names, per chunk type, the full provider whose in-flight
	// peering for this consumer masks the type ("" when none).
	blockedBy [numTypes]string
	// ex records the walks for an explanation (nil for a view).
	ex *explainer
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
// better-ranked full provider settle); under Latency the consumer's
// shortlist of nearest ones (three by default; more when tied at the last
// one's distance, up to LatencyShortlistMax).
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

	v := ix.newViewCtx(consumerID, nil, nil)

	v.decide()
	listed := v.listed(all)

	resp := api.NodeGroupListResponse{
		NodeGroups:       make([]api.NodeGroupView, 0, len(listed)),
		AppliedPlacement: v.policy,
		ServedAt:         metav1.NewTime(ix.now()),
	}
	for _, k := range listed {
		ps := ix.providers[k.provider]
		if ps == nil || !MayBorrow(ps.p.Sharing, consumerID) {
			continue
		}
		resp.NodeGroups = append(resp.NodeGroups, v.group(ps, k))
	}
	resp.LatencyShortlist = v.shortlst
	resp.Generation = generation(&resp)
	return resp
}

// listed returns the groups a view lists, by provider id then wire order
// of chunk types: held and growable, and with all every group of an
// available provider too.
func (v *viewCtx) listed(all bool) []groupKey {
	listed := make([]groupKey, 0, len(v.held)+len(v.growable))
	for k := range v.held {
		listed = append(listed, k)
	}
	for k := range v.growable {
		if _, dup := v.held[k]; !dup {
			listed = append(listed, k)
		}
	}
	if all {
		listed = listed[:0]
		for id, ps := range v.ix.providers {
			for ti := range chunkTypes {
				k := groupKey{id, ti}
				if _, held := v.held[k]; held || (ps.p.Available && ps.total[ti] > 0) {
					listed = append(listed, k)
				}
			}
		}
	}
	slices.SortFunc(listed, func(a, b groupKey) int {
		if c := strings.Compare(a.provider, b.provider); c != 0 {
			return c
		}
		return a.t - b.t // chunkTypes is in wire order
	})
	return listed
}

// newViewCtx prepares one decision for consumerID (under the read lock):
// its heartbeated policy, or override when set (the explanation of another
// policy's choice); ex, when set, records what the walks meet.
func (ix *Index) newViewCtx(consumerID string, override *api.Placement, ex *explainer) *viewCtx {
	c, ok := ix.consumers[consumerID]
	if !ok {
		c = Consumer{ID: consumerID}
	}
	if override != nil {
		c.Placement = *override
	}
	v := &viewCtx{
		ix:       ix,
		c:        c,
		held:     ix.held[consumerID],
		growable: map[groupKey]struct{}{},
		ex:       ex,
	}
	v.policy, _ = NormalizePolicy(c.Placement.Type)
	if c.Latitude != nil && c.Longitude != nil && validCoord(*c.Latitude, *c.Longitude) {
		v.located, v.clat, v.clon = true, *c.Latitude, *c.Longitude
	}
	if v.scored() {
		v.weights = normWeights(c.Placement.Weights)
	}
	return v
}

// scored reports whether the policy stamps the Weighted score: Weighted,
// and Choice (whose consumer falls back to the Weighted order).
func (v *viewCtx) scored() bool {
	return v.policy == api.PlacementWeighted || v.policy == api.PlacementChoice
}

// decide runs the consumer's policy for every chunk type: it fills
// growable (and blockedBy). Views and explanations both call it.
func (v *viewCtx) decide() {
	for ti := range chunkTypes {
		switch {
		case v.policy == api.PlacementLatency && v.located:
			v.latency(ti)
		case v.policy == api.PlacementWeighted:
			v.weightedPick(ti)
		case v.policy == api.PlacementChoice:
			v.choice(ti)
		case v.policy == api.PlacementRandom:
			v.randomPick(ti)
		default:
			v.ranked(ti)
		}
	}
}

// group builds one view row.
func (v *viewCtx) group(ps *provState, k groupKey) api.NodeGroupView {
	t := chunkTypes[k.t]
	live := v.held[k].Live
	if v.shapes[k.t] == nil {
		v.shapes[k.t] = v.ix.cfg.Shape(t).DeepCopy()
	}
	g := api.NodeGroupView{
		ID:                    api.NodeGroupID(ps.p.ID, t),
		ProviderClusterID:     ps.p.ID,
		ProviderLiqoClusterID: ps.p.LiqoID,
		Type:                  t,
		MaxSize:               live,
		CurrentReserved:       live,
		ChunkResources:        v.shapes[k.t],
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
	if v.policy == api.PlacementChoice {
		if ps.hasCarbon {
			c := ps.carbon
			g.CarbonIntensity = &c
		}
		g.Renewable = ps.p.Renewable
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
	case api.PlacementWeighted, api.PlacementChoice:
		if n := v.weighted[ti]; n != nil {
			return n.score(v, ps, ti), true
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

// verdict is what a group is for this consumer under the sharing rules
// and capacity: usable, blocking, or why it is filtered out.
type verdict uint8

const (
	usable     verdict = iota // may borrow, has head-room
	blocking                  // no head-room, this consumer's peering in flight
	stale                     // the provider is unavailable (stale)
	noChunks                  // the provider offers no chunk of the type
	denied                    // the provider denies this consumer
	notAllowed                // the provider's allow list leaves it out
	quotaFull                 // this consumer reached the provider's quota
	full                      // no free chunk left
)

// classify is the one rule of who may take a group now: candidate and the
// explanations both use it.
func (v *viewCtx) classify(ps *provState, ti int) verdict {
	switch {
	case ps == nil || ps.total[ti] == 0:
		return noChunks
	case !ps.p.Available:
		return stale
	}
	if r := sharingVerdict(ps.p.Sharing, v.c.ID); r != usable {
		return r
	}
	if v.headroom(ps, ti) > 0 {
		return usable
	}
	if v.ix.usageOf(groupKey{ps.p.ID, ti}, v.c.ID).InFlight > 0 {
		return blocking
	}
	if v.ix.free(ps, ti) > 0 {
		return quotaFull
	}
	return full
}

// candidate classifies a group met in a walk: usable (may borrow, has
// head-room), blocking (may borrow, no head-room, peering in flight) or
// neither.
func (v *viewCtx) candidate(ps *provState, ti int) (ok, blocks bool) {
	switch v.classify(ps, ti) {
	case usable:
		return true, false
	case blocking:
		return false, true
	}
	return false, false
}

// heldBlockers returns the providers of chunk type ti this consumer has
// in flight that have no head-room for it (at most its held groups).
func (v *viewCtx) heldBlockers(ti int) []*provState {
	if !v.blockersDone[ti] {
		v.blockersDone[ti] = true
		for k, u := range v.held {
			if k.t != ti || u.InFlight == 0 {
				continue
			}
			ps := v.ix.providers[k.provider]
			if _, blocks := v.candidate(ps, ti); blocks {
				v.blockers[ti] = append(v.blockers[ti], ps)
			}
		}
	}
	return v.blockers[ti]
}

// ranked applies single-winner masking for Standard, Price, Eco (and
// Latency without a consumer location, which has no preference and uses the
// Standard order): walk the type's open providers best-first; the first one
// with head-room for this consumer wins, unless a full provider with this
// consumer's peerings in flight ranks before it, in which case nothing is
// growable so the Cluster Autoscaler waits. Providers without a metric rank
// after every provider with one (last resort), by id.
//
// With an explainer the walk goes on past the decision, recording every
// open provider in rank order; the decision is the same.
func (v *viewCtx) ranked(ti int) {
	tree, keyOf, less := v.rankOrder(ti)
	var (
		winner  *provState
		winKey  rankItem
		decided bool
	)
	tree.Ascend(func(it rankItem) bool {
		ps := v.ix.providers[it.id]
		v.ex.meet(ti, ps)
		if decided {
			return true // explaining: record the rest of the order
		}
		switch v.classify(ps, ti) {
		case usable:
			winner, winKey, decided = ps, it, true
		case blocking:
			v.blockedBy[ti], decided = ps.p.ID, true
		}
		return !decided || v.ex != nil
	})
	if v.blockedBy[ti] != "" {
		return
	}
	// Full providers are not in the trees: the consumer's own in-flight
	// ones still block if they rank before the winner.
	for _, ps := range v.heldBlockers(ti) {
		if winner == nil || less(keyOf(ps), winKey) {
			v.blockedBy[ti] = ps.p.ID
			return
		}
	}
	if winner != nil {
		v.growable[groupKey{winner.p.ID, ti}] = struct{}{}
	}
}

// ChoiceListSize is how many providers per chunk type a Choice view makes
// growable at most: the best by the Weighted score (ties by id). The
// consumer agent shows its model at most 32 (--choice-max-candidates,
// at most 256), so a longer list would only cost the broker and the wire.
const ChoiceListSize = 256

// choice makes the providers of chunk type ti with head-room for this
// consumer growable (the Choice policy: the consumer agent picks one), at
// most ChoiceListSize of them, the best by the Weighted score, and keeps
// the Weighted normalisation over all of them, so each listed group
// carries its Weighted score, the consumer's deterministic fallback.
// Nothing blocks: the agent walks its own ranking. It reads and scores
// every open provider of the type (O(open providers)); with an explainer
// it records them in the Standard order.
func (v *viewCtx) choice(ti int) {
	n := v.weightedBounds(ti)
	v.weighted[ti] = n
	type scored struct {
		ps *provState
		s  float64
	}
	var cands []scored
	v.ix.trees[ti].std.Ascend(func(it rankItem) bool {
		ps := v.ix.providers[it.id]
		v.ex.meet(ti, ps)
		if v.classify(ps, ti) == usable {
			cands = append(cands, scored{ps, n.score(v, ps, ti)})
		}
		return true
	})
	if len(cands) > ChoiceListSize {
		slices.SortFunc(cands, func(a, b scored) int {
			if c := cmp.Compare(a.s, b.s); c != 0 {
				return c
			}
			return strings.Compare(a.ps.p.ID, b.ps.p.ID)
		})
		cands = cands[:ChoiceListSize]
	}
	for _, c := range cands {
		v.growable[groupKey{c.ps.p.ID, ti}] = struct{}{}
	}
}

// rankOrder returns the tree a single-winner policy walks for chunk type
// ti, the key a provider has in it and the tree's order.
func (v *viewCtx) rankOrder(ti int) (*btree.BTreeG[rankItem], func(*provState) rankItem, func(a, b rankItem) bool) {
	tr := &v.ix.trees[ti]
	switch v.policy {
	case api.PlacementPrice:
		return tr.price, func(ps *provState) rankItem { return v.ix.priceItem(ps, ti) }, lessDec
	case api.PlacementEco:
		return tr.eco, ecoItem, lessFloat
	}
	return tr.std, func(ps *provState) rankItem { return rankItem{f: v.ix.standardKey(ps, ti), id: ps.p.ID} }, lessFloat
}

// latency keeps the shortlistSize nearest providers with head-room
// growable (great-circle distance from the consumer), nearest first, and
// those tied with the last (up to LatencyShortlistMax); a full
// provider with this consumer's peerings in flight met before anything was
// kept masks the type. When no provider with coordinates has head-room,
// the Standard order picks one last-resort provider. With an explainer the
// walk records every provider with coordinates, nearest first.
func (v *viewCtx) latency(ti int) {
	type cand struct {
		ps   *provState
		dist float64
	}
	var kept []cand
	done := false
	v.nearest(ti, func(ps *provState, dist float64) bool {
		v.ex.meet(ti, ps)
		if n := len(kept); n == LatencyShortlistMax || n >= v.shortlistSize() && dist > kept[n-1].dist {
			done = true // full, and every tie at its farthest distance kept
		}
		if done {
			return v.ex != nil
		}
		switch v.classify(ps, ti) {
		case usable:
			kept = append(kept, cand{ps, dist})
		case blocking:
			if len(kept) == 0 {
				v.blockedBy[ti], done = ps.p.ID, true
			}
		}
		return !done || v.ex != nil
	})
	if v.blockedBy[ti] != "" {
		return
	}
	for _, ps := range v.heldBlockers(ti) {
		if !ps.hasCoords {
			continue
		}
		d := DistanceKM(v.clat, v.clon, ps.lat, ps.lon)
		if len(kept) == 0 || d < kept[0].dist || (d == kept[0].dist && ps.p.ID < kept[0].ps.p.ID) {
			v.blockedBy[ti] = ps.p.ID
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

// shortlistSize is how many nearest providers the consumer's Latency
// shortlist keeps before distance ties: its Placement.LatencyCandidates,
// api.DefaultLatencyCandidates when unset, never past LatencyShortlistMax
// (for records the heartbeat check did not see).
func (v *viewCtx) shortlistSize() int {
	n := v.c.Placement.LatencyCandidates
	if n <= 0 {
		return api.DefaultLatencyCandidates
	}
	return min(n, LatencyShortlistMax)
}

// nearest calls fn with the open providers of chunk type ti that have
// coordinates, nearest to the consumer first (ties by id), until fn
// returns false.
func (v *viewCtx) nearest(ti int, fn func(ps *provState, dist float64) bool) {
	it := v.newNearIter(ti, false)
	for {
		ps, d, ok := it.next()
		if !ok || !fn(ps, d) {
			return
		}
	}
}

// validCoord reports whether a consumer location is usable.
func validCoord(lat, lon float64) bool {
	return lat >= -90 && lat <= 90 && lon >= -180 && lon <= 180 && !(lat == 0 && lon == 0)
}

// generation is a content hash of the view (FNV-1a 64 over every field
// except servedAt and the chunk shapes, which are fixed for the Index's
// life), folded into a positive int64 that is never 0.
func generation(r *api.NodeGroupListResponse) int64 {
	h := fnvHash(14695981039346656037)
	h.str(string(r.AppliedPlacement))
	if r.LatencyShortlist {
		h.num(1)
	} else {
		h.num(0)
	}
	for i := range r.NodeGroups {
		g := &r.NodeGroups[i]
		h.str(g.ID)
		h.str(g.ProviderLiqoClusterID)
		h.num(uint64(g.MaxSize))
		h.num(uint64(g.CurrentReserved))
		h.str(g.Cost)
		h.str(g.ProbeEndpoint)
		if g.HasMetric {
			h.num(math.Float64bits(*g.PlacementMetric))
		} else {
			h.num(1<<64 - 1)
		}
		if g.CarbonIntensity != nil || g.Renewable { // Choice only: other views hash as before
			var flags uint64 = 1
			if g.Renewable {
				flags = 2
			}
			h.str("carbon")
			h.num(flags)
			if g.CarbonIntensity != nil {
				h.num(math.Float64bits(*g.CarbonIntensity))
			} else {
				h.str("-")
			}
		}
		if t := g.Topology; t != nil {
			h.str(t.Zone)
			h.str(t.Region)
			h.str(t.City)
			h.num(math.Float64bits(t.Latitude))
			h.num(math.Float64bits(t.Longitude))
		} else {
			h.str("-")
		}
	}
	gen := int64(uint64(h) &^ (1 << 63))
	if gen == 0 {
		gen = 1
	}
	return gen
}

// fnvHash is an allocation-free FNV-1a 64 accumulator.
type fnvHash uint64

const fnvPrime = 1099511628211

func (h *fnvHash) str(s string) {
	x := uint64(*h)
	for i := 0; i < len(s); i++ {
		x = (x ^ uint64(s[i])) * fnvPrime
	}
	*h = fnvHash((x ^ 0xff) * fnvPrime) // terminator
}

func (h *fnvHash) num(n uint64) {
	x := uint64(*h)
	for range 8 {
		x = (x ^ (n & 0xff)) * fnvPrime
		n >>= 8
	}
	*h = fnvHash(x)
}
