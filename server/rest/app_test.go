package rest

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/pki"
)

// testCertHeader carries "cn/role" (role may be empty) to the unit tests'
// peer lookup; no header means no client certificate.
const testCertHeader = "X-Test-Cert"

func testPeer(c *fiber.Ctx) (*x509.Certificate, bool) {
	v := c.Get(testCertHeader)
	if v == "" {
		return nil, false
	}
	cn, role, _ := strings.Cut(v, "/")
	cert := &x509.Certificate{Subject: pkix.Name{CommonName: cn}}
	if role != "" {
		cert.Subject.OrganizationalUnit = []string{pki.RoleOUPrefix + role}
	}
	return cert, true
}

type manualClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *manualClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *manualClock) Step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newTestApp(t *testing.T, b Broker, mutate ...func(*Config)) *fiber.App {
	t.Helper()
	cfg := Config{Broker: b, RateLimitBurst: 1000, RateLimitRPS: 1000, peer: testPeer}
	for _, m := range mutate {
		m(&cfg)
	}
	return NewApp(cfg)
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) errBody(t *testing.T) api.ErrorResponse {
	t.Helper()
	var e api.ErrorResponse
	if err := json.Unmarshal(r.body, &e); err != nil {
		t.Fatalf("error body %q is not an ErrorResponse: %v", r.body, err)
	}
	return e
}

