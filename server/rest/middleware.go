package rest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/pki"
)

// Locals keys.
const (
	localLogger   = "fa.logger"
	localIdentity = "fa.identity"
)

// maxRequestIDLen bounds an incoming X-Request-Id; a longer or non-printable
// value is replaced by a generated one.
const maxRequestIDLen = 128

// identity is the authenticated caller.
type identity struct {
	cn string
	// role is empty for a legacy (role-less) certificate accepted with
	// AllowLegacyCerts: it may act as both roles.
	role api.Role
}

func (id identity) may(r api.Role) bool { return id.role.Acts(r) }

type server struct {
	broker      Broker
	log         *slog.Logger
	allowLegacy bool
	roleOf      func(*x509.Certificate) (api.Role, bool)
	// limiters holds one token-bucket set per rate-limit class.
	limiters  map[string]*limiter
	bodyLimit int
	metrics   *metrics
	now       func() time.Time
	baseCtx   func() context.Context
	newID     func() string
	// newRequestID names a request that came without a valid id.
	newRequestID func() string
	peer         func(*fiber.Ctx) (*x509.Certificate, bool)
	routes       routeTable
	// ads and beats decode the periodic reports (see reportCache).
	ads   reportCache[api.AdvertisementRequest]
	beats reportCache[api.HeartbeatRequest]
}

