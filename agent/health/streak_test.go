package health

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestStreakWarnsOnceWithCountAndLastError(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	tr := NewTracker(clk, 30*time.Second)
	tr.BrokerReached()
	s := tr.NewStreak("Listing virtual nodes", log, clk, true)
	ctx := context.Background()
	for i := range 10 {
		s.Failed(ctx, errors.New("boom "+string(rune('a'+i))))
		clk.SetTime(clk.Now().Add(time.Second))
		r := tr.Report()
		switch {
		case i+1 < DefaultStreakThreshold && (!r.Ready || len(r.Failing) != 0):
			t.Fatalf("after %d failures: %+v, want ready (a retry may work)", i+1, r)
		case i+1 >= DefaultStreakThreshold && (r.Ready || !strings.Contains(r.Reason, "Listing virtual nodes failed") || len(r.Failing) != 1):
			t.Fatalf("after %d failures: %+v, want not ready saying why", i+1, r)
		}
	}
	logs := buf.String()
	if n := strings.Count(logs, "level=WARN"); n != 1 {
		t.Fatalf("%d warnings for one streak, want 1:\n%s", n, logs)
	}
	if !strings.Contains(logs, "failures=3") || !strings.Contains(logs, "lastError=\"boom c\"") || !strings.Contains(logs, "since=2026-12-01T10:00:00Z") {
		t.Errorf("the warning lacks the count, the last error or since when:\n%s", logs)
	}
	if _, why := s.Failing(); !strings.Contains(why, "10 times") || !strings.Contains(why, "boom j") {
		t.Errorf("Failing() = %q, want the count and the last error", why)
	}
	buf.Reset()
	s.Succeeded(ctx)
	if !strings.Contains(buf.String(), "Listing virtual nodes works again") || !strings.Contains(buf.String(), "failures=10") {
		t.Errorf("recovery not logged: %s", buf.String())
	}
	if r := tr.Report(); !r.Ready || len(r.Failing) != 0 {
		t.Errorf("after the success: %+v", r)
	}
	// A new streak warns again.
	buf.Reset()
	for range DefaultStreakThreshold {
		s.Failed(ctx, errors.New("again"))
	}
	if strings.Count(buf.String(), "level=WARN") != 1 {
		t.Errorf("the second streak was not warned once:\n%s", buf.String())
	}
	// A short streak that recovers is not announced.
	buf.Reset()
	s.Succeeded(ctx)
	s.Failed(ctx, errors.New("blip"))
	s.Succeeded(ctx)
	if strings.Contains(buf.String(), "blip") || strings.Count(buf.String(), "works again") != 1 {
		t.Errorf("a single failure was announced:\n%s", buf.String())
	}
}

func TestBrokerStreakDoesNotGateReadiness(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(0, 0))
	tr := NewTracker(clk, 30*time.Second)
	tr.BrokerReached()
	s := tr.NewStreak("Heartbeat", nil, clk, false)
	for range 5 {
		s.Failed(context.Background(), errors.New("403 Forbidden"))
	}
	r := tr.Report()
	if !r.Ready || len(r.Failing) != 1 || !strings.Contains(r.Failing[0], "403 Forbidden") {
		t.Fatalf("%+v, want ready (the broker answered) with the failing heartbeat listed", r)
	}
	var nilTracker *Tracker
	if s := nilTracker.NewStreak("x", nil, nil, true); s == nil {
		t.Fatal("a nil tracker gave no streak")
	}
}
