package testpoll_test

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/deploy/testpoll"
)

// recorder is a testing.TB whose Fatalf records the message and ends the
// goroutine, as the real one does.
type recorder struct {
	testing.TB
	msg string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run calls wait with a recorder in its own goroutine and returns the
// failure message ("" when it returned normally).
func run(t *testing.T, wait func(testing.TB)) string {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		wait(r)
	}()
	<-done
	return r.msg
}

func TestPolling(t *testing.T) {
	for _, tc := range []struct {
		name string
		wait func(tb testing.TB, calls *atomic.Int64)
		want string // "" : returns without failing
	}{
		{"until holds on the third poll", func(tb testing.TB, n *atomic.Int64) {
			testpoll.Until(tb, time.Minute, "three polls", func() bool { return n.Add(1) == 3 })
		}, ""},
		{"until never holds", func(tb testing.TB, n *atomic.Int64) {
			testpoll.Until(tb, 5*time.Millisecond, "the impossible", func() bool { n.Add(1); return false })
		}, "timed out after 5ms waiting for the impossible"},
		{"nil error ends the wait", func(tb testing.TB, n *atomic.Int64) {
			testpoll.UntilNil(tb, time.Minute, "no error", func() error {
				if n.Add(1) < 2 {
					return errors.New("first")
				}
				return nil
			})
		}, ""},
		{"the last error is reported", func(tb testing.TB, n *atomic.Int64) {
			testpoll.UntilNil(tb, 5*time.Millisecond, "the server", func() error { return fmt.Errorf("attempt %d refused", n.Add(1)) })
		}, "timed out after 5ms waiting for the server: attempt "},
		{"what was seen last is reported", func(tb testing.TB, n *atomic.Int64) {
			testpoll.UntilSeen(tb, 5*time.Millisecond, "six pods", func() (bool, string) { n.Add(1); return false, "4 running" })
		}, "timed out after 5ms waiting for six pods: last seen: 4 running"},
		{"a report is built once, at the deadline", func(tb testing.TB, n *atomic.Int64) {
			reports := 0
			testpoll.UntilReport(tb, 5*time.Millisecond, "no goroutine left", func() bool { n.Add(1); return false }, func() string {
				reports++
				return fmt.Sprintf("report %d after %d polls", reports, n.Load())
			})
		}, "timed out after 5ms waiting for no goroutine left: last seen: report 1 after "},
		{"report holds on the second poll", func(tb testing.TB, n *atomic.Int64) {
			testpoll.UntilReport(tb, time.Minute, "two polls", func() bool { return n.Add(1) == 2 }, func() string {
				tb.Fatalf("report built although the condition held")
				return ""
			})
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int64
			got := run(t, func(tb testing.TB) { tc.wait(tb, &calls) })
			switch {
			case tc.want == "" && got != "":
				t.Fatalf("failed: %s", got)
			case tc.want != "" && !strings.HasPrefix(got, tc.want):
				t.Fatalf("failure %q, want it to start with %q", got, tc.want)
			case calls.Load() == 0:
				t.Fatal("the condition was never polled")
			}
		})
	}
}
