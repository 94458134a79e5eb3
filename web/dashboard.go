package web

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/a-h/templ"
	"github.com/gofiber/fiber/v2"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/web/auth"
	"github.com/federation-autoscaler/federation-autoscaler/web/views"
)

// DashboardOptions configures the broker dashboard. Zero values take the
// defaults.
type DashboardOptions struct {
	// SiteOptions: the prefix, the optional login token (the broker's
	// --dashboard-token), the clock, the live timing, the currency, the log.
	SiteOptions
	// HistoryWindow is the span of the charts (default DefaultHistoryWindow); SampleEvery is
	// the history resolution and the period at which the history is sampled,
	// whatever the rate of changes and whether or not anyone watches
	// (default 5s).
	HistoryWindow time.Duration
	SampleEvery   time.Duration
	// HistoryStore, when set, keeps the history (chart samples and what
	// each consumer spent today and this month) across restarts: one
	// record per sample, the window's worth.
	HistoryStore HistoryStore
	// StaleAfter marks a provider stale when its last advertisement is older
	// (default 2m).
	StaleAfter time.Duration
}

// DefaultDashboardCoalesce is the dashboard's shortest time between two
// live publications (DashboardOptions.Coalesce): at most one a second. The
// page counts the ages itself and nobody acts on it, so a second is live
// enough, and a big federation's dashboard changes between any two
// publications: each one costs the broker. The consoles, where an operator
// waits for the result of a form, keep DefaultCoalesce.
const DefaultDashboardCoalesce = time.Second

// Dashboard is the broker's live, read-only dashboard.
type Dashboard struct {
	site *site
	src  OverviewSource
	hist *history
	evs  *eventLog
	opts DashboardOptions
	// snap caches the last overview read, keyed by the source's version
	// when the source is Versioned; why the same for the explanations (nil
	// explain: the source has none).
	snap    overviewCache
	explain ExplanationSource
	why     versionCache[[]api.PlacementExplanation]
	// parts are the live page's panels as last rendered, each with the
	// values it was rendered from: a publication re-renders only the
	// panels whose values changed.
	parts *dashboardParts
}

// dashboardParts are the cached panels of the live dashboard. The charts
// change only with a new sample, every SampleEvery, each range at its
// cadence (chartsCache); the explanations are keyed by the list the source
// handed out, every table by its rows, the big tables' rows each by its
// values.
type dashboardParts struct {
	charts       chartsCache
	why          partCache[listKey]
	providers    *tableCache[views.ProviderRow]
	consumers    *tableCache[views.ConsumerRow]
	migrations   partCache[[]views.MigrationRow]
	totals       partCache[[]views.TotalsRow]
	reservations partCache[[]views.ReservationRow]
	instructions partCache[[]views.InstructionRow]
	events       partCache[eventsKey]
}

func newDashboardParts() *dashboardParts {
	p := &dashboardParts{
		why:          partCache[listKey]{same: eq[listKey]},
		providers:    newTableCache(func(r views.ProviderRow) string { return r.ID }, views.ProviderTableRow, views.ProvidersTable),
		consumers:    newTableCache(func(r views.ConsumerRow) string { return r.ID }, views.ConsumerTableRow, views.ConsumersTable),
		migrations:   partCache[[]views.MigrationRow]{same: slices.Equal[[]views.MigrationRow]},
		totals:       partCache[[]views.TotalsRow]{same: slices.Equal[[]views.TotalsRow]},
		reservations: partCache[[]views.ReservationRow]{same: func(a, b []views.ReservationRow) bool { return reflect.DeepEqual(a, b) }},
		instructions: partCache[[]views.InstructionRow]{same: slices.Equal[[]views.InstructionRow]},
		events:       partCache[eventsKey]{same: sameEvents},
	}
	return p
}

func eq[K comparable](a, b K) bool { return a == b }

// eventsKey is what the events list is rendered from.
type eventsKey struct {
	events               []views.EventRow
	consumers, providers []string
}

func sameEvents(a, b eventsKey) bool {
	return slices.Equal(a.events, b.events) && slices.Equal(a.consumers, b.consumers) && slices.Equal(a.providers, b.providers)
}

// listKey identifies a list of explanations handed out by the
// ExplanationSource: the source never modifies a list it handed out and
// hands the same list out again while nothing it explains changed (see
// ExplanationSource), so the same key means the same explanations. The
// cached key's pointer keeps its list alive: its address cannot be reused
// by a later list.
type listKey struct {
	first *api.PlacementExplanation
	n     int
}

