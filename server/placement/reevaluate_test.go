package placement

import (
	"strings"
	"testing"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

func f(v float64) *float64 { return &v }

func cost(id string, c float64) Standing { return Standing{ProviderID: id, CostPerHour: f(c)} }

// TestReevaluateTable checks the rule against hand-computed decisions. The
// thresholds are the defaults unless a row says otherwise: 0.01 per hour,
// 1 gCO2eq/h, 10 ms; a move needs a saving of MORE than the threshold.
func TestReevaluateTable(t *testing.T) {
	price := api.Placement{Type: api.PlacementPrice}
	eco := api.Placement{Type: api.PlacementEco}
	latency := api.Placement{Type: api.PlacementLatency}
	def := DefaultThresholds()
	tests := []struct {
		name     string
		p        api.Placement
		held     Standing
		others   []Standing
		th       Thresholds
		decision string
		metric   api.ExplainMetric
		target   string
		saving   *float64
		reason   string
	}{
		{"Price: 0.08 held, 0.052 free: saves 0.028 > 0.01", price, cost("dear", 0.08), []Standing{cost("x", 0.052), cost("y", 0.07)}, def,
			api.DecisionMove, api.MetricCost, "x", f(0.028), "x is better by 0.028 per hour per chunk, more than the threshold of 0.01"},
		{"Price: 0.06 held, 0.052 free: saves only 0.008", price, cost("mid", 0.06), []Standing{cost("x", 0.052)}, def,
			api.DecisionKeep, api.MetricCost, "x", f(0.008), "x is better by only 0.008 per hour per chunk, not more than the threshold of 0.01"},
		{"Price: the consumer's own threshold 0.005 moves it", price, cost("mid", 0.06), []Standing{cost("x", 0.052)}, def.With(&api.Thresholds{CostPerHour: f(0.005)}),
			api.DecisionMove, api.MetricCost, "x", f(0.008), "x is better by 0.008 per hour per chunk, more than the threshold of 0.005"},
		{"Price: held is the cheapest", price, cost("x", 0.052), []Standing{cost("y", 0.07)}, def,
			api.DecisionKeep, api.MetricCost, "y", f(-0.018), "x is still the best with room (y: 0.07 per hour per chunk)"},
		{"Price: held unpriced", price, Standing{ProviderID: "free"}, []Standing{cost("x", 0.052)}, def,
			api.DecisionKeep, api.MetricCost, "", nil, "free has no price; nothing to compare"},
		{"Price: nobody else priced", price, cost("dear", 0.08), []Standing{{ProviderID: "u"}}, def,
			api.DecisionKeep, api.MetricCost, "", nil, "no other provider with room has a price"},
		{"Price: held itself is not its own alternative", price, cost("dear", 0.08), []Standing{cost("dear", 0.01)}, def,
			api.DecisionKeep, api.MetricCost, "", nil, "no other provider with room has a price"},
		{"Price: a tie goes to the lower id", price, cost("dear", 0.08), []Standing{cost("b", 0.05), cost("a", 0.05)}, def,
			api.DecisionMove, api.MetricCost, "a", f(0.03), "a is better by 0.03 per hour per chunk, more than the threshold of 0.01"},
		// Eco: 10 W chunks; 300 g/kWh → 3 g/h, 50 g/kWh → 0.5 g/h.
		{"Eco: 3 g/h held, 0.5 g/h free: saves 2.5 > 1", eco, Standing{ProviderID: "coal", CarbonPerHour: f(3)}, []Standing{{ProviderID: "hydro", CarbonPerHour: f(0.5)}}, def,
			api.DecisionMove, api.MetricCarbonPerHour, "hydro", f(2.5), "hydro is better by 2.5 gCO2eq/h per chunk, more than the threshold of 1"},
		{"Eco: the consumer's threshold of 5 g/h keeps it", eco, Standing{ProviderID: "coal", CarbonPerHour: f(3)}, []Standing{{ProviderID: "hydro", CarbonPerHour: f(0.5)}}, def.With(&api.Thresholds{CarbonPerHour: f(5)}),
			api.DecisionKeep, api.MetricCarbonPerHour, "hydro", f(2.5), "hydro is better by only 2.5 gCO2eq/h per chunk, not more than the threshold of 5"},
		{"Latency: 80 ms held, 30 ms measured: saves 50 > 10", latency, Standing{ProviderID: "far", RTTMillis: f(80)}, []Standing{{ProviderID: "near", RTTMillis: f(30)}, {ProviderID: "unmeasured"}}, def,
			api.DecisionMove, api.MetricRTT, "near", f(50), "near is better by 50 ms per chunk, more than the threshold of 10"},
		{"Latency: exactly the threshold is not more", latency, Standing{ProviderID: "far", RTTMillis: f(50)}, []Standing{{ProviderID: "near", RTTMillis: f(40)}}, def,
			api.DecisionKeep, api.MetricRTT, "near", f(10), "near is better by only 10 ms per chunk, not more than the threshold of 10"},
		{"Latency: nothing measured elsewhere", latency, Standing{ProviderID: "far", RTTMillis: f(80)}, []Standing{{ProviderID: "near"}}, def,
			api.DecisionKeep, api.MetricRTT, "", nil, "no other provider with room has a measured RTT"},
		{"Standard compares nothing", api.Placement{}, cost("dear", 0.08), []Standing{cost("x", 0.01)}, def,
			api.DecisionKeep, "", "", nil, "the Standard policy ranks by free capacity; a move would save nothing"},
		{"Weighted: carbon weighs most", api.Placement{Type: api.PlacementWeighted, Weights: &api.Weights{Price: 1, Carbon: 2}},
			Standing{ProviderID: "coal", CostPerHour: f(0.01), CarbonPerHour: f(3)}, []Standing{{ProviderID: "hydro", CostPerHour: f(0.5), CarbonPerHour: f(0.5)}}, def,
			api.DecisionMove, api.MetricCarbonPerHour, "hydro", f(2.5), "hydro is better by 2.5 gCO2eq/h per chunk, more than the threshold of 1"},
		{"Weighted without weights: all 1, price first", api.Placement{Type: api.PlacementWeighted}, cost("dear", 0.08), []Standing{cost("x", 0.052)}, def,
			api.DecisionMove, api.MetricCost, "x", f(0.028), "x is better by 0.028 per hour per chunk, more than the threshold of 0.01"},
		{"Weighted: distance weighs most, compared by RTT", api.Placement{Type: api.PlacementWeighted, Weights: &api.Weights{Distance: 3, FreeCapacity: 5}},
			Standing{ProviderID: "far", RTTMillis: f(80)}, []Standing{{ProviderID: "near", RTTMillis: f(30)}}, def,
			api.DecisionMove, api.MetricRTT, "near", f(50), "near is better by 50 ms per chunk, more than the threshold of 10"},
		{"Weighted: only free capacity weighs: nothing to compare", api.Placement{Type: api.PlacementWeighted, Weights: &api.Weights{FreeCapacity: 1}},
			cost("dear", 0.08), []Standing{cost("x", 0.01)}, def,
			api.DecisionKeep, "", "", nil, "the Standard policy ranks by free capacity; a move would save nothing"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Reevaluate(tc.p, tc.held, tc.others, tc.th)
			if got.Decision != tc.decision || got.Metric != tc.metric || got.Target != tc.target || got.Reason != tc.reason {
				t.Fatalf("got %s %q → %q: %q\nwant %s %q → %q: %q", got.Decision, got.Metric, got.Target, got.Reason, tc.decision, tc.metric, tc.target, tc.reason)
			}
			if (got.SavingPerChunk == nil) != (tc.saving == nil) || tc.saving != nil && !near(got.SavingPerChunk, *tc.saving) {
				t.Fatalf("saving %v, want %v", show(got.SavingPerChunk), show(tc.saving))
			}
		})
	}
}

