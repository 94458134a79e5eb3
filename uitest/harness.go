// Package uitest drives the broker dashboard and the provider and consumer
// consoles in a real browser (Debian's Chromium through playwright-go).
//
// The tests run against a Target: by default the demo federation
// (StartDemo: the real broker, agents, adapter and autoscaler on simulated
// clusters, in process); FA_UITEST_FAKE=1 selects the fake federation
// (StartFake: the real web handlers over web/webfake backends, which can
// pause reservation progress for a screenshot of an instruction in flight);
// FA_UITEST_DASHBOARD_URL and friends (see TargetFromEnv) point them at a
// running federation instead.
package uitest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/federation-autoscaler/federation-autoscaler/mocks/demo"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/web"
	"github.com/federation-autoscaler/federation-autoscaler/web/auth"
	"github.com/federation-autoscaler/federation-autoscaler/web/webfake"
)

// Target is what the browser tests drive.
type Target struct {
	DashboardURL string
	// Providers maps a provider cluster id to its console URL and token.
	Providers map[string]Console
	Consumer  Console
	// CheapestProvider is where a Price-policy workload lands.
	CheapestProvider string
	// DropDashboardSockets closes every dashboard websocket from the server
	// side (nil when the target cannot do it; the test then skips that step).
	DropDashboardSockets func(ctx context.Context)
	// PauseProgress stops (true) and resumes (false) reservation progress
	// (nil when the target cannot; the test then skips that screenshot).
	PauseProgress func(bool)
	// Overview reads the broker's real state, which the test compares with
	// what the pages show (nil: GET DashboardURL/api/v1/overview).
	Overview func(ctx context.Context) (api.Overview, error)
	// StopProviderAgent stops one provider's agent (its cluster keeps
	// running, as when the agent dies) and RestartProviderAgent starts it
	// again (nil when the target cannot; the test then skips that step).
	StopProviderAgent    func(id string) error
	RestartProviderAgent func(id string) error
	// ConsumerLocalAPI is the consumer agent's local API (its masked node
	// groups and virtual nodes), which the field checks compare the
	// consumer console with ("" when the target has none: skipped).
	ConsumerLocalAPI string
}

// BrokerOverview reads the broker's state through Overview, or through the
// dashboard listener's GET /api/v1/overview.
func (t *Target) BrokerOverview(ctx context.Context) (api.Overview, error) {
	if t.Overview != nil {
		return t.Overview(ctx)
	}
	var ov api.Overview
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.DashboardURL+"/api/v1/overview", nil)
	if err != nil {
		return ov, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return ov, fmt.Errorf("reading the broker overview: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return ov, fmt.Errorf("reading the broker overview: %s", resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&ov); err != nil {
		return ov, fmt.Errorf("decoding the broker overview: %w", err)
	}
	return ov, nil
}

// BrokerExplanations reads every consumer's placement explanation through
// the dashboard listener's GET /api/v1/placement/explanations; ok is false
// when the target has no such route (the fake federation).
func (t *Target) BrokerExplanations(ctx context.Context) (list []api.PlacementExplanation, ok bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.DashboardURL+"/api/v1/placement/explanations", nil)
	if err != nil {
		return nil, false, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, false, fmt.Errorf("reading the broker's explanations: %w", err)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		return nil, false, nil
	default:
		return nil, false, fmt.Errorf("reading the broker's explanations: %s", resp.Status)
	}
	var out api.PlacementExplanationList
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, false, fmt.Errorf("decoding the broker's explanations: %w", err)
	}
	return out.Explanations, true, nil
}

// Console is one console's address and login token.
type Console struct {
	URL   string
	Token string
}

// TargetFromEnv reads a real federation's addresses:
//
//	FA_UITEST_DASHBOARD_URL   the broker dashboard
//	FA_UITEST_PROVIDERS       id=url=token,id=url=token,…
//	FA_UITEST_CONSUMER        url=token
//	FA_UITEST_CHEAPEST        the provider a Price workload lands on
//
// It returns nil when FA_UITEST_DASHBOARD_URL is unset.
func TargetFromEnv() (*Target, error) {
	dash := os.Getenv("FA_UITEST_DASHBOARD_URL")
	if dash == "" {
		return nil, nil
	}
	t := &Target{DashboardURL: dash, Providers: map[string]Console{}, CheapestProvider: os.Getenv("FA_UITEST_CHEAPEST")}
	for _, item := range strings.Split(os.Getenv("FA_UITEST_PROVIDERS"), ",") {
		if item == "" {
			continue
		}
		parts := strings.SplitN(item, "=", 3)
		if len(parts) != 3 {
			return nil, fmt.Errorf("FA_UITEST_PROVIDERS: %q is not id=url=token", item)
		}
		t.Providers[parts[0]] = Console{URL: parts[1], Token: parts[2]}
	}
	url, token, ok := strings.Cut(os.Getenv("FA_UITEST_CONSUMER"), "=")
	if !ok {
		return nil, errors.New("FA_UITEST_CONSUMER must be url=token")
	}
	t.Consumer = Console{URL: url, Token: token}
	return t, nil
}

// Fake is an in-process federation serving the real dashboard and consoles.
type Fake struct {
	Target
	Fed       *webfake.Federation
	Dashboard *web.Dashboard
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	errs      chan error
}