func do(t *testing.T, app *fiber.App, method, path, cert, body string, headers ...string) response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, path, rd)
	if cert != "" {
		req.Header.Set(testCertHeader, cert)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := app.Test(req, -1)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

const (
	prov = "prov-a/provider"
	cons = "cons-a/consumer"
)

const goodAd = `{"clusterId":"prov-a","liqoClusterId":"liqo-a","resources":{"cpu":"8","memory":"32Gi"}}`
const goodHB = `{"clusterId":"cons-a","liqoClusterId":"liqo-c"}`
const goodRes = `{"providerClusterId":"prov-a","chunkCount":1,"chunkType":"standard"}`

func TestStatusAndCodes(t *testing.T) {
	fail := func(err error) *fakeBroker {
		return &fakeBroker{
			ReserveFn: func(context.Context, string, string, api.ReservationRequest) (api.ReservationResponse, bool, error) {
				return api.ReservationResponse{}, false, err
			},
			ReleaseFn: func(context.Context, string, string, int) (api.ReleaseResponse, error) {
				return api.ReleaseResponse{}, err
			},
			PostResultFn: func(context.Context, string, api.Role, string, api.InstructionResultRequest) error { return err },
		}
	}
	tests := []struct {
		name    string
		broker  *fakeBroker
		method  string
		path    string
		cert    string
		body    string
		headers []string
		status  int
		code    string
		msg     string
	}{
		{name: "healthz", method: "GET", path: "/healthz", cert: prov, status: 200},
		{name: "no client certificate", method: "GET", path: "/healthz", status: 401, code: api.CodeUnauthenticated},
		{name: "empty CN", method: "GET", path: "/healthz", cert: "/provider", status: 401, code: api.CodeUnauthenticated},
		{name: "legacy cert refused", method: "GET", path: "/healthz", cert: "prov-a", status: 403, code: api.CodeForbidden, msg: "carries no role"},
		{name: "unknown route", method: "GET", path: "/nope", cert: prov, status: 404, code: api.CodeNotFound},
		{name: "wrong method", method: "PUT", path: "/api/v1/heartbeat", cert: cons, status: 405, code: api.CodeMethodNotAllowed},

		{name: "advertise ok", method: "POST", path: "/api/v1/advertisements", cert: prov, body: goodAd, status: 200},
		{name: "advertise by consumer", method: "POST", path: "/api/v1/advertisements", cert: cons, body: goodAd, status: 403, code: api.CodeForbidden},
		{name: "advertise empty body", method: "POST", path: "/api/v1/advertisements", cert: prov, status: 400, code: api.CodeInvalidRequest, msg: "decode body: EOF"},
		{name: "advertise unknown field", method: "POST", path: "/api/v1/advertisements", cert: prov, body: `{"clusterId":"prov-a","bogus":1}`, status: 400, code: api.CodeInvalidRequest, msg: "decode body:"},
		{name: "advertise trailing data", method: "POST", path: "/api/v1/advertisements", cert: prov, body: goodAd + `{}`, status: 400, code: api.CodeInvalidRequest, msg: "after the JSON value"},
		{name: "advertise trailing whitespace", method: "POST", path: "/api/v1/advertisements", cert: prov, body: goodAd + " \n", status: 200},
		{name: "advertise no liqo id", method: "POST", path: "/api/v1/advertisements", cert: prov, body: `{"clusterId":"prov-a","resources":{"cpu":"1"}}`, status: 400, code: api.CodeInvalidRequest},
		{name: "advertise no resources", method: "POST", path: "/api/v1/advertisements", cert: prov, body: `{"clusterId":"prov-a","liqoClusterId":"l"}`, status: 400, code: api.CodeInvalidRequest},
		{name: "advertise negative carbon", method: "POST", path: "/api/v1/advertisements", cert: prov, body: `{"clusterId":"prov-a","liqoClusterId":"l","resources":{"cpu":"1"},"carbonIntensity":-1}`, status: 400, code: api.CodeInvalidRequest},
		{name: "advertise non-DNS cluster id", method: "POST", path: "/api/v1/advertisements", cert: prov, body: `{"clusterId":"Prov_A","liqoClusterId":"l","resources":{"cpu":"1"}}`, status: 400, code: api.CodeInvalidRequest},
		{name: "advertise CN mismatch", method: "POST", path: "/api/v1/advertisements", cert: prov, body: strings.Replace(goodAd, `"prov-a"`, `"prov-b"`, 1), status: 403, code: api.CodeForbidden},
		{name: "advertise validation before CN check", method: "POST", path: "/api/v1/advertisements", cert: prov, body: `{"clusterId":"prov-b"}`, status: 400, code: api.CodeInvalidRequest},
		{name: "read own advertisement", method: "GET", path: "/api/v1/advertisements/prov-a", cert: prov, status: 200},
		{name: "read other advertisement", method: "GET", path: "/api/v1/advertisements/prov-b", cert: prov, status: 403, code: api.CodeForbidden},
		{name: "read advertisement empty id", method: "GET", path: "/api/v1/advertisements/", cert: prov, status: 400, code: api.CodeInvalidRequest},
		{name: "advertisement missing", broker: &fakeBroker{AdvertisementFn: func(context.Context, string) (api.AdvertisementSnapshot, error) {
			return api.AdvertisementSnapshot{}, api.Errorf(api.CodeNotFound, "no advertisement for cluster prov-a")
		}}, method: "GET", path: "/api/v1/advertisements/prov-a", cert: prov, status: 404, code: api.CodeNotFound},
		{name: "read advertisement as consumer", method: "GET", path: "/api/v1/advertisements/cons-a", cert: cons, status: 403, code: api.CodeForbidden},

		{name: "heartbeat ok", method: "POST", path: "/api/v1/heartbeat", cert: cons, body: goodHB, status: 200},
		{name: "heartbeat by provider", method: "POST", path: "/api/v1/heartbeat", cert: prov, body: goodHB, status: 403, code: api.CodeForbidden},
		{name: "heartbeat missing id", method: "POST", path: "/api/v1/heartbeat", cert: cons, body: `{"liqoClusterId":"l"}`, status: 400, code: api.CodeInvalidRequest},
		{name: "heartbeat CN mismatch", method: "POST", path: "/api/v1/heartbeat", cert: cons, body: `{"clusterId":"cons-b","liqoClusterId":"l"}`, status: 403, code: api.CodeForbidden},
		{name: "heartbeat negative weight", method: "POST", path: "/api/v1/heartbeat", cert: cons, body: `{"clusterId":"cons-a","liqoClusterId":"l","placement":{"type":"Weighted","weights":{"price":-1}}}`, status: 400, code: api.CodeInvalidRequest},

		{name: "nodegroups", method: "GET", path: "/api/v1/nodegroups", cert: cons, status: 200},
		{name: "nodegroups all", method: "GET", path: "/api/v1/nodegroups?all=true", cert: cons, status: 200},
		{name: "nodegroups bad all", method: "GET", path: "/api/v1/nodegroups?all=maybe", cert: cons, status: 400, code: api.CodeInvalidRequest},
		{name: "nodegroups by provider", method: "GET", path: "/api/v1/nodegroups", cert: prov, status: 403, code: api.CodeForbidden},

		{name: "reserve created", method: "POST", path: "/api/v1/reservations", cert: cons, body: goodRes, headers: []string{api.HeaderReservationID, "res-1"}, status: 201},
		{name: "reserve replay", broker: &fakeBroker{ReserveFn: func(_ context.Context, _, id string, _ api.ReservationRequest) (api.ReservationResponse, bool, error) {
			return api.ReservationResponse{ReservationID: id}, false, nil
		}}, method: "POST", path: "/api/v1/reservations", cert: cons, body: goodRes, headers: []string{api.HeaderReservationID, "res-1"}, status: 200},
		{name: "reserve by provider", method: "POST", path: "/api/v1/reservations", cert: prov, body: goodRes, status: 403, code: api.CodeForbidden},
		{name: "reserve bad id before body", method: "POST", path: "/api/v1/reservations", cert: cons, body: `garbage`, headers: []string{api.HeaderReservationID, "Bad_ID"}, status: 400, code: api.CodeInvalidRequest, msg: api.HeaderReservationID},
		{name: "reserve chunkCount 0", method: "POST", path: "/api/v1/reservations", cert: cons, body: `{"providerClusterId":"prov-a","chunkCount":0,"chunkType":"standard"}`, status: 400, code: api.CodeInvalidRequest, msg: "must be >= 1"},
		{name: "reserve chunkCount 2", method: "POST", path: "/api/v1/reservations", cert: cons, body: `{"providerClusterId":"prov-a","chunkCount":2,"chunkType":"standard"}`, status: 400, code: api.CodeInvalidRequest},
		{name: "reserve bad type", method: "POST", path: "/api/v1/reservations", cert: cons, body: `{"providerClusterId":"prov-a","chunkCount":1,"chunkType":"huge"}`, status: 400, code: api.CodeInvalidRequest},
		{name: "reserve nodeGroupId mismatch", method: "POST", path: "/api/v1/reservations", cert: cons, body: `{"providerClusterId":"prov-a","nodeGroupId":"ng-prov-a-gpu","chunkCount":1,"chunkType":"standard"}`, status: 400, code: api.CodeInvalidRequest},
		{name: "reserve nodeGroupId match", method: "POST", path: "/api/v1/reservations", cert: cons, body: `{"providerClusterId":"prov-a","nodeGroupId":"ng-prov-a-standard","chunkCount":1,"chunkType":"standard"}`, status: 201},
		{name: "reserve no heartbeat", broker: fail(api.Errorf(api.CodePreconditionFailed, "send POST /api/v1/heartbeat first")), method: "POST", path: "/api/v1/reservations", cert: cons, body: goodRes, status: 412, code: api.CodePreconditionFailed},
		{name: "reserve unknown provider", broker: fail(api.Errorf(api.CodeNotFound, "x")), method: "POST", path: "/api/v1/reservations", cert: cons, body: goodRes, status: 404, code: api.CodeNotFound},
		{name: "reserve stale provider", broker: fail(api.Errorf(api.CodeServiceUnavailable, "x")), method: "POST", path: "/api/v1/reservations", cert: cons, body: goodRes, status: 503, code: api.CodeServiceUnavailable},
		{name: "reserve full", broker: fail(api.Errorf(api.CodeInsufficientCapacity, "x").WithDetails(map[string]any{"available": 0, "requested": 1})), method: "POST", path: "/api/v1/reservations", cert: cons, body: goodRes, status: 409, code: api.CodeInsufficientCapacity},
		{name: "reserve other spec", broker: fail(api.Errorf(api.CodeConflict, "x")), method: "POST", path: "/api/v1/reservations", cert: cons, body: goodRes, status: 409, code: api.CodeConflict},
		{name: "reserve internal", broker: fail(errors.New("disk on fire")), method: "POST", path: "/api/v1/reservations", cert: cons, body: goodRes, status: 500, code: api.CodeInternalError, msg: "internal error"},

		{name: "get reservation consumer", method: "GET", path: "/api/v1/reservations/res-1", cert: cons, status: 200},
		{name: "get reservation provider", method: "GET", path: "/api/v1/reservations/res-1", cert: prov, status: 200},
		{name: "get reservation empty id", method: "GET", path: "/api/v1/reservations/", cert: cons, status: 400, code: api.CodeInvalidRequest},
		{name: "release", method: "DELETE", path: "/api/v1/reservations/res-1", cert: cons, status: 202},
		{name: "release by provider", method: "DELETE", path: "/api/v1/reservations/res-1", cert: prov, status: 403, code: api.CodeForbidden},
		{name: "release bad chunks", method: "DELETE", path: "/api/v1/reservations/res-1?chunks=-1", cert: cons, status: 400, code: api.CodeInvalidRequest},
		{name: "release not a number", method: "DELETE", path: "/api/v1/reservations/res-1?chunks=x", cert: cons, status: 400, code: api.CodeInvalidRequest},
		{name: "release partial", broker: fail(api.Errorf(api.CodeNotImplemented, "partial release is not implemented")), method: "DELETE", path: "/api/v1/reservations/res-1?chunks=3", cert: cons, status: 501, code: api.CodeNotImplemented},

		{name: "instructions", method: "GET", path: "/api/v1/instructions", cert: cons, status: 200},
		{name: "instructions wait", method: "GET", path: "/api/v1/instructions?wait=1ms", cert: prov, status: 200},
		{name: "instructions wait too long", method: "GET", path: "/api/v1/instructions?wait=61s", cert: prov, status: 400, code: api.CodeInvalidRequest, msg: "60s"},
		{name: "instructions wait bad", method: "GET", path: "/api/v1/instructions?wait=soon", cert: prov, status: 400, code: api.CodeInvalidRequest},
		{name: "result ok", method: "POST", path: "/api/v1/instructions/peer-res-1/result", cert: cons, body: `{"status":"Succeeded","payload":{"kind":"PeerPayload","virtualNodeNames":["vk-1"]}}`, status: 200},
		{name: "result bad status", method: "POST", path: "/api/v1/instructions/peer-res-1/result", cert: cons, body: `{"status":"Done"}`, status: 400, code: api.CodeInvalidRequest},
		{name: "result failed without message", method: "POST", path: "/api/v1/instructions/peer-res-1/result", cert: cons, body: `{"status":"Failed","error":{"code":"X"}}`, status: 400, code: api.CodeInvalidRequest},
		{name: "result bad payload kind", method: "POST", path: "/api/v1/instructions/peer-res-1/result", cert: cons, body: `{"status":"Succeeded","payload":{"kind":"Nope"}}`, status: 400, code: api.CodeInvalidRequest},
		{name: "result unknown payload field", method: "POST", path: "/api/v1/instructions/peer-res-1/result", cert: cons, body: `{"status":"Succeeded","payload":{"extra":1}}`, status: 400, code: api.CodeInvalidRequest, msg: "decode body"},
		{name: "result not target", broker: fail(api.Errorf(api.CodeForbidden, "not the target")), method: "POST", path: "/api/v1/instructions/gk-x/result", cert: prov, body: `{"status":"Succeeded"}`, status: 403, code: api.CodeForbidden},
		{name: "result missing", broker: fail(api.Errorf(api.CodeNotFound, "x")), method: "POST", path: "/api/v1/instructions/gk-x/result", cert: prov, body: `{"status":"Succeeded"}`, status: 404, code: api.CodeNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.broker
			if b == nil {
				b = &fakeBroker{}
			}
			app := newTestApp(t, b)
			r := do(t, app, tc.method, tc.path, tc.cert, tc.body, append([]string{api.HeaderRequestID, "req-42"}, tc.headers...)...)
			if r.status != tc.status {
				t.Fatalf("status = %d, want %d (body %s)", r.status, tc.status, r.body)
			}
			if got := r.header.Get(api.HeaderRequestID); got != "req-42" {
				t.Errorf("X-Request-Id = %q, want the echo req-42", got)
			}
			if r.header.Get(api.HeaderLongPoll) != "1" || r.header.Get(api.HeaderBrokerAPI) != BrokerAPI {
				t.Errorf("extension headers missing: %v", r.header)
			}
			if ct := r.header.Get("Content-Type"); ct != "application/json; charset=utf-8" {
				t.Errorf("Content-Type = %q", ct)
			}
			if tc.code == "" {
				return
			}
			e := r.errBody(t)
			if e.Code != tc.code || e.RequestID != "req-42" || e.Message == "" {
				t.Errorf("error body = %+v, want code %s with requestId req-42", e, tc.code)
			}
			if tc.msg != "" && !strings.Contains(e.Message, tc.msg) {
				t.Errorf("message %q does not mention %q", e.Message, tc.msg)
			}
		})
	}
}

