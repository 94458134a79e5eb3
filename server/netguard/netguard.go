// Package netguard keeps a process's TCP listeners serving through
// connection floods and resource pressure. A guarded listener
//
//   - retries temporary accept errors (EMFILE, ENFILE, ECONNABORTED,
//     timeouts, …) with a backoff of 5 ms doubling to 1 s, as net/http and
//     grpc-go do, and never returns them: fasthttp (under Fiber) ends its
//     Serve on any accept error but a timeout, and the process with it;
//   - closes at once (with a reset) a connection beyond its cap per remote
//     address or in total, so that a flood never takes the process to its
//     file-descriptor limit and its own work (store, outgoing calls) keeps
//     descriptors;
//   - hands a connection to the server only once it has finished its TLS
//     handshake (TLS listeners) and sent its first byte (of the request,
//     inside TLS) within the handshake timeout: a silent peer is closed
//     after a few seconds without the server ever seeing it, and a server
//     shutting down never waits for a connection that carries no request.
//
// A process builds one Guard from its flags (Limits.AddFlags) and opens
// every listener through it (Guard.Listen, Guard.Wrap, Guard.WrapTLS).
package netguard

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Reasons a connection is dropped (the reason label of
// fa_listener_dropped_connections_total).
const (
	ReasonMaxConns         = "max_conns"
	ReasonMaxConnsPerIP    = "max_conns_per_ip"
	ReasonHandshakeTimeout = "handshake_timeout"
	ReasonHandshakeFailed  = "handshake_failed"
)

// Accept backoff, as net/http's Server.Serve.
const (
	minAcceptDelay = 5 * time.Millisecond
	maxAcceptDelay = time.Second
)

// logEvery is the least time between two warnings of one kind on one
// listener; the suppressed ones are counted in the next.
const logEvery = 10 * time.Second

// Options configure a Guard.
type Options struct {
	// Limits are the process's flags; zero fields are automatic.
	Limits Limits
	// Listeners is how many listeners the process opens through the
	// Guard: the automatic caps share the file descriptors among them.
	Listeners int
	// Registerer, when set, receives the fa_listener_* metrics.
	Registerer prometheus.Registerer
	// Logger receives rate-limited warnings (default: discard).
	Logger *slog.Logger
	// FDLimit overrides the process's file-descriptor limit (tests).
	FDLimit uint64
}

// Guard opens the guarded listeners of one process.
type Guard struct {
	limits  Limits
	metrics *metrics
	log     *slog.Logger
}

// New resolves o.Limits for o.Listeners listeners and registers the
// metrics. The error says which flag to change.
func New(o Options) (*Guard, error) {
	fds := o.FDLimit
	if fds == 0 {
		fds = FDLimit()
	}
	lim, err := o.Limits.Resolve(o.Listeners, fds)
	if err != nil {
		return nil, err
	}
	g := &Guard{limits: lim, log: o.Logger}
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	if o.Registerer != nil {
		if g.metrics, err = newMetrics(o.Registerer); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// Limits are the resolved limits of each listener.
func (g *Guard) Limits() Limits { return g.limits }

// Listen listens on the TCP address addr and guards it; name labels it in
// logs and metrics.
func (g *Guard) Listen(ctx context.Context, name, addr string) (*Listener, error) {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return g.Wrap(name, ln), nil
}

// Wrap guards a plain listener; closing the result closes ln.
func (g *Guard) Wrap(name string, ln net.Listener) *Listener { return g.wrap(name, ln, nil) }

// WrapTLS guards ln and serves TLS with cfg on it: Accept returns
// *tls.Conn values whose handshake is complete.
func (g *Guard) WrapTLS(name string, ln net.Listener, cfg *tls.Config) *Listener {
	return g.wrap(name, ln, cfg)
}

func (g *Guard) wrap(name string, ln net.Listener, cfg *tls.Config) *Listener {
	ctx, cancel := context.WithCancel(context.Background())
	l := &Listener{
		inner: ln, name: name, limits: g.limits, tls: cfg,
		log:     g.log.With("listener", name, "addr", ln.Addr().String()),
		metrics: g.metrics.forListener(name, g.limits),
		ctx:     ctx, cancel: cancel,
		ready:  make(chan net.Conn),
		done:   make(chan struct{}),
		perIP:  map[netip.Addr]int{},
		warned: map[string]*warning{},
	}
	l.wg.Add(1)
	go l.acceptLoop()
	return l
}

// Listener is a guarded net.Listener. Its accept loop runs from Wrap until
// Close; Accept only returns connections that passed the gate, or the
// error that ended the loop (the inner listener was closed, or failed
// with a permanent error).
type Listener struct {
	inner   net.Listener
	name    string
	limits  Limits
	tls     *tls.Config
	log     *slog.Logger
	metrics listenerMetrics

	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	ready  chan net.Conn // gated connections for Accept
	done   chan struct{} // closed when the accept loop has ended
	err    error         // why it ended; written before done is closed
	wg     sync.WaitGroup
	once   sync.Once
	cerr   error

	mu     sync.Mutex
	open   int
	perIP  map[netip.Addr]int
	warned map[string]*warning
}

// warning throttles one kind of log line.
type warning struct {
	last       time.Time
	suppressed int
}

var _ net.Listener = (*Listener)(nil)

// Accept returns the next connection that passed the gate.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ready:
		return c, nil
	case <-l.done:
		return nil, l.err
	}
}

// Close stops accepting, closes the inner listener and every connection
// still in the gate, and waits for them.
func (l *Listener) Close() error {
	l.once.Do(func() {
		l.cancel()
		l.cerr = l.inner.Close()
		l.wg.Wait()
	})
	return l.cerr
}

// Addr is the inner listener's address.
func (l *Listener) Addr() net.Addr { return l.inner.Addr() }

// Open is the number of connections the listener holds (in the gate or
// handed to the server and not yet closed).
func (l *Listener) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

func (l *Listener) acceptLoop() {
	defer l.wg.Done()
	var delay time.Duration
	for {
		c, err := l.inner.Accept()
		if err != nil {
			if l.ctx.Err() == nil && temporary(err) {
				delay = backoff(delay)
				l.metrics.acceptErrors.Inc()
				l.warn("accept", "Accepting a connection failed; retrying", "err", err, "retryIn", delay)
				t := time.NewTimer(delay)
				select {
				case <-t.C:
					continue
				case <-l.ctx.Done():
					t.Stop()
					err = net.ErrClosed
				}
			}
			l.err = err
			close(l.done)
			return
		}
		delay = 0
		key := peerKey(c.RemoteAddr())
		if reason := l.admit(key); reason != "" {
			l.metrics.dropped(reason)
			reset(c)
			limit := l.limits.MaxConns
			if reason == ReasonMaxConnsPerIP {
				limit = l.limits.MaxConnsPerIP
			}
			l.warn(reason, "Connection refused: the listener is at its limit", "reason", reason, "limit", limit, "peer", c.RemoteAddr().String())
			continue
		}
		l.metrics.open.Inc()
		gc := &conn{Conn: c, release: func() { l.release(key) }}
		l.wg.Add(1)
		go l.gate(gc)
	}
}

// backoff is the wait after a temporary accept error that followed a wait
// of d: 5 ms, doubling to 1 s.
func backoff(d time.Duration) time.Duration {
	return min(max(2*d, minAcceptDelay), maxAcceptDelay)
}

// admit counts a new connection from key, or says which cap it is over.
func (l *Listener) admit(key netip.Addr) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open >= l.limits.MaxConns {
		return ReasonMaxConns
	}
	if l.perIP[key] >= l.limits.MaxConnsPerIP {
		return ReasonMaxConnsPerIP
	}
	l.open++
	l.perIP[key]++
	return ""
}

