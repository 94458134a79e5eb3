package placement

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// explainRows renders one chunk type's explanation as
// "rank provider outcome[/filter] metric" entries and a summary line.
func explainRows(te api.ChunkTypeExplanation) string {
	var out []string
	for _, c := range te.Candidates {
		s := fmt.Sprintf("%d %s %s", c.Rank, c.ProviderClusterID, c.Outcome)
		if c.Filter != "" {
			s += "/" + string(c.Filter)
		}
		if c.Metric != nil {
			s += fmt.Sprintf(" %.4f", *c.Metric)
		} else {
			s += " -"
		}
		out = append(out, s)
	}
	sum := fmt.Sprintf("winners=%s runnerUp=%s", strings.Join(te.Winners, ","), te.RunnerUp)
	if te.Margin != nil {
		sum += fmt.Sprintf(" margin=%.4f", *te.Margin)
	}
	if te.BlockedBy != "" {
		sum += " blockedBy=" + te.BlockedBy
	}
	return sum + " | " + strings.Join(out, "; ")
}

// TestExplainHandComputed checks the explanation of each policy against
// hand-computed tables: rank order, metric values, filters, winners and
// the margin to the runner-up (standard chunks only).
func TestExplainHandComputed(t *testing.T) {
	const c1, c2 = "c1", "c2"
	cheap := priced("0.02", "0.003") // 2·0.02 + 4·0.003 = 0.052
	mid := priced("0.03", "0.005")   // 0.08
	dear := priced("0.03", "0.01")   // 0.06 + 0.04 = 0.10
	tests := []struct {
		name      string
		providers []Provider
		consumer  Consumer
		usage     []usageSet
		metric    api.ExplainMetric
		want      string
	}{
		// Standard: a 0.8·1 = 0.8; b 0.8·2/4 + 0.2 = 0.6; c 0.8 + 0.2 = 1.0.
		// c wins, a is the runner-up 0.2 behind.
		{
			name:      "standard ranks by score, higher first",
			providers: []Provider{prov("a", 4), prov("b", 4, renewable), prov("c", 10, renewable)},
			consumer:  consumer(c1, ""),
			usage:     []usageSet{{"b", api.ChunkStandard, c2, Usage{Live: 2}}},
			metric:    api.MetricStandardScore,
			want:      "winners=c runnerUp=a margin=0.2000 | 1 c winner 1.0000; 2 a eligible 0.8000; 3 b eligible 0.6000",
		},
		// Price: cheap is full (c2 holds all), den denies c1, old is stale,
		// q has a quota of 1 that c1 holds, nobody is unpriced. Eligible:
		// mid 0.08, dear 0.10, free (no price, last). Margin 0.02.
		{
			name: "price with every filter",
			providers: []Provider{
				prov("cheap", 4, cheap), prov("mid", 4, mid), prov("dear", 4, dear), prov("free", 4),
				prov("den", 4, cheap, sharing(api.Sharing{DeniedConsumers: []string{c1}})),
				prov("only", 4, cheap, sharing(api.Sharing{AllowedConsumers: []string{c2}})),
				prov("old", 4, cheap, unavailable),
				prov("q", 4, cheap, sharing(api.Sharing{MaxChunksPerConsumer: 1})),
			},
			consumer: consumer(c1, api.PlacementPrice),
			usage:    []usageSet{{"cheap", api.ChunkStandard, c2, Usage{Live: 4}}, {"q", api.ChunkStandard, c1, Usage{Live: 1}}},
			metric:   api.MetricCost,
			want: "winners=mid runnerUp=dear margin=0.0200 | 1 mid winner 0.0800; 2 dear eligible 0.1000; 3 free eligible -; " +
				"0 cheap filtered/full 0.0520; 0 den filtered/denied 0.0520; 0 old filtered/stale 0.0520; " +
				"0 only filtered/notAllowed 0.0520; 0 q filtered/quota 0.0520",
		},
		// Eco tie at 50: the lower id wins, margin 0.
		{
			name:      "eco tie breaks by id",
			providers: []Provider{prov("y", 4, carbonNow(50)), prov("x", 4, carbonNow(50)), prov("w", 4, forecast(100, 200))},
			consumer:  consumer(c1, api.PlacementEco),
			metric:    api.MetricCarbon,
			want:      "winners=x runnerUp=y margin=0.0000 | 1 x winner 50.0000; 2 y eligible 50.0000; 3 w eligible 138.4615",
		},
		// Latency from Turin: the three nearest are growable, Madrid and
		// the provider without coordinates are eligible behind them.
		{
			name: "latency shortlist and the margin to the second nearest",
			providers: []Provider{
				prov("paris", 4, at(48.86, 2.35)), prov("milan", 4, at(45.46, 9.19)),
				prov("frankfurt", 4, at(50.11, 8.68)), prov("madrid", 4, at(40.42, -3.70)), prov("nowhere", 4),
			},
			consumer: consumer(c1, api.PlacementLatency, located(45.07, 7.69)),
			metric:   api.MetricDistance,
			want: "winners=milan,frankfurt,paris runnerUp=frankfurt margin=440.1597 | 1 milan winner 125.1446; " +
				"2 frankfurt winner 565.3043; 3 paris winner 584.3614; 4 madrid eligible 1062.7467; 5 nowhere eligible -",
		},
		// Weighted (docs/placement.md): x 1, z 2, y 3.1379 → x, margin 1.
		{
			name: "weighted scores",
			providers: []Provider{
				prov("x", 4, cheap, carbonNow(300)), prov("y", 4, mid, carbonNow(50)), prov("z", 4, carbonNow(10)),
			},
			consumer: consumer(c1, api.PlacementWeighted, weights(api.Weights{Price: 2, Carbon: 1, FreeCapacity: 1})),
			usage:    []usageSet{{"y", api.ChunkStandard, c2, Usage{Live: 2}}},
			metric:   api.MetricWeightedScore,
			want:     "winners=x runnerUp=z margin=1.0000 | 1 x winner 1.0000; 2 z eligible 2.0000; 3 y eligible 3.1379",
		},
		// c1's peering on cheap is in flight and cheap is full: the type
		// is masked, mid has room but does not win.
		{
			name:      "in-flight peering on a full better provider blocks",
			providers: []Provider{prov("mid", 4, mid), prov("cheap", 4, cheap)},
			consumer:  consumer(c1, api.PlacementPrice),
			usage:     []usageSet{{"cheap", api.ChunkStandard, c1, Usage{Live: 4, InFlight: 1}}},
			metric:    api.MetricCost,
			want:      "winners= runnerUp= blockedBy=cheap | 1 mid eligible 0.0800; 0 cheap blocking/full 0.0520",
		},
		{
			name:      "nothing with room",
			providers: []Provider{prov("a", 2)},
			consumer:  consumer(c1, api.PlacementEco),
			usage:     []usageSet{{"a", api.ChunkStandard, c2, Usage{Live: 2}}},
			metric:    api.MetricCarbon,
			want:      "winners= runnerUp= | 0 a filtered/full -",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ix := NewIndex(DefaultChunkConfig())
			for _, p := range tc.providers {
				ix.UpsertProvider(p)
			}
			ix.UpsertConsumer(tc.consumer)
			for _, u := range tc.usage {
				ix.SetUsage(u.provider, u.t, u.consumer, u.u)
			}
			ex := ix.Explain(c1, nil)
			if ex.Metric != tc.metric || ex.HigherIsBetter != (tc.metric == api.MetricStandardScore) {
				t.Errorf("metric %q higherIsBetter %v, want %q", ex.Metric, ex.HigherIsBetter, tc.metric)
			}
			if len(ex.ChunkTypes) != 1 || ex.ChunkTypes[0].ChunkType != api.ChunkStandard {
				t.Fatalf("chunk types %+v, want standard only", ex.ChunkTypes)
			}
			if got := explainRows(ex.ChunkTypes[0]); got != tc.want {
				t.Errorf("explanation\n got %s\nwant %s", got, tc.want)
			}
			checkExplainAgrees(t, ix, c1)
		})
	}
}

