package reservations

import (
	"strconv"

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
	typ := api.ChunkStandard
	if p.chunks[api.ChunkStandard] == 0 && p.chunks[api.ChunkGPU] > 0 {
		typ = api.ChunkGPU
	}
	if cost, ok := placement.CostPerChunk(r.UnitPrices, s.cfg.ChunkConfig.Shape(typ)); ok {
		if f, err := strconv.ParseFloat(cost.String(), 64); err == nil {
			snap.CostPerChunk = f
		}
	}
}