func show(v *float64) string {
	if v == nil {
		return "nil"
	}
	return num(*v)
}

// TestIndexReevaluate runs the rule over the index: c1 (Price) holds two
// chunks on dear (0.03/core·h, 0.01/GiB·h: 2 × 0.03 + 4 × 0.01 = 0.10 per
// chunk); cheap (0.052) has room, denies (0.008) denies c1, gone (0.01) is
// stale. Move to cheap, saving 0.048 per chunk. Once cheap is full, keep.
func TestIndexReevaluate(t *testing.T) {
	ix := NewIndex(DefaultChunkConfig())
	ix.UpsertProvider(prov("dear", 4, priced("0.03", "0.01")))
	ix.UpsertProvider(prov("cheap", 2, priced("0.02", "0.003")))
	ix.UpsertProvider(prov("denies", 4, priced("0.002", "0.001"), sharing(api.Sharing{DeniedConsumers: []string{"c1"}})))
	gone := prov("gone", 4, priced("0.002", "0.0015"))
	gone.Available = false
	ix.UpsertProvider(gone)
	ix.UpsertConsumer(consumer("c1", api.PlacementPrice))
	ix.SetUsage("dear", api.ChunkStandard, "c1", Usage{Live: 2})

	got := ix.Reevaluate("c1", nil, DefaultThresholds())
	if len(got) != 1 {
		t.Fatalf("%d decisions, want one for ng-dear-standard: %+v", len(got), got)
	}
	r := got[0]
	if r.NodeGroupID != "ng-dear-standard" || r.Chunks != 2 || r.Decision != api.DecisionMove || r.Target != "cheap" || !near(r.Current, 0.10) || !near(r.SavingPerChunk, 0.048) {
		t.Fatalf("decision %+v, want move 2 chunks to cheap saving 0.048", r)
	}
	ix.SetUsage("cheap", api.ChunkStandard, "c2", Usage{Live: 2})
	r = ix.Reevaluate("c1", nil, DefaultThresholds())[0]
	if r.Decision != api.DecisionKeep || !strings.Contains(r.Reason, "no other provider with room") {
		t.Fatalf("with cheap full: %+v, want keep", r)
	}
	if got := ix.Reevaluate("nobody", nil, DefaultThresholds()); got != nil {
		t.Fatalf("a consumer without chunks: %+v", got)
	}
}

