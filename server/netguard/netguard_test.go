package netguard_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/federation-autoscaler/federation-autoscaler/deploy/testpoll"
	"github.com/federation-autoscaler/federation-autoscaler/server/netguard"
)

// patience bounds every wait on a real condition (a loaded 2-core machine
// running the race detector can be slow; nothing here waits for it unless
// something is broken).
const patience = 30 * time.Second

func newGuard(t *testing.T, lim netguard.Limits) (*netguard.Guard, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	g, err := netguard.New(netguard.Options{Limits: lim, Listeners: 1, Registerer: reg, FDLimit: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	return g, reg
}

// value is the value of the series of family name with these labels
// (counter or gauge; 0 when absent).
func value(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if want, ok := labels[l.GetName()]; ok && want != l.GetValue() {
					continue series
				}
			}
			if m.Counter != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return 0
}

func dropped(t *testing.T, reg *prometheus.Registry, listener, reason string) int {
	t.Helper()
	return int(value(t, reg, "fa_listener_dropped_connections_total", map[string]string{"listener": listener, "reason": reason}))
}

// accepted runs Accept until it fails and sends every connection on the
// channel (closed at the end).
func accepted(t *testing.T, ln net.Listener) <-chan net.Conn {
	t.Helper()
	out := make(chan net.Conn, 64)
	go func() {
		defer close(out)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			out <- c
		}
	}()
	return out
}

