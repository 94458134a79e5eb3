package placement

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// TestChoiceCarriesTheModelsMetrics: under Choice every listed group
// carries the provider's weighted carbon and renewable flag (the consumer's
// model ranks by them); under every other policy neither is sent, so those
// views (and their generations) are unchanged.
func TestChoiceCarriesTheModelsMetrics(t *testing.T) {
	ix := NewIndex(DefaultChunkConfig())
	ix.UpsertProvider(prov("green", 4, forecast(100, 200), renewable))
	ix.UpsertProvider(prov("grey", 4, priced("0.02", "0.003")))
	for _, tt := range []struct {
		policy api.PlacementType
		want   map[string]string // provider → carbon/renewable
	}{
		{api.PlacementChoice, map[string]string{"green": "138.46 true", "grey": "- false"}},
		{api.PlacementWeighted, map[string]string{"green": "- false"}},
		{api.PlacementEco, map[string]string{"green": "- false"}},
	} {
		ix.UpsertConsumer(consumer("c1", tt.policy))
		v := ix.View("c1", false)
		got := map[string]string{}
		for _, g := range v.NodeGroups {
			c := "-"
			if g.CarbonIntensity != nil {
				c = trim2(*g.CarbonIntensity)
			}
			if g.Renewable {
				got[g.ProviderClusterID] = c + " true"
			} else {
				got[g.ProviderClusterID] = c + " false"
			}
		}
		if len(got) != len(tt.want) {
			t.Errorf("%s: groups %v, want %v", tt.policy, got, tt.want)
			continue
		}
		for id, w := range tt.want {
			if got[id] != w {
				t.Errorf("%s: %s = %q, want %q", tt.policy, id, got[id], w)
			}
		}
	}
}

func trim2(f float64) string { return strconv.FormatFloat(f, 'f', 2, 64) }

// TestChoiceGenerationFollowsCarbon: the carbon the model reads is part of
// the view's content hash.
func TestChoiceGenerationFollowsCarbon(t *testing.T) {
	ix := NewIndex(DefaultChunkConfig())
	ix.UpsertProvider(prov("a", 4, carbonNow(100)))
	ix.UpsertConsumer(consumer("c1", api.PlacementChoice))
	g0 := ix.View("c1", false).Generation
	ix.UpsertProvider(prov("a", 4, carbonNow(120)))
	if g := ix.View("c1", false).Generation; g == g0 {
		t.Fatal("generation did not change with the carbon intensity")
	}
}

// TestChoiceExplainListsEveryCandidate: the explanation of a Choice view
// names every provider with room as a winner, ordered by the Weighted
// score (the consumer agent's fallback order).
func TestChoiceExplainListsEveryCandidate(t *testing.T) {
	ix := NewIndex(DefaultChunkConfig())
	ix.UpsertProvider(prov("x", 4, priced("0.02", "0.003"), carbonNow(300)))
	ix.UpsertProvider(prov("y", 4, priced("0.03", "0.005"), carbonNow(50)))
	ix.UpsertProvider(prov("full", 2))
	ix.SetUsage("full", api.ChunkStandard, "c2", Usage{Live: 2})
	ix.UpsertConsumer(consumer("c1", api.PlacementChoice, weights(api.Weights{Price: 2, Carbon: 1})))
	ex := ix.Explain("c1", nil)
	if ex.AppliedPlacement != api.PlacementChoice || ex.Metric != api.MetricWeightedScore || ex.Weights == nil {
		t.Fatalf("explanation header = %+v", ex)
	}
	if len(ex.ChunkTypes) != 1 {
		t.Fatalf("chunk types = %+v", ex.ChunkTypes)
	}
	te := ex.ChunkTypes[0]
	// x: price 0, carbon 1 → 1; y: price 2, carbon 0 → 2.
	if len(te.Winners) != 2 || te.Winners[0] != "x" || te.Winners[1] != "y" {
		t.Errorf("winners = %v, want [x y]", te.Winners)
	}
	last := te.Candidates[len(te.Candidates)-1]
	if last.ProviderClusterID != "full" || last.Outcome != api.OutcomeFiltered || last.Filter != api.FilterFull {
		t.Errorf("last candidate = %+v, want full filtered", last)
	}
}

// TestChoiceListSize: past ChoiceListSize providers with room, the view
// keeps the best by the Weighted score (price only here: the cheapest).
func TestChoiceListSize(t *testing.T) {
	ix := NewIndex(DefaultChunkConfig())
	for i := range ChoiceListSize + 10 {
		// Provider i costs 2 × (0.010 + i/10 000) + 4 × 0.001 per chunk.
		ix.UpsertProvider(prov(fmt.Sprintf("p%04d", i), 1, priced(strconv.FormatFloat(0.01+float64(i)/10000, 'f', 4, 64), "0.001")))
	}
	ix.UpsertConsumer(consumer("c1", api.PlacementChoice, weights(api.Weights{Price: 1})))
	v := ix.View("c1", false)
	if len(v.NodeGroups) != ChoiceListSize {
		t.Fatalf("%d groups listed, want %d", len(v.NodeGroups), ChoiceListSize)
	}
	if first, last := v.NodeGroups[0].ProviderClusterID, v.NodeGroups[len(v.NodeGroups)-1].ProviderClusterID; first != "p0000" || last != fmt.Sprintf("p%04d", ChoiceListSize-1) {
		t.Errorf("listed %s … %s, want the %d cheapest", first, last, ChoiceListSize)
	}
}
