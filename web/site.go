package web

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"mime"
	"net/url"
	"path"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/a-h/templ"
	"github.com/gofiber/fiber/v2"
	"k8s.io/utils/clock"

	"github.com/federation-autoscaler/federation-autoscaler/assets"
	"github.com/federation-autoscaler/federation-autoscaler/web/auth"
	"github.com/federation-autoscaler/federation-autoscaler/web/live"
	"github.com/federation-autoscaler/federation-autoscaler/web/views"
)

// SessionEndedMessage is what the login page says when the browser's
// session ended.
const SessionEndedMessage = "Your session has ended: the console restarted, the session expired (after 12 hours) or you logged out in another tab. Log in again to go back to where you were; a form you had not sent yet is filled in again."

// productName ends every page title.
const productName = "Federation Autoscaler"

// site holds what the dashboard and both consoles share: the route prefix,
// optional login, the live hub and its publisher.
type site struct {
	prefix string
	// loginHint tells where the login token comes from.
	loginHint string
	// running guards against a second Run.
	running atomic.Bool
	// failingSince is when the backend first failed to answer (zero: it
	// answers); owned by the publisher goroutine, like sent, the parts of
	// the last publication (the backend's state notice last).
	failingSince time.Time
	sent         []segments
	// logins bounds failed login attempts per client.
	logins *auth.Throttle
	title  string
	// currency is the ISO 4217 code prices are shown in.
	currency string
	// places are the cities of the consoles' location picker.
	places  places
	authn   *auth.Authenticator // nil: no login
	hub     *live.Hub
	log     *slog.Logger
	clock   clock.WithTicker
	refresh time.Duration
	// coalesce is the shortest time between two publications: a burst of
	// changes within it is published once, at its end.
	coalesce time.Duration
	// renderShare is the fraction of one core the publisher may spend: after
	// a publication that took d, the next waits at least d/renderShare.
	renderShare float64
	// publications counts the publications done, each counted once its
	// message is with the hub (tests and benchmarks read it).
	publications atomic.Int64
	// wakes counts the publisher's wake-ups, each counted once handled
	// (tests read it).
	wakes atomic.Int64
	// dueAt is when the publication that is due will be done (Unix ns on
	// the site's clock), 0 when none is due (benchmarks read it).
	dueAt  atomic.Int64
	wsOpts live.WSOptions
	// life bounds websocket connections; cancelled when Run returns.
	life       context.Context
	lifeCancel context.CancelFunc
	// render builds the live fragment broadcast to every client, in parts:
	// each part is one or more top-level elements with ids (the live script
	// replaces an element by its id), and a publication carries only the
	// parts whose HTML changed since the last (see send).
	render func(ctx context.Context) ([]templ.Component, error)
	// subscribe is the backend's change signal.
	subscribe func(ctx context.Context) <-chan struct{}
}

// DefaultCoalesce is the shortest time between two live publications of a
// console (ConsoleOptions.Coalesce): at most 4 per second, however fast the
// state changes. The dashboard's is DefaultDashboardCoalesce.
const DefaultCoalesce = 250 * time.Millisecond

// DefaultRenderShare is the fraction of one core a page's live publisher
// may spend rendering (DashboardOptions.RenderShare,
// ConsoleOptions.RenderShare): 0.5 %. A page whose publication costs 5 ms
// of CPU (a dashboard of ~250 providers and 250 consumers, with its charts
// and explanations cached) is published at most once a second; a page
// costing more than Refresh/200 is published once per Refresh, so its
// share grows past 0.5 %. With one viewer the broker's budget of issue #13
// (0.05 ms per request at 250 + 250 agents, 175 requests/s) is 0.9 % of a
// core for everything a viewer costs (see docs/performance.md).
const DefaultRenderShare = 0.005

