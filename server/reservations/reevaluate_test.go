package reservations

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// beatPolicy sends c's heartbeat with policy p and its own thresholds.
func (e *env) beatPolicy(c string, p api.PlacementType, th *api.Thresholds) {
	e.t.Helper()
	req := api.HeartbeatRequest{ClusterID: c, LiqoClusterID: "liqo-" + c, Placement: &api.Placement{Type: p}}
	if th != nil {
		req.Lifecycle = &api.Lifecycle{Thresholds: th}
	}
	if _, err := e.s.Heartbeat(e.ctx, c, req); err != nil {
		e.t.Fatalf("heartbeat %s: %v", c, err)
	}
}

func (e *env) decisions(c string) []api.Reevaluation {
	e.t.Helper()
	ov, err := e.s.Overview(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, row := range ov.Consumers {
		if row.ClusterID == c {
			return row.Reevaluations
		}
	}
	return nil
}

func priced(cpu, mem string) func(*api.AdvertisementRequest) {
	return func(r *api.AdvertisementRequest) { r.UnitPrices = rl(cpu, mem) }
}

// TestReevaluationFollowsEvents: c1 (Price) holds a chunk on dear (2 ×
// 0.03 + 4 × 0.01 = 0.10 per hour); cheap costs 0.08 (2 × 0.02 + 4 ×
// 0.01): a saving of 0.02 beats the default threshold 0.01 → move. The
// consumer's own threshold of 0.05 → keep. cheap's price cut to 0.04 (2 ×
// 0.01 + 4 × 0.005): saving 0.06 → move again, seen at the next sweep.
// Each change of decision is counted.
func TestReevaluationFollowsEvents(t *testing.T) {
	e := newEnv(t)
	e.advertise("dear", 2, priced("0.03", "0.01"))
	e.advertise("cheap", 2, priced("0.02", "0.01"))
	e.beatPolicy("c1", api.PlacementPrice, nil)
	e.peer("c1", "r1", "dear")
	e.s.sweep(e.ctx)
	d := e.decisions("c1")
	if len(d) != 1 || d[0].Decision != api.DecisionMove || d[0].Target != "cheap" || d[0].NodeGroupID != "ng-dear-standard" || !nearly(d[0].SavingPerChunk, 0.02) {
		t.Fatalf("decisions %+v, want move ng-dear-standard to cheap saving 0.02", d)
	}
	th := 0.05
	e.beatPolicy("c1", api.PlacementPrice, &api.Thresholds{CostPerHour: &th})
	e.s.sweep(e.ctx)
	if d := e.decisions("c1"); len(d) != 1 || d[0].Decision != api.DecisionKeep || d[0].Threshold != 0.05 {
		t.Fatalf("with the consumer's threshold 0.05: %+v, want keep", d)
	}
	e.advertise("cheap", 2, priced("0.01", "0.005"))
	e.s.sweep(e.ctx)
	if d := e.decisions("c1"); len(d) != 1 || d[0].Decision != api.DecisionMove || !nearly(d[0].SavingPerChunk, 0.06) {
		t.Fatalf("after cheap's price cut: %+v, want move saving 0.06", d)
	}
	if n := testutil.ToFloat64(gauge(t, e.s, "fa_broker_reevaluations_total", "move", "Price")); n != 2 {
		t.Fatalf("reevaluations_total{Price,move} = %v, want 2", n)
	}
	if n := testutil.ToFloat64(gauge(t, e.s, "fa_broker_reevaluations_total", "keep", "Price")); n != 1 {
		t.Fatalf("reevaluations_total{Price,keep} = %v, want 1", n)
	}
	// Released: nothing held, nothing shown.
	if _, err := e.s.Release(e.ctx, "c1", "r1", 0); err != nil {
		t.Fatal(err)
	}
	e.result("c1", unpeerName("r1"), ok())
	e.s.sweep(e.ctx)
	if d := e.decisions("c1"); len(d) != 0 {
		t.Fatalf("after the release: %+v, want none", d)
	}
}

func nearly(a *float64, want float64) bool { return a != nil && *a-want < 1e-9 && want-*a < 1e-9 }

// TestHeartbeatAnswersMoves: the heartbeat's answer carries the consumer's
// "move" decisions only — none before the first sweep decided, the move
// to cheap after it (its group holds an autoscaled reservation; the budget
// of 2 has room), none once the consumer's own threshold keeps it, and
// never another consumer's.
func TestHeartbeatAnswersMoves(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MigrationBudget = 2 })
	e.advertise("dear", 2, priced("0.03", "0.01"))
	e.advertise("cheap", 2, priced("0.02", "0.01"))
	e.beatPolicy("c1", api.PlacementPrice, nil)
	e.beatPolicy("c2", api.PlacementPrice, nil)
	e.peer("c1", "res-1", "dear")
	beat := func(c string, th *api.Thresholds) []api.Reevaluation {
		t.Helper()
		req := api.HeartbeatRequest{ClusterID: c, LiqoClusterID: "liqo-" + c, Placement: &api.Placement{Type: api.PlacementPrice}}
		if th != nil {
			req.Lifecycle = &api.Lifecycle{Thresholds: th}
		}
		resp, err := e.s.Heartbeat(e.ctx, c, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Moves
	}
	if m := beat("c1", nil); len(m) != 0 {
		t.Fatalf("before any sweep: moves %+v, want none", m)
	}
	e.s.sweep(e.ctx)
	m := beat("c1", nil)
	if len(m) != 1 || m[0].NodeGroupID != "ng-dear-standard" || m[0].Target != "cheap" || m[0].Decision != api.DecisionMove {
		t.Fatalf("after the sweep: moves %+v, want ng-dear-standard to cheap", m)
	}
	if m := beat("c2", nil); len(m) != 0 {
		t.Fatalf("c2 holds nothing: moves %+v, want none", m)
	}
	th := 0.05
	beat("c1", &api.Thresholds{CostPerHour: &th})
	e.s.sweep(e.ctx)
	if m := beat("c1", &api.Thresholds{CostPerHour: &th}); len(m) != 0 {
		t.Fatalf("kept under the consumer's threshold: moves %+v, want none", m)
	}
}
