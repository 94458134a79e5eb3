// Package brokerclient is the agents' client for the Broker API v1: HTTP/1.1
// over the join bundle's mTLS, per-attempt timeouts, retries with backoff on
// network errors and 5xx, 429 with Retry-After, request ids reused across the
// retries of one logical call, failover across the replicas of an HA broker
// (on a transport failure or a standby's 503), typed errors that keep the broker's status,
// code and message, and long-poll detection with a fallback to polling. The
// package also holds the instruction loop both agent roles share.
package brokerclient

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"k8s.io/utils/clock"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// Defaults of Config (reference §2.10, §9.2).
const (
	DefaultAttemptTimeout = 10 * time.Second
	DefaultMaxRetries     = 3
	DefaultBaseBackoff    = 100 * time.Millisecond
	DefaultMaxBackoff     = 2 * time.Second
	// DefaultMaxRetryAfter bounds how long a 429's Retry-After may hold a
	// call; a broker asking for longer is answered with the 429 itself.
	DefaultMaxRetryAfter = 30 * time.Second
	// DefaultTakeoverHold is how long a call that finds no serving replica
	// keeps retrying past its MaxRetries: an HA broker's takeover takes 3-4.4 s
	// (docs/operations.md), and the Cluster Autoscaler's calls through the
	// consumer agent have 5 s (its grpc_timeout), so a call made as the
	// leader dies is answered by the new one instead of failing.
	DefaultTakeoverHold = 4500 * time.Millisecond
	// DefaultMaxIdleConnsPerHost is how many idle keep-alive connections to
	// the broker the agent keeps. HTTP/1.1 carries one request per
	// connection at a time, so a burst of n concurrent calls needs n
	// connections; with fewer kept idle, every burst re-opens the rest with
	// a full mTLS handshake each (on 2 cores ~15–20 ms for the late
	// requests of a 10-reservation fan-out). It covers the adapter's
	// IncreaseSize parallelism (16) plus the long poll and the heartbeat.
	DefaultMaxIdleConnsPerHost = 32
	// maxBody bounds a response body read into memory; the largest legit
	// answer (an instruction list with inline kubeconfigs) is far smaller.
	maxBody = 8 << 20
)

// Config configures a Client.
type Config struct {
	// BaseURL is the broker's https URL; any path is ignored.
	BaseURL string
	// AlternateURLs are the other replicas of an HA broker (the join
	// bundle's alternateBrokerURLs). The client sends to one URL at a time
	// and moves to the next on a transport failure or a 5xx (a standby
	// answers 503), so it stays with the leader once it found it.
	AlternateURLs []string
	// TLS is the client's mTLS configuration (pki.Bundle.ClientTLSConfig).
	// Ignored when Transport is set.
	TLS *tls.Config
	// Transport overrides the HTTP transport (tests).
	Transport http.RoundTripper
	// AttemptTimeout bounds one HTTP attempt (default 10 s). A long poll
	// gets its wait on top.
	AttemptTimeout time.Duration
	// MaxRetries is the number of extra attempts after the first on a
	// transient failure (default 3). Negative means none.
	MaxRetries int
	// BaseBackoff and MaxBackoff shape the backoff: BaseBackoff doubling
	// each retry, capped at MaxBackoff (defaults 100 ms, 2 s).
	BaseBackoff, MaxBackoff time.Duration
	// MaxRetryAfter caps how long a 429 Retry-After is honoured (default 30 s).
	MaxRetryAfter time.Duration
	// TakeoverHold: a call whose every replica is unreachable or answers
	// 503 (a takeover, or a broker starting) keeps retrying past
	// MaxRetries until its waits and its age reach this (default
	// DefaultTakeoverHold; negative: no hold). The caller's context
	// still ends it at once.
	TakeoverHold time.Duration
	// Clock drives backoff waits (default the real clock).
	Clock clock.Clock
	// NewRequestID mints the X-Request-Id of one logical call (default UUID v4).
	NewRequestID func() string
	// OnResponse, when set, is called after every HTTP response from the
	// broker, whatever its status: the broker is reachable. Health uses it.
	OnResponse func()
	// Observe, when set, is called once per logical call with the route
	// name, the final HTTP status (0 for a transport failure) and the
	// duration. Metrics use it.
	Observe func(route string, status int, d time.Duration)
	// Logger receives debug lines about retries (default discards).
	Logger *slog.Logger
}