func keyOf(exs []api.PlacementExplanation) listKey {
	if len(exs) == 0 {
		return listKey{}
	}
	return listKey{&exs[0], len(exs)}
}

// partCache holds one panel of the live page rendered from the values key
// stands for: a key the same as the cached one hands out the same bytes,
// another renders again. Safe for concurrent use (the publisher and page
// loads).
type partCache[K any] struct {
	same  func(a, b K) bool
	mu    sync.Mutex
	valid bool
	key   K
	html  rendered
	// renders counts the renders (tests read it).
	renders int
}

// get returns the panel rendered from the values key stands for, rendered
// by render only when key is not the same as the cached one. A key that
// is not the values themselves (a generation) must be taken before the
// values render reads, so that a change meanwhile moves it again and is
// rendered next time. The key is kept: it must not be modified afterwards.
func (c *partCache[K]) get(ctx context.Context, key K, render func() templ.Component) (templ.Component, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.valid && c.same(c.key, key) {
		return c.html, nil
	}
	var buf bytes.Buffer
	buf.Grow(len(c.html) + len(c.html)/8)
	if err := render().Render(ctx, &buf); err != nil {
		c.valid = false
		return nil, err
	}
	// A fresh buffer each time: the bytes handed out before stay intact.
	c.valid, c.key, c.html = true, key, buf.Bytes()
	c.renders++
	return c.html, nil
}

// rendered is HTML rendered before, written as it is.
type rendered []byte

func (r rendered) Render(_ context.Context, w io.Writer) error {
	_, err := w.Write(r)
	return err
}

// Versioned is an optional interface of an OverviewSource: Version changes
// after every change of the state the overview shows (it never goes back).
// The dashboard reads the overview again only when the version moved.
type Versioned interface {
	Version() uint64
}

// versionCache holds a value read at a version of a Versioned source (the
// overview, the explanations).
type versionCache[T any] struct {
	mu      sync.Mutex
	src     Versioned // nil: the source is not versioned, never cached
	valid   bool
	version uint64
	val     T
}

// overviewCache is the cache of the overview.
type overviewCache = versionCache[api.Overview]

// get returns the value, read from read only when the version moved since
// the last read. The value must not be modified by the caller.
func (c *versionCache[T]) get(ctx context.Context, read func(context.Context) (T, error)) (T, error) {
	if c.src == nil {
		return read(ctx)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	// The version is taken before the read: the value then holds at
	// least every change up to it, so a change after it moves the version
	// again and is read next time.
	v := c.src.Version()
	if c.valid && c.version == v {
		return c.val, nil
	}
	val, err := read(ctx)
	if err != nil {
		var zero T
		return zero, err
	}
	c.valid, c.version, c.val = true, v, val
	return val, nil
}

// NewDashboard builds the dashboard over src. Mount it on a Fiber app and
// call Run.
func NewDashboard(src OverviewSource, opts DashboardOptions) (*Dashboard, error) {
	if src == nil {
		return nil, fmt.Errorf("web: the dashboard needs an overview source")
	}
	if opts.StaleAfter <= 0 {
		opts.StaleAfter = 2 * time.Minute
	}
	if opts.Coalesce <= 0 {
		opts.Coalesce = DefaultDashboardCoalesce
	}
	s, err := newSite(opts.SiteOptions)
	if err != nil {
		return nil, err
	}
	if opts.Token != nil {
		a, err := auth.NewAuthenticator(auth.Options{
			Verifier: opts.Token, Secure: opts.SecureCookie, CookieName: "fa_dashboard", Now: s.clock.Now,
		})
		if err != nil {
			return nil, err
		}
		s.authn = a
		s.loginHint = "Use the token the broker was started with (--dashboard-token)."
	}
	d := &Dashboard{site: s, src: src, hist: newHistory(opts.HistoryWindow, opts.SampleEvery), evs: newEventLog(MaxEvents), opts: opts, parts: newDashboardParts()}
	d.snap.src, _ = src.(Versioned)
	d.why.src = d.snap.src
	d.explain, _ = src.(ExplanationSource)
	s.subscribe = src.Subscribe
	s.render = d.renderLive
	return d, nil
}

// Mount registers the dashboard's routes on app.
func (d *Dashboard) Mount(app *fiber.App) {
	protect := d.site.mountCommon(app)
	d.site.route(app, fiber.MethodGet, "/", protect, d.get)
}

// Run samples the history every SampleEvery and pushes the dashboard to
// connected browsers (coalesced, only while any is connected) until ctx is
// done. Call it once.
func (d *Dashboard) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sampled := make(chan struct{})
	go func() { defer close(sampled); d.sample(ctx) }()
	err := d.site.run(ctx)
	cancel()
	<-sampled
	return err
}