func newServer(cfg Config) *server {
	if cfg.Broker == nil {
		panic("rest: Config.Broker is required")
	}
	s := &server{
		broker:      cfg.Broker,
		log:         cfg.Logger,
		allowLegacy: cfg.AllowLegacyCerts,
		roleOf:      cfg.RoleOf,
		bodyLimit:   cfg.BodyLimit,
		now:         cfg.Now,
		baseCtx:     cfg.BaseContext,
		newID:       cfg.NewID,
		peer:        cfg.peer,
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.roleOf == nil {
		s.roleOf = pki.RoleOf
	}
	if s.bodyLimit <= 0 {
		s.bodyLimit = DefaultBodyLimit
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.baseCtx == nil {
		s.baseCtx = context.Background
	}
	s.newRequestID = s.newID
	if s.newID == nil {
		s.newID = func() string { return uuid.NewString() }
		s.newRequestID = fastUUID
	}
	if s.peer == nil {
		s.peer = tlsPeer
	}
	burst, rps, releaseBurst := cfg.RateLimitBurst, cfg.RateLimitRPS, cfg.ReleaseBurst
	if burst <= 0 {
		burst = DefaultRateLimitBurst
	}
	if rps <= 0 {
		rps = DefaultRateLimitRPS
	}
	if releaseBurst <= 0 {
		releaseBurst = DefaultReleaseBurst
	}
	// Releases are never throttled harder than the other classes.
	releaseBurst = max(releaseBurst, burst)
	s.limiters = map[string]*limiter{
		rateClassReserve:      newLimiter(rps, burst),
		rateClassRelease:      newLimiter(rps, releaseBurst),
		rateClassInstructions: newLimiter(rps, burst),
		rateClassOther:        newLimiter(rps, burst),
	}
	s.metrics = newMetrics(cfg.Metrics)
	return s
}

// connStater is a TLS connection (crypto/tls.Conn and the listener guard's
// wrapper of it).
type connStater interface{ ConnectionState() tls.ConnectionState }

// tlsPeer returns the leaf of the first verified chain of the connection.
// It reads the state from the connection itself: fasthttp's
// TLSConnectionState would copy it to the heap for every request.
func tlsPeer(c *fiber.Ctx) (*x509.Certificate, bool) {
	tc, ok := c.Context().Conn().(connStater)
	if !ok {
		return nil, false
	}
	st := tc.ConnectionState()
	if len(st.VerifiedChains) == 0 || len(st.VerifiedChains[0]) == 0 {
		return nil, false
	}
	return st.VerifiedChains[0][0], true
}

func jsonMarshal(v any) ([]byte, error)   { return json.Marshal(v) }
func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// jsonContentType is the Content-Type of every answer.
const jsonContentType = "application/json; charset=utf-8"

// writeJSON answers status with v as JSON.
func writeJSON(c *fiber.Ctx, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode response: %w", err)
	}
	c.Set(fiber.HeaderContentType, jsonContentType)
	return c.Status(status).Send(b)
}

// handleError is the one place where an error becomes an ErrorResponse:
// *api.Error keeps its code, Fiber's own errors (unrouted, requests the
// transport refused) get the matching code, anything else is an internal
// error, logged with the request id and answered without its text. The
// status is always api.Status of the code.
func (s *server) handleError(c *fiber.Ctx, err error) error {
	resp := api.ErrorResponse{RequestID: s.ensureRequestID(c)}
	var ae *api.Error
	var fe *fiber.Error
	switch {
	case errors.As(err, &ae):
		resp.Code, resp.Message, resp.Details = ae.Code, ae.Message, ae.Details
	case errors.As(err, &fe):
		resp.Code, resp.Message = s.transportError(fe)
	default:
		resp.Code, resp.Message = api.CodeInternalError, "internal error"
	}
	status := api.Status(resp.Code)
	if resp.Code == api.CodeInternalError {
		s.logger(c).Error("Internal error", "method", c.Method(), "path", c.Path(), "err", err)
	}
	return writeJSON(c, status, resp)
}

// transportError gives a Fiber error its wire code and message. Fiber
// raises them for requests no route matched and, before any middleware
// runs, for requests the transport could not read (Fiber's
// serverErrorHandler: headers too large, read timeout, body too large, a
// network error, which it reports as 502, or a malformed request).
func (s *server) transportError(fe *fiber.Error) (code, message string) {
	switch fe.Code {
	case http.StatusNotFound:
		return api.CodeNotFound, fe.Message
	case http.StatusMethodNotAllowed:
		return api.CodeMethodNotAllowed, fe.Message
	case http.StatusRequestEntityTooLarge:
		return api.CodePayloadTooLarge, fmt.Sprintf("request body exceeds %d bytes", s.bodyLimit)
	case http.StatusRequestHeaderFieldsTooLarge:
		return api.CodeRequestHeadersTooLarge, fmt.Sprintf("the request line and headers exceed %d bytes", readBufferSize)
	case http.StatusRequestTimeout:
		return api.CodeRequestTimeout, fmt.Sprintf("the request was not received within %s", readTimeout)
	case http.StatusBadGateway:
		return api.CodeInvalidRequest, "the request could not be read: " + fe.Message
	}
	if fe.Code >= 500 {
		return api.CodeInternalError, "internal error"
	}
	return api.CodeInvalidRequest, "malformed request: " + fe.Message
}

// recoverPanics turns a panic in any later handler into 500 InternalError.
func (s *server) recoverPanics(c *fiber.Ctx) (err error) {
	defer func() {
		if r := recover(); r != nil {
			s.logger(c).Error("Panic while serving a request", "panic", r, "stack", string(debug.Stack()))
			err = s.handleError(c, fmt.Errorf("panic: %v", r))
		}
	}()
	return c.Next()
}

// requestID echoes X-Request-Id (or a fresh UUID v4) and sets the
// extension headers on every response.
func (s *server) requestID(c *fiber.Ctx) error {
	s.setRequestID(c)
	return c.Next()
}

// setRequestID chooses the request's id and sets the headers every answer
// carries, unless that happened already. The error handler calls it too:
// requests the transport rejects never reach the middleware. The id lives
// in the response header only, so a request that succeeds costs no string
// for it.
func (s *server) setRequestID(c *fiber.Ctx) {
	h := &c.Response().Header
	if len(h.Peek(api.HeaderRequestID)) > 0 {
		return
	}
	if id := c.Request().Header.Peek(api.HeaderRequestID); validRequestID(id) {
		h.SetBytesV(api.HeaderRequestID, id)
	} else {
		h.Set(api.HeaderRequestID, s.newRequestID())
	}
	h.Set(api.HeaderLongPoll, "1")
	h.Set(api.HeaderBrokerAPI, BrokerAPI)
}

// fastUUID returns a random UUID v4 from the runtime's per-thread
// generator (math/rand/v2): unique enough to name a request in logs and
// error bodies, without the system call and lock of crypto/rand that
// uuid.NewString costs. Reservation ids keep uuid.NewString.
func fastUUID() string {
	var u uuid.UUID
	binary.LittleEndian.PutUint64(u[:8], rand.Uint64())
	binary.LittleEndian.PutUint64(u[8:], rand.Uint64())
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	return u.String()
}

// ensureRequestID returns the request's id (see setRequestID), for error
// bodies and log lines.
func (s *server) ensureRequestID(c *fiber.Ctx) string {
	s.setRequestID(c)
	return string(c.Response().Header.Peek(api.HeaderRequestID))
}

// validRequestID accepts a non-empty, printable ASCII value of bounded size.
func validRequestID[T string | []byte](id T) bool {
	if len(id) == 0 || len(id) > maxRequestIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return false
		}
	}
	return true
}

// logger returns the request's logger (carrying its request id), built on
// first use.
func (s *server) logger(c *fiber.Ctx) *slog.Logger {
	if l, ok := c.Locals(localLogger).(*slog.Logger); ok {
		return l
	}
	l := s.log.With("requestId", s.ensureRequestID(c))
	c.Locals(localLogger, l)
	return l
}

