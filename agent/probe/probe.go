// Package probe measures latency between clusters over UDP: a provider runs
// an echo Responder (advertised as probeEndpoint), a consumer's Prober sends
// it datagrams and takes the median round trip (reference §6.5).
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

// Payload is the datagram a Prober sends. Any reply counts, so the stock
// ghcr.io/liqotech/udpecho also works as a responder.
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
// address (the experiments). fn must be safe for concurrent use and quick:
// it runs on the responder's read loop.
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
	// 1500 bytes: one Ethernet MTU; probes are 8 bytes, bigger datagrams
	// are echoed truncated, which still counts as a reply.
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

// ProberConfig configures a Prober; zero values take the reference's
// numbers.
type ProberConfig struct {
	// Probes per endpoint (default 5).
	Probes int
	// Timeout per probe (default 300 ms).
	Timeout time.Duration
	// TTL of a cached measurement (default 15 s).
	TTL   time.Duration
	Clock clock.PassiveClock
	// Source is the address probes are sent from (invalid, the zero
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
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Prober{cfg: cfg, cache: map[string]cached{}}
}

// Measure returns the median RTT in milliseconds of every endpoint that
// answered, probing the endpoints concurrently; endpoints with a cached
// result younger than the TTL are not probed again. Endpoints that never
// answered are absent from the result.
func (p *Prober) Measure(ctx context.Context, endpoints []string) map[string]float64 {
	out := map[string]float64{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, ep := range slices.Compact(slices.Sorted(slices.Values(endpoints))) {
		if ep == "" {
			continue
		}
		p.mu.Lock()
		c, ok := p.cache[ep]
		p.mu.Unlock()
		if ok && p.cfg.Clock.Since(c.at) < p.cfg.TTL {
			if c.rtt >= 0 {
				mu.Lock() // probes of other endpoints may be writing out
				out[ep] = c.rtt
				mu.Unlock()
			}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			rtt, err := p.measure(ctx, ep)
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				rtt = -1
			}
			p.mu.Lock()
			p.cache[ep] = cached{rtt: rtt, at: p.cfg.Clock.Now()}
			p.mu.Unlock()
			if rtt >= 0 {
				mu.Lock()
				out[ep] = rtt
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return out
}

// measure sends the probes to ep one after another and returns the median
// of the replies in ms.
func (p *Prober) measure(ctx context.Context, ep string) (float64, error) {
	var d net.Dialer
	if p.cfg.Source.IsValid() {
		d.LocalAddr = net.UDPAddrFromAddrPort(netip.AddrPortFrom(p.cfg.Source, 0))
	}
	conn, err := d.DialContext(ctx, "udp", ep)
	if err != nil {
		return 0, fmt.Errorf("probe endpoint %q: %w", ep, err)
	}
	defer conn.Close()
	buf := make([]byte, 64)
	var rtts []float64
	for range p.cfg.Probes {
		if ctx.Err() != nil {
			break
		}
		start := p.cfg.Clock.Now()
		if err := conn.SetDeadline(start.Add(p.cfg.Timeout)); err != nil {
			return 0, err
		}
		if _, err := conn.Write([]byte(Payload)); err != nil {
			continue
		}
		if _, err := conn.Read(buf); err != nil {
			continue
		}
		rtts = append(rtts, float64(p.cfg.Clock.Since(start).Microseconds())/1000)
	}
	if len(rtts) == 0 {
		return 0, fmt.Errorf("probe endpoint %q: no reply to %d probes", ep, p.cfg.Probes)
	}
	return Median(rtts), nil
}

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
