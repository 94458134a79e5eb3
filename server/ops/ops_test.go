package ops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/web/auth"
	"github.com/federation-autoscaler/federation-autoscaler/web/auth/authtest"
)

type overviewFunc func(context.Context) (api.Overview, error)

func (f overviewFunc) Overview(ctx context.Context) (api.Overview, error) { return f(ctx) }

type explanationsFunc func(context.Context) ([]api.PlacementExplanation, error)

func (f explanationsFunc) Explanations(ctx context.Context) ([]api.PlacementExplanation, error) {
	return f(ctx)
}

func get(t *testing.T, app *fiber.App, path string, header ...string) (int, map[string][]string, string) {
	t.Helper()
	req := httptest.NewRequest("GET", path, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := app.Test(req, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func TestEndpoints(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "broker_test_total", Help: "t"})
	reg.MustRegister(c)
	c.Inc()
	ready := &Readiness{}
	app := New(Config{
		Overview: overviewFunc(func(context.Context) (api.Overview, error) {
			return api.Overview{Capacity: api.CapacitySummary{TotalChunks: 7}}, nil
		}),
		Explanations: explanationsFunc(func(context.Context) ([]api.PlacementExplanation, error) {
			return []api.PlacementExplanation{{ConsumerClusterID: "lyon", AppliedPlacement: api.PlacementEco}}, nil
		}),
		Gatherer:  reg,
		Readiness: ready,
	})
	if s, _, _ := get(t, app, "/healthz"); s != 200 {
		t.Errorf("healthz %d", s)
	}
	s, _, body := get(t, app, "/readyz")
	if s != 503 || !strings.Contains(body, `"store":"not loaded"`) {
		t.Errorf("readyz before load: %d %s", s, body)
	}
	ready.SetStoreLoaded(true)
	if s, _, body := get(t, app, "/readyz"); s != 503 || !strings.Contains(body, `"api":"not serving"`) {
		t.Errorf("readyz before serving: %d %s", s, body)
	}
	ready.SetAPIServing(true)
	if s, _, body := get(t, app, "/readyz"); s != 200 || !strings.Contains(body, `"status":"ready"`) {
		t.Errorf("readyz: %d %s", s, body)
	}
	if s, _, body := get(t, app, "/metrics"); s != 200 || !strings.Contains(body, "broker_test_total 1") {
		t.Errorf("metrics: %d %s", s, body)
	}
	s, h, body := get(t, app, "/api/v1/overview")
	var ov api.Overview
	if s != 200 || json.Unmarshal([]byte(body), &ov) != nil || ov.Capacity.TotalChunks != 7 {
		t.Errorf("overview: %d %s", s, body)
	}
	if h["Cache-Control"][0] != "no-store" {
		t.Errorf("Cache-Control %v", h["Cache-Control"])
	}
	s, h, body = get(t, app, "/api/v1/placement/explanations")
	var list api.PlacementExplanationList
	if s != 200 || json.Unmarshal([]byte(body), &list) != nil || len(list.Explanations) != 1 || list.Explanations[0].ConsumerClusterID != "lyon" {
		t.Errorf("explanations: %d %s", s, body)
	}
	if h["Cache-Control"][0] != "no-store" {
		t.Errorf("explanations Cache-Control %v", h["Cache-Control"])
	}
	if s, _, body := get(t, app, "/"); s != 200 || !strings.Contains(body, "<h1>") {
		t.Errorf("placeholder: %d %s", s, body)
	}
	if s, _, body := get(t, app, "/nope"); s != 404 || !strings.Contains(body, `"code":"NotFound"`) {
		t.Errorf("unknown: %d %s", s, body)
	}
}

func TestTokenGuardAndMounts(t *testing.T) {
	app := New(Config{
		Overview:     overviewFunc(func(context.Context) (api.Overview, error) { return api.Overview{}, nil }),
		Explanations: explanationsFunc(func(context.Context) ([]api.PlacementExplanation, error) { return nil, nil }),
		Readiness:    &Readiness{},
		Token:        "s3cret",
		Mounts: []Mount{func(app *fiber.App) Access {
			app.Get("/", func(c *fiber.Ctx) error { return c.SendString("dashboard") })
			app.Get("/login", func(c *fiber.Ctx) error { return c.SendString("login") })
			return Access{
				Owns:          func(path string) bool { return path == "/login" },
				Authenticated: func(c *fiber.Ctx) bool { return c.Cookies("session") == "good" },
			}
		}},
	})
	for _, tc := range []struct {
		path   string
		header []string
		want   int
	}{
		{"/healthz", nil, 200},
		{"/readyz", nil, 503},
		{"/metrics", nil, 200},
		{"/api/v1/overview", nil, 401},
		{"/api/v1/overview", []string{"Authorization", "Bearer wrong"}, 401},
		{"/api/v1/overview", []string{"Authorization", "Bearer s3cret"}, 200},
		{"/api/v1/overview?token=s3cret", nil, 200},
		{"/api/v1/placement/explanations", nil, 401},
		{"/api/v1/placement/explanations", []string{"Authorization", "Bearer s3cret"}, 200},
		{"/", nil, 401},
		{"/?token=s3cret", nil, 200},
		{"/login", nil, 200},
		{"/api/v1/overview", []string{"Cookie", "session=good"}, 200},
		{"/", []string{"Cookie", "session=good"}, 200},
		{"/api/v1/overview", []string{"Cookie", "session=bad"}, 401},
	} {
		if s, _, body := get(t, app, tc.path, tc.header...); s != tc.want {
			t.Errorf("GET %s %v: %d %s, want %d", tc.path, tc.header, s, body, tc.want)
		}
	}
	if _, _, body := get(t, app, "/?token=s3cret"); body != "dashboard" {
		t.Errorf("mounted page not served: %q", body)
	}
}

func TestOverviewErrorIsInternal(t *testing.T) {
	app := New(Config{
		Overview:  overviewFunc(func(context.Context) (api.Overview, error) { return api.Overview{}, errors.New("boom") }),
		Readiness: &Readiness{},
	})
	if s, _, body := get(t, app, "/api/v1/overview"); s != 500 || strings.Contains(body, "boom") {
		t.Errorf("overview error: %d %s", s, body)
	}
}

// TestTokenGuardThrottlesWrongTokensPerClient: over real connections, a
// client guessing tokens gets 429 with Retry-After once past the burst (its
// guesses are no longer checked), while another client's right token and a
// session keep working.
func TestTokenGuardThrottlesWrongTokensPerClient(t *testing.T) {
	var clock atomic.Int64 // read by the server's goroutines
	clock.Store(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC).UnixNano())
	app := New(Config{
		Overview:  overviewFunc(func(context.Context) (api.Overview, error) { return api.Overview{}, nil }),
		Readiness: &Readiness{},
		Token:     "0123456789abcdef-token",
		Now:       func() time.Time { return time.Unix(0, clock.Load()) },
	})
	base := authtest.Serve(t, app)
	get := func(c *http.Client, token string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("GET", base+"/api/v1/overview", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	guesser, owner := authtest.ClientFrom("127.0.0.2"), authtest.ClientFrom("127.0.0.3")
	statuses := map[int]int{}
	for i := range 50 {
		resp := get(guesser, fmt.Sprintf("guess-%d", i))
		statuses[resp.StatusCode]++
		if resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") != "1" {
			t.Fatalf("429 with Retry-After %q, want 1 (2 failures/s)", resp.Header.Get("Retry-After"))
		}
	}
	if statuses[401] != auth.DefaultThrottleBurst || statuses[429] != 50-auth.DefaultThrottleBurst {
		t.Fatalf("50 wrong tokens at once: %v, want %d × 401 then 429", statuses, auth.DefaultThrottleBurst)
	}
	// Throttled, even the right token is refused from that client: the
	// answer must not tell a right guess from a wrong one.
	if resp := get(guesser, "0123456789abcdef-token"); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("right token from the throttled client: %d, want 429", resp.StatusCode)
	}
	for range 20 {
		if resp := get(owner, "0123456789abcdef-token"); resp.StatusCode != http.StatusOK {
			t.Fatalf("the owner's token during the flood: %d, want 200", resp.StatusCode)
		}
	}
	clock.Add(int64(time.Second))
	if resp := get(guesser, "0123456789abcdef-token"); resp.StatusCode != http.StatusOK {
		t.Fatalf("right token after the wait: %d, want 200", resp.StatusCode)
	}
}

