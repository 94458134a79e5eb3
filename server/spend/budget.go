package spend

import (
	"fmt"
	"math"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// Budget is a consumer's budget in the providers' currency (its
// ConsumerPolicy's spec.budget); a nil limit is none.
type Budget struct {
	PerHour, PerMonth *float64
	// WarnAtPercent is the share of a limit from which the budget shows as
	// nearly used (1 to 100).
	WarnAtPercent int32
}

// BudgetOf is the budget a heartbeat carries (nil when it sets no limit).
func BudgetOf(b *api.Budget) *Budget {
	if b == nil || b.PerHour == nil && b.PerMonth == nil {
		return nil
	}
	out := &Budget{WarnAtPercent: api.DefaultBudgetWarnAtPercent}
	if b.PerHour != nil {
		v := b.PerHour.AsApproximateFloat64()
		out.PerHour = &v
	}
	if b.PerMonth != nil {
		v := b.PerMonth.AsApproximateFloat64()
		out.PerMonth = &v
	}
	if b.WarnAtPercent != nil {
		out.WarnAtPercent = *b.WarnAtPercent
	}
	return out
}

// Usage is a consumer's spend at one instant, as the budget rule reads it.
type Usage struct {
	// Rate is its spend per hour now (unpriced chunks cost 0).
	Rate float64
	// SpentMonth is what it spent so far this UTC month (the Book).
	SpentMonth float64
	// HoursLeft is how long until this UTC month ends.
	HoursLeft float64
}

// UsageAt is a consumer's usage at now: spend per hour rate, what it spent
// this month according to the book.
func UsageAt(b *Book, consumer string, rate float64, now time.Time, maxGap time.Duration) Usage {
	_, month := b.SpentAt(consumer, now, maxGap)
	return Usage{Rate: rate, SpentMonth: month, HoursLeft: MonthEnd(now).Sub(now).Hours()}
}

// ProjectedMonth is the month's projected spend with add more per hour:
// what was spent so far plus the new rate held until the month ends.
func (u Usage) ProjectedMonth(add float64) float64 {
	return u.SpentMonth + (u.Rate+add)*u.HoursLeft
}

// epsilon absorbs float rounding: a sum that equals a limit up to it fits.
const epsilon = 1e-9

// Refusal says why a reservation breaks a budget: which limit, its value,
// where the consumer stands without the reservation and with it.
type Refusal struct {
	// Limit is "perHour" or "perMonth".
	Limit string
	// Budget is the limit; Current the spend per hour now (perHour) or the
	// projected month now (perMonth); Cost what the reservation adds to
	// that; After = Current + Cost.
	Budget, Current, Cost, After float64
	// Rate is the spend per hour now.
	Rate float64
}

// Message is the refusal in words for consumer: the budget, the spend now,
// what the reservation costs and what to do.
func (r *Refusal) Message(consumer string) string {
	if r.Limit == "perHour" {
		return fmt.Sprintf("budget reached: consumer %q spends %s per hour now and this chunk costs %s per hour more (%s per hour), "+
			"above its budget of %s per hour (spec.budget.perHour of its ConsumerPolicy); release capacity, raise the budget, or use a cheaper provider",
			consumer, amount(r.Current), amount(r.Cost), amount(r.After), amount(r.Budget))
	}
	return fmt.Sprintf("budget reached: consumer %q's month is projected at %s (spent so far plus %s per hour until the month ends); this chunk adds %s (%s in all), "+
		"above its budget of %s per month (spec.budget.perMonth of its ConsumerPolicy); release capacity, raise the budget, or use a cheaper provider",
		consumer, amount(r.Current), amount(r.Rate), amount(r.Cost), amount(r.After), amount(r.Budget))
}

// Details are the refusal's machine-readable details (the error body's).
func (r *Refusal) Details() map[string]any {
	return map[string]any{"limit": r.Limit, "budget": r.Budget, "current": r.Current, "cost": r.Cost, "after": r.After}
}

func amount(v float64) string { return fmt.Sprintf("%.4g", v) }

// Check decides whether a reservation costing add per hour fits b at u:
// nil when it does. A reservation that adds nothing (an unpriced provider)
// always fits, even over the budget: it does not raise the spend. The
// per-hour limit is checked first.
func (b *Budget) Check(u Usage, add float64) *Refusal {
	if b == nil || add <= 0 {
		return nil
	}
	if b.PerHour != nil && u.Rate+add > *b.PerHour+epsilon {
		return &Refusal{Limit: "perHour", Budget: *b.PerHour, Current: u.Rate, Cost: add, After: u.Rate + add, Rate: u.Rate}
	}
	if b.PerMonth != nil {
		now, after := u.ProjectedMonth(0), u.ProjectedMonth(add)
		if after > *b.PerMonth+epsilon {
			return &Refusal{Limit: "perMonth", Budget: *b.PerMonth, Current: now, Cost: after - now, After: after, Rate: u.Rate}
		}
	}
	return nil
}

// Affordable is how many more chunks costing perChunk per hour each fit b
// at u (the same answer as Check, chunk by chunk); ok is false when there
// is no cap (no budget, or the chunk costs nothing).
func (b *Budget) Affordable(u Usage, perChunk float64) (n int32, ok bool) {
	if b == nil || perChunk <= 0 {
		return 0, false
	}
	room := math.Inf(1)
	if b.PerHour != nil {
		room = (*b.PerHour + epsilon - u.Rate) / perChunk
	}
	if b.PerMonth != nil && u.HoursLeft > 0 {
		room = math.Min(room, ((*b.PerMonth+epsilon-u.SpentMonth)/u.HoursLeft-u.Rate)/perChunk)
	}
	if math.IsInf(room, 1) {
		return 0, false
	}
	f := math.Floor(math.Max(room, 0))
	if f > math.MaxInt32 {
		return math.MaxInt32, true
	}
	n = int32(f)
	for n > 0 && b.Check(u, float64(n)*perChunk) != nil {
		n--
	}
	return n, true
}

// Status is where u stands against b: the larger share used and its
// limit, the state (refused: a scale-up was refused for the budget and the
// spend has not gone down since).
func (b *Budget) Status(u Usage, refused bool) api.BudgetStatus {
	st := api.BudgetStatus{
		WarnAtPercent: b.WarnAtPercent, PerHour: b.PerHour, PerMonth: b.PerMonth,
		CostPerHour: u.Rate, SpentThisMonth: u.SpentMonth, ProjectedMonth: u.ProjectedMonth(0),
		State: api.BudgetOK,
	}
	for _, l := range []struct {
		name     string
		limit    *float64
		spending float64
	}{{"perHour", b.PerHour, st.CostPerHour}, {"perMonth", b.PerMonth, st.ProjectedMonth}} {
		if l.limit == nil {
			continue
		}
		if p := Share(l.spending, *l.limit); st.UsedOf == "" || p > st.UsedPercent {
			st.UsedPercent, st.UsedOf = p, l.name
		}
	}
	switch {
	case refused || st.UsedPercent >= 100:
		st.State = api.BudgetReached
	case st.UsedPercent >= float64(b.WarnAtPercent):
		st.State = api.BudgetWarning
	}
	return st
}

// Share is spending as a percentage of limit; a limit of 0 is used up.
func Share(spending, limit float64) float64 {
	if limit <= 0 {
		return 100
	}
	return 100 * spending / limit
}