// sample records the history at start and every SampleEvery until ctx is
// done: a fixed cadence, independent of the rate of changes and of viewers.
// With a Versioned source an unchanged state costs no overview read.
func (d *Dashboard) sample(ctx context.Context) {
	if d.opts.HistoryStore != nil {
		evs, err := d.hist.restore(ctx, d.opts.HistoryStore, d.site.clock.Now())
		if err != nil {
			d.site.log.Warn("Dashboard history not fully restored", "err", err)
		}
		d.evs.restore(evs)
	}
	tick := d.site.clock.NewTicker(d.hist.every)
	defer tick.Stop()
	for {
		if ov, err := d.snap.get(ctx, d.src.Overview); err == nil {
			now := d.site.clock.Now()
			d.hist.record(now, ov.Advertisements, ov.Capacity.ChunkSizes)
			d.evs.record(ov)
			if d.opts.HistoryStore != nil {
				evs := d.evs.takeUnsaved()
				if err := d.hist.persist(ctx, d.opts.HistoryStore, now, evs); err != nil {
					d.evs.requeue(evs)
					if ctx.Err() == nil {
						d.site.log.Warn("Dashboard history not stored", "err", err)
					}
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C():
		}
	}
}

// DropClients disconnects every browser; they reconnect by themselves.
func (d *Dashboard) DropClients(ctx context.Context) { d.site.hub.DropAll(ctx) }

func (d *Dashboard) get(c *fiber.Ctx) error {
	vm, err := d.model(c.UserContext())
	if err != nil {
		d.site.log.Error("dashboard: overview unavailable", "err", err)
		return fiber.NewError(fiber.StatusServiceUnavailable, "the broker's state is unavailable; retry shortly")
	}
	return d.site.renderPage(c, fiber.StatusOK, views.DashboardPage(d.site.page(c, "Federation dashboard", "", true), vm))
}

// renderLive is the live fragment: the page's panels and the events list,
// each with an id of its own, so that a publication carries only the ones
// that changed.
func (d *Dashboard) renderLive(ctx context.Context) ([]templ.Component, error) {
	vm, err := d.model(ctx)
	if err != nil {
		return nil, err
	}
	events, err := d.parts.events.get(ctx, eventsKey{vm.Events, vm.EventConsumers, vm.EventProviders}, func() templ.Component {
		return views.EventList(vm)
	})
	if err != nil {
		return nil, fmt.Errorf("render the events: %w", err)
	}
	return append(views.DashboardLiveParts(vm), events), nil
}

// model builds the page's view model from the (cached) overview and the
// history, with the panels whose values did not change since the last
// render taken from the cache (vm.Parts). The history is recorded by the
// sampler only, so neither page loads nor the rate of changes skew it.
func (d *Dashboard) model(ctx context.Context) (views.Dashboard, error) {
	ov, err := d.snap.get(ctx, d.src.Overview)
	if err != nil {
		return views.Dashboard{}, fmt.Errorf("read overview: %w", err)
	}
	cur := d.site.currency
	vm := buildTables(d.site.clock.Now(), ov, d.opts.StaleAfter, cur)
	for _, r := range chartRanges(d.hist.window) {
		vm.Ranges = append(vm.Ranges, r.ChartRange) // the range radios
	}
	d.evs.record(ov)
	vm.Events, vm.EventConsumers, vm.EventProviders = eventRows(d.evs.snapshot())
	var exs []api.PlacementExplanation
	if d.explain != nil {
		// Explanations cost O(consumers × providers): only here, when a
		// page is rendered, and only after a change.
		if exs, err = d.why.get(ctx, d.explain.Explanations); err != nil {
			return views.Dashboard{}, fmt.Errorf("read placement explanations: %w", err)
		}
	}
	vm.Totals = buildTotals(ov.Consumers, exs, cur)
	p, parts := d.parts, &vm.Parts
	for _, part := range []struct {
		name string
		get  func() (templ.Component, error)
		dst  *templ.Component
	}{
		{"charts", func() (templ.Component, error) {
			return p.charts.get(ctx, d.hist, cur)
		}, &parts.Charts},
		{"explanations", func() (templ.Component, error) {
			return p.why.get(ctx, keyOf(exs), func() templ.Component {
				ws := make([]views.Why, 0, len(exs))
				for _, ex := range exs {
					ws = append(ws, buildWhy(ex, cur, DashboardWhyRows))
				}
				return views.WhyPanel(ws)
			})
		}, &parts.Why},
		{"providers", func() (templ.Component, error) {
			return p.providers.get(ctx, vm.Providers)
		}, &parts.Providers},
		{"consumers", func() (templ.Component, error) {
			return p.consumers.get(ctx, vm.Consumers)
		}, &parts.Consumers},
		{"moves", func() (templ.Component, error) {
			return p.migrations.get(ctx, vm.Migrations, func() templ.Component { return views.MigrationsPanel(vm.Migrations) })
		}, &parts.Migrations},
		{"totals", func() (templ.Component, error) {
			return p.totals.get(ctx, vm.Totals, func() templ.Component { return views.TotalsPanel(vm.Totals) })
		}, &parts.Totals},
		{"reservations", func() (templ.Component, error) {
			return p.reservations.get(ctx, vm.Reservations, func() templ.Component { return views.ReservationsPanel(vm.Reservations) })
		}, &parts.Reservations},
		{"instructions", func() (templ.Component, error) {
			return p.instructions.get(ctx, vm.Instructions, func() templ.Component { return views.InstructionsPanel(vm.Instructions) })
		}, &parts.Instructions},
	} {
		if *part.dst, err = part.get(); err != nil {
			return views.Dashboard{}, fmt.Errorf("render the %s: %w", part.name, err)
		}
	}
	return vm, nil
}

// buildDashboard is the whole view model, charts included (as of the
// history's last sample).
func buildDashboard(now time.Time, ov api.Overview, hist *history, staleAfter time.Duration, cur string) views.Dashboard {
	vm := buildTables(now, ov, staleAfter, cur)
	vm.Ranges, vm.Legend = buildCharts(hist, cur)
	return vm
}

// buildCharts builds the charts of every range over the history, ending at
// its last sample, and their legend.
func buildCharts(hist *history, cur string) ([]views.ChartRange, []views.LegendItem) {
	ids, series, now := hist.snapshot()
	rs := chartRanges(hist.window)
	longest := time.Duration(0)
	for _, r := range rs {
		longest = max(longest, r.span)
	}
	// Each metric's points once, over the longest range; the shorter
	// ranges are their ends.
	m := metricsSince(now, now.Add(-longest), ids, series)
	var ranges []views.ChartRange
	for _, r := range rs {
		r.Charts = rangeCharts(r, now, ids, m, cur)
		ranges = append(ranges, r.ChartRange)
	}
	return ranges, legendOf(ids)
}

// chartMetrics are each charted metric's points per provider.
type chartMetrics struct{ reserved, price, co2 [][]chartPoint }

func metricsSince(now, from time.Time, ids []string, series map[string][]sample) chartMetrics {
	return chartMetrics{
		reserved: chartSeries(now, from, ids, series, func(s sample) (float64, bool) { return s.reserved, true }),
		price:    chartSeries(now, from, ids, series, func(s sample) (float64, bool) { return s.price, s.hasPrice }),
		co2:      chartSeries(now, from, ids, series, func(s sample) (float64, bool) { return s.carbon, s.hasCO2 }),
	}
}

// rangeCharts are range r's charts, ending at now, from m (points since at
// least now - r.span).
func rangeCharts(r chartRange, now time.Time, ids []string, m chartMetrics, cur string) []views.Chart {
	return []views.Chart{
		buildChart("reserved-"+r.ID, "Chunks reserved per provider", "chunks", now, r.span, ids, m.reserved,
			func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) + " chunks" }),
		buildChart("price-"+r.ID, "Price per chunk", cur+" per hour", now, r.span, ids, m.price,
			func(v float64) string { return perHour(cur, v) }),
		buildChart("carbon-"+r.ID, "Weighted carbon intensity", "gCO2eq/kWh", now, r.span, ids, m.co2,
			func(v float64) string { return carbon(&v) }),
	}
}