// SiteOptions configure what the dashboard and both consoles share: where
// a page lives, its login, its clock, how often its live part is published,
// its currency and its log. DashboardOptions and ConsoleOptions embed them;
// zero values take the defaults.
type SiteOptions struct {
	// Prefix is the path the page lives under ("" = the listener's root).
	// Routes: Prefix+"/", "/ws", "/static/*", with a login "/login" and
	// "/logout", and a console's forms.
	Prefix string
	// Token verifies the login token. A console requires one (see
	// auth.OpenTokenStore, auth.TokenFromFile and auth.NewStaticToken); the
	// dashboard requires a login only when it is set (the broker's
	// --dashboard-token).
	Token auth.Verifier
	// SecureCookie marks the session cookie Secure (set it behind TLS).
	SecureCookie bool
	// Clock drives sessions, ages, the history and the refresh ticker
	// (default real).
	Clock clock.WithTicker
	// Refresh re-renders the live part this often even without a change, so
	// ages stay current (default 5s); only while a browser is connected.
	Refresh time.Duration
	// Coalesce is the shortest time between two live publications: changes
	// within it are published once (default DefaultCoalesce).
	Coalesce time.Duration
	// RenderShare is the fraction of one core the live publisher may spend:
	// after a publication that cost d of CPU, the next one waits at least
	// d/RenderShare, at most Refresh (default DefaultRenderShare; at most 1).
	RenderShare float64
	// Currency is the ISO 4217 code prices are shown in (default
	// DefaultCurrency).
	Currency string
	Log      *slog.Logger
}