// Client calls the Broker API v1. It is safe for concurrent use.
type Client struct {
	// bases are the broker's URLs, BaseURL first; current indexes the one
	// calls go to (modulo len(bases)).
	bases    []*url.URL
	current  atomic.Uint64
	serving  atomic.Uint64 // 1 + the index that last served (0: none yet)
	http     *http.Client
	cfg      Config
	longPoll atomic.Bool
}

// New validates cfg and returns a Client.
func New(cfg Config) (*Client, error) {
	var bases []*url.URL
	for _, raw := range append([]string{cfg.BaseURL}, cfg.AlternateURLs...) {
		u, err := url.Parse(raw)
		if err != nil {
			return nil, fmt.Errorf("broker URL %q: %w", raw, err)
		}
		if u.Scheme != "https" && u.Scheme != "http" || u.Host == "" {
			return nil, fmt.Errorf("broker URL %q: want https://<host>[:port]", raw)
		}
		u.Path, u.RawQuery, u.Fragment = "", "", ""
		bases = append(bases, u)
	}
	if cfg.AttemptTimeout <= 0 {
		cfg.AttemptTimeout = DefaultAttemptTimeout
	}
	if cfg.MaxRetries == 0 {
		cfg.MaxRetries = DefaultMaxRetries
	}
	if cfg.MaxRetries < 0 {
		cfg.MaxRetries = 0
	}
	if cfg.BaseBackoff <= 0 {
		cfg.BaseBackoff = DefaultBaseBackoff
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = DefaultMaxBackoff
	}
	if cfg.MaxRetryAfter <= 0 {
		cfg.MaxRetryAfter = DefaultMaxRetryAfter
	}
	if cfg.TakeoverHold == 0 {
		cfg.TakeoverHold = DefaultTakeoverHold
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.NewRequestID == nil {
		cfg.NewRequestID = func() string { return uuid.NewString() }
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	rt := cfg.Transport
	if rt == nil {
		rt = NewTransport(cfg.TLS, cfg.AttemptTimeout)
	}
	return &Client{bases: bases, http: &http.Client{Transport: rt}, cfg: cfg}, nil
}

// NewTransport returns the agents' HTTP transport to the broker, the one New
// uses when Config.Transport is nil: HTTP/1.1 only over tlsCfg (cloned), with
// DefaultMaxIdleConnsPerHost keep-alive connections so that a concurrent
// burst (the adapter's IncreaseSize fan-out) reuses its connections instead
// of paying an mTLS handshake per request next time. Callers that need to
// close idle connections themselves (tests) build it here and pass it as
// Config.Transport.
func NewTransport(tlsCfg *tls.Config, handshakeTimeout time.Duration) *http.Transport {
	if handshakeTimeout <= 0 {
		handshakeTimeout = DefaultAttemptTimeout
	}
	return &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		TLSClientConfig:     tlsCfg.Clone(),
		ForceAttemptHTTP2:   false,
		MaxIdleConnsPerHost: DefaultMaxIdleConnsPerHost,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: handshakeTimeout,
		// An empty, non-nil map turns HTTP/2 off: the agents speak
		// HTTP/1.1 only, like the reference agents (§1).
		TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{},
	}
}

// Error is a broker answer with a non-2xx status. It keeps the HTTP status,
// the wire code, message and request id so that the consumer's local API can
// pass them through unchanged. errors.As(err, **api.Error) also matches it.
type Error struct {
	Status    int
	Code      string
	Message   string
	RequestID string
	Details   map[string]any
	// RetryAfter is the parsed Retry-After of a 429 (0 when absent).
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	return fmt.Sprintf("broker answered %d %s: %s", e.Status, e.Code, e.Message)
}

// Unwrap exposes the wire error as an *api.Error.
func (e *Error) Unwrap() error {
	return &api.Error{Code: e.Code, Message: e.Message, Details: e.Details}
}

// StatusOf returns the broker's HTTP status carried by err, or 0 when err
// is not a broker answer (a transport failure).
func StatusOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// Close drops the client's idle keep-alive connections (call it when the
// agent stops, so the broker's graceful shutdown need not wait for them).
func (c *Client) Close() { c.http.CloseIdleConnections() }

// LongPollSupported reports whether the broker announced long-poll support
// (the api.HeaderLongPoll header) on its last answer.
func (c *Client) LongPollSupported() bool { return c.longPoll.Load() }

// call is one logical request.
type call struct {
	route    string
	method   string
	path     string
	query    url.Values
	body     any
	headers  map[string]string
	out      any
	extraTTL time.Duration // added to the attempt timeout (long poll)
}

// do runs c with retries and returns the final HTTP status.
func (c *Client) do(ctx context.Context, cl call) (int, error) {
	start := c.cfg.Clock.Now()
	status, err := c.doRetries(ctx, cl)
	if c.cfg.Observe != nil {
		c.cfg.Observe(cl.route, status, c.cfg.Clock.Since(start))
	}
	return status, err
}

func (c *Client) doRetries(ctx context.Context, cl call) (int, error) {
	var payload []byte
	if cl.body != nil {
		b, err := json.Marshal(cl.body)
		if err != nil {
			return 0, fmt.Errorf("encoding %s request: %w", cl.route, err)
		}
		payload = b
	}
	reqID := c.cfg.NewRequestID()
	backoff := c.cfg.BaseBackoff
	var lastErr error
	lastStatus := 0
	start := c.cfg.Clock.Now()
	// tried counts the replicas tried since the last wait: a call moves on
	// to a replica it has not tried in this round at once, and waits (and
	// spends one of its retries) only after a whole round failed.
	tried := 0
	// waited is how long this call has waited between rounds.
	var waited time.Duration
	for retries := 0; ; {
		at := c.current.Load()
		base := c.bases[at%uint64(len(c.bases))]
		status, retryable, wait, err := c.attempt(ctx, cl, base, payload, reqID)
		if err == nil {
			c.noteServing(at, base, cl.route, start)
			return status, nil
		}
		lastErr, lastStatus = err, status
		if !retryable || ctx.Err() != nil {
			return lastStatus, lastErr
		}
		if len(c.bases) > 1 && (status == 0 || status == http.StatusServiceUnavailable) {
			// Unreachable, or a standby: the next replica may be the
			// leader. Another call may have moved on already.
			c.current.CompareAndSwap(at, at+1)
			if tried++; tried < len(c.bases) {
				c.cfg.Logger.Debug("Broker replica did not serve; trying the next", "route", cl.route, "url", base.String(), "requestId", reqID, "err", err)
				continue
			}
		}
		tried = 0
		noServer := status == 0 || status == http.StatusServiceUnavailable
		holding := noServer && waited < c.cfg.TakeoverHold && c.cfg.Clock.Since(start) < c.cfg.TakeoverHold
		if retries >= c.cfg.MaxRetries && !holding {
			return lastStatus, lastErr
		}
		if wait <= 0 {
			wait = backoff
			backoff = min(backoff*2, c.cfg.MaxBackoff)
		}
		if retries >= c.cfg.MaxRetries {
			wait = min(wait, c.cfg.TakeoverHold-waited) // held for a takeover
		}
		retries++
		waited += wait
		c.cfg.Logger.Debug("Retrying broker call", "route", cl.route, "attempt", retries, "wait", wait, "requestId", reqID, "err", err)
		select {
		case <-ctx.Done():
			return lastStatus, fmt.Errorf("%s: %w (last error: %w)", cl.route, ctx.Err(), lastErr)
		case <-c.cfg.Clock.After(wait):
		}
	}
}

// noteServing logs, once per change, that calls now go to another replica
// of an HA broker (a takeover as the agent sees it).
func (c *Client) noteServing(at uint64, base *url.URL, route string, start time.Time) {
	if len(c.bases) < 2 || c.serving.Swap(at+1) == at+1 {
		return
	}
	c.cfg.Logger.Info("Broker replica serving", "url", base.String(), "route", route, "callDuration", c.cfg.Clock.Since(start))
}

// attempt performs one HTTP exchange. It returns the status, whether a
// failure may be retried, a server-requested wait, and the error.
func (c *Client) attempt(ctx context.Context, cl call, base *url.URL, payload []byte, reqID string) (int, bool, time.Duration, error) {
	actx, cancel := context.WithTimeout(ctx, c.cfg.AttemptTimeout+cl.extraTTL)
	defer cancel()
	// cl.path is escaped already (ids go through url.PathEscape): keep it
	// as the raw path so that it is escaped exactly once on the wire.
	u := *base
	p, err := url.PathUnescape(cl.path)
	if err != nil {
		return 0, false, 0, fmt.Errorf("building %s request: %w", cl.route, err)
	}
	u.Path, u.RawPath = p, cl.path
	u.RawQuery = cl.query.Encode()
	var body io.Reader
	if payload != nil {
		body = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(actx, cl.method, u.String(), body)
	if err != nil {
		return 0, false, 0, fmt.Errorf("building %s request: %w", cl.route, err)
	}
	req.Header.Set("Accept", "application/json; charset=utf-8")
	if payload != nil {
		req.Header.Set("Content-Type", "application/json; charset=utf-8")
	}
	req.Header.Set(api.HeaderRequestID, reqID)
	for k, v := range cl.headers {
		req.Header.Set(k, v)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return 0, false, 0, fmt.Errorf("%s: %w", cl.route, ctx.Err())
		}
		return 0, true, 0, fmt.Errorf("%s: broker unreachable: %w", cl.route, err)
	}
	defer resp.Body.Close()
	c.noteHeaders(resp.Header)
	if c.cfg.OnResponse != nil {
		c.cfg.OnResponse()
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return resp.StatusCode, true, 0, fmt.Errorf("%s: reading broker answer: %w", cl.route, err)
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		if cl.out != nil {
			if err := json.Unmarshal(data, cl.out); err != nil {
				return resp.StatusCode, true, 0, fmt.Errorf("%s: decoding broker answer: %w", cl.route, err)
			}
		}
		return resp.StatusCode, false, 0, nil
	}
	e := c.parseError(resp, data)
	switch {
	case resp.StatusCode == http.StatusTooManyRequests:
		if e.RetryAfter > c.cfg.MaxRetryAfter {
			return resp.StatusCode, false, 0, e
		}
		return resp.StatusCode, true, e.RetryAfter, e
	case resp.StatusCode == http.StatusServiceUnavailable:
		// A standby (or a broker starting) says when to come back.
		return resp.StatusCode, true, min(e.RetryAfter, c.cfg.MaxRetryAfter), e
	case resp.StatusCode >= 500:
		return resp.StatusCode, true, 0, e
	default:
		return resp.StatusCode, false, 0, e
	}
}

func (c *Client) noteHeaders(h http.Header) {
	v := strings.ToLower(strings.TrimSpace(h.Get(api.HeaderLongPoll)))
	c.longPoll.Store(v != "" && v != "false" && v != "0")
}

// parseError turns a non-2xx answer into *Error. A body that is not an
// ErrorResponse becomes the message (reference §2.10).
func (c *Client) parseError(resp *http.Response, data []byte) *Error {
	e := &Error{Status: resp.StatusCode, RequestID: resp.Header.Get(api.HeaderRequestID)}
	var body api.ErrorResponse
	if err := json.Unmarshal(data, &body); err == nil && body.Code != "" {
		e.Code, e.Message, e.Details = body.Code, body.Message, body.Details
		if body.RequestID != "" {
			e.RequestID = body.RequestID
		}
	} else {
		e.Code = codeForStatus(resp.StatusCode)
		e.Message = strings.TrimSpace(string(data))
		if e.Message == "" {
			e.Message = http.StatusText(resp.StatusCode)
		}
	}
	if ra := resp.Header.Get("Retry-After"); ra != "" {
		if secs, err := strconv.Atoi(strings.TrimSpace(ra)); err == nil && secs >= 0 {
			e.RetryAfter = time.Duration(secs) * time.Second
		} else if t, err := http.ParseTime(ra); err == nil {
			e.RetryAfter = max(t.Sub(c.cfg.Clock.Now()), 0)
		}
	}
	return e
}

// codeForStatus names a wire code for a status whose body carried none
// (a plain-text 404/405 from a mux, a proxy's 502).
func codeForStatus(status int) string {
	if code, ok := api.CodeForStatus(status); ok {
		return code
	}
	return api.CodeInternalError
}

// Advertise posts a provider advertisement.
func (c *Client) Advertise(ctx context.Context, req api.AdvertisementRequest) (api.AdvertisementResponse, error) {
	var out api.AdvertisementResponse
	_, err := c.do(ctx, call{route: "advertise", method: http.MethodPost, path: "/api/v1/advertisements", body: req, out: &out})
	return out, err
}

// Advertisement reads back the broker's view of provider clusterID.
func (c *Client) Advertisement(ctx context.Context, clusterID string) (api.AdvertisementSnapshot, error) {
	var out api.AdvertisementSnapshot
	_, err := c.do(ctx, call{route: "advertisement", method: http.MethodGet, path: "/api/v1/advertisements/" + url.PathEscape(clusterID), out: &out})
	return out, err
}

// Heartbeat posts a consumer heartbeat.
func (c *Client) Heartbeat(ctx context.Context, req api.HeartbeatRequest) (api.HeartbeatResponse, error) {
	var out api.HeartbeatResponse
	_, err := c.do(ctx, call{route: "heartbeat", method: http.MethodPost, path: "/api/v1/heartbeat", body: req, out: &out})
	return out, err
}

// NodeGroups reads the caller's policy-masked node-group view.
func (c *Client) NodeGroups(ctx context.Context) (api.NodeGroupListResponse, error) {
	var out api.NodeGroupListResponse
	_, err := c.do(ctx, call{route: "nodegroups", method: http.MethodGet, path: "/api/v1/nodegroups", out: &out})
	return out, err
}

// AllNodeGroups returns every node group, unmasked (GET
// /api/v1/nodegroups?all=true): what a console offers for manual
// reservations.
func (c *Client) AllNodeGroups(ctx context.Context) (api.NodeGroupListResponse, error) {
	var out api.NodeGroupListResponse
	_, err := c.do(ctx, call{route: "nodegroups", method: http.MethodGet, path: "/api/v1/nodegroups", query: url.Values{"all": {"true"}}, out: &out})
	return out, err
}

// Explanation reads why this consumer grows where it does under its
// policy (extension route; a broker without it answers 404).
func (c *Client) Explanation(ctx context.Context) (api.PlacementExplanation, error) {
	var out api.PlacementExplanation
	_, err := c.do(ctx, call{route: "explanation", method: http.MethodGet, path: "/api/v1/placement/explanation", out: &out})
	return out, err
}

// Reserve creates (or replays) reservation id. It returns the broker's
// status: 201 for a new reservation, 200 for a replay.
func (c *Client) Reserve(ctx context.Context, id string, req api.ReservationRequest) (api.ReservationResponse, int, error) {
	var out api.ReservationResponse
	h := map[string]string{}
	if id != "" {
		h[api.HeaderReservationID] = id
	}
	status, err := c.do(ctx, call{route: "reserve", method: http.MethodPost, path: "/api/v1/reservations", body: req, headers: h, out: &out})
	return out, status, err
}

// Reservation reads reservation id.
func (c *Client) Reservation(ctx context.Context, id string) (api.ReservationResponse, error) {
	var out api.ReservationResponse
	_, err := c.do(ctx, call{route: "reservation", method: http.MethodGet, path: "/api/v1/reservations/" + url.PathEscape(id), out: &out})
	return out, err
}

// Release asks the broker to release reservation id and returns its status
// (202 from both brokers).
func (c *Client) Release(ctx context.Context, id string) (api.ReleaseResponse, int, error) {
	var out api.ReleaseResponse
	status, err := c.do(ctx, call{route: "release", method: http.MethodDelete, path: "/api/v1/reservations/" + url.PathEscape(id), out: &out})
	return out, status, err
}

// Instructions fetches the caller's pending instructions. With wait > 0 and
// a broker that announced long-poll support it asks the broker to hold the
// request up to wait; otherwise it is a plain poll. The second result says
// whether the call was a long poll.
func (c *Client) Instructions(ctx context.Context, wait time.Duration) ([]api.InstructionView, bool, error) {
	var out api.InstructionListResponse
	cl := call{route: "instructions", method: http.MethodGet, path: "/api/v1/instructions", out: &out}
	long := wait > 0 && c.LongPollSupported()
	if long {
		cl.query = url.Values{"wait": {wait.String()}}
		cl.extraTTL = wait
	}
	_, err := c.do(ctx, cl)
	return out.Instructions, long, err
}

// PostResult reports the outcome of instruction id.
func (c *Client) PostResult(ctx context.Context, id string, req api.InstructionResultRequest) error {
	var out api.InstructionResultResponse
	_, err := c.do(ctx, call{route: "result", method: http.MethodPost, path: "/api/v1/instructions/" + url.PathEscape(id) + "/result", body: req, out: &out})
	return err
}

// Healthz calls GET /healthz on the API listener.
func (c *Client) Healthz(ctx context.Context) error {
	_, err := c.do(ctx, call{route: "healthz", method: http.MethodGet, path: "/healthz"})
	return err
}
