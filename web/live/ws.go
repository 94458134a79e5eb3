package live

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/coder/websocket"
	"github.com/gofiber/fiber/v2"
	"k8s.io/utils/clock"
)

// WSOptions tunes a websocket endpoint. Zero values take the defaults.
type WSOptions struct {
	// WriteTimeout bounds one message write (default 5s).
	WriteTimeout time.Duration
	// PingInterval is how often the server pings an idle browser so dead
	// peers are noticed (default 20s).
	PingInterval time.Duration
	// Log receives connection errors (nil discards them).
	Log *slog.Logger
	// End, when set, says when the request's login session ends: ended is
	// closed at a logout, at is its expiry (zero: none). The socket is then
	// closed with StatusSessionEnded, so that the page can say so instead
	// of showing stale state as live.
	End func(c *fiber.Ctx) (ended <-chan struct{}, at time.Time)
	// Clock measures the session expiry (default the real clock).
	Clock clock.Clock
}

// StatusSessionEnded is the close code of a socket whose login session
// ended (logout, expiry): the browser must log in again, not reconnect.
// 4000–4999 are the application's codes (RFC 6455 §7.4.2).
const StatusSessionEnded websocket.StatusCode = 4001

func (o WSOptions) withDefaults() WSOptions {
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 5 * time.Second
	}
	if o.PingInterval <= 0 {
		o.PingInterval = 20 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return o
}

// Handler serves hub's messages on a websocket. Fiber's net/http adaptor
// offers no http.Hijacker, so the handler takes the raw connection from
// fasthttp (HijackSetNoResponse + Hijack) and hands coder/websocket a small
// hijack-capable ResponseWriter over it. The handshake (including the
// same-origin check on the Origin header) is coder/websocket's own. base
// bounds the lifetime of every connection (cancel it to close them all).
// Authentication must run before this handler (as Fiber middleware).
func Handler(base context.Context, hub *Hub, opts WSOptions) fiber.Handler {
	opts = opts.withDefaults()
	return func(c *fiber.Ctx) error {
		if !isUpgrade(c) {
			return fiber.NewError(fiber.StatusUpgradeRequired, "this endpoint speaks websocket only")
		}
		req, err := copyRequest(base, c)
		if err != nil {
			return fiber.NewError(fiber.StatusBadRequest, err.Error())
		}
		var sess session
		if opts.End != nil {
			sess.ended, sess.at = opts.End(c)
		}
		fctx := c.Context()
		fctx.HijackSetNoResponse(true)
		fctx.Hijack(func(conn net.Conn) {
			// fasthttp may have armed read/write deadlines for the HTTP
			// exchange; the websocket manages its own.
			_ = conn.SetDeadline(time.Time{})
			w := newHijackWriter(conn)
			ws, err := websocket.Accept(w, req, nil)
			if err != nil {
				opts.Log.Debug("websocket handshake refused", "err", err)
				return
			}
			serve(base, ws, hub, opts, sess)
		})
		return nil
	}
}

// session is when a socket's login session ends (zero: never).
type session struct {
	ended <-chan struct{}
	at    time.Time
}

func serve(base context.Context, ws *websocket.Conn, hub *Hub, opts WSOptions, sess session) {
	ctx := ws.CloseRead(base) // the browser sends nothing; this answers pings and notices closes
	client, err := hub.Register(ctx)
	if err != nil {
		_ = ws.Close(websocket.StatusGoingAway, "server stopping")
		return
	}
	defer hub.Unregister(client)
	ping := time.NewTicker(opts.PingInterval)
	defer ping.Stop()
	var expired <-chan time.Time
	if !sess.at.IsZero() {
		t := opts.Clock.NewTimer(sess.at.Sub(opts.Clock.Now()))
		defer t.Stop()
		expired = t.C()
	}
	for {
		select {
		case <-ctx.Done():
			_ = ws.Close(websocket.StatusGoingAway, "server stopping")
			return
		case <-sess.ended:
			_ = ws.Close(StatusSessionEnded, "session ended: logged out")
			return
		case <-expired:
			_ = ws.Close(StatusSessionEnded, "session ended: expired")
			return
		case <-client.Done():
			_ = ws.Close(websocket.StatusTryAgainLater, "disconnected by server")
			return
		case msg := <-client.Send():
			wctx, cancel := context.WithTimeout(ctx, opts.WriteTimeout)
			err := ws.Write(wctx, websocket.MessageText, msg)
			cancel()
			if err != nil {
				opts.Log.Debug("websocket write failed", "err", err)
				_ = ws.CloseNow()
				return
			}
		case <-ping.C:
			pctx, cancel := context.WithTimeout(ctx, opts.WriteTimeout)
			err := ws.Ping(pctx)
			cancel()
			if err != nil {
				_ = ws.CloseNow()
				return
			}
		}
	}
}

func isUpgrade(c *fiber.Ctx) bool {
	return c.Method() == fiber.MethodGet &&
		strings.EqualFold(c.Get(fiber.HeaderUpgrade), "websocket") &&
		strings.Contains(strings.ToLower(c.Get(fiber.HeaderConnection)), "upgrade")
}

// copyRequest builds a net/http request from the fasthttp one, copying every
// byte: fasthttp recycles its buffers once the handler returns, while the
// hijack handler runs later.
func copyRequest(ctx context.Context, c *fiber.Ctx) (*http.Request, error) {
	r, err := http.NewRequestWithContext(ctx, http.MethodGet, string(c.Request().URI().FullURI()), nil)
	if err != nil {
		return nil, fmt.Errorf("websocket request URL: %w", err)
	}
	r.Host = string(c.Request().Host())
	r.RemoteAddr = c.Context().RemoteAddr().String()
	c.Request().Header.VisitAll(func(k, v []byte) {
		r.Header.Add(string(k), string(v))
	})
	return r, nil
}

// hijackWriter is the http.ResponseWriter + http.Hijacker coder/websocket
// needs, over a connection already taken from fasthttp.
type hijackWriter struct {
	conn        net.Conn
	brw         *bufio.ReadWriter
	header      http.Header
	wroteHeader bool
	hijacked    bool
}

func newHijackWriter(conn net.Conn) *hijackWriter {
	return &hijackWriter{
		conn:   conn,
		brw:    bufio.NewReadWriter(bufio.NewReader(conn), bufio.NewWriter(conn)),
		header: make(http.Header),
	}
}

func (w *hijackWriter) Header() http.Header { return w.header }

func (w *hijackWriter) WriteHeader(code int) {
	if w.wroteHeader || w.hijacked {
		return
	}
	w.wroteHeader = true
	if code != http.StatusSwitchingProtocols {
		w.header.Set("Connection", "close")
	}
	fmt.Fprintf(w.brw, "HTTP/1.1 %d %s\r\n", code, http.StatusText(code))
	_ = w.header.Write(w.brw)
	_, _ = w.brw.WriteString("\r\n")
	_ = w.brw.Flush()
}

func (w *hijackWriter) Write(b []byte) (int, error) {
	if w.hijacked {
		return 0, errors.New("connection hijacked")
	}
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	n, err := w.brw.Write(b)
	if err == nil {
		err = w.brw.Flush()
	}
	return n, err
}

func (w *hijackWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if w.hijacked {
		return nil, nil, errors.New("connection already hijacked")
	}
	w.hijacked = true
	if err := w.brw.Flush(); err != nil {
		return nil, nil, fmt.Errorf("flush handshake: %w", err)
	}
	return w.conn, w.brw, nil
}
