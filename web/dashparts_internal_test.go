package web

import (
	"bytes"
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/web/views"
)

// partsSource is a Versioned OverviewSource with explanations, both
// replaced by the test: a new overview or a new list of explanations moves
// the version, as the broker's domain does.
type partsSource struct {
	mu      sync.Mutex
	ov      api.Overview
	exs     []api.PlacementExplanation
	version uint64
}

func (p *partsSource) Overview(context.Context) (api.Overview, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ov, nil
}

func (p *partsSource) Explanations(context.Context) ([]api.PlacementExplanation, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exs, nil
}

func (p *partsSource) Subscribe(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{})
	go func() { <-ctx.Done(); close(ch) }()
	return ch
}

func (p *partsSource) Version() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.version
}

func (p *partsSource) set(f func(*partsSource)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f(p)
	p.version++
}

func explanationOf(consumer, winner string, cost float64) api.PlacementExplanation {
	return api.PlacementExplanation{
		ConsumerClusterID: consumer, AppliedPlacement: api.PlacementPrice, Metric: api.MetricCost,
		ChunkTypes: []api.ChunkTypeExplanation{{
			ChunkType: api.ChunkStandard, Winners: []string{winner},
			Candidates: []api.PlacementCandidate{{ProviderClusterID: winner, Rank: 1, Outcome: api.OutcomeWinner, Metric: fp(cost), FreeChunks: 2, TotalChunks: 4, HeadRoom: 2}},
		}},
	}
}

// freshLive renders the live fragment from scratch, without any cached
// part: what the cached page must equal byte for byte.
func freshLive(t *testing.T, d *Dashboard, src *partsSource) []byte {
	t.Helper()
	ctx := context.Background()
	ov, _ := src.Overview(ctx)
	exs, _ := src.Explanations(ctx)
	vm := buildTables(d.site.clock.Now(), ov, d.opts.StaleAfter, d.site.currency)
	vm.Ranges, vm.Legend = drawnCharts(t, d)
	vm.Events, vm.EventConsumers, vm.EventProviders = eventRows(d.evs.snapshot())
	for _, ex := range exs {
		vm.Why = append(vm.Why, buildWhy(ex, d.site.currency, DashboardWhyRows))
	}
	vm.Totals = buildTotals(ov.Consumers, exs, d.site.currency)
	var buf bytes.Buffer
	for _, part := range views.DashboardLiveParts(vm) {
		if err := part.Render(ctx, &buf); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

// drawnCharts are the charts of every range drawn from scratch to the
// moment the dashboard last drew that range, after checking that the
// moment is a sample within the range's cadence of the last one.
func drawnCharts(t *testing.T, d *Dashboard) ([]views.ChartRange, []views.LegendItem) {
	t.Helper()
	ids, series, last := d.hist.snapshot()
	var ranges []views.ChartRange
	for i, r := range chartRanges(d.hist.window) {
		at := d.parts.charts.drawn[i]
		if age, every := last.Sub(at), chartCadence(r.span, d.hist.every); age < 0 || age >= every {
			t.Fatalf("the %s range ends at %s, the last sample at %s: not within its cadence (%s)", r.ID, clockTime(at), clockTime(last), every)
		}
		upTo := map[string][]sample{}
		for id, ring := range series {
			for _, s := range ring {
				if !s.at.After(at) {
					upTo[id] = append(upTo[id], s)
				}
			}
		}
		r.Charts = rangeCharts(r, at, ids, metricsSince(at, at.Add(-r.span), ids, upTo), d.site.currency)
		ranges = append(ranges, r.ChartRange)
	}
	return ranges, legendOf(ids)
}

// livePage is what a browser shows of the live fragment: the page's
// elements, kept current by applying each delta as the live script does.
type livePage struct {
	body *html.Node
}

func parseFragment(t *testing.T, frag []byte) []*html.Node {
	t.Helper()
	ctx := &html.Node{Type: html.ElementNode, Data: "body", DataAtom: atom.Body}
	nodes, err := html.ParseFragment(bytes.NewReader(frag), ctx)
	if err != nil {
		t.Fatal(err)
	}
	return nodes
}

func attrOf(n *html.Node, key string) (string, bool) {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val, true
		}
	}
	return "", false
}