// newSite builds the site opts configure (title: productName).
func newSite(opts SiteOptions) (*site, error) {
	prefix, log, clk := opts.Prefix, opts.Log, opts.Clock
	refresh, coalesce, share := opts.Refresh, opts.Coalesce, opts.RenderShare
	cur, err := checkCurrency(opts.Currency)
	if err != nil {
		return nil, err
	}
	if prefix != "" {
		if !strings.HasPrefix(prefix, "/") || strings.HasSuffix(prefix, "/") {
			return nil, errors.New("web: the path prefix must start with / and not end with / (or be empty)")
		}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	if refresh <= 0 {
		refresh = 5 * time.Second
	}
	if coalesce <= 0 {
		coalesce = DefaultCoalesce
	}
	if !(share > 0 && share <= 1) {
		share = DefaultRenderShare
	}
	life, cancel := context.WithCancel(context.Background())
	return &site{
		prefix: prefix, title: productName, currency: cur, log: log, clock: clk, refresh: refresh, coalesce: coalesce, renderShare: share,
		hub:    live.NewHub(log, live.DefaultClientBuffer),
		wsOpts: live.WSOptions{Log: log},
		life:   life, lifeCancel: cancel,
		logins: auth.NewThrottle(auth.ThrottleOptions{}),
	}, nil
}

func (s *site) path(p string) string { return s.prefix + p }

func (s *site) page(c *fiber.Ctx, heading, who string, withWS bool) views.Page {
	p := views.Page{Title: heading + " · " + s.title, Heading: heading, Who: who, Base: s.prefix}
	if withWS {
		p.WSPath = s.path("/ws")
		p.SessionPath = s.path("/session")
		if s.authn != nil {
			p.LoginPath = s.path("/login")
		}
	}
	if sess, ok := auth.SessionOf(c); ok {
		p.CSRF = sess.CSRF
		p.LoggedIn = true
	}
	return p
}

// mountCommon registers static assets, login/logout and the websocket, and
// returns the middleware protecting pages (a pass-through without login).
func (s *site) mountCommon(app *fiber.App) (protect fiber.Handler) {
	hdr := auth.SecurityHeaders()
	app.Get(s.path("/static/:name"), hdr, s.static)
	protect = func(c *fiber.Ctx) error { return c.Next() }
	wsProtect := protect
	wsOpts := s.wsOpts
	if s.authn != nil {
		protect = s.authn.Require(func(c *fiber.Ctx) error {
			next := string(c.Request().URI().RequestURI())
			if c.Method() != fiber.MethodGet {
				next = s.path("/") // a form cannot be replayed after the login
			}
			return c.Redirect(s.loginURL(next, s.authn.Stale(c)), fiber.StatusSeeOther)
		})
		wsProtect = s.authn.Require(func(c *fiber.Ctx) error {
			return fiber.NewError(fiber.StatusUnauthorized, "log in first")
		})
		wsOpts.Clock = s.clock
		wsOpts.End = func(c *fiber.Ctx) (<-chan struct{}, time.Time) {
			sess, _ := auth.SessionOf(c)
			return sess.Ended(), sess.Expires
		}
		app.Get(s.path("/login"), hdr, s.loginForm)
		app.Post(s.path("/login"), hdr, s.login)
		app.Post(s.path("/logout"), hdr, protect, s.logout)
	}
	app.Get(s.path("/session"), hdr, s.session)
	app.Get(s.path("/ws"), wsProtect, live.Handler(s.life, s.hub, wsOpts))
	return protect
}

// loginURL is the login page that returns to next (a local path) after the
// login; ended says that the browser's session ended (the page says so).
func (s *site) loginURL(next string, ended bool) string {
	u := s.path("/login") + "?next=" + url.QueryEscape(auth.SafeNext(next))
	if ended {
		u += "&ended=1"
	}
	return u
}

// session answers whether the browser's login session is alive: 204 when
// it is (or the site has no login), 401 when it ended or never began. The
// pages' script asks before it reconnects its websocket and before it
// sends a form, so that an ended session is explained instead of showing
// stale state as live or landing a form on the login page.
func (s *site) session(c *fiber.Ctx) error {
	c.Set(fiber.HeaderCacheControl, "no-store")
	if s.authn == nil {
		return c.SendStatus(fiber.StatusNoContent)
	}
	if _, ok := s.authn.Current(c); !ok {
		c.Set(fiber.HeaderContentType, fiber.MIMETextPlainCharsetUTF8)
		return c.Status(fiber.StatusUnauthorized).SendString("session ended: log in again")
	}
	return c.SendStatus(fiber.StatusNoContent)
}

// route registers a page or form handler behind the security headers and
// the session check.
func (s *site) route(app *fiber.App, method, p string, protect, h fiber.Handler) {
	app.Add(method, s.path(p), auth.SecurityHeaders(), protect, h)
}

func (s *site) static(c *fiber.Ctx) error {
	name := path.Clean(c.Params("name"))
	b, err := fs.ReadFile(assets.FS(), name)
	if err != nil {
		return fiber.ErrNotFound
	}
	ct := mime.TypeByExtension(path.Ext(name))
	if ct == "" {
		ct = "application/octet-stream"
	}
	c.Set(fiber.HeaderContentType, ct)
	c.Set(fiber.HeaderCacheControl, "no-cache")
	return c.Send(b)
}

func (s *site) loginForm(c *fiber.Ctx) error {
	if _, ok := s.authn.Current(c); ok {
		return c.Redirect(auth.SafeNext(c.Query("next")), fiber.StatusSeeOther)
	}
	l := views.Login{Next: auth.SafeNext(c.Query("next")), Hint: s.loginHint}
	if c.Query("ended") != "" || s.authn.Stale(c) {
		l.Ended = SessionEndedMessage
	}
	return s.renderPage(c, fiber.StatusOK, views.LoginPage(s.page(c, "Log in", "", false), l))
}

// login checks the login form. Failed attempts are throttled per client
// (auth.Throttle defaults: 2 per second, burst 10): one client's flood of
// wrong tokens never locks another client out.
func (s *site) login(c *fiber.Ctx) error {
	next := auth.SafeNext(formValue(c, "next"))
	attempt, wait, ok := s.logins.Begin(c.IP(), s.clock.Now())
	if !ok {
		auth.SetRetryAfter(c, wait)
		return s.renderPage(c, fiber.StatusTooManyRequests, views.LoginPage(s.page(c, "Log in", "", false), views.Login{
			Next: next, Error: "Too many failed login attempts from your address; wait " + auth.RetryAfterSeconds(wait) + " s and try again.", Hint: s.loginHint,
		}))
	}
	if _, err := s.authn.Login(c, formValue(c, "token")); err != nil {
		s.log.Info("console login refused", "remote", c.IP())
		msg := "Login refused: the access token is not correct."
		if !errors.Is(err, auth.ErrBadToken) {
			msg = "Login failed: " + err.Error()
		}
		return s.renderPage(c, fiber.StatusUnauthorized, views.LoginPage(s.page(c, "Log in", "", false), views.Login{
			Next: next, Error: msg, Hint: s.loginHint,
		}))
	}
	attempt.Succeeded()
	return c.Redirect(s.path(strings.TrimPrefix(next, s.prefix)), fiber.StatusSeeOther)
}

func (s *site) logout(c *fiber.Ctx) error {
	sess, _ := auth.SessionOf(c)
	if err := auth.CheckCSRF(c, sess); err != nil {
		return s.csrfRefused(c, err)
	}
	s.authn.Logout(c)
	return c.Redirect(s.path("/login"), fiber.StatusSeeOther)
}

// csrfRefused answers a write without a valid CSRF token: 403 and a page
// saying why.
func (s *site) csrfRefused(c *fiber.Ctx, err error) error {
	s.log.Info("write refused: CSRF token missing or wrong", "path", c.Path(), "remote", c.IP())
	return s.renderPage(c, fiber.StatusForbidden, views.ProblemPage(s.page(c, "Request refused", "", false), views.Problem{
		Title:   "Request refused",
		Message: "Refused: " + err.Error() + ".",
		Back:    s.path("/"),
	}))
}

// checkWrite verifies the session's CSRF token on a write.
func (s *site) checkWrite(c *fiber.Ctx) error {
	sess, ok := auth.SessionOf(c)
	if !ok {
		return fiber.ErrUnauthorized
	}
	return auth.CheckCSRF(c, sess)
}

func (s *site) renderPage(c *fiber.Ctx, status int, comp templ.Component) error {
	var buf bytes.Buffer
	if err := comp.Render(c.UserContext(), &buf); err != nil {
		s.log.Error("render page", "path", c.Path(), "err", err)
		return fiber.NewError(fiber.StatusInternalServerError, "the page could not be rendered")
	}
	c.Status(status)
	c.Set(fiber.HeaderContentType, fiber.MIMETextHTMLCharsetUTF8)
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.Send(buf.Bytes())
}

// run publishes the live fragment until ctx is done, only while at least
// one browser is connected: nothing is rendered for nobody. A change (or a
// refresh period, so ages stay current) marks the page dirty; a dirty page
// is published at most once per coalesce period (longer when rendering is
// expensive, see renderShare), so a burst of changes costs one render. A
// browser joining a hub without a current fragment
// (nobody watched since the last publication) gets one at once, or at the
// end of the current period.
func (s *site) run(ctx context.Context) error {
	if !s.running.CompareAndSwap(false, true) {
		return errors.New("web: Run was already called")
	}
	defer s.lifeCancel()
	hubDone := make(chan struct{})
	go func() { defer close(hubDone); s.hub.Run(ctx) }()
	defer func() { <-hubDone }()
	changes := s.subscribe(ctx)
	tick := s.clock.NewTicker(s.refresh)
	defer tick.Stop()
	p := &publisher{s: s, gap: s.coalesce}
	defer p.stop()
	for {
		// Changes are read only while one can lead to a publication: a
		// browser is connected and no publication is due yet. A change
		// meanwhile waits in the channel (buffer 1), so a busy broker wakes
		// this goroutine once or twice per period, not once per change
		// (docs/performance.md). A browser that joins finds the waiting
		// change (or Wanted fires).
		var watch <-chan struct{}
		if p.due == nil && s.hub.Clients() > 0 {
			watch = changes
		}
		select {
		case <-ctx.Done():
			return nil
		case _, ok := <-watch:
			if !ok {
				if ctx.Err() != nil {
					return nil
				}
				return errors.New("web: the backend closed its change subscription")
			}
			p.schedule(ctx)
		case <-s.hub.Wanted():
			p.schedule(ctx)
		case <-tick.C():
			if s.hub.Clients() > 0 {
				p.schedule(ctx)
			}
		case <-p.due:
			p.due, p.timer = nil, nil
			s.dueAt.Store(0)
			if p.dirty && s.hub.Clients() > 0 {
				p.flush(ctx)
			}
		}
		s.wakes.Add(1)
	}
}

// publisher is run's coalescing state; only run's goroutine touches it.
type publisher struct {
	s     *site
	dirty bool
	gap   time.Duration    // shortest time until the next publication
	last  time.Time        // of the last publication
	timer clock.Timer      // armed while a publication is due
	due   <-chan time.Time // timer's channel; nil when none is armed
}

// flush publishes now and sets the next gap from the render's cost.
func (p *publisher) flush(ctx context.Context) {
	s := p.s
	p.dirty = false
	p.last = s.clock.Now()
	// The goroutine keeps its OS thread while it renders, so that the
	// render's cost is the thread's CPU time: waiting for a core on a
	// loaded machine does not count (wall-clock time where the thread's
	// CPU time cannot be read). Only while it renders: waking a goroutine
	// locked to a thread costs a thread switch.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cpu0, cpuOK := threadCPU()
	wall0 := time.Now()
	s.publish(ctx)
	cost := time.Since(wall0)
	if cpu1, ok := threadCPU(); ok && cpuOK {
		cost = cpu1 - cpu0
	}
	// At most one refresh period apart: ages on the page stay as
	// current as Refresh promises even when a render is expensive.
	p.gap = min(max(s.coalesce, time.Duration(float64(cost)/s.renderShare)), max(s.coalesce, s.refresh))
}

// schedule publishes now when the last publication is at least one period
// old, or arms the timer for the end of the period.
func (p *publisher) schedule(ctx context.Context) {
	s := p.s
	p.dirty = true
	if p.due != nil || s.hub.Clients() == 0 {
		return
	}
	wait := p.gap - s.clock.Since(p.last)
	if wait <= 0 {
		p.flush(ctx)
		return
	}
	p.timer = s.clock.NewTimer(wait)
	p.due = p.timer.C()
	s.dueAt.Store(s.clock.Now().Add(wait).UnixNano())
}

func (p *publisher) stop() {
	if p.timer != nil {
		p.timer.Stop()
	}
}

// publish renders and broadcasts the live fragment. When the backend cannot
// be read, browsers keep the last state and get a notice saying since when
// it is stale; the notice goes away with the next good update. It runs on
// the publisher goroutine only (failingSince and sent are not shared).
func (s *site) publish(ctx context.Context) {
	defer s.publications.Add(1)
	parts, err := s.renderParts(ctx)
	if err != nil {
		if s.failingSince.IsZero() {
			s.failingSince = s.clock.Now()
			s.log.Warn("live update: backend state unavailable", "err", err)
		}
		var buf bytes.Buffer
		msg := "The state could not be read since " + clockTime(s.failingSince) + " UTC (retrying); the page shows the last known state."
		if err := views.BackendState(msg).Render(ctx, &buf); err != nil {
			return
		}
		// The panels last sent stay, with the notice.
		kept := make([]part, 0, len(s.sent))
		for _, h := range s.sent[:max(len(s.sent)-1, 0)] {
			kept = append(kept, part{html: h})
		}
		s.send(ctx, append(kept, part{html: segments{buf.Bytes()}}))
		return
	}
	if !s.failingSince.IsZero() {
		s.log.Info("live update: backend state readable again", "after", s.clock.Since(s.failingSince).String())
		s.failingSince = time.Time{}
	}
	var buf bytes.Buffer
	if err := views.BackendState("").Render(ctx, &buf); err != nil {
		return
	}
	s.send(ctx, append(parts, part{html: segments{buf.Bytes()}}))
}

// part is one part of the live fragment as rendered: its HTML and, when it
// was rendered from its previous rendering (base) by replacing some of its
// elements, those elements (patch, see patchable).
type part struct {
	html, base, patch segments
}

// segments is HTML in pieces written one after the other: a part
// assembled from cached pieces (a range's charts) is not copied into one.
type segments [][]byte

func (s segments) Render(_ context.Context, w io.Writer) error {
	for _, b := range s {
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	return nil
}

func (s segments) len() int {
	n := 0
	for _, b := range s {
		n += len(b)
	}
	return n
}

// sameSegments reports whether a and b are the same HTML in the same
// pieces (a part handed out again from a cache is the same slices).
func sameSegments(a, b segments) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !sameBytes(a[i], b[i]) {
			return false
		}
	}
	return true
}

