package spend

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

func f(v float64) *float64 { return &v }

// TestBudgetCheck: the rule against hand-computed tables.
func TestBudgetCheck(t *testing.T) {
	hour := &Budget{PerHour: f(3), WarnAtPercent: 80}
	month := &Budget{PerMonth: f(100), WarnAtPercent: 80}
	both := &Budget{PerHour: f(3), PerMonth: f(100), WarnAtPercent: 80}
	cases := []struct {
		name string
		b    *Budget
		u    Usage
		add  float64
		// want is the refused limit ("" fits) and what the refusal says.
		want                         string
		budget, current, cost, after float64
	}{
		{"no budget", nil, Usage{Rate: 50}, 10, "", 0, 0, 0, 0},
		{"per hour: 2 + 1 is exactly 3", hour, Usage{Rate: 2}, 1, "", 0, 0, 0, 0},
		{"per hour: 2 + 1.5 = 3.5 > 3", hour, Usage{Rate: 2}, 1.5, "perHour", 3, 2, 1.5, 3.5},
		{"per hour: 0.1 + 0.2 rounds to 0.30000000000000004, fits 0.3", &Budget{PerHour: f(0.3)}, Usage{Rate: 0.1}, 0.2, "", 0, 0, 0, 0},
		// 40 spent + (1 + 0.2) × 50 h = 100.
		{"per month: projected exactly 100", month, Usage{Rate: 1, SpentMonth: 40, HoursLeft: 50}, 0.2, "", 0, 0, 0, 0},
		// 40 + 1 × 50 = 90 now; 40 + 1.3 × 50 = 105 with it (+15).
		{"per month: projected 105 > 100", month, Usage{Rate: 1, SpentMonth: 40, HoursLeft: 50}, 0.3, "perMonth", 100, 90, 15, 105},
		// Spent 99 with 2 h left: 0.5/h more is 1 more, 1/h is 2.
		{"per month: near the month end", month, Usage{SpentMonth: 99, HoursLeft: 2}, 0.5, "", 0, 0, 0, 0},
		{"per month: near the month end, too much", month, Usage{SpentMonth: 99, HoursLeft: 2}, 1, "perMonth", 100, 99, 2, 101},
		{"both: the hour is checked first", both, Usage{Rate: 2.5, SpentMonth: 99, HoursLeft: 2}, 1, "perHour", 3, 2.5, 1, 3.5},
		{"unpriced provider costs 0: fits even over the budget", hour, Usage{Rate: 7}, 0, "", 0, 0, 0, 0},
		{"a budget of 0 refuses any priced chunk", &Budget{PerHour: f(0)}, Usage{}, 0.01, "perHour", 0, 0, 0.01, 0.01},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.b.Check(tc.u, tc.add)
			if tc.want == "" {
				if r != nil {
					t.Fatalf("refused: %+v", r)
				}
				return
			}
			if r == nil {
				t.Fatalf("fits, want refused for %s", tc.want)
			}
			if r.Limit != tc.want || !approx(r.Budget, tc.budget) || !approx(r.Current, tc.current) || !approx(r.Cost, tc.cost) || !approx(r.After, tc.after) {
				t.Fatalf("refusal %+v, want %s budget %v current %v cost %v after %v", r, tc.want, tc.budget, tc.current, tc.cost, tc.after)
			}
			msg := r.Message("lyon")
			for _, w := range []string{"budget reached", `"lyon"`, amount(tc.budget), amount(tc.cost), "spec.budget." + tc.want, "raise the budget"} {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q lacks %q", msg, w)
				}
			}
		})
	}
}

