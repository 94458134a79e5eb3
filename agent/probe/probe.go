// Package probe measures latency between clusters over UDP: a provider runs
// an echo Responder (advertised as probeEndpoint), a consumer's Prober sends
// it datagrams over a Network (UDP, the real one; the experiments simulate
// one) and estimates the path's round trip from the replies.
package probe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
)

// Payload opens every datagram a Prober sends; an 8-byte big-endian
// sequence number follows it, so a late reply to an earlier probe is never
// taken for the reply to a later one. The responder echoes the datagram
// whole, as the stock ghcr.io/liqotech/udpecho does, so that works as a
// responder too.
const Payload = "fa-probe"

// Responder echoes every UDP datagram back to its sender.
type Responder struct {
	conn *net.UDPConn
	// delay is added before every echo, in nanoseconds (see SetDelay).
	delay atomic.Int64
	// delayFor, when set, gives the delay per sender (SetDelayFunc).
	delayFor atomic.Pointer[func(from netip.Addr) time.Duration]
}

// SetDelay adds d before every echo, so one machine can model the network
// distance between clusters (the demo's providers, which move when their
// location changes). It may be called while Serve runs. Each echo waits in
// its own goroutine, so a delay does not queue probes.
func (r *Responder) SetDelay(d time.Duration) { r.delay.Store(int64(d)) }

// SetDelayFunc makes the delay before an echo depend on the sender's
// address (nil: back to SetDelay's), so one machine can model a different
// network distance from each simulated consumer, each on its own loopback
// address (the experiments' UDP network). fn must be safe for concurrent
// use and quick: it runs on the responder's read loop.
func (r *Responder) SetDelayFunc(fn func(from netip.Addr) time.Duration) {
	if fn == nil {
		r.delayFor.Store(nil)
		return
	}
	r.delayFor.Store(&fn)
}

// Listen opens a UDP echo responder on addr ("127.0.0.1:0", ":5000").
func Listen(addr string) (*Responder, error) {
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("probe listen address %q: %w", addr, err)
	}
	conn, err := net.ListenUDP("udp", ua)
	if err != nil {
		return nil, fmt.Errorf("opening the UDP probe responder on %q: %w", addr, err)
	}
	return &Responder{conn: conn}, nil
}

// Addr is the bound address.
func (r *Responder) Addr() *net.UDPAddr { return r.conn.LocalAddr().(*net.UDPAddr) }

// Serve echoes datagrams until ctx ends, then closes the socket.
func (r *Responder) Serve(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { _ = r.conn.Close() })
	defer stop()
	// 1500 bytes: one Ethernet MTU; probes are 16 bytes, bigger datagrams
	// are echoed truncated.
	buf := make([]byte, 1500)
	for {
		n, from, err := r.conn.ReadFromUDP(buf)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("reading a probe: %w", err)
		}
		delay := time.Duration(r.delay.Load())
		if fn := r.delayFor.Load(); fn != nil {
			delay = (*fn)(from.AddrPort().Addr().Unmap())
		}
		if delay <= 0 {
			_, _ = r.conn.WriteToUDP(buf[:n], from)
			continue
		}
		reply := append([]byte(nil), buf[:n]...)
		time.AfterFunc(delay, func() { _, _ = r.conn.WriteToUDP(reply, from) })
	}
}

// Close stops the responder.
func (r *Responder) Close() error { return r.conn.Close() }

// Network carries probes to an endpoint: UDP is the real one; a simulation
// (the experiments') answers from its latency model. It is the only part of
// a measurement that differs between them: the Prober's cache, concurrency
// bound and estimator are the same.
type Network interface {
	// Probe sends n probes to endpoint one after another, each waiting at
	// most timeout for its own reply, and returns the round trip of every
	// probe answered in time (an error, or none, when nothing answered).
	Probe(ctx context.Context, endpoint string, n int, timeout time.Duration) ([]time.Duration, error)
}

