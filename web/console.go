package web

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/gofiber/fiber/v2"
	"k8s.io/utils/clock"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/web/auth"
)

// ConsoleOptions configures a provider or consumer console.
type ConsoleOptions struct {
	// Prefix is the path the console lives under ("" = root).
	Prefix string
	// Token verifies the login token (required): see auth.OpenTokenStore,
	// auth.TokenFromFile and auth.NewStaticToken.
	Token auth.Verifier
	// SecureCookie marks the session cookie Secure (set it behind TLS).
	SecureCookie bool
	// Clock drives sessions, ages and the refresh ticker (default real).
	Clock clock.WithTicker
	// Refresh re-renders the live parts this often even without a change
	// (default 5s), only while a browser is connected.
	Refresh time.Duration
	// Coalesce is the shortest time between two live publications
	// (default DefaultCoalesce).
	Coalesce time.Duration
	// RenderShare bounds the live publisher's CPU (default
	// DefaultRenderShare): see DashboardOptions.RenderShare.
	RenderShare float64
	// Currency is the ISO 4217 code prices are shown in (default
	// DefaultCurrency).
	Currency string
	// Places are the cities the location picker offers (city, region and
	// coordinates; the geo data's, e.g. geo.Places()). Empty: no picker.
	Places []api.Topology
	Log    *slog.Logger
}

func newConsoleSite(opts ConsoleOptions) (*site, error) {
	if opts.Token == nil {
		return nil, errors.New("web: a console needs a login token verifier (ConsoleOptions.Token)")
	}
	cur, err := checkCurrency(opts.Currency)
	if err != nil {
		return nil, err
	}
	s, err := newSite(opts.Prefix, productName, opts.Log, opts.Clock, liveTiming{opts.Refresh, opts.Coalesce, opts.RenderShare})
	if err != nil {
		return nil, err
	}
	s.currency = cur
	s.places = newPlaces(opts.Places)
	a, err := auth.NewAuthenticator(auth.Options{Verifier: opts.Token, Secure: opts.SecureCookie, Now: s.clock.Now})
	if err != nil {
		return nil, err
	}
	s.authn = a
	s.loginHint = "The console printed its token once, when it first started (or read it from its token file or Secret)."
	return s, nil
}

// NewApp returns a Fiber app configured for the consoles: bounded bodies and
// timeouts, no startup banner, and errors answered as plain text with the
// security headers.
func NewApp() *fiber.App {
	return fiber.New(fiber.Config{
		DisableStartupMessage: true,
		BodyLimit:             64 << 10,
		ReadTimeout:           15 * time.Second,
		WriteTimeout:          15 * time.Second,
		IdleTimeout:           60 * time.Second,
		ErrorHandler: func(c *fiber.Ctx, err error) error {
			code := fiber.StatusInternalServerError
			msg := "internal error"
			var fe *fiber.Error
			if errors.As(err, &fe) {
				code, msg = fe.Code, fe.Message
			}
			h := &c.Response().Header
			h.Set("X-Content-Type-Options", "nosniff")
			h.Set("X-Frame-Options", "DENY")
			h.Set("Content-Security-Policy", auth.ContentSecurityPolicy)
			c.Set(fiber.HeaderContentType, fiber.MIMETextPlainCharsetUTF8)
			return c.Status(code).SendString(msg)
		},
	})
}

// Serve serves app on ln until ctx is done, then shuts it down (waiting at
// most 5s for requests in flight).
func Serve(ctx context.Context, app *fiber.App, ln net.Listener) error {
	errc := make(chan error, 1)
	go func() { errc <- app.Listener(ln) }()
	select {
	case err := <-errc:
		if err != nil {
			return fmt.Errorf("serve %s: %w", ln.Addr(), err)
		}
		return nil
	case <-ctx.Done():
	}
	err := app.ShutdownWithTimeout(5 * time.Second)
	// Shutdown is a no-op when it runs before Listener has started serving
	// (a stop right after a start); closing the listener ends Serve in
	// every case.
	_ = ln.Close()
	<-errc //nolint:errcheck // after the close, Serve's own error only says the listener closed
	if err != nil {
		return fmt.Errorf("shut down %s: %w", ln.Addr(), err)
	}
	return nil
}
