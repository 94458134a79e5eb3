package spend

import (
	"encoding/json"
	"math"
	"testing"
	"time"
)

func approx(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// TestBookIntegrates by hand: 0.12/h for 30 min = 0.06, then 0.30/h for
// 10 min = 0.05; across midnight UTC on the 30th only the 10 minutes after
// it count for the new day and month (0.05); a gap longer than maxGap
// (broker down) is not counted.
func TestBookIntegrates(t *testing.T) {
	var b Book
	t0 := time.Date(2026, 11, 30, 23, 0, 0, 0, time.UTC)
	gap := time.Hour
	b.Add(t0, map[string]float64{"lyon": 0.12}, gap)
	b.Add(t0.Add(30*time.Minute), map[string]float64{"lyon": 0.30}, gap)
	b.Add(t0.Add(40*time.Minute), map[string]float64{"lyon": 0.30}, gap)
	if !approx(b.Today["lyon"], 0.11) || !approx(b.Spent["lyon"], 0.11) {
		t.Fatalf("today %v month %v, want 0.06 + 0.05 = 0.11", b.Today, b.Spent)
	}
	b.Add(t0.Add(50*time.Minute), map[string]float64{"lyon": 0.30}, gap) // 23:50, 0.16
	b.Add(t0.Add(70*time.Minute), map[string]float64{"lyon": 0.30}, gap) // 00:10 on the 1st
	if b.Day != "2026-12-01" || b.Month != "2026-12" || !approx(b.Today["lyon"], 0.05) || !approx(b.Spent["lyon"], 0.05) {
		t.Fatalf("after midnight: %+v, want 0.05 today and this month (10 min at 0.30/h)", b)
	}
	b.Add(t0.Add(190*time.Minute), map[string]float64{}, gap) // 2 h later: not counted
	if !approx(b.Today["lyon"], 0.05) {
		t.Fatalf("a gap of 2 h counted: %v", b.Today)
	}
}

// TestSpentAtIndependentOfSampling: at a constant rate, what SpentAt
// answers does not depend on how often the book was sampled, nor on a
// restart (the book through its stored JSON), nor on a month boundary
// between the last sample and the question.
func TestSpentAtIndependentOfSampling(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 22, 0, 0, 0, time.UTC)
	rates := map[string]float64{"lyon": 1.2}
	cases := []struct {
		name  string
		every time.Duration
		until time.Duration // last sample, after t0
		ask   time.Duration // the question, after t0
		today float64
		month float64
	}{
		// 22:00 → 23:30: 1.5 h at 1.2/h.
		{"every 10 s", 10 * time.Second, 90 * time.Minute, 90 * time.Minute, 1.8, 1.8},
		{"every minute", time.Minute, 90 * time.Minute, 90 * time.Minute, 1.8, 1.8},
		{"last sample 4 min before", 10 * time.Second, 86 * time.Minute, 90 * time.Minute, 1.8, 1.8},
		// 00:03 on the 1st, last sample at 23:59: 3 min in the new month.
		{"across the month end", 10 * time.Second, 119 * time.Minute, 123 * time.Minute, 0.06, 0.06},
		// 6 min after the last sample: longer than the gap, not counted.
		{"longer than the gap", 10 * time.Second, 84 * time.Minute, 90 * time.Minute, 1.68, 1.68},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var b Book
			for d := time.Duration(0); d <= tc.until; d += tc.every {
				b.Add(t0.Add(d), rates, DefaultMaxGap)
			}
			data, err := json.Marshal(b)
			if err != nil {
				t.Fatal(err)
			}
			var restored Book
			if err := json.Unmarshal(data, &restored); err != nil {
				t.Fatal(err)
			}
			for name, bk := range map[string]*Book{"live": &b, "restored": &restored} {
				today, month := bk.SpentAt("lyon", t0.Add(tc.ask), DefaultMaxGap)
				if !approx(today, tc.today) || !approx(month, tc.month) {
					t.Errorf("%s: today %v month %v, want %v %v", name, today, month, tc.today, tc.month)
				}
			}
		})
	}
}

func TestMonthEnd(t *testing.T) {
	for _, tc := range []struct{ at, want time.Time }{
		{time.Date(2026, 12, 31, 23, 59, 0, 0, time.UTC), time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)},
		{time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)},
		{time.Date(2026, 3, 1, 0, 30, 0, 0, time.FixedZone("CET", 3600)), time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)}, // 23:30 UTC on Feb 28
	} {
		if got := MonthEnd(tc.at); !got.Equal(tc.want) {
			t.Errorf("MonthEnd(%v) = %v, want %v", tc.at, got, tc.want)
		}
	}
}