func legendOf(ids []string) []views.LegendItem {
	legend := make([]views.LegendItem, 0, len(ids))
	for i, id := range ids {
		legend = append(legend, views.LegendItem{Name: id, Color: colorOf(i)})
	}
	return legend
}

// buildTables is the view model without the charts and the explanations:
// capacity, providers, consumers, moves, reservations and instructions at
// now.
func buildTables(now time.Time, ov api.Overview, staleAfter time.Duration, cur string) views.Dashboard {
	vm := views.Dashboard{GeneratedAt: clockTime(now), Now: now.UnixMilli(), Warnings: ov.Warnings}
	cp := ov.Capacity
	vm.Stats = []views.Stat{
		{Label: "chunks in total", Value: strconv.Itoa(int(cp.TotalChunks))},
		{Label: "chunks reserved", Value: strconv.Itoa(int(cp.ReservedChunks))},
		{Label: "chunks free", Value: strconv.Itoa(int(cp.AvailableChunks))},
		{Label: "providers available", Value: fmt.Sprintf("%d / %d", cp.AvailableProviderCount, cp.ProviderCount)},
		{Label: "consumers", Value: strconv.Itoa(len(ov.Consumers))},
	}
	vm.ChunkTypes = chunkRows(cp.ByChunkType, func(t api.ChunkType) string { return resources(cp.ChunkSizes[t]) })

	// The rows are allocated once at their size and sorted, not the
	// (larger) snapshots: this runs at every live publication.
	vm.Providers = make([]views.ProviderRow, 0, len(ov.Advertisements))
	for i := range ov.Advertisements {
		a := &ov.Advertisements[i]
		r := views.ProviderRow{
			ID: a.ClusterID, Location: topologyLocation(a.Topology), Renewable: a.Renewable,
			Sharing: sharingSummary(a.Sharing), Free: a.AvailableChunks, Reserved: a.ReservedChunks, Total: a.ChunkCount,
			Seen: momentOf(a.LastSeen.Time), Price: dash, Carbon: carbon(a.CarbonWeighted),
		}
		if a.CarbonWeighted == nil && a.CarbonIntensity != nil {
			r.Carbon = carbon(a.CarbonIntensity) + " now"
		}
		r.Price = "unpriced"
		if cost, ok := chunkCost(*a, cp.ChunkSizes); ok {
			r.Price = perHour(cur, cost)
		}
		switch {
		case !a.Available && a.GraceUntil != nil:
			// Its borrowed capacity is kept until then (disconnect grace).
			r.Health, r.HealthLabel = "warn", "disconnected, grace until "+clockTime(a.GraceUntil.Time)
		case !a.Available:
			r.Health, r.HealthLabel = "bad", "unavailable"
		case a.LastSeen.IsZero() || now.Sub(a.LastSeen.Time) > staleAfter:
			r.Health, r.HealthLabel = "warn", "stale"
		default:
			r.Health, r.HealthLabel = "ok", "available"
		}
		vm.Providers = append(vm.Providers, r)
	}
	sort.Slice(vm.Providers, func(i, j int) bool { return vm.Providers[i].ID < vm.Providers[j].ID })

	vm.Consumers = make([]views.ConsumerRow, 0, len(ov.Consumers))
	for i := range ov.Consumers {
		c := &ov.Consumers[i]
		r := views.ConsumerRow{
			ID: c.ClusterID, Location: location(c.City, c.Region),
			Policy: policyLabel(c.Placement, c.AppliedPlacement), Chosen: c.ChosenProvider,
			RTT: dash, LastSeen: momentOf(c.LastSeen.Time), Saved: savingsLabel(cur, c.Savings),
		}
		if r.Chosen == "" {
			r.Chosen = "none growable now"
		}
		r.RTT = rttList(c.MeasuredLatencies)
		r.Budget, r.BudgetClass = budgetSummary(c.Budget)
		vm.Consumers = append(vm.Consumers, r)
	}
	sort.Slice(vm.Consumers, func(i, j int) bool { return vm.Consumers[i].ID < vm.Consumers[j].ID })

	vm.Migrations = dashboardMigrations(cur, ov.Consumers)
	vm.Reservations = reservationRows(ov.Reservations)
	vm.Instructions = instructionRows(now, ov.ProviderInstructions, ov.ReservationInstructions)
	return vm
}