// DefaultConcurrency is how many endpoints one Measure probes at once by
// default: more would measure the prober's own scheduling (each endpoint's
// probes are timed by a goroutine that must be scheduled when its reply
// lands), fewer would serialise long lists.
const DefaultConcurrency = 8

// ProberConfig configures a Prober; zero values take the defaults.
type ProberConfig struct {
	// Probes per endpoint (default 5, the reference's).
	Probes int
	// Timeout per probe (default 300 ms).
	Timeout time.Duration
	// TTL of a cached measurement (default 15 s).
	TTL time.Duration
	// Concurrency bounds how many endpoints one Measure probes at once
	// (default DefaultConcurrency).
	Concurrency int
	Clock       clock.PassiveClock
	// Network carries the probes (default UDP from Source, timed by
	// Clock).
	Network Network
	// Source is the address UDP probes are sent from (invalid, the zero
	// value: the kernel's choice). The simulations give each consumer its
	// own loopback address, which a provider's echo can tell apart.
	Source netip.Addr
}

// Prober measures endpoints and caches the results.
type Prober struct {
	cfg   ProberConfig
	mu    sync.Mutex
	cache map[string]cached
}

type cached struct {
	rtt float64 // ms; negative: no reply
	at  time.Time
}

// NewProber returns a Prober.
func NewProber(cfg ProberConfig) *Prober {
	if cfg.Probes <= 0 {
		cfg.Probes = 5
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 300 * time.Millisecond
	}
	if cfg.TTL <= 0 {
		cfg.TTL = 15 * time.Second
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Network == nil {
		cfg.Network = UDP{Source: cfg.Source, Clock: cfg.Clock}
	}
	return &Prober{cfg: cfg, cache: map[string]cached{}}
}

// Measure returns the estimated round trip in milliseconds (Estimate of
// its probes) of every endpoint that answered, probing at most
// Concurrency endpoints at once; endpoints with a cached result younger
// than the TTL are not probed again. Endpoints that never answered are
// absent from the result.
func (p *Prober) Measure(ctx context.Context, endpoints []string) map[string]float64 {
	out := map[string]float64{}
	var mu sync.Mutex // guards out
	var todo []string
	for _, ep := range slices.Compact(slices.Sorted(slices.Values(endpoints))) {
		if ep == "" {
			continue
		}
		p.mu.Lock()
		c, ok := p.cache[ep]
		p.mu.Unlock()
		if !ok || p.cfg.Clock.Since(c.at) >= p.cfg.TTL {
			todo = append(todo, ep)
		} else if c.rtt >= 0 {
			out[ep] = c.rtt
		}
	}
	slots := make(chan struct{}, p.cfg.Concurrency)
	var wg sync.WaitGroup
	for _, ep := range todo {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-slots }()
			rtts, err := p.cfg.Network.Probe(ctx, ep, p.cfg.Probes, p.cfg.Timeout)
			if ctx.Err() != nil {
				return // cancelled: neither an answer nor a silence
			}
			rtt := -1.0
			if err == nil && len(rtts) > 0 {
				rtt = Estimate(rtts)
			}
			p.mu.Lock()
			p.cache[ep] = cached{rtt: rtt, at: p.cfg.Clock.Now()}
			p.mu.Unlock()
			if rtt >= 0 {
				mu.Lock()
				out[ep] = rtt
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return out
}

// Estimate is a path's round trip in ms from its probes' round trips: the
// minimum, as ping's and TCP's min-RTT take it. Queueing and scheduling
// only ever add delay to a probe, so the fastest reply is the closest to
// the path's latency; docs/agents.md has the measurement that chose it
// over the reference's median. rtts must not be empty.
func Estimate(rtts []time.Duration) float64 {
	return ms(slices.Min(rtts))
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Median returns the median of xs (the mean of the middle two for an even
// count); xs must not be empty.
func Median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