// TestExplainOverrideAndSharing checks the policy override (the Standard
// choice of a Price consumer), NotSharing and the applied weights.
func TestExplainOverrideAndSharing(t *testing.T) {
	ix := NewIndex(DefaultChunkConfig())
	ix.UpsertProvider(prov("cheap", 4, priced("0.02", "0.003")))
	ix.UpsertProvider(prov("green", 8, renewable))
	ix.UpsertProvider(prov("den", 4, sharing(api.Sharing{DeniedConsumers: []string{"c1"}})))
	ix.UpsertConsumer(consumer("c1", api.PlacementPrice))

	if got := ix.Explain("c1", nil).ChunkTypes[0].Winners; !slices.Equal(got, []string{"cheap"}) {
		t.Errorf("price winners %v, want [cheap]", got)
	}
	std := ix.Explain("c1", &api.Placement{Type: api.PlacementStandard})
	if std.AppliedPlacement != api.PlacementStandard || !slices.Equal(std.ChunkTypes[0].Winners, []string{"green"}) {
		t.Errorf("standard override: applied %s winners %v, want Standard [green]", std.AppliedPlacement, std.ChunkTypes[0].Winners)
	}
	if std.NotSharing != 1 {
		t.Errorf("notSharing %d, want 1", std.NotSharing)
	}
	w := ix.Explain("c1", &api.Placement{Type: api.PlacementWeighted})
	if w.Weights == nil || *w.Weights != (api.Weights{Price: 1, Carbon: 1, Distance: 1, FreeCapacity: 1}) {
		t.Errorf("weighted without weights applies %+v, want all 1", w.Weights)
	}
	if ex := ix.Explain("nobody", nil); ex.AppliedPlacement != api.PlacementStandard || len(ex.ChunkTypes) != 1 {
		t.Errorf("a consumer without heartbeat: %+v, want the Standard explanation", ex)
	}
}