func TestMethodNotAllowedListsAllow(t *testing.T) {
	r := do(t, newTestApp(t, &fakeBroker{}), "PATCH", "/api/v1/reservations/res-1", cons, "")
	if r.status != 405 {
		t.Fatalf("status %d", r.status)
	}
	if got := r.header.Get("Allow"); got != "GET, HEAD, DELETE" {
		t.Errorf("Allow = %q", got)
	}
}

func TestGeneratedRequestAndReservationIDs(t *testing.T) {
	var gotID string
	b := &fakeBroker{ReserveFn: func(_ context.Context, cn, id string, req api.ReservationRequest) (api.ReservationResponse, bool, error) {
		gotID = id
		if cn != "cons-a" || req.ProviderClusterID != "prov-a" {
			t.Errorf("Reserve(%q, %+v)", cn, req)
		}
		return api.ReservationResponse{ReservationID: id}, true, nil
	}}
	r := do(t, newTestApp(t, b), "POST", "/api/v1/reservations", cons, goodRes)
	if r.status != 201 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	if !strings.HasPrefix(gotID, "res-") || len(gotID) != len("res-")+36 {
		t.Errorf("generated reservation id %q, want res-<uuid>", gotID)
	}
	if rid := r.header.Get(api.HeaderRequestID); len(rid) != 36 {
		t.Errorf("generated request id %q, want a UUID", rid)
	}
	// An invalid incoming request id is replaced.
	r = do(t, newTestApp(t, b), "GET", "/healthz", cons, "", api.HeaderRequestID, strings.Repeat("x", 500))
	if rid := r.header.Get(api.HeaderRequestID); len(rid) != 36 {
		t.Errorf("oversized request id was echoed: %q", rid)
	}
}