// dialFrom dials addr from the loopback address src. A refused
// connection may already be reset when connect returns: that is nil.
func dialFrom(t *testing.T, src, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: patience}
	c, err := d.Dial("tcp", addr)
	if errors.Is(err, syscall.ECONNRESET) {
		return nil
	}
	if err != nil {
		t.Fatalf("dial %s from %s: %v", addr, src, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// closedByServer reports whether the server closed c (a read ends with EOF
// or a reset) before the patience ran out.
func closedByServer(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(patience))
	// Whatever the server sent before closing (a TLS 1.3 server's session
	// tickets, say) is read past.
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

// served waits until the server accepted the connection whose client end is
// c, or c was closed by the server; it returns the server end or nil.
func served(t *testing.T, c net.Conn, acc <-chan net.Conn) net.Conn {
	t.Helper()
	closed := make(chan struct{})
	go func() {
		if closedByServer(c) {
			close(closed)
		}
	}()
	timeout := time.After(patience)
	for {
		select {
		case s := <-acc:
			if s.RemoteAddr().String() == c.LocalAddr().String() {
				return s
			}
			t.Fatalf("the server accepted %s, which was refused earlier", s.RemoteAddr())
		case <-closed:
			return nil
		case <-timeout:
			t.Fatalf("connection from %s neither served nor closed within %s", c.LocalAddr(), patience)
		}
	}
}

// TestCaps: connections beyond the per-address or the total cap are closed
// at once and counted; closing a served one frees its slot.
func TestCaps(t *testing.T) {
	type step struct {
		from  string // dial from this loopback address…
		want  bool   // …and expect it served (or refused)
		close int    // or, when > 0, close the close-th served connection (1-based)
	}
	for _, tc := range []struct {
		name          string
		limits        netguard.Limits
		steps         []step
		perIP, total  int
		finalOpenConn int
	}{
		{
			name:   "per-address cap leaves other addresses alone",
			limits: netguard.Limits{MaxConns: 10, MaxConnsPerIP: 2},
			steps: []step{
				{from: "127.0.0.1", want: true}, {from: "127.0.0.1", want: true}, {from: "127.0.0.1", want: false},
				{from: "127.0.0.2", want: true}, {from: "127.0.0.2", want: true}, {from: "127.0.0.2", want: false},
			},
			perIP: 2, finalOpenConn: 4,
		},
		{
			name:   "total cap",
			limits: netguard.Limits{MaxConns: 3, MaxConnsPerIP: 3},
			steps: []step{
				{from: "127.0.0.1", want: true}, {from: "127.0.0.1", want: true}, {from: "127.0.0.2", want: true},
				{from: "127.0.0.2", want: false}, {from: "127.0.0.3", want: false},
			},
			total: 2, finalOpenConn: 3,
		},
		{
			name:   "a closed connection frees its slot",
			limits: netguard.Limits{MaxConns: 10, MaxConnsPerIP: 1},
			steps: []step{
				{from: "127.0.0.1", want: true}, {from: "127.0.0.1", want: false},
				{close: 1}, {from: "127.0.0.1", want: true}, {from: "127.0.0.1", want: false},
			},
			perIP: 2, finalOpenConn: 1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, reg := newGuard(t, tc.limits)
			ln, err := g.Listen(context.Background(), "test", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			acc := accepted(t, ln)
			var servers []net.Conn
			for i, s := range tc.steps {
				if s.close > 0 {
					_ = servers[s.close-1].Close()
					continue
				}
				var srv net.Conn
				if c := dialFrom(t, s.from, ln.Addr().String()); c != nil {
					if _, err := c.Write([]byte("x")); err != nil && s.want {
						t.Fatalf("step %d: write: %v", i, err)
					}
					srv = served(t, c, acc)
				}
				if (srv != nil) != s.want {
					t.Fatalf("step %d (from %s): served = %v, want %v", i, s.from, srv != nil, s.want)
				}
				if srv != nil {
					servers = append(servers, srv)
				}
			}
			if got := dropped(t, reg, "test", netguard.ReasonMaxConnsPerIP); got != tc.perIP {
				t.Errorf("dropped for the per-address cap: %d, want %d", got, tc.perIP)
			}
			if got := dropped(t, reg, "test", netguard.ReasonMaxConns); got != tc.total {
				t.Errorf("dropped for the total cap: %d, want %d", got, tc.total)
			}
			if got := ln.Open(); got != tc.finalOpenConn {
				t.Errorf("open connections: %d, want %d", got, tc.finalOpenConn)
			}
			if got := value(t, reg, "fa_listener_open_connections", map[string]string{"listener": "test"}); int(got) != tc.finalOpenConn {
				t.Errorf("fa_listener_open_connections = %v, want %d", got, tc.finalOpenConn)
			}
		})
	}
}

func selfSigned(t *testing.T) *tls.Config {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "netguard test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
}

// TestHandshakeGate: a connection reaches Accept only once it has finished
// its TLS handshake and sent its first byte (plain: its first byte); a
// silent or broken one is closed without the server seeing it.
func TestHandshakeGate(t *testing.T) {
	serverTLS := selfSigned(t)
	const get = "GET / HTTP/1.1\r\nHost: x\r\n\r\n"
	for _, tc := range []struct {
		name    string
		tls     bool
		timeout time.Duration
		client  func(t *testing.T, c net.Conn)
		served  bool
		reason  string
		check   func(t *testing.T, srv net.Conn)
	}{
		{name: "silent TLS client", tls: true, timeout: 100 * time.Millisecond,
			client: func(*testing.T, net.Conn) {}, reason: netguard.ReasonHandshakeTimeout},
		{name: "TLS client stalling mid-record", tls: true, timeout: 100 * time.Millisecond,
			client: func(t *testing.T, c net.Conn) { _, _ = c.Write([]byte{0x16, 0x03, 0x01, 0x01}) }, reason: netguard.ReasonHandshakeTimeout},
		{name: "TLS client that sends no request", tls: true, timeout: 300 * time.Millisecond,
			client: func(t *testing.T, c net.Conn) {
				tc := tls.Client(c, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13}) //nolint:gosec // self-signed test server
				if err := tc.Handshake(); err != nil {
					t.Fatalf("TLS handshake: %v", err)
				}
			}, reason: netguard.ReasonHandshakeTimeout},
		{name: "plain HTTP on a TLS listener", tls: true, timeout: patience,
			client: func(t *testing.T, c net.Conn) { _, _ = c.Write([]byte(get)) }, reason: netguard.ReasonHandshakeFailed},
		{name: "TLS client", tls: true, timeout: patience, served: true,
			client: func(t *testing.T, c net.Conn) {
				go func() {
					tc := tls.Client(c, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13}) //nolint:gosec // self-signed test server
					if _, err := tc.Write([]byte("ping")); err != nil {
						t.Errorf("TLS client: %v", err)
					}
				}()
			},
			check: func(t *testing.T, srv net.Conn) {
				// What servers read the peer's certificate through.
				tc, ok := srv.(interface{ ConnectionState() tls.ConnectionState })
				if !ok || !tc.ConnectionState().HandshakeComplete {
					t.Fatalf("Accept returned %T, want a TLS connection with its handshake complete", srv)
				}
				buf := make([]byte, 4)
				if _, err := io.ReadFull(srv, buf); err != nil || string(buf) != "ping" {
					t.Fatalf("read %q, %v; want ping", buf, err)
				}
			}},
		{name: "silent plain client", timeout: 100 * time.Millisecond,
			client: func(*testing.T, net.Conn) {}, reason: netguard.ReasonHandshakeTimeout},
		{name: "plain client that hangs up", timeout: patience,
			client: func(t *testing.T, c net.Conn) { _ = c.(*net.TCPConn).CloseWrite() }, reason: netguard.ReasonHandshakeFailed},
		{name: "plain client", timeout: patience, served: true,
			client: func(t *testing.T, c net.Conn) { _, _ = c.Write([]byte(get)) },
			check: func(t *testing.T, srv net.Conn) {
				buf := make([]byte, len(get))
				if _, err := io.ReadFull(srv, buf); err != nil || string(buf) != get {
					t.Fatalf("the server read %q, %v; want the request intact (first byte replayed)", buf, err)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, reg := newGuard(t, netguard.Limits{MaxConns: 8, MaxConnsPerIP: 8, HandshakeTimeout: tc.timeout})
			inner, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			var ln *netguard.Listener
			if tc.tls {
				ln = g.WrapTLS("test", inner, serverTLS)
			} else {
				ln = g.Wrap("test", inner)
			}
			defer ln.Close()
			acc := accepted(t, ln)
			c := dialFrom(t, "127.0.0.1", ln.Addr().String())
			tc.client(t, c)
			if !tc.served {
				if !closedByServer(c) {
					t.Fatalf("the server did not close the connection within %s", patience)
				}
				testpoll.Until(t, patience, "the drop to be counted as "+tc.reason, func() bool { return dropped(t, reg, "test", tc.reason) == 1 })
				testpoll.Until(t, patience, "the slot to be freed", func() bool { return ln.Open() == 0 })
				select {
				case s := <-acc:
					t.Fatalf("Accept returned %s, which never passed the gate", s.RemoteAddr())
				default:
				}
				for _, r := range []string{netguard.ReasonHandshakeFailed, netguard.ReasonHandshakeTimeout} {
					if want := map[bool]int{true: 1}[r == tc.reason]; dropped(t, reg, "test", r) != want {
						t.Fatalf("dropped{reason=%s} = %d, want %d", r, dropped(t, reg, "test", r), want)
					}
				}
				return
			}
			select {
			case s := <-acc:
				tc.check(t, s)
				_ = s.Close()
			case <-time.After(patience):
				t.Fatalf("the connection was not served within %s", patience)
			}
		})
	}
}

// scripted fails Accept with the queued errors, then accepts for real.
type scripted struct {
	net.Listener
	mu   sync.Mutex
	errs []error
}

func (s *scripted) Accept() (net.Conn, error) {
	s.mu.Lock()
	if len(s.errs) > 0 {
		err := s.errs[0]
		s.errs = s.errs[1:]
		s.mu.Unlock()
		return nil, err
	}
	s.mu.Unlock()
	return s.Listener.Accept()
}

func listenScripted(t *testing.T, errs ...error) *scripted {
	t.Helper()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return &scripted{Listener: inner, errs: errs}
}

func acceptErr(e error) error {
	return &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", e)}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

// TestAcceptErrors: temporary accept errors are retried and never reach
// the server; a permanent one and Close end Accept.
func TestAcceptErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		errs    []error
		retried int
		wantErr error // nil: a connection is served after the errors
	}{
		{name: "out of descriptors, aborted, timeout", errs: []error{acceptErr(syscall.EMFILE), acceptErr(syscall.ENFILE), acceptErr(syscall.ECONNABORTED), timeoutErr{}}, retried: 4},
		{name: "permanent", errs: []error{acceptErr(syscall.EMFILE), acceptErr(syscall.EBADF)}, retried: 1, wantErr: syscall.EBADF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			g, err := netguard.New(netguard.Options{Listeners: 1, Registerer: reg, FDLimit: 1 << 20})
			if err != nil {
				t.Fatal(err)
			}
			s := listenScripted(t, tc.errs...)
			ln := g.Wrap("test", s)
			defer ln.Close()
			type result struct {
				c   net.Conn
				err error
			}
			res := make(chan result, 1)
			go func() { c, err := ln.Accept(); res <- result{c, err} }()
			if tc.wantErr == nil {
				c := dialFrom(t, "127.0.0.1", ln.Addr().String())
				_, _ = c.Write([]byte("x"))
			}
			var r result
			select {
			case r = <-res:
			case <-time.After(patience):
				t.Fatal("Accept did not return")
			}
			if tc.wantErr != nil {
				if !errors.Is(r.err, tc.wantErr) {
					t.Fatalf("Accept: %v, want %v", r.err, tc.wantErr)
				}
			} else if r.err != nil {
				t.Fatalf("Accept returned %v; temporary errors must be retried", r.err)
			} else {
				_ = r.c.Close()
			}
			if acceptErrors := value(t, reg, "fa_listener_accept_errors_total", map[string]string{"listener": "test"}); int(acceptErrors) != tc.retried {
				t.Fatalf("fa_listener_accept_errors_total = %v, want %d", acceptErrors, tc.retried)
			}
		})
	}
}

