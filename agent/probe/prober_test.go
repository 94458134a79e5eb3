package probe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// scripted is a fake Network: each endpoint answers with its script's
// round trips (none: silence), counting calls and the calls in flight.
type scripted struct {
	rtts     map[string][]time.Duration
	calls    atomic.Int32
	inFlight atomic.Int32
	maxSeen  atomic.Int32
	// hold, when set, blocks every call until it is closed.
	hold chan struct{}
}

func (s *scripted) Probe(ctx context.Context, ep string, n int, _ time.Duration) ([]time.Duration, error) {
	s.calls.Add(1)
	now := s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	for {
		old := s.maxSeen.Load()
		if now <= old || s.maxSeen.CompareAndSwap(old, now) {
			break
		}
	}
	if s.hold != nil {
		select {
		case <-s.hold:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	r := s.rtts[ep]
	if len(r) == 0 {
		return nil, errors.New("silent")
	}
	return r[:min(n, len(r))], nil
}

func TestEstimate(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name string
		in   []time.Duration
		want float64
	}{
		{"one probe", []time.Duration{12 * ms}, 12},
		{"queueing only adds delay: the fastest reply", []time.Duration{41 * ms, 20 * ms, 95 * ms, 21 * ms, 300 * ms}, 20},
		{"sub-millisecond", []time.Duration{1500 * time.Microsecond, 250 * time.Microsecond}, 0.25},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Estimate(tc.in); got != tc.want {
				t.Errorf("Estimate(%v) = %v ms, want %v", tc.in, got, tc.want)
			}
		})
	}
}

// TestMeasureCacheAndEstimate: the estimate of each endpoint, silent ones
// absent, and the TTL (on a fake clock) deciding when to probe again.
func TestMeasureCacheAndEstimate(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1_800_000_000, 0))
	net := &scripted{rtts: map[string][]time.Duration{
		"a:1": {30 * time.Millisecond, 10 * time.Millisecond, 50 * time.Millisecond},
		"b:1": {7 * time.Millisecond},
	}}
	p := NewProber(ProberConfig{Network: net, Clock: clk, TTL: 10 * time.Second})
	eps := []string{"b:1", "a:1", "silent:1", "a:1", ""}
	want := map[string]float64{"a:1": 10, "b:1": 7}
	steps := []struct {
		advance   time.Duration
		wantCalls int32
	}{
		{0, 3},               // first measure: each distinct endpoint once
		{9 * time.Second, 3}, // within the TTL: cached, silent ones too
		{1 * time.Second, 6}, // TTL reached: probed again
		{5 * time.Second, 6},
	}
	for i, st := range steps {
		clk.SetTime(clk.Now().Add(st.advance))
		got := p.Measure(context.Background(), eps)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("step %d: Measure = %v, want %v", i, got, want)
		}
		if c := net.calls.Load(); c != st.wantCalls {
			t.Errorf("step %d: %d probe calls, want %d", i, c, st.wantCalls)
		}
	}
}

// TestMeasureBoundsConcurrency: one Measure never probes more than
// Concurrency endpoints at once, and still measures them all.
func TestMeasureBoundsConcurrency(t *testing.T) {
	const n, limit = 20, 3
	net := &scripted{rtts: map[string][]time.Duration{}, hold: make(chan struct{})}
	var eps []string
	for i := range n {
		ep := fmt.Sprintf("p%02d:1", i)
		eps = append(eps, ep)
		net.rtts[ep] = []time.Duration{time.Millisecond}
	}
	p := NewProber(ProberConfig{Network: net, Concurrency: limit})
	done := make(chan map[string]float64, 1)
	go func() { done <- p.Measure(context.Background(), eps) }()
	deadline := time.Now().Add(30 * time.Second)
	for net.inFlight.Load() < limit {
		if time.Now().After(deadline) {
			t.Fatalf("only %d probes in flight, want %d", net.inFlight.Load(), limit)
		}
		time.Sleep(time.Millisecond)
	}
	close(net.hold)
	got := <-done
	if len(got) != n {
		t.Errorf("measured %d endpoints, want %d", len(got), n)
	}
	if m := net.maxSeen.Load(); m != limit {
		t.Errorf("%d endpoints probed at once, want at most (and here exactly) %d", m, limit)
	}
}

// TestMeasureCancelled: a cancelled Measure caches nothing, so the next
// one probes again instead of reporting a silence.
func TestMeasureCancelled(t *testing.T) {
	net := &scripted{rtts: map[string][]time.Duration{"a:1": {time.Millisecond}}, hold: make(chan struct{})}
	p := NewProber(ProberConfig{Network: net})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got := p.Measure(ctx, []string{"a:1"}); len(got) != 0 {
		t.Errorf("cancelled Measure = %v, want nothing", got)
	}
	close(net.hold)
	if got := p.Measure(context.Background(), []string{"a:1"}); got["a:1"] != 1 {
		t.Errorf("after a cancelled Measure: %v, want a:1 measured (1 ms)", got)
	}
}

// TestUDPDiscardsLateReplies: a reply to an earlier probe that arrives
// while a later one waits is not the later one's reply. The scripted
// responder ignores probe 0; when probe 1 arrives it echoes probe 0 at
// once (late) and probe 1 only after 40 ms.
func TestUDPDiscardsLateReplies(t *testing.T) {
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const wait = 40 * time.Millisecond
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		buf := make([]byte, 64)
		var first []byte
		for {
			n, from, err := conn.ReadFromUDP(buf)
			if err != nil {
				return
			}
			msg := append([]byte(nil), buf[:n]...)
			if first == nil {
				first = msg // probe 0: no answer for now
				continue
			}
			_, _ = conn.WriteToUDP(first, from)
			time.AfterFunc(wait, func() { _, _ = conn.WriteToUDP(msg, from) })
		}
	})
	rtts, err := UDP{}.Probe(context.Background(), conn.LocalAddr().String(), 2, 2*time.Second)
	_ = conn.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(rtts) != 1 || rtts[0] < wait {
		t.Errorf("round trips %v: want one (probe 1's), at least %s (the late echo of probe 0 is not its reply)", rtts, wait)
	}
}