func TestLegacyCertificatesWithFlag(t *testing.T) {
	app := newTestApp(t, &fakeBroker{}, func(c *Config) { c.AllowLegacyCerts = true })
	for _, tc := range []struct{ method, path, cert, body string }{
		{"POST", "/api/v1/advertisements", "prov-a", goodAd},
		{"POST", "/api/v1/heartbeat", "cons-a", goodHB},
		{"GET", "/api/v1/nodegroups", "cons-a", ""},
		{"GET", "/api/v1/instructions", "prov-a", ""},
	} {
		if r := do(t, app, tc.method, tc.path, tc.cert, tc.body); r.status != 200 {
			t.Errorf("%s %s with a legacy cert: %d %s", tc.method, tc.path, r.status, r.body)
		}
	}
	// Role-carrying certificates are still gated.
	if r := do(t, app, "POST", "/api/v1/heartbeat", prov, goodHB); r.status != 403 {
		t.Errorf("provider on heartbeat: %d", r.status)
	}
}

func TestRateLimit(t *testing.T) {
	clk := &manualClock{t: time.Unix(1_800_000_000, 0)}
	app := newTestApp(t, &fakeBroker{}, func(c *Config) {
		c.RateLimitBurst, c.RateLimitRPS, c.Now = 10, 5, clk.Now
	})
	for i := range 10 {
		if r := do(t, app, "GET", "/healthz", prov, ""); r.status != 200 {
			t.Fatalf("request %d: %d", i, r.status)
		}
	}
	r := do(t, app, "GET", "/healthz", prov, "")
	if r.status != 429 {
		t.Fatalf("11th request: %d, want 429", r.status)
	}
	if got := r.header.Get("Retry-After"); got != "1" {
		t.Errorf("Retry-After = %q, want 1", got)
	}
	e := r.errBody(t)
	if e.Code != api.CodeTooManyRequests || e.Details["clusterId"] != "prov-a" {
		t.Errorf("429 body %+v", e)
	}
	// Buckets are per CN.
	if r := do(t, app, "GET", "/healthz", cons, ""); r.status != 200 {
		t.Errorf("other CN limited: %d", r.status)
	}
	clk.Step(200 * time.Millisecond)
	if r := do(t, app, "GET", "/healthz", prov, ""); r.status != 200 {
		t.Errorf("after refill: %d", r.status)
	}
}