// patchable is a part rendered from its previous rendering, base, by
// replacing some of its elements (table rows, a range's charts): patch
// holds the new ones, each a top-level element with the id of the one it
// replaces, or a <table data-patch> whose rows do (assets/static/live.js).
// A viewer whose page shows base is sent patch instead of the whole part.
type patchable struct {
	segments
	base, patch segments
}

// renderParts renders the live fragment's parts. A part rendered before
// (cached by its page) is taken as it is, without a copy.
func (s *site) renderParts(ctx context.Context) ([]part, error) {
	comps, err := s.render(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]part, 0, len(comps)+1)
	for i, c := range comps {
		switch r := c.(type) {
		case rendered:
			out = append(out, part{html: segments{r}})
			continue
		case segments:
			out = append(out, part{html: r})
			continue
		case patchable:
			out = append(out, part{html: r.segments, base: r.base, patch: r.patch})
			continue
		}
		var buf bytes.Buffer
		if i < len(s.sent) {
			// Sized from the last time: growing a buffer of megabytes by
			// doubling copies it about twice over.
			n := s.sent[i].len()
			buf.Grow(n + n/8)
		}
		if err := c.Render(ctx, &buf); err != nil {
			return nil, err
		}
		out = append(out, part{html: segments{buf.Bytes()}})
	}
	return out, nil
}

