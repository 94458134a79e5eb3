package reservations

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/deploy/testpoll"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

func graceSeconds(s int32) *int32 { return &s }

// beat sends consumer c's heartbeat with its lifecycle settings and the
// reservations whose virtual node it reports NotReady.
func (e *env) beat(c string, grace *int32, notReady ...string) {
	e.t.Helper()
	req := api.HeartbeatRequest{ClusterID: c, LiqoClusterID: "liqo-" + c, NotReadyReservations: notReady}
	if grace != nil {
		req.Lifecycle = &api.Lifecycle{DisconnectGraceSeconds: grace}
	}
	if _, err := e.s.Heartbeat(e.ctx, c, req); err != nil {
		e.t.Fatalf("heartbeat %s: %v", c, err)
	}
}

func (e *env) message(id string) string {
	e.s.mu.Lock()
	defer e.s.mu.Unlock()
	return e.s.st.reservations[id].Message
}

func withGrace(g time.Duration) func(*Config) {
	return func(c *Config) { c.DisconnectGrace = g }
}

// TestDisconnectGrace walks a provider that stops advertising through its
// consumer's disconnect grace in 10 s steps and checks when (and why) the
// reservation on it fails, against the times worked out by hand: the
// provider is stale 90 s after its last advertisement, and the grace runs
// from then.
func TestDisconnectGrace(t *testing.T) {
	const never = -1
	cases := []struct {
		name string
		// grace is the consumer's own setting (nil: the broker's 5 min).
		grace *int32
		// notReady: from 10 s into the grace on, the consumer reports the
		// reservation's virtual node NotReady.
		notReady bool
		// back: the provider advertises again (and on, every 10 s) from
		// this long into the grace (0: never).
		back time.Duration
		// failAt is when, into the grace, the reservation is seen Failed.
		failAt time.Duration
		msg    string
	}{
		{name: "the broker's grace runs out", failAt: 5 * time.Minute,
			msg: "provider p1 stopped advertising; its disconnect grace of 5m0s ran out"},
		{name: "back within the grace", back: 4*time.Minute + 50*time.Second, failAt: never},
		{name: "back too late", back: 5*time.Minute + 10*time.Second, failAt: 5 * time.Minute,
			msg: "provider p1 stopped advertising; its disconnect grace of 5m0s ran out"},
		{name: "the consumer's shorter grace", grace: graceSeconds(60), failAt: time.Minute,
			msg: "provider p1 stopped advertising; its disconnect grace of 1m0s ran out"},
		{name: "the consumer's longer grace", grace: graceSeconds(600), failAt: 10 * time.Minute,
			msg: "provider p1 stopped advertising; its disconnect grace of 10m0s ran out"},
		{name: "the consumer's zero grace: fail at once, as without grace", grace: graceSeconds(0), failAt: 0,
			msg: "provider p1 stopped advertising"},
		{name: "a NotReady virtual node ends the grace", notReady: true, failAt: 10 * time.Second,
			msg: "provider p1 stopped advertising and consumer c1 reports its virtual node NotReady"},
		{name: "NotReady after the provider came back changes nothing", notReady: true, back: 10 * time.Second, failAt: never},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, withGrace(5*time.Minute))
			e.advertise("p1", 2)
			e.beat("c1", tc.grace)
			e.peer("c1", "r1", "p1")
			e.clk.Step(DefaultProviderStaleAfter) // stale now: the grace starts
			got := time.Duration(never)
			for at := time.Duration(0); at <= 11*time.Minute; at += 10 * time.Second {
				if tc.back > 0 && at >= tc.back {
					e.advertise("p1", 2)
				}
				var notReady []string
				if tc.notReady && at >= 10*time.Second {
					notReady = []string{"r1"}
				}
				e.beat("c1", tc.grace, notReady...)
				e.s.sweep(e.ctx)
				if e.phase("r1") == api.PhaseFailed {
					got = at
					break
				}
				e.clk.Step(10 * time.Second)
			}
			if got != tc.failAt {
				t.Fatalf("failed %v into the grace, want %v (-1: never; phase %s)", got, tc.failAt, e.phase("r1"))
			}
			if tc.failAt == never {
				return
			}
			if m := e.message("r1"); m != tc.msg {
				t.Fatalf("message %q, want %q", m, tc.msg)
			}
			e.mustFind("c1", "cleanup-r1") // fails over as without grace
		})
	}
}