func TestLimiterEvictsIdleBuckets(t *testing.T) {
	l := newLimiter(5, 10)
	now := time.Unix(1_800_000_000, 0)
	l.allow("a", now)
	l.allow("b", now)
	if l.size() != 2 {
		t.Fatalf("size %d", l.size())
	}
	l.allow("c", now.Add(l.idle))
	if l.size() != 1 {
		t.Errorf("idle buckets kept: size %d, want 1", l.size())
	}
}

func TestBodyLimit(t *testing.T) {
	app := newTestApp(t, &fakeBroker{})
	big := `{"clusterId":"prov-a","liqoClusterId":"` + strings.Repeat("x", DefaultBodyLimit) + `"}`
	r := do(t, app, "POST", "/api/v1/advertisements", prov, big)
	if r.status != 413 || r.errBody(t).Code != api.CodePayloadTooLarge {
		t.Fatalf("status %d body %.200s", r.status, r.body)
	}
}

func TestPanicIsInternalError(t *testing.T) {
	app := newTestApp(t, &fakeBroker{NodeGroupsFn: func(context.Context, string, bool) (api.NodeGroupListResponse, error) {
		panic("boom")
	}})
	r := do(t, app, "GET", "/api/v1/nodegroups", cons, "")
	if r.status != 500 || r.errBody(t).Code != api.CodeInternalError {
		t.Fatalf("status %d body %s", r.status, r.body)
	}
}

