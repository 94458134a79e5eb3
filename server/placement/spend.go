package placement

import (
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// intensityNow is a provider's grid intensity now (gCO2eq/kWh): its
// current value when valid, else the 6-hour weighted Eco metric.
func (ps *provState) intensityNow() (float64, bool) {
	if c := ps.p.CarbonIntensity; c != nil && validCarbon(*c) {
		return *c, true
	}
	return ps.carbon, ps.hasCarbon
}

// Spend returns what consumer consumerID's live chunks cost and emit per
// hour now, at each provider's current prices and grid intensity. It costs
// O(the consumer's held groups).
func (ix *Index) Spend(consumerID string) api.ConsumerSpend {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	out := api.ConsumerSpend{}
	for k, u := range ix.held[consumerID] {
		if u.Live == 0 {
			continue
		}
		if out.Chunks == nil {
			out.Chunks = map[api.ChunkType]int32{}
		}
		out.Chunks[chunkTypes[k.t]] = AddChunks(out.Chunks[chunkTypes[k.t]], u.Live)
		alt := ix.alternative(ix.providers[k.provider], k.t, u.Live)
		if alt.CostPerHour != nil {
			out.CostPerHour += *alt.CostPerHour
		} else {
			out.UnpricedChunks = AddChunks(out.UnpricedChunks, u.Live)
		}
		if alt.CarbonPerHour != nil {
			out.CarbonPerHour += *alt.CarbonPerHour
		} else {
			out.NoCarbonChunks = AddChunks(out.NoCarbonChunks, u.Live)
		}
	}
	return out
}

// alternative is what n chunks of type ti cost and emit per hour on ps (a
// removed provider, nil, has neither).
func (ix *Index) alternative(ps *provState, ti int, n int32) api.Alternative {
	var a api.Alternative
	if ps == nil {
		return a
	}
	a.ProviderClusterID = ps.p.ID
	if ps.cost[ti] != nil {
		c := float64(n) * ps.costF[ti]
		a.CostPerHour = &c
	}
	if ci, ok := ps.intensityNow(); ok {
		g := float64(n) * ix.watts[ti] / 1000 * ci
		a.CarbonPerHour = &g
	}
	return a
}

// alternatives fills the explanation's Held, MostExpensive and
// StandardChoice for chunk type ti; std is the consumer's decision under
// the Standard policy.
func (v *viewCtx) alternatives(te *api.ChunkTypeExplanation, ti int, ids []string, std *viewCtx) {
	for k, u := range v.held {
		if k.t == ti {
			te.Held = AddChunks(te.Held, u.Live)
		}
	}
	if te.Held == 0 {
		return
	}
	var dearest *provState
	for _, id := range ids {
		ps := v.ix.providers[id]
		if ps.total[ti] == 0 || !ps.p.Available || ps.cost[ti] == nil || sharingVerdict(ps.p.Sharing, v.c.ID) != usable {
			continue
		}
		if dearest == nil || ps.cost[ti].Cmp(dearest.cost[ti]) > 0 {
			dearest = ps
		}
	}
	if dearest != nil {
		a := v.ix.alternative(dearest, ti, te.Held)
		te.MostExpensive = &a
	}
	for k := range std.growable {
		if k.t == ti {
			a := v.ix.alternative(v.ix.providers[k.provider], ti, te.Held)
			te.StandardChoice = &a
		}
	}
}

// ChunkCost is what n chunks of type t cost per hour on provider
// providerID at its current prices; false when the provider is unknown or
// does not price a resource of the chunk.
func (ix *Index) ChunkCost(providerID string, t api.ChunkType, n int32) (float64, bool) {
	ti, ok := typeIdx(t)
	if !ok {
		return 0, false
	}
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	a := ix.alternative(ix.providers[providerID], ti, n)
	if a.CostPerHour == nil {
		return 0, false
	}
	return *a.CostPerHour, true
}

// Restamp recomputes r's Generation after its groups changed (a budget
// capped their max sizes), so that a client comparing generations sees it.
func Restamp(r *api.NodeGroupListResponse) { r.Generation = generation(r) }
