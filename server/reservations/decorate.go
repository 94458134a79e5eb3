package reservations

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/placement"
)

// decorateSnapshot adds the derived placement fields: carbonWeighted (the
// Eco metric) always, costPerChunk on the dashboard only (as the
// reference). The cost is that of the provider's standard chunk, or of its
// GPU chunk when it offers only GPU chunks.
func (s *Service) decorateSnapshot(snap *api.AdvertisementSnapshot, p *provider, dashboard bool) {
	r := p.rec.Request
	if w, ok := placement.WeightedCarbon(r.CarbonForecast, r.CarbonIntensity); ok {
		snap.CarbonWeighted = &w
	}
	if !dashboard {
		return
	}
	if p.costOK {
		snap.CostPerChunk = p.cost
	}
}

// setChunks cuts the chunks of provider p's advertisement req and prices
// the one the dashboard shows: the standard chunk, or the GPU chunk of a
// provider that has only those.
func (s *Service) setChunks(p *provider, req api.AdvertisementRequest) {
	p.chunks = placement.Chunks(s.cfg.ChunkConfig, req.Resources)
	typ := api.ChunkStandard
	if p.chunks[api.ChunkStandard] == 0 && p.chunks[api.ChunkGPU] > 0 {
		typ = api.ChunkGPU
	}
	p.cost, p.costOK = s.chunkCost(req.UnitPrices, typ)
}

// chunkCost is the cost per hour of one chunk of typ at prices, as a float
// for display; false when a resource of the chunk is unpriced.
func (s *Service) chunkCost(prices corev1.ResourceList, typ api.ChunkType) (float64, bool) {
	cost, ok := placement.CostPerChunk(prices, s.cfg.ChunkConfig.Shape(typ))
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(cost.String(), 64)
	return f, err == nil
}