// The dashboard listener's transport errors carry their own wire codes,
// as the API's do (issue #11 item 10): 408 RequestTimeout and 431
// RequestHeadersTooLarge, never InvalidRequest.
func TestTransportErrorsCarryTheirCodes(t *testing.T) {
	for _, tc := range []struct {
		status int
		want   string
	}{
		{http.StatusBadRequest, api.CodeInvalidRequest},
		{http.StatusUnauthorized, api.CodeUnauthenticated},
		{http.StatusNotFound, api.CodeNotFound},
		{http.StatusMethodNotAllowed, api.CodeMethodNotAllowed},
		{http.StatusRequestTimeout, api.CodeRequestTimeout},
		{http.StatusRequestEntityTooLarge, api.CodePayloadTooLarge},
		{http.StatusRequestHeaderFieldsTooLarge, api.CodeRequestHeadersTooLarge},
		{http.StatusTooManyRequests, api.CodeTooManyRequests},
		{http.StatusTeapot, api.CodeInvalidRequest},
		{http.StatusInternalServerError, api.CodeInternalError},
		{http.StatusBadGateway, api.CodeUpstreamError},
		{http.StatusHTTPVersionNotSupported, api.CodeInternalError},
	} {
		if got := codeFor(tc.status); got != tc.want {
			t.Errorf("codeFor(%d) = %q, want %q", tc.status, got, tc.want)
		}
	}
	// The 431 over a real connection: fasthttp refuses the headers before
	// any route runs and the error handler names the code.
	base := authtest.Serve(t, New(Config{
		Overview:  overviewFunc(func(context.Context) (api.Overview, error) { return api.Overview{}, nil }),
		Readiness: &Readiness{},
	}))
	req, _ := http.NewRequest("GET", base+"/healthz", nil)
	req.Header.Set("X-Filler", strings.Repeat("a", 8<<10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e api.ErrorResponse
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil || resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge || e.Code != api.CodeRequestHeadersTooLarge {
		t.Fatalf("8 KiB of headers: %d %+v (%v), want 431 %s", resp.StatusCode, e, err, api.CodeRequestHeadersTooLarge)
	}
}
