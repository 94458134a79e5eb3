package experiment

import (
	"testing"
	"time"
)

func TestStallWatch(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 4, 0, 0, 0, time.UTC)
	type obs struct {
		at      time.Duration // since t0
		seen    string        // "" : nothing read at this instant
		stalled bool
	}
	tests := []struct {
		name string
		obs  []obs
	}{
		{"nothing seen: stalled at the timeout", []obs{{at: 59 * time.Second}, {at: time.Minute, stalled: true}}},
		{"the same value all along: stalled a timeout after the first read", []obs{
			{at: 10 * time.Second, seen: "9 live"}, {at: 69 * time.Second, seen: "9 live"}, {at: 70 * time.Second, seen: "9 live", stalled: true},
		}},
		{"steady progress: never stalled", []obs{
			{at: 50 * time.Second, seen: "9 live"}, {at: 100 * time.Second, seen: "7 live"}, {at: 150 * time.Second, seen: "3 live"}, {at: 200 * time.Second, seen: "1 live"},
		}},
		{"progress then stuck", []obs{
			{at: 30 * time.Second, seen: "9 live"}, {at: 80 * time.Second, seen: "4 live"}, {at: 139 * time.Second, seen: "4 live"}, {at: 140 * time.Second, seen: "4 live", stalled: true},
		}},
		{"a failed read is no progress", []obs{
			{at: 5 * time.Second, seen: "2 live"}, {at: 64 * time.Second}, {at: 65 * time.Second, stalled: true},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newStallWatch(t0, time.Minute)
			for i, o := range tc.obs {
				now := t0.Add(o.at)
				if o.seen != "" {
					w.saw(now, o.seen)
				}
				if got := w.stalled(now); got != o.stalled {
					t.Fatalf("observation %d (%v, %q): stalled = %v, want %v", i, o.at, o.seen, got, o.stalled)
				}
			}
		})
	}
}
