// Package ops is the broker's dashboard listener (plain HTTP, default
// :9444): liveness, readiness, Prometheus metrics, the read-only overview
// JSON and the web dashboard, which other packages mount through Mount
// options without editing this one. An optional bearer token guards the
// overview and the pages (wrong tokens throttled per client); /healthz,
// /readyz and /metrics stay open for probes and scrapers.
package ops

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/web/auth"
)

// OverviewSource produces the overview (the broker's domain).
type OverviewSource interface {
	Overview(ctx context.Context) (api.Overview, error)
}

// ExplanationSource lists every consumer's placement explanation (the
// broker's domain).
type ExplanationSource interface {
	Explanations(ctx context.Context) ([]api.PlacementExplanation, error)
}

// Mount adds routes to the dashboard application (the web dashboard uses
// it) and tells the token guard how those routes authenticate. Mounted
// routes are behind the guard unless the returned Access owns them.
type Mount func(app *fiber.App) Access

// Access describes a mount's own authentication to the token guard. The
// zero value means the mount relies on the guard entirely.
type Access struct {
	// Owns reports the paths the mount authenticates itself (a login page,
	// a session cookie, static files, a websocket); the guard lets them
	// through.
	Owns func(path string) bool
	// Authenticated reports whether a request carries the mount's own
	// credential (a dashboard session); the guard accepts it in place of
	// the token on the routes it guards (the overview).
	Authenticated func(c *fiber.Ctx) bool
}

// Readiness tracks what /readyz reports. The zero value is not ready.
type Readiness struct {
	store atomic.Bool
	api   atomic.Bool
}

// SetStoreLoaded records that the store is open and loaded.
func (r *Readiness) SetStoreLoaded(v bool) { r.store.Store(v) }

// SetAPIServing records whether the API listener is serving.
func (r *Readiness) SetAPIServing(v bool) { r.api.Store(v) }

// ReadyResponse is the body of /readyz.
type ReadyResponse struct {
	Status string            `json:"status"`
	Checks map[string]string `json:"checks"`
}

func (r *Readiness) report() (bool, ReadyResponse) {
	resp := ReadyResponse{Status: "ready", Checks: map[string]string{"store": "loaded", "api": "serving"}}
	ok := true
	if !r.store.Load() {
		ok = false
		resp.Checks["store"] = "not loaded"
	}
	if !r.api.Load() {
		ok = false
		resp.Checks["api"] = "not serving"
	}
	if !ok {
		resp.Status = "not ready"
	}
	return ok, resp
}

// Config configures New.
type Config struct {
	// Overview answers GET /api/v1/overview (required).
	Overview OverviewSource
	// Explanations, when set, answers GET /api/v1/placement/explanations
	// (behind the token like the overview).
	Explanations ExplanationSource
	// Gatherer is exposed on /metrics (default: an empty registry).
	Gatherer prometheus.Gatherer
	// Readiness feeds /readyz (required).
	Readiness *Readiness
	// Token, when set, is required as "Authorization: Bearer <token>" or
	// ?token=<token> on everything but /healthz, /readyz and /metrics.
	Token string
	// Logger receives errors (default: discard).
	Logger *slog.Logger
	// Mounts add the web dashboard's routes. Without any, GET / answers a
	// placeholder page.
	Mounts []Mount
	// OverviewTimeout bounds one overview computation (default 10 s).
	OverviewTimeout time.Duration
	// Now is the token throttle's clock (default time.Now).
	Now func() time.Time
}

// openPaths skip the token guard.
var openPaths = map[string]bool{"/healthz": true, "/readyz": true, "/metrics": true}