func (l *Listener) release(key netip.Addr) {
	l.mu.Lock()
	l.open--
	if l.perIP[key]--; l.perIP[key] <= 0 {
		delete(l.perIP, key)
	}
	l.mu.Unlock()
	l.metrics.open.Dec()
}

// gate hands c to Accept once it has spoken within the handshake timeout.
func (l *Listener) gate(c *conn) {
	defer l.wg.Done()
	ctx, cancel := context.WithTimeout(l.ctx, l.limits.HandshakeTimeout)
	defer cancel()
	var out net.Conn = c
	var err error
	if l.tls != nil {
		tc := tls.Server(c, l.tls)
		out = tc
		if err = tc.HandshakeContext(ctx); err == nil {
			// The request's first byte too: a client that finished its
			// handshake but sends nothing (Go's transport dials spare
			// connections and may never use them) would count as busy for
			// fasthttp from its first read, and hold a graceful shutdown
			// until its read timeout.
			rc := &tlsConn{Conn: tc}
			if err = rc.first.await(ctx, tc, tc.NetConn()); err == nil {
				out = rc
			}
		}
	} else {
		err = c.first.await(ctx, c.Conn, c.Conn)
	}
	if err != nil {
		switch {
		case l.ctx.Err() != nil: // closing
		case ctx.Err() != nil:
			l.metrics.dropped(ReasonHandshakeTimeout)
			l.log.Debug("Connection closed: no handshake in time", "peer", c.RemoteAddr().String(), "timeout", l.limits.HandshakeTimeout)
			reset(c.Conn)
		case errors.Is(err, io.EOF):
			l.metrics.dropped(ReasonHandshakeFailed) // e.g. a TCP probe
		default:
			l.metrics.dropped(ReasonHandshakeFailed)
			l.warn("handshake", "Connection closed: handshake failed", "peer", c.RemoteAddr().String(), "err", err)
		}
		_ = out.Close()
		return
	}
	select {
	case l.ready <- out:
	case <-l.ctx.Done():
		_ = out.Close()
	case <-l.done:
		_ = out.Close()
	}
}

