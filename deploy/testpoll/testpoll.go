// Package testpoll waits in tests for a real condition: it polls until the
// condition holds or a deadline passes, then fails the test saying what was
// awaited and, when the condition says so, what it saw last. It is the one
// polling loop of the project's tests (no test sleeps for luck). The poll
// interval starts at 100 µs and doubles up to MaxInterval, so a condition
// that holds at once costs nothing and a slow one is not hammered.
package testpoll

import (
	"errors"
	"testing"
	"time"
)

// MaxInterval is the longest pause between two polls.
const MaxInterval = 20 * time.Millisecond

// Until polls cond until it returns true. If within passes first the test
// fails: "timed out after <within> waiting for <what>".
func Until(tb testing.TB, within time.Duration, what string, cond func() bool) {
	tb.Helper()
	UntilNil(tb, within, what, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	})
}

// UntilSeen polls cond until it reports done; at the deadline the test
// fails with the last thing cond said it saw.
func UntilSeen(tb testing.TB, within time.Duration, what string, cond func() (done bool, seen string)) {
	tb.Helper()
	UntilNil(tb, within, what, func() error {
		if done, seen := cond(); !done {
			return errors.New("last seen: " + seen)
		}
		return nil
	})
}

// UntilReport polls cond until it returns true; at the deadline the test
// fails with what report says of the state then. report runs once, at the
// deadline: for accounts too costly to build at every poll (a goroutine
// dump, a process's output).
func UntilReport(tb testing.TB, within time.Duration, what string, cond func() bool, report func() string) {
	tb.Helper()
	UntilNil(tb, within, what, func() error {
		if cond() {
			return nil
		}
		return lazyReport(report)
	})
}

// lazyReport is UntilReport's "false": its text is built when the failure
// is reported, not at every poll.
type lazyReport func() string

func (r lazyReport) Error() string { return "last seen: " + r() }

// UntilNil polls cond until it returns nil; at the deadline the test fails
// with cond's last error.
func UntilNil(tb testing.TB, within time.Duration, what string, cond func() error) {
	tb.Helper()
	deadline := time.Now().Add(within)
	pause := 100 * time.Microsecond
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			if errors.Is(err, errNotYet) {
				tb.Fatalf("timed out after %s waiting for %s", within, what)
			}
			tb.Fatalf("timed out after %s waiting for %s: %v", within, what, err)
		}
		time.Sleep(pause) // polling a real condition
		pause = min(2*pause, MaxInterval)
	}
}

// errNotYet is Until's "false": nothing more to report.
var errNotYet = errors.New("not yet")