// TestDisconnectGraceShown checks what the broker shows during a grace: the
// provider unavailable at once for new reservations, when it disconnected,
// when its grace ends (per reservation and per provider), and all of it
// gone once it advertises again.
func TestDisconnectGraceShown(t *testing.T) {
	e := newEnv(t, withGrace(5*time.Minute))
	e.advertise("p1", 2)
	e.beat("c1", nil)
	e.beat("c2", graceSeconds(30))
	e.peer("c1", "r1", "p1")
	e.peer("c2", "r2", "p1")
	lastSeen := e.clk.Now()
	e.clk.Step(DefaultProviderStaleAfter)
	e.beat("c1", nil)
	e.beat("c2", graceSeconds(30))
	e.s.sweep(e.ctx)

	_, _, err := e.s.Reserve(e.ctx, "c1", "new", stdReq("p1"))
	wantCode(t, err, api.CodeServiceUnavailable)
	staleAt := lastSeen.Add(DefaultProviderStaleAfter)
	snap, _ := e.s.Advertisement(e.ctx, "p1")
	if snap.Available || snap.DisconnectedAt == nil || !snap.DisconnectedAt.Time.Equal(staleAt) {
		t.Fatalf("disconnected provider: available=%v disconnectedAt=%v, want false and %s", snap.Available, snap.DisconnectedAt, staleAt)
	}
	if snap.GraceUntil == nil || !snap.GraceUntil.Time.Equal(staleAt.Add(5*time.Minute)) {
		t.Fatalf("provider graceUntil %v, want the latest grace end %s", snap.GraceUntil, staleAt.Add(5*time.Minute))
	}
	for id, want := range map[string]time.Time{"r1": staleAt.Add(5 * time.Minute), "r2": staleAt.Add(30 * time.Second)} {
		r, err := e.s.Reservation(e.ctx, "p1", api.RoleProvider, id)
		if err != nil {
			t.Fatal(err)
		}
		if r.GraceUntil == nil || !r.GraceUntil.Time.Equal(want) {
			t.Fatalf("%s graceUntil %v, want %s", id, r.GraceUntil, want)
		}
	}
	ov := overviewJSON(t, e.s)
	for _, w := range []string{`"graceUntil"`, `"disconnectedAt"`} {
		if !strings.Contains(ov, w) {
			t.Fatalf("overview lacks %s: %s", w, ov)
		}
	}

	e.advertise("p1", 2)
	snap, _ = e.s.Advertisement(e.ctx, "p1")
	r, _ := e.s.Reservation(e.ctx, "c1", api.RoleConsumer, "r1")
	if !snap.Available || snap.DisconnectedAt != nil || snap.GraceUntil != nil || r.GraceUntil != nil || r.Status != api.PhasePeered {
		t.Fatalf("after the provider came back: snapshot %+v, reservation %+v", snap, r)
	}
}

// TestDisconnectGraceAfterRestart: a broker restart gives a stale
// provider's reservations a full freshness window and grace again (nobody
// could reach a broker that was down).
func TestDisconnectGraceAfterRestart(t *testing.T) {
	e := newEnv(t, withGrace(time.Minute))
	e.advertise("p1", 2)
	e.beat("c1", nil)
	e.peer("c1", "r1", "p1")
	e.clk.Step(DefaultProviderStaleAfter + 30*time.Second)
	e.s.sweep(e.ctx)
	e.restart()
	e.clk.Step(DefaultProviderStaleAfter + time.Minute - time.Second)
	e.beat("c1", nil)
	e.s.sweep(e.ctx)
	if got := e.phase("r1"); got != api.PhasePeered {
		t.Fatalf("r1 %s one second before the restarted window and grace end, want Peered", got)
	}
	e.clk.Step(time.Second)
	e.s.sweep(e.ctx)
	if got := e.phase("r1"); got != api.PhaseFailed {
		t.Fatalf("r1 %s after the restarted window and grace, want Failed", got)
	}
}

// TestDisconnectGraceHeartbeatWakesRun: a heartbeat that ends a grace
// sooner (a NotReady virtual node, a shorter grace) is acted on at once,
// not at Run's next deadline.
func TestDisconnectGraceHeartbeatWakesRun(t *testing.T) {
	for _, tc := range []struct {
		name     string
		grace    *int32
		notReady []string
	}{
		{"NotReady", nil, []string{"r1"}},
		{"shorter grace", graceSeconds(0), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, withGrace(5*time.Minute))
			e.advertise("p1", 1)
			e.beat("c1", nil)
			e.peer("c1", "r1", "p1")
			e.clk.Step(DefaultProviderStaleAfter)
			ctx, cancel := context.WithCancel(e.ctx)
			done := make(chan error, 1)
			go func() { done <- e.s.Run(ctx) }()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("Run: %v", err)
				}
			}()
			testpoll.Until(t, 10*time.Second, "the stale provider's reservation in grace", func() bool {
				r, err := e.s.Reservation(e.ctx, "c1", api.RoleConsumer, "r1")
				return err == nil && r.GraceUntil != nil && e.clk.HasWaiters()
			})
			if e.phase("r1") != api.PhasePeered {
				t.Fatalf("r1 %s before the heartbeat, want Peered", e.phase("r1"))
			}
			e.beat("c1", tc.grace, tc.notReady...)
			// Run may still wait out its one-second minimum between
			// sweeps: step the fake clock in small steps, but never near
			// the 5-minute grace or the 30-second re-evaluation.
			start := e.clk.Now()
			testpoll.Until(t, 10*time.Second, "r1 to fail long before its grace runs out", func() bool {
				if e.phase("r1") == api.PhaseFailed {
					return true
				}
				if e.clk.Since(start) < 5*time.Second && e.clk.HasWaiters() {
					e.clk.Step(100 * time.Millisecond)
				}
				return false
			})
		})
	}
}