// momentOf is t as a views.Age (the zero Age when t is zero): the page's
// script shows its age.
func momentOf(t time.Time) views.Age {
	if t.IsZero() {
		return views.Age{}
	}
	return views.Age{At: strconv.FormatInt(t.UnixMilli(), 10), Clock: clockTime(t)}
}

func chunkRows(m map[api.ChunkType]api.ChunkCounts, size func(api.ChunkType) string) []views.ChunkTypeRow {
	types := make([]string, 0, len(m))
	for t := range m {
		types = append(types, string(t))
	}
	sort.Strings(types)
	rows := make([]views.ChunkTypeRow, 0, len(types))
	for _, t := range types {
		cc := m[api.ChunkType(t)]
		rows = append(rows, views.ChunkTypeRow{
			Type: t, Size: size(api.ChunkType(t)),
			Total: cc.TotalChunks, Reserved: cc.ReservedChunks, Available: cc.AvailableChunks,
		})
	}
	return rows
}

// maxReservationRows bounds the reservations table: the newest live
// reservations (ended ones are in the events log).
const maxReservationRows = 40

func reservationRows(in []api.OverviewReservation) []views.ReservationRow {
	// Pointers, not copies: this runs at every live publication.
	rs := make([]*api.OverviewReservation, 0, len(in))
	for i := range in {
		if !in[i].Status.Terminal() {
			rs = append(rs, &in[i])
		}
	}
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].CreatedAt.After(rs[j].CreatedAt.Time) })
	if len(rs) > maxReservationRows {
		rs = rs[:maxReservationRows]
	}
	out := make([]views.ReservationRow, 0, len(rs))
	for _, r := range rs {
		var grace *time.Time
		if r.GraceUntil != nil {
			grace = &r.GraceUntil.Time
		}
		phase, class := phaseLabel(r.Status, grace)
		row := views.ReservationRow{
			ID: r.ReservationID, Consumer: r.ConsumerClusterID, Provider: r.ProviderClusterID,
			Chunks: chunksLabel(r.ChunkCount, r.ChunkType), Phase: phase, PhaseClass: class,
			Created: clockTime(r.CreatedAt.Time),
		}
		for i, h := range r.History {
			row.Timeline = append(row.Timeline, views.Step{
				Phase: string(h.Phase), At: clockTime(h.At.Time), Title: h.Message, Current: i == len(r.History)-1,
			})
		}
		if len(row.Timeline) == 0 {
			row.Timeline = []views.Step{{Phase: string(r.Status), At: clockTime(r.CreatedAt.Time), Current: true}}
		}
		out = append(out, row)
	}
	return out
}