func TestInstructionsWaitAndEmptyList(t *testing.T) {
	var got time.Duration
	b := &fakeBroker{InstructionsFn: func(ctx context.Context, cn string, _ api.Role, wait time.Duration) ([]api.InstructionView, error) {
		got = wait
		<-ctx.Done() // the handler bounds the wait
		return nil, ctx.Err()
	}}
	r := do(t, newTestApp(t, b), "GET", "/api/v1/instructions?wait=20ms", cons, "")
	if r.status != 200 || string(r.body) != `{"instructions":[]}` {
		t.Fatalf("status %d body %s", r.status, r.body)
	}
	if got != 20*time.Millisecond {
		t.Errorf("wait passed = %v", got)
	}
}

func TestRequestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	app := newTestApp(t, &fakeBroker{}, func(c *Config) { c.Metrics = reg })
	do(t, app, "GET", "/api/v1/reservations/res-1", cons, "")
	do(t, app, "GET", "/api/v1/reservations/res-2", cons, "")
	do(t, app, "GET", "/nope", cons, "")
	want := `
# HELP fa_broker_http_requests_total Broker API requests by route template, method and HTTP status code.
# TYPE fa_broker_http_requests_total counter
fa_broker_http_requests_total{code="200",method="GET",route="/api/v1/reservations/:id"} 2
fa_broker_http_requests_total{code="404",method="GET",route="unmatched"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), MetricRequests); err != nil {
		t.Error(err)
	}
}

// TestRateLimitClasses: reservation creates have their own bucket per
// caller, so an exhausted bucket of other calls (heartbeats, views, long
// polls) does not refuse a scale-up, and a burst of creates does not
// starve the rest (the reference shares one bucket, bug #20).
func TestRateLimitClasses(t *testing.T) {
	clk := &manualClock{t: time.Unix(1_800_000_000, 0)}
	b := &fakeBroker{ReserveFn: func(_ context.Context, _, id string, _ api.ReservationRequest) (api.ReservationResponse, bool, error) {
		return api.ReservationResponse{ReservationID: id}, true, nil
	}}
	app := newTestApp(t, b, func(c *Config) { c.RateLimitBurst, c.RateLimitRPS, c.Now = 10, 5, clk.Now })
	for i := range 10 {
		if r := do(t, app, "GET", "/healthz", cons, ""); r.status != 200 {
			t.Fatalf("request %d: %d", i, r.status)
		}
	}
	if r := do(t, app, "GET", "/healthz", cons, ""); r.status != 429 {
		t.Fatalf("11th plain request: %d, want 429", r.status)
	}
	for i := range 10 {
		if r := do(t, app, "POST", "/api/v1/reservations", cons, goodRes); r.status != 201 {
			t.Fatalf("reservation %d with the other bucket empty: %d %s", i, r.status, r.body)
		}
	}
	if r := do(t, app, "POST", "/api/v1/reservations", cons, goodRes); r.status != 429 {
		t.Fatalf("11th reservation: %d, want 429", r.status)
	}
	if r := do(t, app, "GET", "/api/v1/instructions", cons, ""); r.status != 200 {
		t.Fatalf("instructions have their own bucket: %d", r.status)
	}
}

// TestReleasesHaveTheirOwnBucket: a scale-down's burst of releases right
// after every other bucket of the consumer is empty (creates, polls and
// results, heartbeats) is served in full; the release bucket holds at
// least --rate-limit-burst tokens and refills at the common rate.
func TestReleasesHaveTheirOwnBucket(t *testing.T) {
	for _, tt := range []struct {
		name          string
		burst, rel, n int // RateLimitBurst, ReleaseBurst, releases served
	}{
		{"default release burst", 10, 0, DefaultReleaseBurst},
		{"configured release burst", 10, 14, 14},
		{"never below the common burst", 20, 5, 20},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clk := &manualClock{t: time.Unix(1_800_000_000, 0)}
			app := newTestApp(t, &fakeBroker{}, func(c *Config) {
				c.RateLimitBurst, c.RateLimitRPS, c.ReleaseBurst, c.Now = tt.burst, 5, tt.rel, clk.Now
			})
			for _, call := range []struct{ method, path, body string }{
				{"POST", "/api/v1/heartbeat", goodHB},
				{"POST", "/api/v1/reservations", goodRes},
				{"GET", "/api/v1/instructions", ""},
			} {
				for {
					if r := do(t, app, call.method, call.path, cons, call.body); r.status == 429 {
						break
					}
				}
			}
			for i := range tt.n {
				if r := do(t, app, "DELETE", fmt.Sprintf("/api/v1/reservations/res-%d", i), cons, ""); r.status != 202 {
					t.Fatalf("release %d of %d after the other buckets ran dry: %d %s", i+1, tt.n, r.status, r.body)
				}
			}
			r := do(t, app, "DELETE", "/api/v1/reservations/one-too-many", cons, "")
			if r.status != 429 || r.header.Get("Retry-After") != "1" {
				t.Fatalf("release %d: %d Retry-After %q, want 429 after 1s", tt.n+1, r.status, r.header.Get("Retry-After"))
			}
			clk.Step(200 * time.Millisecond) // one token at 5/s
			if r := do(t, app, "DELETE", "/api/v1/reservations/after-refill", cons, ""); r.status != 202 {
				t.Fatalf("release after a refill: %d", r.status)
			}
			// Releases did not drain the other buckets' refill either.
			if r := do(t, app, "POST", "/api/v1/reservations", cons, goodRes); r.status != 201 {
				t.Fatalf("create after a refill: %d", r.status)
			}
		})
	}
}
