// Package spend is what consumers spend and may spend: the book that
// integrates each consumer's spend per hour over time into what it spent
// today and this month (UTC calendar days and months), and the budget rule
// the broker applies to a reservation (docs/placement.md, Budgets).
package spend

import (
	"maps"
	"time"
)

// DefaultMaxGap is the longest pause between two samples of a Book that is
// still counted (at the rate before it): a broker restart or a late sweep
// is counted, a broker that was down longer is not (nobody saw the rate
// then).
const DefaultMaxGap = 5 * time.Minute

// Book integrates each consumer's spend per hour over time. The zero Book
// is empty and ready. It is not safe for concurrent use; its JSON form is
// what the broker stores.
type Book struct {
	Day   string             `json:"day"`
	Month string             `json:"month"`
	Today map[string]float64 `json:"today,omitempty"`
	Spent map[string]float64 `json:"spent,omitempty"` // this month
	// Rate is each consumer's spend per hour at LastAt.
	Rate   map[string]float64 `json:"rate,omitempty"`
	LastAt time.Time          `json:"lastAt"`
}

func dayOf(t time.Time) string   { return t.UTC().Format("2006-01-02") }
func monthOf(t time.Time) string { return t.UTC().Format("2006-01") }

// dayStart and monthStart are the UTC midnights that start t's day and month.
func dayStart(t time.Time) time.Time {
	u := t.UTC()
	return time.Date(u.Year(), u.Month(), u.Day(), 0, 0, 0, 0, time.UTC)
}

func monthStart(t time.Time) time.Time {
	u := t.UTC()
	return time.Date(u.Year(), u.Month(), 1, 0, 0, 0, 0, time.UTC)
}

// MonthEnd is when t's UTC month ends (the next month's first midnight).
func MonthEnd(t time.Time) time.Time { return monthStart(t).AddDate(0, 1, 0) }

// Add integrates the rates of the previous sample up to now and records
// rates as the new ones. An interval that crosses midnight UTC counts only
// its part after midnight in the new day (and month): what was spent before
// belongs to the day that ended. A gap longer than maxGap, or a clock that
// went back, is not counted.
func (b *Book) Add(now time.Time, rates map[string]float64, maxGap time.Duration) {
	today, spent := b.integrated(now, maxGap)
	b.Day, b.Month, b.Today, b.Spent = dayOf(now), monthOf(now), today, spent
	b.Rate, b.LastAt = maps.Clone(rates), now
}

// integrated is what Today and Spent are at now (the book unchanged).
func (b *Book) integrated(now time.Time, maxGap time.Duration) (today, spent map[string]float64) {
	today, spent = map[string]float64{}, map[string]float64{}
	if b.Day == dayOf(now) {
		maps.Copy(today, b.Today)
	}
	if b.Month == monthOf(now) {
		maps.Copy(spent, b.Spent)
	}
	dayH, monthH := b.elapsed(now, maxGap)
	for c, r := range b.Rate {
		today[c] += r * dayH
		spent[c] += r * monthH
	}
	return today, spent
}

// elapsed is how many hours since the last sample count for today and for
// this month (0 when the gap is not counted).
func (b *Book) elapsed(now time.Time, maxGap time.Duration) (dayH, monthH float64) {
	if dt := now.Sub(b.LastAt); b.LastAt.IsZero() || dt <= 0 || dt > maxGap {
		return 0, 0
	}
	return now.Sub(later(b.LastAt, dayStart(now))).Hours(), now.Sub(later(b.LastAt, monthStart(now))).Hours()
}

// SpentAt is what consumer spent today and this month at now: the book
// integrated up to now at the last sample's rate (the book is unchanged), so
// the answer does not depend on when the samples were taken.
func (b *Book) SpentAt(consumer string, now time.Time, maxGap time.Duration) (today, month float64) {
	if b.Day == dayOf(now) {
		today = b.Today[consumer]
	}
	if b.Month == monthOf(now) {
		month = b.Spent[consumer]
	}
	dayH, monthH := b.elapsed(now, maxGap)
	r := b.Rate[consumer]
	return today + r*dayH, month + r*monthH
}

// Clone is a deep copy of b.
func (b *Book) Clone() Book {
	c := *b
	c.Today, c.Spent, c.Rate = maps.Clone(b.Today), maps.Clone(b.Spent), maps.Clone(b.Rate)
	return c
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