// TestIndexReevaluateMatchesEveryProvider: walking the price or Eco order
// only to the first provider the consumer may grow on decides exactly what
// the rule decides over every provider it may grow on (benchFederation:
// 300 providers, 50 consumers of every policy, a third of the providers
// full, some denying).
func TestIndexReevaluateMatchesEveryProvider(t *testing.T) {
	ix, consumers := benchFederation(t, 300, "")
	rtts := map[string]float64{"provider-00001": 40, "provider-00007": 12, "provider-00100": 95, "provider-00200": 12}
	th := DefaultThresholds()
	moves := 0
	for _, c := range consumers {
		got := ix.Reevaluate(c, rtts, th)
		ix.mu.RLock()
		v := ix.newViewCtx(c, nil, nil)
		for _, r := range got {
			ti, _ := typeIdx(r.ChunkType)
			var all []Standing
			for id, ps := range ix.providers {
				if id != r.ProviderClusterID && v.classify(ps, ti) == usable {
					all = append(all, ix.standing(ps, ti, rtts))
				}
			}
			want := Reevaluate(v.c.Placement, ix.standing(ix.providers[r.ProviderClusterID], ti, rtts), all, th)
			if r.Decision != want.Decision || r.Target != want.Target || r.Reason != want.Reason {
				t.Errorf("%s %s: %s → %q (%s), every provider: %s → %q (%s)", c, r.NodeGroupID, r.Decision, r.Target, r.Reason, want.Decision, want.Target, want.Reason)
			}
			if r.Decision == api.DecisionMove {
				moves++
			}
		}
		ix.mu.RUnlock()
	}
	if moves == 0 {
		t.Fatal("no move decided anywhere: the comparison proves nothing")
	}
}
