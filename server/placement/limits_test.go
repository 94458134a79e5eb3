package placement

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// TestExtremeProviderCannotBreakAView: the broker refuses values beyond
// server/api's limits at ingest, but the index must stay safe for any
// input (records stored before the limits, callers that skip validation):
// a provider priced near float64's maximum, with carbon values that
// overflow a weighted sum and with astronomic weights in the consumer's
// policy, leaves every consumer's view finite and JSON-encodable (JSON
// cannot carry ±Inf or NaN: today's symptom was a 500 on GET
// /api/v1/nodegroups for every Price consumer).
func TestExtremeProviderCannotBreakAView(t *testing.T) {
	ix := NewIndex(DefaultChunkConfig())
	ix.UpsertProvider(prov("huge", 4, priced("9e307", "9e307"), carbonNow(math.MaxFloat64), forecast(math.MaxFloat64, math.MaxFloat64), at(10, 10)))
	ix.UpsertProvider(prov("overflow", 4, priced("1e400", "0"), carbonNow(1), at(20, 20)))
	ix.UpsertProvider(prov("fair", 4, priced("0.01", "0.001"), carbonNow(50), at(45, 7)))
	for _, c := range []Consumer{
		consumer("c-price", api.PlacementPrice),
		consumer("c-eco", api.PlacementEco),
		consumer("c-latency", api.PlacementLatency, located(45, 7)),
		consumer("c-standard", api.PlacementStandard),
		consumer("c-weighted", api.PlacementWeighted, located(45, 7)),
		consumer("c-weights", api.PlacementWeighted, located(45, 7), weights(api.Weights{Price: 1e308, Carbon: math.MaxFloat64, Distance: 1e308, FreeCapacity: 1e308})),
	} {
		ix.UpsertConsumer(c)
		for _, all := range []bool{false, true} {
			v := ix.View(c.ID, all)
			if _, err := json.Marshal(v); err != nil {
				t.Fatalf("%s (all=%v): the view does not encode: %v", c.ID, all, err)
			}
			for _, g := range v.NodeGroups {
				if g.PlacementMetric != nil && (math.IsNaN(*g.PlacementMetric) || math.IsInf(*g.PlacementMetric, 0)) {
					t.Errorf("%s: group %s metric %v", c.ID, g.ID, *g.PlacementMetric)
				}
			}
			if len(v.NodeGroups) != 3 && all {
				t.Errorf("%s: %d groups, want all 3", c.ID, len(v.NodeGroups))
			}
		}
		// The cheap, sane provider still wins Price.
		if c.ID == "c-price" {
			if got := growableIDs(ix.View(c.ID, false)); len(got) != 1 || got[0] != "fair" {
				t.Errorf("Price winner %v, want [fair]", got)
			}
		}
	}
	// The eco metric of the huge provider is out of range: carbon-less.
	if _, ok := WeightedCarbon([]float64{math.MaxFloat64, math.MaxFloat64}, nil); ok {
		t.Error("an overflowing forecast has a carbon metric")
	}
	if _, ok := WeightedCarbon(nil, ptr(float64(api.MaxCarbonIntensity)+1)); ok {
		t.Error("a carbon intensity above the limit has a metric")
	}
}

// TestAddChunksSaturates: chunk totals never wrap (two providers at the
// int32 maximum gave totalChunks -2).
func TestAddChunksSaturates(t *testing.T) {
	for _, tc := range []struct{ a, b, want int32 }{
		{1, 2, 3},
		{math.MaxInt32, math.MaxInt32, math.MaxInt32},
		{math.MaxInt32 - 1, 1, math.MaxInt32},
		{math.MaxInt32 - 1, 2, math.MaxInt32},
		{0, 0, 0},
	} {
		if got := AddChunks(tc.a, tc.b); got != tc.want {
			t.Errorf("AddChunks(%d, %d) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

func growableIDs(v api.NodeGroupListResponse) []string {
	var out []string
	for _, g := range v.NodeGroups {
		if g.MaxSize > g.CurrentReserved {
			out = append(out, g.ProviderClusterID)
		}
	}
	return out
}
