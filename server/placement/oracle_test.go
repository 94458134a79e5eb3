package placement

import (
	"sort"

	"gopkg.in/inf.v0"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// model is a deliberately naive restatement of the placement rules: it
// keeps plain maps and answers a view by sorting every provider. Tests
// compare the Index against it.
type model struct {
	cfg       ChunkConfig
	providers map[string]Provider
	consumers map[string]Consumer
	usage     map[string]map[api.ChunkType]map[string]Usage // provider → type → consumer
	// Per-provider caches of Chunks and CostPerChunk (pure functions).
	chunks map[string]map[api.ChunkType]int32
	costs  map[string]map[api.ChunkType]*inf.Dec
}

func (m *model) setProvider(p Provider) {
	m.providers[p.ID] = p
	m.chunks[p.ID] = Chunks(m.cfg, p.Resources)
	m.costs[p.ID] = map[api.ChunkType]*inf.Dec{}
	for _, t := range chunkTypes {
		if d, ok := CostPerChunk(p.UnitPrices, m.cfg.Shape(t)); ok {
			m.costs[p.ID][t] = d
		}
	}
}

func (m *model) removeProvider(id string) {
	delete(m.providers, id)
	delete(m.chunks, id)
	delete(m.costs, id)
}

func newModel(cfg ChunkConfig) *model {
	return &model{cfg: cfg, providers: map[string]Provider{}, consumers: map[string]Consumer{}, usage: map[string]map[api.ChunkType]map[string]Usage{},
		chunks: map[string]map[api.ChunkType]int32{}, costs: map[string]map[api.ChunkType]*inf.Dec{}}
}

func (m *model) setUsage(p string, t api.ChunkType, c string, u Usage) {
	if m.usage[p] == nil {
		m.usage[p] = map[api.ChunkType]map[string]Usage{}
	}
	if m.usage[p][t] == nil {
		m.usage[p][t] = map[string]Usage{}
	}
	if u == (Usage{}) {
		delete(m.usage[p][t], c)
		return
	}
	m.usage[p][t][c] = u
}

type mgroup struct {
	p        Provider
	t        api.ChunkType
	total    int32
	live     int32 // everyone's
	mine     Usage
	headroom int32
	std      float64
	cost     float64
	costDec  *inf.Dec
	priced   bool
	carbon   float64
	hasC     bool
	dist     float64
	hasD     bool
	costStr  string
}

func (m *model) view(consumerID string, all bool) api.NodeGroupListResponse {
	c, ok := m.consumers[consumerID]
	if !ok {
		c = Consumer{ID: consumerID}
	}
	policy, _ := NormalizePolicy(c.Placement.Type)
	located := c.Latitude != nil && c.Longitude != nil && validCoord(*c.Latitude, *c.Longitude)
	growable := map[[2]string]bool{}
	metric := map[[2]string]float64{}
	shortlist := false

	for _, t := range []api.ChunkType{api.ChunkGPU, api.ChunkStandard} {
		var groups []*mgroup
		for _, p := range m.providers {
			total := m.chunks[p.ID][t]
			if !MayBorrow(p.Sharing, consumerID) {
				continue
			}
			g := &mgroup{p: p, t: t, total: total}
			for cid, u := range m.usage[p.ID][t] {
				g.live += u.Live
				if cid == consumerID {
					g.mine = u
				}
			}
			free := max(total-g.live, 0)
			g.headroom = free
			if q := Quota(p.Sharing); q > 0 {
				g.headroom = min(free, q-g.mine.Live)
			}
			g.headroom = max(g.headroom, 0)
			if !p.Available {
				g.headroom = 0
			}
			frac := 0.0
			if total > 0 {
				frac = float64(free) / float64(total)
			}
			ren := 0.0
			if p.Renewable {
				ren = 1
			}
			g.std = 1 - (0.8*frac + 0.2*ren)
			if d, ok := m.costs[p.ID][t]; ok {
				g.priced, g.costDec = true, d
				g.cost, _ = strconvDec(d)
				g.costStr = CostQuantity(d).String()
			}
			g.carbon, g.hasC = WeightedCarbon(p.CarbonForecast, p.CarbonIntensity)
			if located && p.Topology.HasCoordinates() {
				g.dist, g.hasD = DistanceKM(*c.Latitude, *c.Longitude, p.Topology.Latitude, p.Topology.Longitude), true
			}
			groups = append(groups, g)
		}
		key := func(g *mgroup) [2]string { return [2]string{g.p.ID, string(t)} }
		// Metrics of every group (listed or not).
		for _, g := range groups {
			switch policy {
			case api.PlacementPrice:
				if g.priced {
					metric[key(g)] = g.cost
				}
			case api.PlacementEco:
				if g.hasC {
					metric[key(g)] = g.carbon
				}
			case api.PlacementLatency:
				if g.hasD {
					metric[key(g)] = g.dist
				}
			}
		}
		// Only available providers with chunks of the type take part.
		var part []*mgroup
		for _, g := range groups {
			if g.p.Available && g.total > 0 {
				part = append(part, g)
			}
		}
		walk := func(order []*mgroup) {
			for _, g := range order {
				if g.headroom > 0 {
					growable[key(g)] = true
					return
				}
				if g.mine.InFlight > 0 {
					return
				}
			}
		}
		byStd := func() []*mgroup {
			o := append([]*mgroup(nil), part...)
			sort.Slice(o, func(i, j int) bool {
				if o[i].std != o[j].std {
					return o[i].std < o[j].std
				}
				return o[i].p.ID < o[j].p.ID
			})
			return o
		}
		switch {
		case policy == api.PlacementPrice || policy == api.PlacementEco:
			o := append([]*mgroup(nil), part...)
			val := func(g *mgroup) (float64, bool) {
				if policy == api.PlacementPrice {
					return g.cost, g.priced
				}
				return g.carbon, g.hasC
			}
			sort.Slice(o, func(i, j int) bool {
				a, aok := val(o[i])
				b, bok := val(o[j])
				if aok != bok {
					return aok
				}
				if aok && policy == api.PlacementPrice {
					if c := o[i].costDec.Cmp(o[j].costDec); c != 0 {
						return c < 0
					}
				} else if aok && a != b {
					return a < b
				}
				return o[i].p.ID < o[j].p.ID
			})
			walk(o)
		case policy == api.PlacementLatency && located:
			var o []*mgroup
			for _, g := range part {
				if g.hasD {
					o = append(o, g)
				}
			}
			sort.Slice(o, func(i, j int) bool {
				if o[i].dist != o[j].dist {
					return o[i].dist < o[j].dist
				}
				return o[i].p.ID < o[j].p.ID
			})
			var kept []*mgroup
			blocked := false
			size := 3 // the default, or the consumer's own (capped)
			if lc := c.Placement.LatencyCandidates; lc > 0 {
				size = min(lc, 16)
			}
			for _, g := range o {
				// size, and the ties at the last one's distance (one city)
				// up to the cap.
				if n := len(kept); n == 16 || n >= size && g.dist > kept[n-1].dist {
					break
				}
				if g.headroom > 0 {
					kept = append(kept, g)
				} else if g.mine.InFlight > 0 && len(kept) == 0 {
					blocked = true
					break
				}
			}
			switch {
			case blocked:
			case len(kept) == 0:
				walk(byStd())
			default:
				for _, g := range kept {
					growable[key(g)] = true
				}
				if len(kept) > 1 {
					shortlist = true
				}
			}
		case policy == api.PlacementWeighted:
			w := weightArray(normWeights(c.Placement.Weights))
			vals := func(g *mgroup) ([4]float64, [4]bool) {
				free := max(g.total-g.live, 0)
				frac := 0.0
				if g.total > 0 {
					frac = float64(free) / float64(g.total)
				}
				return [4]float64{g.cost, g.carbon, g.dist, 1 - frac}, [4]bool{g.priced, g.hasC, g.hasD, true}
			}
			n := &weightedNorm{w: w}
			for _, g := range part {
				if g.headroom == 0 {
					continue
				}
				v, ok := vals(g)
				for i := range v {
					if !ok[i] {
						continue
					}
					if !n.has[i] {
						n.lo[i], n.hi[i], n.has[i] = v[i], v[i], true
					}
					n.lo[i], n.hi[i] = min(n.lo[i], v[i]), max(n.hi[i], v[i])
				}
			}
			score := func(g *mgroup) float64 {
				v, ok := vals(g)
				s := 0.0
				for i := range w {
					if w[i] == 0 {
						continue
					}
					norm := 1.0
					switch {
					case !ok[i]:
					case !n.has[i] || n.hi[i] == n.lo[i]:
						if !n.has[i] || v[i] <= n.lo[i] {
							norm = 0
						}
					default:
						norm = min(max((v[i]-n.lo[i])/(n.hi[i]-n.lo[i]), 0), 1)
					}
					s += w[i] * norm
				}
				return s
			}
			for _, g := range groups {
				metric[key(g)] = score(g)
			}
			o := append([]*mgroup(nil), part...)
			sort.Slice(o, func(i, j int) bool {
				a, b := score(o[i]), score(o[j])
				if a != b {
					return a < b
				}
				return o[i].p.ID < o[j].p.ID
			})
			// Only candidates and blockers matter to the walk.
			var oo []*mgroup
			for _, g := range o {
				if g.headroom > 0 || g.mine.InFlight > 0 {
					oo = append(oo, g)
				}
			}
			walk(oo)
		default:
			walk(byStd())
		}
	}

	resp := api.NodeGroupListResponse{NodeGroups: []api.NodeGroupView{}, AppliedPlacement: policy, LatencyShortlist: shortlist}
	for _, p := range m.providers {
		if !MayBorrow(p.Sharing, consumerID) {
			continue
		}
		chunks := m.chunks[p.ID]
		for _, t := range []api.ChunkType{api.ChunkGPU, api.ChunkStandard} {
			k := [2]string{p.ID, string(t)}
			mine := m.usage[p.ID][t][consumerID]
			held := mine != (Usage{})
			if !(held || growable[k] || (all && p.Available && chunks[t] > 0)) {
				continue
			}
			g := api.NodeGroupView{
				ID: api.NodeGroupID(p.ID, t), ProviderClusterID: p.ID, ProviderLiqoClusterID: p.LiqoID, Type: t,
				CurrentReserved: mine.Live, MaxSize: mine.Live, ChunkResources: m.cfg.Shape(t).DeepCopy(),
				ProbeEndpoint: p.ProbeEndpoint,
			}
			if d, ok := m.costs[p.ID][t]; ok {
				g.Cost = CostQuantity(d).String()
			}
			if p.Topology != nil {
				topo := *p.Topology
				g.Topology = &topo
			}
			if growable[k] {
				live := int32(0)
				for _, u := range m.usage[p.ID][t] {
					live += u.Live
				}
				room := max(chunks[t]-live, 0)
				if q := Quota(p.Sharing); q > 0 {
					room = min(room, q-mine.Live)
				}
				g.MaxSize += max(room, 0)
			}
			if v, ok := metric[k]; ok {
				g.PlacementMetric, g.HasMetric = &v, true
			}
			resp.NodeGroups = append(resp.NodeGroups, g)
		}
	}
	sort.Slice(resp.NodeGroups, func(i, j int) bool {
		a, b := resp.NodeGroups[i], resp.NodeGroups[j]
		if a.ProviderClusterID != b.ProviderClusterID {
			return a.ProviderClusterID < b.ProviderClusterID
		}
		return a.Type < b.Type
	})
	resp.Generation = generation(&resp)
	resp.ServedAt = metav1.Time{}
	return resp
}
