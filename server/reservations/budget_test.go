package reservations

import (
	"math"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// budgetBeat heartbeats consumer c with budget b.
func (e *env) budgetBeat(c string, b api.Budget) {
	e.t.Helper()
	if _, err := e.s.Heartbeat(e.ctx, c, api.HeartbeatRequest{ClusterID: c, LiqoClusterID: "liqo-" + c, Budget: &b}); err != nil {
		e.t.Fatalf("heartbeat %s: %v", c, err)
	}
}

func qty(s string) *resource.Quantity {
	q := resource.MustParse(s)
	return &q
}

// consumerRow is consumer c's overview row.
func (e *env) consumerRow(c string) api.OverviewConsumer {
	e.t.Helper()
	ov, err := e.s.Overview(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, row := range ov.Consumers {
		if row.ClusterID == c {
			return row
		}
	}
	e.t.Fatalf("no overview row for %s", c)
	return api.OverviewConsumer{}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-6 }

// TestBudgetPerHourRefusesAndCaps: with 2.5 per hour and chunks of 1.0 per
// hour, two chunks fit and the third is refused with 409 BudgetExceeded
// saying the budget, the spend and the cost; the node groups stop offering
// room; the overview says 80 % of the hour and "reached" until capacity is
// released; an unpriced provider's chunk costs nothing and still fits.
func TestBudgetPerHourRefusesAndCaps(t *testing.T) {
	e := newEnv(t)
	e.advertise("p1", 4, priced("0.5", "0")) // 1.0 per chunk-hour
	e.advertise("free", 4)
	e.budgetBeat("c1", api.Budget{PerHour: qty("2.5")})
	e.reserve("c1", "r1", "p1")
	e.reserve("c1", "r2", "p1")
	_, _, err := e.s.Reserve(e.ctx, "c1", "r3", stdReq("p1"))
	wantCode(t, err, api.CodeBudgetExceeded)
	if got := api.Status(api.CodeOf(err)); got != 409 {
		t.Fatalf("status %d, want 409", got)
	}
	var ae *api.Error
	if !asAPIError(err, &ae) || ae.Details["limit"] != "perHour" || ae.Details["budget"] != 2.5 || ae.Details["current"] != 2.0 || ae.Details["cost"] != 1.0 {
		t.Fatalf("details %+v", ae)
	}
	for _, w := range []string{"budget reached", "spends 2 per hour", "costs 1 per hour more", "budget of 2.5 per hour", "spec.budget.perHour"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("message %q lacks %q", err.Error(), w)
		}
	}
	if e.reserved("p1") != 2 {
		t.Fatalf("p1 holds %d chunks, want 2: the refused one is not created", e.reserved("p1"))
	}
	v, err := e.s.NodeGroups(e.ctx, "c1", true)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range v.NodeGroups {
		switch g.ProviderClusterID {
		case "p1":
			if g.MaxSize != g.CurrentReserved || g.CurrentReserved != 2 {
				t.Errorf("p1's group %d of max %d, want capped at the 2 held", g.CurrentReserved, g.MaxSize)
			}
		case "free":
			if g.MaxSize != 4 {
				t.Errorf("the unpriced group's max %d, want 4 (it costs nothing)", g.MaxSize)
			}
		}
	}
	if b := v.Budget; b == nil || b.State != api.BudgetReached || !near(b.UsedPercent, 80) || b.UsedOf != "perHour" || !strings.Contains(b.LastRefusal, "budget reached") {
		t.Fatalf("node-group budget %+v, want reached at 80 %% with the refusal", v.Budget)
	}
	e.reserve("c1", "r4", "free")
	if _, err := e.s.Release(e.ctx, "c1", "r2", 0); err != nil {
		t.Fatal(err)
	}
	row := e.consumerRow("c1")
	if b := row.Budget; b == nil || b.State != api.BudgetOK || !near(b.UsedPercent, 40) || b.LastRefusal == "" {
		t.Fatalf("after a release: %+v, want ok at 40 %% with the last refusal kept", row.Budget)
	}
	e.reserve("c1", "r5", "p1") // 2 per hour again: fits
	if b := e.consumerRow("c1").Budget; b.State != api.BudgetWarning || !near(b.UsedPercent, 80) {
		t.Fatalf("at 80 %%: %+v, want warning", b)
	}
	// A new budget forgets the old refusal.
	e.budgetBeat("c1", api.Budget{PerHour: qty("10")})
	if b := e.consumerRow("c1").Budget; b.LastRefusal != "" || b.State != api.BudgetOK {
		t.Fatalf("after a new budget: %+v", b)
	}
}

func asAPIError(err error, target **api.Error) bool {
	e, ok := err.(*api.Error)
	*target = e
	return ok
}

// sweepFor steps the clock by d in steps of a minute, with keep (the
// agents' reports) and a sweep after each, so the spend book samples.
func (e *env) sweepFor(d time.Duration, keep func()) {
	for end := e.clk.Now().Add(d); e.clk.Now().Before(end); {
		e.clk.Step(time.Minute)
		keep()
		e.s.sweep(e.ctx)
	}
}

// TestBudgetPerMonthProjection: on 22 July at 10:00 (230 h before the
// month ends), spent 1.0 after an hour at 1.0 per hour; a budget of 460
// per month fits a second chunk (1 + 2 × 229 = 459) and refuses a third
// (1 + 3 × 229 = 688). The spend book survives a restart: the two minutes
// the broker was down count at the rate before them.
func TestBudgetPerMonthProjection(t *testing.T) {
	e := newEnv(t)
	keep := func() {
		e.advertise("p1", 4, priced("0.5", "0")) // 1.0 per chunk-hour
		e.budgetBeat("c1", api.Budget{PerMonth: qty("460")})
	}
	keep()
	e.reserve("c1", "r1", "p1")
	e.s.sweep(e.ctx) // the sample the reservation asked for
	e.sweepFor(time.Hour, keep)
	row := e.consumerRow("c1")
	if !near(row.Spend.SpentThisMonth, 1) || !near(row.Budget.ProjectedMonth, 1+229) {
		t.Fatalf("after an hour: spent %v projected %v, want 1 and 230", row.Spend.SpentThisMonth, row.Budget.ProjectedMonth)
	}
	e.reserve("c1", "r2", "p1")
	_, _, err := e.s.Reserve(e.ctx, "c1", "r3", stdReq("p1"))
	wantCode(t, err, api.CodeBudgetExceeded)
	var ae *api.Error
	if !asAPIError(err, &ae) || ae.Details["limit"] != "perMonth" || !near(ae.Details["after"].(float64), 1+3*229) || !near(ae.Details["cost"].(float64), 229) {
		t.Fatalf("details %+v, want perMonth after 688 cost 229", ae)
	}
	e.s.sweep(e.ctx)
	before := e.consumerRow("c1").Spend.SpentThisMonth
	e.restart()
	e.clk.Step(2 * time.Minute)
	keep()
	after := e.consumerRow("c1").Spend.SpentThisMonth
	if want := before + 2*2.0/60; !near(after, want) {
		t.Fatalf("after a restart of 2 min: spent %v, want %v (%v before + 2 min at 2 per hour)", after, want, before)
	}
}

// TestBudgetMonthRollover: the month that ends takes its spend with it;
// the new month starts at what was spent since midnight UTC.
func TestBudgetMonthRollover(t *testing.T) {
	e := newEnv(t)
	e.clk.SetTime(time.Date(2026, 7, 31, 23, 0, 0, 0, time.UTC))
	keep := func() {
		e.advertise("p1", 4, priced("1.5", "0")) // 3.0 per chunk-hour
		e.budgetBeat("c1", api.Budget{PerMonth: qty("3000")})
	}
	keep()
	e.reserve("c1", "r1", "p1")
	e.s.sweep(e.ctx)
	e.sweepFor(50*time.Minute, keep)
	if got := e.consumerRow("c1").Spend.SpentThisMonth; !near(got, 2.5) {
		t.Fatalf("23:50 on 31 July: spent %v, want 2.5 (50 min at 3 per hour)", got)
	}
	e.sweepFor(20*time.Minute, keep) // 00:10 on 1 August
	row := e.consumerRow("c1")
	// 10 min at 3 per hour = 0.5; 31 days less 10 min left at 3 per hour.
	if want := 0.5 + 3*(31*24-1.0/6); !near(row.Spend.SpentThisMonth, 0.5) || !near(row.Budget.ProjectedMonth, want) {
		t.Fatalf("00:10 on 1 August: spent %v projected %v, want 0.5 and %v", row.Spend.SpentThisMonth, row.Budget.ProjectedMonth, want)
	}
	// 0.5 + 6 × 743.83 = 4463.5 > 3000: a second chunk is refused.
	_, _, err := e.s.Reserve(e.ctx, "c1", "r2", stdReq("p1"))
	wantCode(t, err, api.CodeBudgetExceeded)
}

// TestBudgetStopsTheViewWithAReason: a budget that affords no chunk of the
// group the policy grows caps it at what is held, and the policy's view
// (the Cluster Autoscaler's) records why, as a reservation there would be
// refused; the view of every group (the console's) records nothing.
func TestBudgetStopsTheViewWithAReason(t *testing.T) {
	e := newEnv(t)
	e.advertise("p1", 4, priced("0.5", "0")) // 1.0 per chunk-hour
	e.budgetBeat("c1", api.Budget{PerHour: qty("0.5")})
	all, err := e.s.NodeGroups(e.ctx, "c1", true)
	if err != nil {
		t.Fatal(err)
	}
	if len(all.NodeGroups) != 1 || all.NodeGroups[0].MaxSize != 0 || all.Budget == nil || all.Budget.LastRefusal != "" {
		t.Fatalf("every group: %+v budget %+v, want p1 capped at 0 and no refusal recorded", all.NodeGroups, all.Budget)
	}
	v, err := e.s.NodeGroups(e.ctx, "c1", false)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.NodeGroups) != 1 || v.NodeGroups[0].MaxSize != 0 {
		t.Fatalf("policy view %+v, want p1 capped at 0", v.NodeGroups)
	}
	if b := v.Budget; b == nil || b.State != api.BudgetReached || !strings.Contains(b.LastRefusal, "costs 1 per hour more") || !strings.Contains(b.LastRefusal, "budget of 0.5 per hour") {
		t.Fatalf("budget %+v, want reached with the reason", v.Budget)
	}
}