// TestCloseEndsTheGate: Close ends Accept with net.ErrClosed and closes a
// connection still waiting in the gate.
func TestCloseEndsTheGate(t *testing.T) {
	g, _ := newGuard(t, netguard.Limits{HandshakeTimeout: netguard.MaxHandshakeTimeout})
	ln, err := g.Listen(context.Background(), "test", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	acc := accepted(t, ln)
	c := dialFrom(t, "127.0.0.1", ln.Addr().String())
	testpoll.Until(t, patience, "the connection in the gate", func() bool { return ln.Open() == 1 })
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	if !closedByServer(c) {
		t.Fatal("a connection in the gate outlived Close")
	}
	if _, ok := <-acc; ok {
		t.Fatal("Accept returned a connection after Close")
	}
	if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close: %v, want net.ErrClosed", err)
	}
	if ln.Open() != 0 {
		t.Fatalf("%d connections still counted after Close", ln.Open())
	}
	if err := ln.Close(); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
}

// TestFiberSurvivesTemporaryAcceptErrors is the reason this package exists:
// fasthttp (under Fiber) ends Listener on an EMFILE; behind the guard it
// keeps serving.
func TestFiberSurvivesTemporaryAcceptErrors(t *testing.T) {
	for _, guarded := range []bool{false, true} {
		t.Run(fmt.Sprintf("guarded=%v", guarded), func(t *testing.T) {
			s := listenScripted(t, acceptErr(syscall.EMFILE), acceptErr(syscall.EMFILE))
			var ln net.Listener = s
			if guarded {
				g, _ := newGuard(t, netguard.Limits{})
				ln = g.Wrap("test", s)
			}
			app := fiber.New(fiber.Config{DisableStartupMessage: true})
			app.Get("/", func(c *fiber.Ctx) error { return c.SendString("ok") })
			done := make(chan error, 1)
			go func() { done <- app.Listener(ln) }()
			defer func() { _ = app.Shutdown(); _ = ln.Close() }()
			if !guarded {
				select {
				case err := <-done:
					if !errors.Is(err, syscall.EMFILE) {
						t.Fatalf("unguarded fasthttp ended with %v, want EMFILE", err)
					}
				case <-time.After(patience):
					t.Fatal("unguarded fasthttp kept serving after EMFILE: the guard may no longer be needed")
				}
				return
			}
			client := &http.Client{Timeout: patience}
			resp, err := client.Get("http://" + ln.Addr().String() + "/")
			if err != nil {
				t.Fatalf("GET through the guarded listener: %v", err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || string(body) != "ok" {
				t.Fatalf("GET: %d %q", resp.StatusCode, body)
			}
			select {
			case err := <-done:
				t.Fatalf("Fiber stopped serving: %v", err)
			default:
			}
		})
	}
}
