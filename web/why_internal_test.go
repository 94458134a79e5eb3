package web

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

func fp(v float64) *float64 { return &v }

// TestBuildWhy renders explanations of several policies into the words and
// units the pages show (docs/ui.md, Why this provider).
func TestBuildWhy(t *testing.T) {
	price := api.PlacementExplanation{
		ConsumerClusterID: "lyon", AppliedPlacement: api.PlacementPrice, Metric: api.MetricCost, NotSharing: 1,
		ChunkTypes: []api.ChunkTypeExplanation{{
			ChunkType: api.ChunkStandard, Winners: []string{"paris"}, RunnerUp: "milan", Margin: fp(0.028),
			Candidates: []api.PlacementCandidate{
				{ProviderClusterID: "paris", Rank: 1, Outcome: api.OutcomeWinner, Metric: fp(0.052), FreeChunks: 3, TotalChunks: 4, HeadRoom: 2},
				{ProviderClusterID: "milan", Rank: 2, Outcome: api.OutcomeEligible, Metric: fp(0.08), FreeChunks: 4, TotalChunks: 4, HeadRoom: 4},
				{ProviderClusterID: "free", Rank: 3, Outcome: api.OutcomeEligible, FreeChunks: 1, TotalChunks: 1, HeadRoom: 1},
				{ProviderClusterID: "cheap", Outcome: api.OutcomeFiltered, Filter: api.FilterFull, Metric: fp(0.04), TotalChunks: 2},
				{ProviderClusterID: "q", Outcome: api.OutcomeFiltered, Filter: api.FilterQuota, Metric: fp(0.04), FreeChunks: 2, TotalChunks: 2},
				{ProviderClusterID: "old", Outcome: api.OutcomeFiltered, Filter: api.FilterStale, TotalChunks: 2},
			},
		}},
	}
	w := buildWhy(price, "EUR", 5)
	if w.Metric != "Cost per chunk" || w.NotSharing != "1 provider does not share with this cluster" {
		t.Errorf("header %q, not sharing %q", w.Metric, w.NotSharing)
	}
	st := w.Types[0]
	if want := "paris wins with 0.0520 EUR/h. Runner-up milan (0.0800 EUR/h), margin 0.0280 EUR/h."; st.Summary != want {
		t.Errorf("summary\n got %q\nwant %q", st.Summary, want)
	}
	var got []string
	for _, r := range st.Rows {
		got = append(got, strings.Join([]string{r.Rank, r.Provider, r.Metric, r.Outcome, r.Reason, r.Room}, "|"))
	}
	want := []string{
		"1|paris|0.0520 EUR/h|winner||2 more (3 of 4 free)",
		"2|milan|0.0800 EUR/h|eligible||4 more (4 of 4 free)",
		"3|free|unpriced|eligible||1 more (1 of 1 free)",
		"—|cheap|0.0400 EUR/h|filtered|no free chunk|0 of 2 free",
		"—|q|0.0400 EUR/h|filtered|this cluster holds the provider's per-consumer quota|2 of 2 free",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("rows\n got %s\nwant %s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if st.More != "and 1 more: 0 eligible, 1 filtered out" {
		t.Errorf("more %q", st.More)
	}

	for _, tc := range []struct {
		name string
		ex   api.PlacementExplanation
		want string
	}{
		{"latency shortlist", api.PlacementExplanation{Metric: api.MetricDistance, ChunkTypes: []api.ChunkTypeExplanation{{
			ChunkType: api.ChunkStandard, Winners: []string{"milan", "frankfurt"}, RunnerUp: "frankfurt", Margin: fp(440.16),
			Candidates: []api.PlacementCandidate{{ProviderClusterID: "milan", Metric: fp(125.14)}, {ProviderClusterID: "frankfurt", Metric: fp(565.3)}},
		}}}, "Shortlisted: milan, frankfurt (the consumer picks by measured RTT). Runner-up frankfurt (565 km), margin 440 km."},
		{"standard alone", api.PlacementExplanation{Metric: api.MetricStandardScore, ChunkTypes: []api.ChunkTypeExplanation{{
			ChunkType: api.ChunkStandard, Winners: []string{"c"}, Candidates: []api.PlacementCandidate{{ProviderClusterID: "c", Metric: fp(1)}},
		}}}, "c wins with score 1.000. No other provider has room for this cluster."},
		{"weighted, runner-up without metric", api.PlacementExplanation{Metric: api.MetricWeightedScore, ChunkTypes: []api.ChunkTypeExplanation{{
			ChunkType: api.ChunkStandard, Winners: []string{"x"}, RunnerUp: "z", Margin: fp(1),
			Candidates: []api.PlacementCandidate{{ProviderClusterID: "x", Metric: fp(1)}, {ProviderClusterID: "z", Metric: fp(2)}},
		}}}, "x wins with score 1.000. Runner-up z (score 2.000), margin 1.000."},
		{"choice", api.PlacementExplanation{AppliedPlacement: api.PlacementChoice, Metric: api.MetricWeightedScore, ChunkTypes: []api.ChunkTypeExplanation{{
			ChunkType: api.ChunkStandard, Winners: []string{"x", "z"}, RunnerUp: "z", Margin: fp(1),
			Candidates: []api.PlacementCandidate{{ProviderClusterID: "x", Metric: fp(1)}, {ProviderClusterID: "z", Metric: fp(2)}},
		}}}, "Candidates: x, z, every provider with room (the consumer's model picks among them; its fallback is the lowest score, x with score 1.000)."},
		{"blocked", api.PlacementExplanation{Metric: api.MetricCost, ChunkTypes: []api.ChunkTypeExplanation{{ChunkType: api.ChunkStandard, BlockedBy: "cheap"}}},
			"Nothing is growable now: cheap ranks first but is full, and a peering of this cluster there is still in flight; the autoscaler waits for it."},
		{"nothing", api.PlacementExplanation{Metric: api.MetricCarbon, ChunkTypes: []api.ChunkTypeExplanation{{ChunkType: api.ChunkStandard}}},
			"Nothing is growable now: no provider has room for this cluster."},
	} {
		if got := buildWhy(tc.ex, "EUR", 10).Types[0].Summary; got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}
}

// TestUnfitRows names the largest chunk offered (most cpu, then memory).
func TestUnfitRows(t *testing.T) {
	std := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi")}
	gpu := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"), "nvidia.com/gpu": resource.MustParse("1")}
	pod := UnfitPod{Namespace: "shop", Name: "big", Requests: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("3"), corev1.ResourceMemory: resource.MustParse("1Gi"), corev1.ResourceEphemeralStorage: resource.MustParse("1Gi"),
	}}
	rows := unfitRows(ConsumerStatus{UnfitPods: []UnfitPod{pod}, NodeGroups: []api.NodeGroupView{{ChunkResources: std}}})
	if len(rows) != 1 || rows[0].Pod != "shop/big" || rows[0].Requests != "cpu 3, memory 1Gi" ||
		rows[0].Reason != "no node group can fit this pod: largest chunk cpu 2, memory 4Gi" {
		t.Errorf("rows %+v", rows)
	}
	rows = unfitRows(ConsumerStatus{UnfitPods: []UnfitPod{pod}, NodeGroups: []api.NodeGroupView{{ChunkResources: std}, {ChunkResources: gpu}}})
	if rows[0].Reason != "no node group can fit this pod: largest chunk cpu 4, memory 8Gi, nvidia.com/gpu 1" {
		t.Errorf("with a GPU chunk: %q", rows[0].Reason)
	}
	if unfitRows(ConsumerStatus{}) != nil {
		t.Error("rows without unfit pods")
	}
}
