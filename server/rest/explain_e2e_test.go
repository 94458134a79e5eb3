package rest_test

import (
	"testing"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// TestExplanationOverMTLS reads the placement explanation through the
// real broker: the consumer sees why it grows where it does (winner,
// runner-up, margin, a full provider filtered), providers that do not share
// with it only as a count, and a provider certificate is refused.
func TestExplanationOverMTLS(t *testing.T) {
	b := startBroker(t)
	paris, milan, deny := b.client(t, "paris", api.RoleProvider), b.client(t, "milan", api.RoleProvider), b.client(t, "secret", api.RoleProvider)
	lyon, other := b.client(t, "lyon", api.RoleConsumer), b.client(t, "other", api.RoleConsumer)

	ad := func(id string, n int, cpu, mem string) map[string]any {
		a := advertisement(id, n)
		a["unitPrices"] = map[string]string{"cpu": cpu, "memory": mem}
		return a
	}
	expect(t, paris.Must(t, "POST", "/api/v1/advertisements", ad("paris", 2, "0.02", "0.003")), 200, "") // 0.052
	expect(t, milan.Must(t, "POST", "/api/v1/advertisements", ad("milan", 2, "0.03", "0.005")), 200, "") // 0.08
	secret := ad("secret", 2, "0.01", "0.001")
	secret["sharing"] = map[string]any{"deniedConsumers": []string{"lyon"}}
	expect(t, deny.Must(t, "POST", "/api/v1/advertisements", secret), 200, "")
	hb := heartbeat("lyon")
	hb["placement"] = map[string]any{"type": "Price"}
	expect(t, lyon.Must(t, "POST", "/api/v1/heartbeat", hb), 200, "")
	expect(t, other.Must(t, "POST", "/api/v1/heartbeat", heartbeat("other")), 200, "")

	read := func() api.PlacementExplanation {
		t.Helper()
		r := lyon.Must(t, "GET", "/api/v1/placement/explanation", nil)
		expect(t, r, 200, "")
		var ex api.PlacementExplanation
		if err := r.Decode(&ex); err != nil {
			t.Fatal(err)
		}
		return ex
	}
	ex := read()
	if ex.AppliedPlacement != api.PlacementPrice || ex.Metric != api.MetricCost || ex.NotSharing != 1 || len(ex.ChunkTypes) != 1 {
		t.Fatalf("explanation %+v, want Price by cost, 1 provider not sharing, standard only", ex)
	}
	te := ex.ChunkTypes[0]
	if len(te.Winners) != 1 || te.Winners[0] != "paris" || te.RunnerUp != "milan" || te.Margin == nil || *te.Margin < 0.0279 || *te.Margin > 0.0281 {
		t.Fatalf("standard: %+v, want paris winning over milan by 0.028", te)
	}
	for _, c := range te.Candidates {
		if c.ProviderClusterID == "secret" {
			t.Fatalf("the consumer sees the provider that denies it: %+v", c)
		}
	}

	// other takes both of paris's chunks: paris is filtered "full" and
	// milan wins.
	for range 2 {
		expect(t, other.Must(t, "POST", "/api/v1/reservations", reservation("paris")), 201, "")
	}
	te = read().ChunkTypes[0]
	if len(te.Winners) != 1 || te.Winners[0] != "milan" || te.RunnerUp != "" {
		t.Fatalf("after paris filled up: %+v, want milan alone", te)
	}
	if c := te.Candidates[len(te.Candidates)-1]; c.ProviderClusterID != "paris" || c.Filter != api.FilterFull {
		t.Fatalf("last candidate %+v, want paris filtered full", c)
	}

	expect(t, paris.Must(t, "GET", "/api/v1/placement/explanation", nil), 403, api.CodeForbidden)

	// The operator's list names the provider that denies lyon.
	all, err := b.svc.Explanations(t.Context())
	if err != nil || len(all) != 2 || all[0].ConsumerClusterID != "lyon" {
		t.Fatalf("explanations %+v, %v; want lyon and other", all, err)
	}
	found := false
	for _, c := range all[0].ChunkTypes[0].Candidates {
		found = found || (c.ProviderClusterID == "secret" && c.Filter == api.FilterDenied)
	}
	if !found {
		t.Fatalf("operator's explanation of lyon lacks secret filtered denied: %+v", all[0].ChunkTypes[0].Candidates)
	}
}