// warn logs at most once per logEvery for each kind.
func (l *Listener) warn(kind, msg string, args ...any) {
	now := time.Now()
	l.mu.Lock()
	w := l.warned[kind]
	if w == nil {
		w = &warning{}
		l.warned[kind] = w
	}
	if !w.last.IsZero() && now.Sub(w.last) < logEvery {
		w.suppressed++
		l.mu.Unlock()
		return
	}
	suppressed := w.suppressed
	w.last, w.suppressed = now, 0
	l.mu.Unlock()
	if suppressed > 0 {
		args = append(args, "suppressedSinceLast", suppressed)
	}
	l.log.Warn(msg, args...)
}

// conn is a counted connection: closing it frees its slot once. On a plain
// listener it replays the first byte the gate read.
type conn struct {
	net.Conn
	release func()
	once    sync.Once
	first   firstByte
}

func (c *conn) Read(p []byte) (int, error) {
	if n := c.first.replay(p); n > 0 {
		return n, nil
	}
	return c.Conn.Read(p)
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// CloseWrite half-closes a TCP connection (net/http uses it before closing
// after an error answer).
func (c *conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// tlsConn is a TLS connection whose first application byte the gate has
// read; it replays it. Embedding *tls.Conn keeps ConnectionState and
// Handshake, which servers use to read the peer's certificate.
type tlsConn struct {
	*tls.Conn
	first firstByte
}

func (c *tlsConn) Read(p []byte) (int, error) {
	if n := c.first.replay(p); n > 0 {
		return n, nil
	}
	return c.Conn.Read(p)
}

// firstByte is the first byte a peer sent, read by the gate and replayed
// to the server.
type firstByte struct {
	b        [1]byte
	buffered bool
}

// await reads the first byte from r unless ctx ends first (the deadline is
// set on raw, the TCP connection under r).
func (f *firstByte) await(ctx context.Context, r io.Reader, raw net.Conn) error {
	stop := context.AfterFunc(ctx, func() { _ = raw.SetReadDeadline(time.Unix(1, 0)) })
	n, err := r.Read(f.b[:])
	if !stop() {
		// The deadline was (or is being) set: the connection is late, or
		// the listener closing; either way it goes.
		return fmt.Errorf("no first byte: %w", ctx.Err())
	}
	if n == 0 {
		if err == nil {
			err = io.ErrNoProgress
		}
		return err
	}
	f.buffered = true
	return nil
}

// replay copies the buffered byte into p once; it returns 0 when there is
// none (or p is empty).
func (f *firstByte) replay(p []byte) int {
	if !f.buffered || len(p) == 0 {
		return 0
	}
	p[0] = f.b[0]
	f.buffered = false
	return 1
}

// reset closes c with a TCP reset: a refused flood connection leaves no
// TIME_WAIT state behind.
func reset(c net.Conn) {
	if tc, ok := c.(interface{ SetLinger(int) error }); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// peerKey is the address a connection is counted under: the IPv4 address,
// or the /64 of an IPv6 one; the zero Addr for other kinds of peers.
func peerKey(a net.Addr) netip.Addr {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return netip.Addr{}
	}
	ip := ta.AddrPort().Addr().Unmap()
	if ip.Is6() {
		if p, err := ip.Prefix(64); err == nil {
			return p.Addr()
		}
	}
	return ip
}

// temporary reports whether an accept error is worth retrying: running out
// of descriptors or memory, a connection aborted or reset before it was
// accepted, a timeout, or a network error the kernel passes on from the
// new connection (accept(2)). Anything else (a closed or invalid socket)
// is permanent.
func temporary(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	for _, e := range []syscall.Errno{
		syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM,
		syscall.ECONNABORTED, syscall.ECONNRESET, syscall.EINTR, syscall.EAGAIN, syscall.ETIMEDOUT,
		syscall.EPROTO, syscall.EPERM, syscall.ENETDOWN, syscall.ENETUNREACH, syscall.EHOSTDOWN, syscall.EHOSTUNREACH, syscall.ENOPROTOOPT,
	} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