// New returns the dashboard application.
func New(cfg Config) *fiber.App {
	if cfg.Overview == nil || cfg.Readiness == nil {
		panic("ops: Config.Overview and Config.Readiness are required")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	gatherer := cfg.Gatherer
	if gatherer == nil {
		gatherer = prometheus.NewRegistry()
	}
	timeout := cfg.OverviewTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	app := newApp(log)
	mountProbes(app, cfg.Readiness, gatherer, log)
	// Mounts run after the guard is registered (Fiber runs middleware in
	// registration order) but before serving, so accesses is complete and
	// read-only by the time a request arrives.
	var accesses []Access
	if cfg.Token != "" {
		now := cfg.Now
		if now == nil {
			now = time.Now
		}
		app.Use(tokenGuard(cfg.Token, &accesses, auth.NewThrottle(auth.ThrottleOptions{}), now))
	}
	app.Get("/api/v1/overview", func(c *fiber.Ctx) error {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		ov, err := cfg.Overview.Overview(ctx)
		if err != nil {
			return err
		}
		c.Set(fiber.HeaderCacheControl, "no-store")
		return writeJSON(c, http.StatusOK, ov)
	})
	if cfg.Explanations != nil {
		app.Get("/api/v1/placement/explanations", func(c *fiber.Ctx) error {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			list, err := cfg.Explanations.Explanations(ctx)
			if err != nil {
				return err
			}
			c.Set(fiber.HeaderCacheControl, "no-store")
			return writeJSON(c, http.StatusOK, api.PlacementExplanationList{Explanations: list})
		})
	}
	for _, m := range cfg.Mounts {
		accesses = append(accesses, m(app))
	}
	if len(cfg.Mounts) == 0 {
		app.Get("/", func(c *fiber.Ctx) error {
			c.Set(fiber.HeaderContentType, fiber.MIMETextHTMLCharsetUTF8)
			c.Set(fiber.HeaderCacheControl, "no-store")
			return c.SendString(placeholderPage)
		})
	}
	return app
}

// newApp is the dashboard listener's Fiber app: its timeouts, and errors as
// the API's JSON (an unexpected one logged and answered "internal error").
func newApp(log *slog.Logger) *fiber.App {
	return fiber.New(fiber.Config{
		AppName:               "federation-autoscaler dashboard",
		DisableStartupMessage: true,
		ReadTimeout:           30 * time.Second,
		WriteTimeout:          30 * time.Second,
		IdleTimeout:           120 * time.Second,
		ErrorHandler: func(c *fiber.Ctx, err error) error {
			code := fiber.StatusInternalServerError
			if fe, ok := err.(*fiber.Error); ok {
				code = fe.Code
			} else {
				log.Error("Dashboard request failed", "path", c.Path(), "err", err)
				err = fiber.NewError(code, "internal error")
			}
			return writeJSON(c, code, api.ErrorResponse{Code: codeFor(code), Message: err.(*fiber.Error).Message})
		},
	})
}

// mountProbes serves /healthz, /readyz and /metrics (never behind the
// token).
func mountProbes(app *fiber.App, ready *Readiness, gatherer prometheus.Gatherer, log *slog.Logger) {
	app.Get("/healthz", func(c *fiber.Ctx) error {
		return writeJSON(c, http.StatusOK, api.HealthResponse{Status: "ok"})
	})
	app.Get("/readyz", func(c *fiber.Ctx) error {
		ok, resp := ready.report()
		status := http.StatusOK
		if !ok {
			status = http.StatusServiceUnavailable
		}
		return writeJSON(c, status, resp)
	})
	app.Get("/metrics", adaptor.HTTPHandler(promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{ErrorLog: slogPrinter{log}})))
}

const placeholderPage = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Federation Autoscaler broker</title></head>
<body><h1>Federation Autoscaler broker</h1>
<p>The web dashboard is not part of this build. The broker's state is at
<a href="/api/v1/overview">/api/v1/overview</a>, its metrics at <a href="/metrics">/metrics</a>.</p>
</body></html>
`

// tokenGuard requires the token on every path but the open probe paths and
// the paths a mount authenticates itself; a mount's own credential is
// accepted in place of the token. Wrong tokens are throttled per client
// (auth.Throttle): a throttled client gets 429 with Retry-After before its
// token is looked at.
func tokenGuard(token string, accesses *[]Access, throttle *auth.Throttle, now func() time.Time) fiber.Handler {
	want := []byte(token)
	return func(c *fiber.Ctx) error {
		if openPaths[c.Path()] {
			return c.Next()
		}
		for _, a := range *accesses {
			if a.Owns != nil && a.Owns(c.Path()) {
				return c.Next()
			}
		}
		for _, a := range *accesses {
			if a.Authenticated != nil && a.Authenticated(c) {
				return c.Next()
			}
		}
		got := c.Query("token")
		if h := c.Get(fiber.HeaderAuthorization); h != "" {
			got, _ = strings.CutPrefix(h, "Bearer ")
		}
		if got != "" {
			attempt, wait, ok := throttle.Begin(c.IP(), now())
			if !ok {
				auth.SetRetryAfter(c, wait)
				return fiber.NewError(http.StatusTooManyRequests, "too many wrong dashboard tokens from your address; retry after "+auth.RetryAfterSeconds(wait)+" s")
			}
			if subtle.ConstantTimeCompare([]byte(got), want) == 1 {
				attempt.Succeeded()
				return c.Next()
			}
		}
		c.Set(fiber.HeaderWWWAuthenticate, `Bearer realm="federation-autoscaler"`)
		return fiber.NewError(http.StatusUnauthorized, "a dashboard token is required: send Authorization: Bearer <token> or ?token=<token>")
	}
}

func codeFor(status int) string {
	if code, ok := api.CodeForStatus(status); ok {
		return code
	}
	if status >= 500 {
		return api.CodeInternalError
	}
	return api.CodeInvalidRequest
}

func writeJSON(c *fiber.Ctx, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderContentType, "application/json; charset=utf-8")
	return c.Status(status).Send(b)
}

// slogPrinter adapts slog to promhttp's error logger.
type slogPrinter struct{ log *slog.Logger }

func (p slogPrinter) Println(v ...any) { p.log.Error("Metrics gathering failed", "err", v) }