// accessLog logs one line per request and records the request metrics.
func (s *server) accessLog(c *fiber.Ctx) error {
	start := s.now()
	err := c.Next()
	if err != nil {
		// Answer now so the status is known to the log and the metrics.
		if herr := s.handleError(c, err); herr != nil {
			return herr
		}
	}
	route := s.routes.template(c.Method(), c.Path())
	status := c.Response().StatusCode()
	elapsed := s.now().Sub(start)
	s.metrics.observe(route, c.Method(), status, elapsed)
	level := slog.LevelInfo
	if status < 300 && periodic(c.Method(), route) {
		level = slog.LevelDebug
	}
	if !s.log.Enabled(context.Background(), level) {
		return nil
	}
	attrs := []any{"method", c.Method(), "route", route, "status", status, "duration", elapsed}
	if id, ok := c.Locals(localIdentity).(identity); ok {
		attrs = append(attrs, "clusterId", id.cn)
	}
	s.logger(c).Log(c.UserContext(), level, "Request", attrs...)
	return nil
}

// periodic reports whether method and route are one of the agents'
// periodic calls (advertisement, heartbeat, node-group list, instruction
// poll). Their successful answers are logged at debug level: at info they
// were most of the log and a tenth of the broker's CPU under load
// (docs/performance.md, Broker under load); their failures and every other
// call stay at info.
func periodic(method, route string) bool {
	switch route {
	case routeAdvertisements, routeHeartbeat:
		return method == fiber.MethodPost
	case routeNodeGroups, routeInstructions:
		return method == fiber.MethodGet
	}
	return false
}

// identify authenticates the caller by the CN of its verified client
// certificate and reads its role.
func (s *server) identify(c *fiber.Ctx) error {
	leaf, ok := s.peer(c)
	if !ok || leaf == nil || leaf.Subject.CommonName == "" {
		return api.Errorf(api.CodeUnauthenticated, "a verified client certificate with a non-empty common name is required")
	}
	id := identity{cn: leaf.Subject.CommonName}
	role, ok := s.roleOf(leaf)
	switch {
	case ok:
		id.role = role
	case !s.allowLegacy:
		return api.Errorf(api.CodeForbidden,
			"the client certificate of %q carries no role: re-issue it with `federation-autoscaler pki join --cluster-id %s --role provider|consumer`, or start the broker with --allow-legacy-certs",
			id.cn, id.cn)
	}
	c.Locals(localIdentity, id)
	return c.Next()
}

func caller(c *fiber.Ctx) identity {
	id, _ := c.Locals(localIdentity).(identity)
	return id
}

// Rate-limit classes: each caller has one token bucket per class, so a
// burst of reservation creates (a Cluster Autoscaler scale-up fans out one
// per node) or of releases (a scale-down, the same) is not starved by the
// same agent's heartbeats, long polls and results, and vice versa (the
// reference shares one bucket, bug #20).
const (
	rateClassReserve      = "reserve"
	rateClassRelease      = "release"
	rateClassInstructions = "instructions"
	rateClassOther        = "other"
)

// rateClass returns the bucket class of a request.
func rateClass(c *fiber.Ctx) string {
	path := strings.TrimSuffix(c.Path(), "/")
	switch {
	case c.Method() == fiber.MethodPost && path == routeReservations:
		return rateClassReserve
	case c.Method() == fiber.MethodDelete && strings.HasPrefix(path, routeReservations+"/"):
		return rateClassRelease
	case strings.HasPrefix(path, routeInstructions):
		return rateClassInstructions
	default:
		return rateClassOther
	}
}

// rateLimit applies the caller's token bucket of the request's class.
func (s *server) rateLimit(c *fiber.Ctx) error {
	id := caller(c)
	ok, wait := s.limiters[rateClass(c)].allow(id.cn, s.now())
	if ok {
		return c.Next()
	}
	s.metrics.rateLimited.Inc()
	secs := int(math.Ceil(wait.Seconds()))
	if secs < 1 {
		secs = 1
	}
	c.Set(fiber.HeaderRetryAfter, strconv.Itoa(secs))
	return api.Errorf(api.CodeTooManyRequests, "rate limit exceeded for cluster %q: retry after %ds", id.cn, secs).
		WithDetails(map[string]any{"clusterId": id.cn})
}

// limitBody answers 413 for bodies over the limit.
func (s *server) limitBody(c *fiber.Ctx) error {
	// c.Body() (decoded as Content-Encoding says, copied) only when there
	// is a body: an empty one decodes to nothing.
	if n := c.Request().Header.ContentLength(); n > s.bodyLimit || (len(c.Request().Body()) > 0 && len(c.Body()) > s.bodyLimit) {
		return api.Errorf(api.CodePayloadTooLarge, "request body exceeds %d bytes", s.bodyLimit)
	}
	return c.Next()
}

// unrouted answers every request no route matched: 405 with Allow when the
// path exists under another method, else 404.
func (s *server) unrouted(c *fiber.Ctx) error {
	if _, allow := s.routes.match(c.Method(), c.Path()); len(allow) > 0 {
		c.Set(fiber.HeaderAllow, joinComma(allow))
		return api.Errorf(api.CodeMethodNotAllowed, "method %s is not allowed on %s (allowed: %s)", c.Method(), c.Path(), joinComma(allow))
	}
	return api.Errorf(api.CodeNotFound, "no route for %s %s", c.Method(), c.Path())
}