func instructionRows(now time.Time, lists ...[]api.OverviewInstruction) []views.InstructionRow {
	var out []views.InstructionRow
	for _, l := range lists {
		for _, in := range l {
			if in.Enforced {
				continue // done: in the events log
			}
			row := views.InstructionRow{
				ID: in.ID, Kind: string(in.Kind), Reservation: in.ReservationID, Target: in.TargetClusterID,
				Attempts: in.Attempts, Issued: dash, Expires: dash, Message: in.Message,
			}
			if in.LastDeliveredAt != nil {
				row.Delivered = momentOf(in.LastDeliveredAt.Time)
			}
			if in.IssuedAt != nil {
				row.Issued = clockTime(in.IssuedAt.Time)
			}
			if in.ExpiresAt != nil {
				row.Expires = clockTime(in.ExpiresAt.Time)
			}
			out = append(out, row)
		}
	}
	return out
}

// Owns reports whether path is one of the dashboard's routes. The dashboard
// authenticates its own routes (login page and session cookie when Token is
// set), so a bearer-token guard in front of the listener should let these
// paths through: browsers cannot send a bearer header for stylesheets and
// websockets.
func (d *Dashboard) Owns(path string) bool {
	p := d.site.prefix
	switch path {
	case p + "/", p + "/ws", p + "/login", p + "/logout":
		return true
	}
	return strings.HasPrefix(path, p+"/static/")
}

// Authenticated reports whether the request carries a live dashboard
// session (always true when no Token is configured). A guard in front of
// the listener may accept it for other read-only routes, such as the
// overview JSON.
func (d *Dashboard) Authenticated(c *fiber.Ctx) bool {
	if d.site.authn == nil {
		return true
	}
	_, ok := d.site.authn.Current(c)
	return ok
}
