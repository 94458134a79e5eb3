// Package rest is the broker's Broker API v1 over mTLS: a Fiber application
// with the middleware chain of the reference broker (panic recovery, request
// id, access log, identity, per-CN rate limit, body limit), role gating,
// strict JSON decoding and one place that turns domain errors into the
// wire's ErrorResponse. The domain behind it is the Broker interface.
//
// Serve the application on a TLS listener built from pki.ServerTLSConfig:
//
//	app := rest.NewApp(rest.Config{Broker: svc, Logger: log})
//	go app.Listener(tls.NewListener(ln, tlsConfig))
package rest

import (
	"context"
	"crypto/x509"
	"log/slog"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// Defaults of Config.
const (
	DefaultRateLimitBurst = 10
	DefaultRateLimitRPS   = 5
	// DefaultReleaseBurst is the burst of the releases' bucket
	// (DELETE /api/v1/reservations/{id}): a whole scale-down at once. A
	// release only frees capacity, only the reservation's consumer may
	// send it, and releasing one already on its way out writes nothing.
	DefaultReleaseBurst = 100
	// DefaultBodyLimit is the largest request body the API reads (1 MiB).
	DefaultBodyLimit = 1 << 20
	// MaxWait bounds GET /api/v1/instructions?wait=.
	MaxWait = 60 * time.Second
	// BrokerAPI is the value of the X-Broker-Api response header.
	BrokerAPI = "federation-autoscaler/v1"
)

// Transport limits: a request whose line and headers exceed readBufferSize
// is answered 431 RequestHeadersTooLarge, one not received within
// readTimeout 408 RequestTimeout.
const (
	readBufferSize = 4096 // fasthttp's default
	readTimeout    = 30 * time.Second
)

// Config configures NewApp.
type Config struct {
	// Broker is the domain (required).
	Broker Broker
	// Logger receives access logs and internal errors (default: discard).
	Logger *slog.Logger
	// AllowLegacyCerts accepts client certificates that carry no role (the
	// reference broker's) for both roles. Without it they get 403.
	AllowLegacyCerts bool
	// RoleOf reads the role recorded in a client certificate (default
	// pki.RoleOf).
	RoleOf func(*x509.Certificate) (api.Role, bool)
	// RateLimitBurst and RateLimitRPS size the per-CN token bucket of each
	// rate-limit class (defaults 10 and 5/s).
	RateLimitBurst int
	RateLimitRPS   float64
	// ReleaseBurst is the burst of the releases' class, which refills at
	// RateLimitRPS (default DefaultReleaseBurst; never below
	// RateLimitBurst).
	ReleaseBurst int
	// BodyLimit is the largest accepted request body in bytes (default 1 MiB).
	BodyLimit int
	// Metrics registers the HTTP metrics (nil: not registered).
	Metrics prometheus.Registerer
	// Now is the clock (default time.Now).
	Now func() time.Time
	// BaseContext returns the context of every domain call; cancelling it
	// ends long-polls at once (shutdown). Default context.Background.
	BaseContext func() context.Context
	// NewID generates request ids and reservation ids (default UUID v4).
	NewID func() string

	// peer overrides the TLS peer lookup in unit tests.
	peer func(*fiber.Ctx) (*x509.Certificate, bool)
}

// NewApp returns the Broker API v1 application. It panics if cfg.Broker is
// nil or a metric cannot be registered (a programming error).
func NewApp(cfg Config) *fiber.App {
	s := newServer(cfg)
	app := fiber.New(fiber.Config{
		AppName:               BrokerAPI,
		DisableStartupMessage: true,
		CaseSensitive:         true,
		// Strings read from the request (path parameters, headers) are
		// handed to the domain, which may keep them.
		Immutable: true,
		// The transport cap is above BodyLimit so bodies between the two
		// reach the body-limit middleware (after identity and rate limit);
		// larger ones are cut by fasthttp and still answered by the error
		// handler as 413 PayloadTooLarge.
		BodyLimit:      4 * s.bodyLimit,
		ReadBufferSize: readBufferSize,
		ReadTimeout:    readTimeout,
		WriteTimeout:   MaxWait + 15*time.Second,
		IdleTimeout:    120 * time.Second,
		// Every agent keeps a connection open and calls every few
		// seconds: between calls its read and write buffers go back to
		// the pool instead of staying with the idle connection (8 KiB
		// per agent, 80 MiB at 10 000 agents).
		ReduceMemoryUsage: true,
		ErrorHandler:      s.handleError,
		JSONEncoder:       jsonMarshal,
		JSONDecoder:       jsonUnmarshal,
	})
	app.Use(s.recoverPanics, s.requestID, s.accessLog, s.identify, s.rateLimit, s.limitBody)
	s.registerRoutes(app)
	app.Use(s.unrouted)
	srv := app.Server()
	srv.Handler = s.knownMethods(app, srv.Handler)
	return app
}
