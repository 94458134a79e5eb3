package probe

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"
)

func TestEchoAndProbeOnLoopback(t *testing.T) {
	r, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Serve(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()

	// A silent endpoint: a bound UDP socket that never answers.
	silent, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()

	p := NewProber(ProberConfig{Timeout: 50 * time.Millisecond})
	live := r.Addr().String()
	got := p.Measure(context.Background(), []string{live, silent.LocalAddr().String(), live, ""})
	if len(got) != 1 {
		t.Fatalf("Measure = %v, want only the live endpoint", got)
	}
	if rtt, ok := got[live]; !ok || rtt < 0 || rtt > 50 {
		t.Fatalf("rtt = %v", got)
	}
	// Cached: closing the responder does not change the answer within the TTL.
	cancel()
	t.Logf("responder stopped: %v", <-done)
	done <- nil
	if again := p.Measure(context.Background(), []string{live}); again[live] != got[live] {
		t.Errorf("cached %v, first %v", again, got)
	}
}

func TestMedian(t *testing.T) {
	tests := []struct {
		in   []float64
		want float64
	}{
		{[]float64{5}, 5},
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{9, 1, 1, 1, 100}, 1},
	}
	for _, tc := range tests {
		if got := Median(tc.in); got != tc.want {
			t.Errorf("Median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// TestResponderDelay: an added delay shows in the measured RTT.
func TestResponderDelay(t *testing.T) {
	r, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.SetDelay(30 * time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = r.Serve(ctx) }()
	got := NewProber(ProberConfig{Timeout: 200 * time.Millisecond}).Measure(ctx, []string{r.Addr().String()})
	if rtt, ok := got[r.Addr().String()]; !ok || rtt < 30 || rtt > 150 {
		t.Fatalf("rtt = %v, want ≥ 30 ms (the added delay)", got)
	}
}

// TestResponderDelayPerSender: with a delay function each sender (a
// Prober sending from its own loopback address) sees its own delay.
func TestResponderDelayPerSender(t *testing.T) {
	r, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	near, far := netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.3")
	r.SetDelayFunc(func(from netip.Addr) time.Duration {
		if from == far {
			return 60 * time.Millisecond
		}
		return 0
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = r.Serve(ctx) }()
	ep := r.Addr().String()
	for _, tc := range []struct {
		from     netip.Addr
		min, max float64
	}{{near, 0, 59.9}, {far, 60, 300}} {
		got := NewProber(ProberConfig{Timeout: 300 * time.Millisecond, Source: tc.from}).Measure(ctx, []string{ep})
		if rtt, ok := got[ep]; !ok || rtt < tc.min || rtt > tc.max {
			t.Errorf("from %s: rtt = %v, want %v–%v ms", tc.from, got, tc.min, tc.max)
		}
	}
	r.SetDelayFunc(nil)
	if got := NewProber(ProberConfig{Timeout: 300 * time.Millisecond, Source: far}).Measure(ctx, []string{ep}); got[ep] >= 60 {
		t.Errorf("after SetDelayFunc(nil): rtt %v, want SetDelay's 0", got)
	}
}