// StartFake serves the dashboard and one console per provider plus the
// consumer console on loopback ports. Tokens are generated through
// auth.OpenTokenStore under dir. Reservations advance one phase every step.
func StartFake(ctx context.Context, dir string, step time.Duration) (*Fake, error) {
	ctx, cancel := context.WithCancel(ctx)
	f := &Fake{Fed: webfake.New(nil), cancel: cancel, errs: make(chan error, 16)}
	f.Providers = map[string]Console{}
	f.CheapestProvider = "paris"
	fail := func(err error) (*Fake, error) { _ = f.Stop(); return nil, err }

	f.wg.Add(1)
	go func() { defer f.wg.Done(); f.Fed.Run(ctx, step) }()

	d, err := web.NewDashboard(f.Fed, web.DashboardOptions{SiteOptions: web.SiteOptions{Refresh: time.Second}})
	if err != nil {
		return fail(err)
	}
	f.Dashboard = d
	app := web.NewApp()
	d.Mount(app)
	url, err := f.serve(ctx, app, d.Run)
	if err != nil {
		return fail(err)
	}
	f.DashboardURL = url
	f.DropDashboardSockets = d.DropClients
	f.PauseProgress = f.Fed.Pause
	f.Overview = f.Fed.Overview

	for _, id := range f.Fed.ProviderIDs() {
		ts, token, err := auth.OpenTokenStore(filepath.Join(dir, id+".token"), nil)
		if err != nil {
			return fail(err)
		}
		pc, err := web.NewProviderConsole(f.Fed.Provider(id), web.ConsoleOptions{SiteOptions: web.SiteOptions{Token: ts, Refresh: time.Second}})
		if err != nil {
			return fail(err)
		}
		url, err := f.serve(ctx, pc.App(), pc.Run)
		if err != nil {
			return fail(err)
		}
		f.Providers[id] = Console{URL: url, Token: token}
	}
	ts, token, err := auth.OpenTokenStore(filepath.Join(dir, "consumer.token"), nil)
	if err != nil {
		return fail(err)
	}
	cc, err := web.NewConsumerConsole(f.Fed.Consumer(), web.ConsoleOptions{SiteOptions: web.SiteOptions{Token: ts, Refresh: time.Second}})
	if err != nil {
		return fail(err)
	}
	url, err = f.serve(ctx, cc.App(), cc.Run)
	if err != nil {
		return fail(err)
	}
	f.Consumer = Console{URL: url, Token: token}
	return f, nil
}

func (f *Fake) serve(ctx context.Context, app *fiber.App, run func(context.Context) error) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("listen: %w", err)
	}
	f.wg.Add(2)
	go func() {
		defer f.wg.Done()
		if err := run(ctx); err != nil {
			f.errs <- err
		}
	}()
	go func() {
		defer f.wg.Done()
		if err := web.Serve(ctx, app, ln); err != nil {
			f.errs <- err
		}
	}()
	return "http://" + ln.Addr().String(), nil
}

// Stop shuts everything down and returns the first background error.
func (f *Fake) Stop() error {
	f.cancel()
	f.wg.Wait()
	select {
	case err := <-f.errs:
		return err
	default:
		return nil
	}
}

// Demo is the demo federation (mocks/demo) serving the browser tests: the
// real broker, agents, adapter and autoscaler on simulated clusters.
type Demo struct {
	Target
	Fed    *demo.Federation
	cancel context.CancelFunc
}

// StartDemo starts the demo federation with its data in dir (0 s peering
// delay, 1 s autoscaler scan) and describes it as a Target. The Price
// policy lands on Sydney, the cheapest of the default providers.
// tune, when given, adjusts the options first (a test's model endpoint).
func StartDemo(ctx context.Context, dir string, tune ...func(*demo.Options)) (*Demo, error) {
	ctx, cancel := context.WithCancel(ctx)
	o := demo.Options{DataDir: dir, ScanInterval: time.Second, AdvertiseInterval: 5 * time.Second}
	for _, f := range tune {
		f(&o)
	}
	fed, err := demo.Start(ctx, o)
	if err != nil {
		cancel()
		return nil, err
	}
	d := &Demo{Fed: fed, cancel: cancel}
	d.DashboardURL = fed.DashboardURL
	d.Providers = map[string]Console{}
	for _, p := range fed.Providers {
		d.Providers[p.Spec.ID] = Console{URL: p.ConsoleURL, Token: fed.ConsoleToken}
	}
	d.Consumer = Console{URL: fed.Consumer.ConsoleURL, Token: fed.ConsoleToken}
	d.ConsumerLocalAPI = fed.Consumer.LocalAPIURL
	d.CheapestProvider = "sydney"
	d.DropDashboardSockets = fed.DropDashboardClients
	d.StopProviderAgent = func(id string) error {
		p := fed.Provider(id)
		if p == nil {
			return fmt.Errorf("the demo has no provider %q", id)
		}
		p.Stop()
		return nil
	}
	d.RestartProviderAgent = func(id string) error {
		p := fed.Provider(id)
		if p == nil {
			return fmt.Errorf("the demo has no provider %q", id)
		}
		return p.Restart()
	}
	return d, nil
}

// Stop stops the federation and waits for every component.
func (d *Demo) Stop() error {
	d.cancel()
	return d.Fed.Stop()
}