// checkExplainAgrees requires the explanation's decision to be the view's:
// the winners are exactly the growable groups, a blocked type has none,
// eligible candidates have head-room and filtered ones none.
func checkExplainAgrees(t *testing.T, ix *Index, consumerID string) {
	t.Helper()
	v := ix.View(consumerID, false)
	growable := map[api.ChunkType][]string{}
	for _, g := range v.NodeGroups {
		if g.MaxSize > g.CurrentReserved {
			growable[g.Type] = append(growable[g.Type], g.ProviderClusterID)
		}
	}
	ex := ix.Explain(consumerID, nil)
	if ex.AppliedPlacement != v.AppliedPlacement {
		t.Fatalf("explanation applies %s, view %s", ex.AppliedPlacement, v.AppliedPlacement)
	}
	for _, te := range ex.ChunkTypes {
		winners := slices.Sorted(slices.Values(te.Winners))
		want := slices.Sorted(slices.Values(growable[te.ChunkType]))
		if !slices.Equal(winners, want) {
			t.Fatalf("consumer %s type %s: explanation winners %v, view growable %v\n%s", consumerID, te.ChunkType, winners, want, explainRows(te))
		}
		if te.BlockedBy != "" && len(te.Winners) > 0 {
			t.Fatalf("type %s blocked by %s yet has winners %v", te.ChunkType, te.BlockedBy, te.Winners)
		}
		for _, c := range te.Candidates {
			switch {
			case c.Outcome == api.OutcomeWinner || c.Outcome == api.OutcomeEligible:
				if c.HeadRoom <= 0 || c.Rank <= 0 || c.Filter != "" {
					t.Fatalf("eligible candidate %+v without head-room or rank", c)
				}
			case c.HeadRoom != 0 || c.Rank != 0 || c.Filter == "":
				t.Fatalf("filtered candidate %+v with head-room, rank or no filter", c)
			}
		}
		delete(growable, te.ChunkType)
	}
	if len(growable) > 0 {
		t.Fatalf("view has growable types %v the explanation lacks", growable)
	}
}
