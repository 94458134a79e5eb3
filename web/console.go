package web

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/a-h/templ"
	"github.com/gofiber/fiber/v2"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/web/auth"
)

// ConsoleOptions configures a provider or consumer console.
type ConsoleOptions struct {
	// SiteOptions: the prefix, the login token (required), the clock, the
	// live timing, the currency, the log.
	SiteOptions
	// Places are the cities the location picker offers (city, region and
	// coordinates; the geo data's, e.g. geo.Places()). Empty: no picker.
	Places []api.Topology
}

// liveBackend is a console backend's change signal.
type liveBackend interface {
	Subscribe(ctx context.Context) <-chan struct{}
}

// consoleRoutes is what a console adds to the base it embeds: its routes
// and its live fragment.
type consoleRoutes interface {
	Mount(app *fiber.App)
	renderLive(ctx context.Context) (templ.Component, error)
}

// console is the base both consoles embed: the site, with its login, over
// the backend's change signal, and App and Run.
type console struct {
	site  *site
	mount func(app *fiber.App)
}

// setup builds the base of the role's console (c's routes and live
// fragment) over backend.
func (b *console) setup(role string, backend liveBackend, opts ConsoleOptions, c consoleRoutes) error {
	if backend == nil {
		return fmt.Errorf("web: the %s console needs a backend", role)
	}
	if opts.Token == nil {
		return errors.New("web: a console needs a login token verifier (ConsoleOptions.Token)")
	}
	s, err := newSite(opts.SiteOptions)
	if err != nil {
		return err
	}
	s.places = newPlaces(opts.Places)
	a, err := auth.NewAuthenticator(auth.Options{Verifier: opts.Token, Secure: opts.SecureCookie, Now: s.clock.Now})
	if err != nil {
		return err
	}
	s.authn = a
	s.loginHint = "The console printed its token once, when it first started (or read it from its token file or Secret)."
	s.subscribe = backend.Subscribe
	s.render = func(ctx context.Context) ([]templ.Component, error) {
		// A console's fragment is small: one part, sent whole on a change.
		comp, err := c.renderLive(ctx)
		return []templ.Component{comp}, err
	}
	b.site, b.mount = s, c.Mount
	return nil
}

// App returns a new Fiber app (see NewApp) with the console mounted.
func (b *console) App() *fiber.App {
	app := NewApp()
	b.mount(app)
	return app
}

// Run pushes status changes to connected browsers until ctx is done.
func (b *console) Run(ctx context.Context) error { return b.site.run(ctx) }

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