// TestBudgetAffordable: how many more chunks fit, the same answer as Check.
func TestBudgetAffordable(t *testing.T) {
	cases := []struct {
		name     string
		b        *Budget
		u        Usage
		perChunk float64
		want     int32
		capped   bool
	}{
		{"no budget", nil, Usage{}, 1, 0, false},
		{"unpriced chunk", &Budget{PerHour: f(1)}, Usage{}, 0, 0, false},
		{"per hour: (3 - 1) / 0.5", &Budget{PerHour: f(3)}, Usage{Rate: 1}, 0.5, 4, true},
		{"per hour: 0.1 steps up to 0.3", &Budget{PerHour: f(0.3)}, Usage{Rate: 0.1}, 0.1, 2, true},
		{"per hour: already above", &Budget{PerHour: f(3)}, Usage{Rate: 4}, 0.5, 0, true},
		// (100 - 40) / 50 h = 1.2/h in all; 1 held: 0.2 more = 2 chunks of 0.1.
		{"per month", &Budget{PerMonth: f(100)}, Usage{Rate: 1, SpentMonth: 40, HoursLeft: 50}, 0.1, 2, true},
		{"the smaller of the two", &Budget{PerHour: f(1.15), PerMonth: f(100)}, Usage{Rate: 1, SpentMonth: 40, HoursLeft: 50}, 0.1, 1, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n, ok := tc.b.Affordable(tc.u, tc.perChunk)
			if n != tc.want || ok != tc.capped {
				t.Fatalf("Affordable = %d, %v; want %d, %v", n, ok, tc.want, tc.capped)
			}
			if ok && tc.b.Check(tc.u, float64(n)*tc.perChunk) != nil || ok && tc.b.Check(tc.u, float64(n+1)*tc.perChunk) == nil {
				t.Fatalf("Affordable %d disagrees with Check", n)
			}
		})
	}
}

// TestBudgetStatus: the share used, its limit, the warning threshold.
func TestBudgetStatus(t *testing.T) {
	cases := []struct {
		name    string
		b       *Budget
		u       Usage
		refused bool
		pct     float64
		of      string
		state   api.BudgetState
	}{
		{"79 % of the hour", &Budget{PerHour: f(10), WarnAtPercent: 80}, Usage{Rate: 7.9}, false, 79, "perHour", api.BudgetOK},
		{"80 % of the hour warns", &Budget{PerHour: f(10), WarnAtPercent: 80}, Usage{Rate: 8}, false, 80, "perHour", api.BudgetWarning},
		{"82 % of the hour", &Budget{PerHour: f(10), WarnAtPercent: 80}, Usage{Rate: 8.2}, false, 82, "perHour", api.BudgetWarning},
		{"100 % is reached", &Budget{PerHour: f(10), WarnAtPercent: 80}, Usage{Rate: 10}, false, 100, "perHour", api.BudgetReached},
		{"refused below 100 % is reached", &Budget{PerHour: f(10), WarnAtPercent: 80}, Usage{Rate: 8.5}, true, 85, "perHour", api.BudgetReached},
		{"warnAtPercent 50", &Budget{PerHour: f(10), WarnAtPercent: 50}, Usage{Rate: 5}, false, 50, "perHour", api.BudgetWarning},
		// 20 + 1 × 70 h = 90 of 100.
		{"projected month", &Budget{PerMonth: f(100), WarnAtPercent: 95}, Usage{Rate: 1, SpentMonth: 20, HoursLeft: 70}, false, 90, "perMonth", api.BudgetOK},
		{"the larger share", &Budget{PerHour: f(4), PerMonth: f(100), WarnAtPercent: 80}, Usage{Rate: 1, SpentMonth: 20, HoursLeft: 70}, false, 90, "perMonth", api.BudgetWarning},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := tc.b.Status(tc.u, tc.refused)
			if !approx(st.UsedPercent, tc.pct) || st.UsedOf != tc.of || st.State != tc.state {
				t.Fatalf("status %+v, want %v %% of %s, %s", st, tc.pct, tc.of, tc.state)
			}
		})
	}
}

// TestBudgetOfAndUsageAt: the heartbeat's quantities, the default warning,
// and the month read from the book with the hours left until it ends.
func TestBudgetOfAndUsageAt(t *testing.T) {
	q := resource.MustParse("2.5")
	b := BudgetOf(&api.Budget{PerHour: &q})
	if b == nil || *b.PerHour != 2.5 || b.PerMonth != nil || b.WarnAtPercent != api.DefaultBudgetWarnAtPercent {
		t.Fatalf("BudgetOf = %+v", b)
	}
	w := int32(90)
	if BudgetOf(&api.Budget{WarnAtPercent: &w}) != nil || BudgetOf(nil) != nil {
		t.Fatal("a budget without a limit is no budget")
	}
	var book Book
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	book.Add(t0, map[string]float64{"lyon": 2}, DefaultMaxGap)
	u := UsageAt(&book, "lyon", 2, t0.Add(3*time.Minute), DefaultMaxGap)
	// 3 min at 2/h = 0.1; 11 h 57 min left in November.
	if !approx(u.SpentMonth, 0.1) || !approx(u.HoursLeft, 11.95) || u.Rate != 2 {
		t.Fatalf("usage %+v", u)
	}
}
