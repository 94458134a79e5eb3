package auth

import (
	"fmt"
	"strconv"
	"testing"
	"time"
)

func TestThrottleIsPerSourceAndChargesOnlyFailures(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	th := NewThrottle(ThrottleOptions{Rate: 2, Burst: 10})
	// The attacker spends its burst on failures, then is refused.
	for i := range 10 {
		if _, _, ok := th.Begin("192.0.2.66:4711", now); !ok {
			t.Fatalf("failure %d of the burst refused", i+1)
		}
	}
	_, wait, ok := th.Begin("192.0.2.66:4712", now)
	if ok || wait <= 0 || wait > time.Second {
		t.Fatalf("11th failure at once: ok %v wait %s, want refused with a wait of at most 1/rate", ok, wait)
	}
	// Another source is not affected.
	a, _, ok := th.Begin("192.0.2.7:1234", now)
	if !ok {
		t.Fatal("another source was throttled by the attacker's failures")
	}
	a.Succeeded()
	// Successes cost nothing: a source that keeps succeeding is never slowed.
	for i := range 100 {
		a, _, ok := th.Begin("192.0.2.7", now)
		if !ok {
			t.Fatalf("success %d refused", i+1)
		}
		a.Succeeded()
	}
	// The attacker is admitted again once a token has refilled.
	if _, _, ok := th.Begin("192.0.2.66", now.Add(wait)); !ok {
		t.Fatal("still refused after the announced wait")
	}
}

func TestThrottleMemoryIsBounded(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	th := NewThrottle(ThrottleOptions{MaxSources: 100})
	for i := range 10_000 {
		th.Begin(fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255), now)
		if n := th.Sources(); n > 100 {
			t.Fatalf("%d sources tracked after %d, cap 100", n, i+1)
		}
	}
	// The most recently seen sources are the ones kept: an attacker that
	// just failed 10 times is still throttled after 99 other sources came.
	for range 10 {
		th.Begin("192.0.2.66", now)
	}
	for i := range 99 {
		th.Begin("198.51.100."+strconv.Itoa(i), now)
	}
	if _, _, ok := th.Begin("192.0.2.66", now); ok {
		t.Fatal("a throttled source was forgotten before the cap was reached")
	}
}

func TestSourceKey(t *testing.T) {
	for in, want := range map[string]string{
		"192.0.2.1":                 "192.0.2.1",
		"192.0.2.1:5555":            "192.0.2.1",
		"::ffff:192.0.2.1":          "192.0.2.1",
		"2001:db8:1:2:3:4:5:6":      "2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff::1]:80": "2001:db8:1:2::/64",
		"not-an-ip":                 "not-an-ip",
	} {
		if got := SourceKey(in); got != want {
			t.Errorf("SourceKey(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRetryAfterSeconds(t *testing.T) {
	for d, want := range map[time.Duration]string{0: "1", time.Millisecond: "1", 500 * time.Millisecond: "1", time.Second: "1", 1001 * time.Millisecond: "2", 90 * time.Second: "90"} {
		if got := RetryAfterSeconds(d); got != want {
			t.Errorf("RetryAfterSeconds(%s) = %s, want %s", d, got, want)
		}
	}
}

func BenchmarkThrottleBegin(b *testing.B) {
	th := NewThrottle(ThrottleOptions{})
	now := time.Now()
	keys := make([]string, 8192)
	for i := range keys {
		keys[i] = fmt.Sprintf("10.0.%d.%d", i>>8, i&255)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		th.Begin(keys[i%len(keys)], now)
	}
}