// send publishes the whole fragment with its delta: a browser that has had
// every publication since it joined receives only the delta (nothing when
// no part changed), one that joins the whole fragment (live.Hub).
func (s *site) send(ctx context.Context, parts []part) {
	delta := s.delta(parts)
	var full [][]byte
	for _, p := range s.sent {
		full = append(full, p...)
	}
	s.hub.Publish(ctx, live.Message{Delta: delta, Full: full})
}

// delta is what turns the last publication's page into parts': each part
// whose HTML differs (every part when their number changed), as its patch
// when it is patchable from the part last published, else whole. parts
// become the last publication.
func (s *site) delta(parts []part) []byte {
	out := make([]segments, len(parts))
	n := 0
	for i, p := range parts {
		switch {
		case len(parts) == len(s.sent) && sameSegments(p.html, s.sent[i]):
			continue
		case len(parts) == len(s.sent) && p.patch != nil && sameSegments(p.base, s.sent[i]):
			out[i] = p.patch
		default:
			out[i] = p.html
		}
		n += out[i].len()
	}
	joined := make([]byte, 0, n)
	for _, segs := range out {
		for _, b := range segs {
			joined = append(joined, b...)
		}
	}
	s.sent = make([]segments, len(parts))
	for i, p := range parts {
		s.sent[i] = p.html
	}
	return joined
}

// sameBytes is bytes.Equal that first asks whether a and b are the same
// slice: a cached part is handed out again unchanged.
func sameBytes(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) == 0 || &a[0] == &b[0] {
		return true
	}
	return bytes.Equal(a, b)
}

// formValue returns a copy of a form field: Fiber's strings alias buffers
// that are reused after the request, and form values are stored.
func formValue(c *fiber.Ctx, name string) string {
	return strings.Clone(c.FormValue(name))
}

// formGetter reads the request's form fields (the form parsers take it so
// that they can be tested and fuzzed without a request).
func formGetter(c *fiber.Ctx) func(string) string {
	return func(name string) string { return formValue(c, name) }
}