// byID is the element of the page with id, and the top-level element
// (panel) it is in.
func (p *livePage) byID(id string) (found, panel *html.Node) {
	var walk func(n, top *html.Node) bool
	walk = func(n, top *html.Node) bool {
		if v, _ := attrOf(n, "id"); n.Type == html.ElementNode && v == id {
			found, panel = n, top
			return true
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if walk(c, top) {
				return true
			}
		}
		return false
	}
	for c := p.body.FirstChild; c != nil; c = c.NextSibling {
		if walk(c, c) {
			return found, panel
		}
	}
	return nil, nil
}

func replaceNode(old, n *html.Node) {
	n.Parent, n.PrevSibling, n.NextSibling = nil, nil, nil
	old.Parent.InsertBefore(n, old)
	old.Parent.RemoveChild(old)
}

// apply applies a delta as assets/static/live.js does and returns how each
// panel was sent: "whole" (a top-level element replacing the element with
// its id) or "patch" (elements in it replaced: rows of a <table
// data-patch>, or an element inside it with the id of a top-level one).
func (p *livePage) apply(t *testing.T, delta []byte) map[string]string {
	t.Helper()
	how := map[string]string{}
	place := func(n *html.Node) {
		id, _ := attrOf(n, "id")
		old, panel := p.byID(id)
		if old == nil {
			t.Fatalf("the delta's element %q is not on the page: the live script cannot place it", id)
		}
		panelID, _ := attrOf(panel, "id")
		if old == panel {
			how[panelID] = "whole"
		} else if how[panelID] == "" {
			how[panelID] = "patch"
		}
		replaceNode(old, n)
	}
	for _, n := range parseFragment(t, delta) {
		if n.Type != html.ElementNode {
			continue
		}
		if _, ok := attrOf(n, "data-patch"); ok {
			var rows []*html.Node
			var walk func(*html.Node)
			walk = func(m *html.Node) {
				if _, ok := attrOf(m, "id"); ok && m.DataAtom == atom.Tr {
					rows = append(rows, m)
					return
				}
				for c := m.FirstChild; c != nil; c = c.NextSibling {
					walk(c)
				}
			}
			walk(n)
			if len(rows) == 0 {
				t.Fatal("a patch carries no row with an id")
			}
			for _, r := range rows {
				r.Parent.RemoveChild(r)
				place(r)
			}
			continue
		}
		if _, ok := attrOf(n, "id"); !ok {
			t.Fatalf("a top-level <%s> of the delta has no id: the live script cannot place it", n.Data)
		}
		place(n)
	}
	return how
}

