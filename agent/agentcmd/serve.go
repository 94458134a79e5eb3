package agentcmd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/federation-autoscaler/federation-autoscaler/web"
)

// Run runs every loop of the agent until ctx ends (it returns nil) or one
// of them fails (it stops the others and returns that error). It waits for
// all of them, then closes the listeners and the broker client.
func (a *Agent) Run(ctx context.Context) error {
	defer a.release()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errc := make(chan error, len(a.tasks))
	for _, t := range a.tasks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := t.run(ctx); err != nil && ctx.Err() == nil {
				errc <- fmt.Errorf("%s: %w", t.name, err)
			}
		}()
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	cancel()
	wg.Wait()
	return err
}

// Close releases what Assemble took, for a caller that gives up before
// Run (Run releases it itself when it returns).
func (a *Agent) Close() { a.release() }

// release closes what Assemble took, in reverse order.
func (a *Agent) release() {
	for i := len(a.cleanup) - 1; i >= 0; i-- {
		a.cleanup[i]()
	}
	a.cleanup = nil
}

// serveHTTP serves h on ln while the agent runs; on stop it lets the open
// requests finish for up to 5 s.
func (as *assembly) serveHTTP(name string, ln net.Listener, h http.Handler) {
	log := as.log
	as.run(name, func(ctx context.Context) error {
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 120 * time.Second}
		stopped := make(chan struct{})
		stop := context.AfterFunc(ctx, func() {
			defer close(stopped)
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if err := srv.Shutdown(sctx); err != nil {
				log.Warn("Stopping the "+name+" listener", "err", err)
			}
		})
		err := srv.Serve(ln)
		if !stop() {
			<-stopped // the agent is stopping: wait for the shutdown
		}
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	})
}

// serveConsole serves a console on a guarded listener while the agent runs.
func (as *assembly) serveConsole(ctx context.Context, app *fiber.App, live func(context.Context) error) error {
	ln, err := as.listen(ctx, "console", "console", as.d.ConsoleListen)
	if err != nil {
		return err
	}
	as.a.Addrs.Console = ln.Addr().String()
	as.run("console", func(ctx context.Context) error { return web.Serve(ctx, app, ln) })
	as.run("console live updates", live)
	as.log.Info("Console listening", "addr", ln.Addr().String())
	return nil
}
