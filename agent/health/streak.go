package health

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// DefaultStreakThreshold is how many failures in a row of an operation the
// agent retries on its own make a streak: logged once as a warning and,
// for a streak that gates readiness, the agent reported not ready.
const DefaultStreakThreshold = 3

// Streak follows one operation the agent retries by itself (a heartbeat, an
// advertisement, an instruction poll, a read of the Kubernetes API). A
// single failure is logged at debug level only (the next try may work);
// the threshold-th failure in a row is logged once as a warning with the
// count, since when and the last error; the first success after that is
// logged as info. It is safe for concurrent use.
type Streak struct {
	name      string
	log       *slog.Logger
	clock     clock.PassiveClock
	threshold int

	mu       sync.Mutex
	failures int
	since    time.Time
	last     error
}

// NewStreak returns a streak of operation name (a phrase such as
// "Heartbeat", used to start log messages) logging to log. clk may be nil.
func NewStreak(name string, log *slog.Logger, clk clock.PassiveClock) *Streak {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Streak{name: name, log: log, clock: clk, threshold: DefaultStreakThreshold}
}

// Failed records a failure.
func (s *Streak) Failed(ctx context.Context, err error) {
	s.mu.Lock()
	s.failures++
	if s.failures == 1 {
		s.since = s.clock.Now()
	}
	s.last = err
	n, since := s.failures, s.since
	s.mu.Unlock()
	if n == s.threshold {
		s.log.WarnContext(ctx, s.name+" keeps failing; retrying", "failures", n, "since", since.UTC().Format(time.RFC3339), "lastError", err)
		return
	}
	s.log.DebugContext(ctx, s.name+" failed; retrying", "failures", n, "err", err)
}

// Succeeded records a success and ends the streak.
func (s *Streak) Succeeded(ctx context.Context) {
	s.mu.Lock()
	n, since := s.failures, s.since
	s.failures, s.last = 0, nil
	s.mu.Unlock()
	if n >= s.threshold {
		s.log.InfoContext(ctx, s.name+" works again", "failures", n, "for", s.clock.Since(since).Round(time.Second).String())
	}
}

// Failing reports whether the streak has reached the threshold, and if so
// a sentence saying since when and why.
func (s *Streak) Failing() (bool, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failures < s.threshold {
		return false, ""
	}
	return true, fmt.Sprintf("%s failed %d times in a row since %s: %v", s.name, s.failures, s.since.UTC().Format(time.RFC3339), s.last)
}
