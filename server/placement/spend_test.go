package placement

import (
	"math"
	"testing"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

func near(a *float64, want float64) bool { return a != nil && math.Abs(*a-want) < 1e-9 }

// TestSpendAndAlternatives checks the totals against a hand-computed
// table. Standard chunks draw 10 W (0.01 kW):
//
//	provider  cost/chunk  g/kWh  chunks  c1 holds
//	cheap     0.052       300    4       2
//	dear      0.10        50     4       0
//	green     unpriced    20     8       1   (renewable)
//
// Spend: 2 × 0.052 = 0.104/h, 1 chunk unpriced; carbon 2 × 0.01 × 300 +
// 1 × 0.01 × 20 = 6.2 g/h. The 3 held chunks on the most expensive (dear):
// 0.30/h, 3 × 0.01 × 50 = 1.5 g/h. Standard scores: cheap 0.8 × 2/4 = 0.4,
// dear 0.8, green 0.8 × 7/8 + 0.2 = 0.9 → green: unpriced, 0.6 g/h.
func TestSpendAndAlternatives(t *testing.T) {
	ix := NewIndex(DefaultChunkConfig())
	ix.UpsertProvider(prov("cheap", 4, priced("0.02", "0.003"), carbonNow(300)))
	ix.UpsertProvider(prov("dear", 4, priced("0.03", "0.01"), forecast(50)))
	ix.UpsertProvider(prov("green", 8, renewable, carbonNow(20)))
	ix.UpsertProvider(prov("denies", 4, priced("1", "1"), carbonNow(900), sharing(api.Sharing{DeniedConsumers: []string{"c1"}})))
	ix.UpsertConsumer(consumer("c1", api.PlacementPrice))
	ix.SetUsage("cheap", api.ChunkStandard, "c1", Usage{Live: 2})
	ix.SetUsage("green", api.ChunkStandard, "c1", Usage{Live: 1})

	s := ix.Spend("c1")
	if s.Chunks[api.ChunkStandard] != 3 || !near(&s.CostPerHour, 0.104) || s.UnpricedChunks != 1 || !near(&s.CarbonPerHour, 6.2) || s.NoCarbonChunks != 0 {
		t.Errorf("spend %+v, want 3 chunks, 0.104/h (1 unpriced), 6.2 g/h", s)
	}
	te := ix.Explain("c1", nil).ChunkTypes[0]
	if te.Held != 3 {
		t.Fatalf("held %d, want 3", te.Held)
	}
	if me := te.MostExpensive; me == nil || me.ProviderClusterID != "dear" || !near(me.CostPerHour, 0.30) || !near(me.CarbonPerHour, 1.5) {
		t.Errorf("most expensive %+v, want dear 0.30/h 1.5 g/h (the provider that denies c1 does not count)", me)
	}
	if sc := te.StandardChoice; sc == nil || sc.ProviderClusterID != "green" || sc.CostPerHour != nil || !near(sc.CarbonPerHour, 0.6) {
		t.Errorf("standard choice %+v, want green, unpriced, 0.6 g/h", sc)
	}

	// GPU chunks draw what WithChunkWatts says.
	gx := NewIndex(DefaultChunkConfig(), WithChunkWatts(map[api.ChunkType]float64{api.ChunkGPU: 400}))
	gx.UpsertProvider(prov("g", 0, withResources("cpu", "4", "memory", "8Gi", "nvidia.com/gpu", "1"), carbonNow(100)))
	gx.SetUsage("g", api.ChunkGPU, "c1", Usage{Live: 1})
	if s := gx.Spend("c1"); !near(&s.CarbonPerHour, 40) || s.UnpricedChunks != 1 {
		t.Errorf("gpu spend %+v, want 1 × 0.4 kW × 100 = 40 g/h, unpriced", s)
	}
	if s := ix.Spend("nobody"); s.Chunks != nil || s.CostPerHour != 0 {
		t.Errorf("a consumer without chunks spends %+v", s)
	}
}