func (p *livePage) html(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for c := p.body.FirstChild; c != nil; c = c.NextSibling {
		if err := html.Render(&b, c); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

// wholePage is the page a browser that joins now is sent.
func wholePage(t *testing.T, frag []byte) *livePage {
	t.Helper()
	body := &html.Node{Type: html.ElementNode, Data: "body", DataAtom: atom.Body}
	for _, n := range parseFragment(t, frag) {
		body.AppendChild(n)
	}
	return &livePage{body: body}
}

// TestLivePartsAreNeverStale changes each input of the live dashboard in
// turn — a sample of the history, with a new value or only a later time;
// the explanations; the overview without a sample; the clock — and checks
// after each that the page rendered with its cached parts is byte for byte
// the page rendered from scratch, and that a part is rendered again
// exactly when one of its inputs moved (the charts per history sample,
// the explanations per list handed out).
func TestLivePartsAreNeverStale(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(t0)
	src := &partsSource{
		ov: api.Overview{
			Advertisements: []api.AdvertisementSnapshot{ad("milan", 1, 0.2, t0, true), ad("paris", 0, 0.3, t0, true)},
			Consumers:      []api.OverviewConsumer{{ClusterID: "lyon", Placement: api.PlacementPrice, LastSeen: metav1.NewTime(t0)}},
		},
		exs: []api.PlacementExplanation{explanationOf("lyon", "milan", 0.2)},
	}
	d, err := NewDashboard(src, DashboardOptions{SiteOptions: SiteOptions{Clock: clk}, SampleEvery: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	sample := func() {
		ov, _ := src.Overview(context.Background())
		d.hist.record(clk.Now(), ov.Advertisements, ov.Capacity.ChunkSizes)
	}
	sample()
	all := []string{"charts", "why", "providers", "consumers", "moves", "totals", "reservations", "instructions", "events"}
	renders := func() map[string]int {
		p := d.parts
		return map[string]int{
			"charts": p.charts.renders, "why": p.why.renders, "providers": p.providers.tables, "consumers": p.consumers.tables,
			"moves": p.migrations.renders, "totals": p.totals.renders, "reservations": p.reservations.renders,
			"instructions": p.instructions.renders, "events": p.events.renders,
		}
	}
	before := renders()
	rows := func() int { return d.parts.providers.renders + d.parts.consumers.renders }
	rowsBefore := rows()
	// page is what a browser that had every publication shows: each delta
	// applied as the live script does.
	var page *livePage
	ids := map[string]string{
		"charts": "charts-panel", "why": "why-panel", "providers": "providers-panel", "consumers": "consumers-panel",
		"moves": "moves-panel", "totals": "totals-panel", "reservations": "reservations-panel",
		"instructions": "instructions-panel", "events": "event-list",
	}
	for _, step := range []struct {
		name   string
		change func()
		// rendered are the panels rendered again (the others are reused).
		rendered []string
		// rows are the table rows rendered again (providers and
		// consumers; the other rows come from the row caches).
		rows int
		// patched are the panels sent as patches of the page a viewer
		// has (their changed rows or charts), not whole.
		patched []string
	}{
		{"first page", func() {}, all, 3, nil},
		{"nothing changed", func() {}, nil, 0, nil},
		{"the clock moved (ages), no sample", func() { clk.Step(3 * time.Second) }, nil, 0, nil},
		{"the overview changed, no sample yet", func() {
			src.set(func(p *partsSource) { p.ov.Advertisements[0] = ad("milan", 3, 0.25, clk.Now(), true) })
		}, []string{"providers"}, 1, []string{"providers"}},
		{"a sample with the new values", func() { clk.Step(2 * time.Second); sample() }, []string{"charts"}, 0, []string{"charts"}},
		{"a sample with the same values, later", func() { clk.Step(5 * time.Second); sample() }, []string{"charts"}, 0, []string{"charts"}},
		// The 15-minute range is drawn again every 15 s, the hour every
		// minute (chartCadence): only the ranges drawn are sent.
		{"three samples later", func() {
			for range 3 {
				clk.Step(5 * time.Second)
				sample()
			}
		}, []string{"charts"}, 0, []string{"charts"}},
		{"a provider left, sampled", func() {
			src.set(func(p *partsSource) { p.ov.Advertisements = p.ov.Advertisements[1:] })
			sample()
		}, []string{"providers"}, 0, nil}, // no new sample time: the charts stay
		{"new explanations", func() {
			src.set(func(p *partsSource) { p.exs = []api.PlacementExplanation{explanationOf("lyon", "paris", 0.3)} })
		}, []string{"why"}, 0, nil},
		{"a new list with the same explanations", func() {
			src.set(func(p *partsSource) { p.exs = []api.PlacementExplanation{explanationOf("lyon", "paris", 0.3)} })
		}, []string{"why"}, 0, nil},
		{"a consumer's heartbeat, the same list", func() {
			src.set(func(p *partsSource) { p.ov.Consumers[0].LastSeen = metav1.NewTime(clk.Now().Add(-time.Second)) })
		}, []string{"consumers"}, 1, []string{"consumers"}},
		{"a reservation", func() {
			src.set(func(p *partsSource) {
				p.ov.Reservations = []api.OverviewReservation{{ReservationResponse: api.ReservationResponse{
					ReservationID: "r1", ConsumerClusterID: "lyon", ProviderClusterID: "paris", Status: api.PhasePeering, ChunkCount: 1, CreatedAt: metav1.NewTime(clk.Now()),
				}}}
			})
		}, []string{"reservations"}, 0, nil},
		{"its next phase", func() {
			src.set(func(p *partsSource) {
				p.ov.Reservations = []api.OverviewReservation{{ReservationResponse: api.ReservationResponse{
					ReservationID: "r1", ConsumerClusterID: "lyon", ProviderClusterID: "paris", Status: api.PhasePeered, ChunkCount: 1, CreatedAt: metav1.NewTime(clk.Now()),
				}}}
			})
		}, []string{"reservations"}, 0, nil},
		{"no explanation left", func() { src.set(func(p *partsSource) { p.exs = nil }) }, []string{"why"}, 0, nil},
	} {
		step.change()
		parts, err := d.site.renderParts(context.Background())
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		var got []byte
		for _, p := range parts {
			for _, b := range p.html {
				got = append(got, b...)
			}
		}
		want := freshLive(t, d, src)
		// renderLive adds the events list after the panels.
		if !bytes.HasPrefix(got, want) {
			t.Fatalf("%s: the cached page differs from a fresh render\n got %s\nwant %s", step.name, got, want)
		}
		delta := d.site.delta(parts)
		if page == nil {
			page = wholePage(t, delta)
		}
		how := page.apply(t, delta)
		if whole := wholePage(t, got).html(t); page.html(t) != whole {
			t.Fatalf("%s: a page kept current by the deltas differs from the whole fragment\n got %s\nwant %s", step.name, page.html(t), whole)
		}
		for _, name := range all {
			if _, sent := how[ids[name]]; sent && !slices.Contains(step.rendered, name) {
				t.Errorf("%s: the delta carries the %s, which did not change", step.name, name)
			}
		}
		var patched []string
		for _, name := range all {
			if how[ids[name]] == "patch" {
				patched = append(patched, name)
			}
		}
		if !slices.Equal(patched, step.patched) {
			t.Errorf("%s: sent as patches %v, want %v (the others whole)", step.name, patched, step.patched)
		}
		now := renders()
		var again []string
		for _, name := range all {
			if now[name] != before[name] {
				again = append(again, name)
			}
		}
		if !slices.Equal(again, step.rendered) {
			t.Errorf("%s: rendered again %v, want %v", step.name, again, step.rendered)
		}
		before = now
		if n := rows() - rowsBefore; n != step.rows {
			t.Errorf("%s: rendered %d table rows again, want %d", step.name, n, step.rows)
		}
		rowsBefore = rows()
	}
	if got, want := d.parts.charts.draws, map[string]int{"5m": 4, "15m": 2, "1h": 1}; !maps.Equal(got, want) {
		t.Errorf("the ranges were drawn %v times, want %v (each at its cadence)", got, want)
	}
}

// A part is sent as its patch only to a page that shows the part the
// patch was made from: a patch of a rendering no viewer was sent (a page
// load rendered the panel in between) would leave the page half old.
func TestDeltaPatchesOnlyWhatWasSent(t *testing.T) {
	a, b, other := []byte(`<div id="x">a</div>`), []byte(`<div id="x">b<p id="y">1</p></div>`), []byte(`<div id="x">z</div>`)
	patch := []byte(`<p id="y">1</p>`)
	for _, tc := range []struct {
		name string
		base []byte
		want string
	}{
		{"made from what was sent", a, string(patch)},
		{"made from the same bytes elsewhere", []byte(string(a)), string(patch)},
		{"made from a rendering never sent", other, string(b)},
	} {
		s := &site{sent: []segments{{a}}}
		if got := s.delta([]part{{html: segments{b}, base: segments{tc.base}, patch: segments{patch}}}); string(got) != tc.want {
			t.Errorf("%s: delta %s, want %s", tc.name, got, tc.want)
		}
		if len(s.sent[0]) != 1 || string(s.sent[0][0]) != string(b) {
			t.Errorf("%s: the last publication is %s, want the whole part", tc.name, s.sent[0])
		}
	}
}
