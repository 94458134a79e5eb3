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
	vm := buildDashboard(d.site.clock.Now(), ov, d.hist, d.opts.StaleAfter, d.site.currency)
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

// topLevel is each top-level element of an HTML fragment by its id, as the
// HTML parser reads it (the live script replaces elements by id).
func topLevel(t *testing.T, frag []byte) map[string]string {
	t.Helper()
	ctx := &html.Node{Type: html.ElementNode, Data: "body", DataAtom: atom.Body}
	nodes, err := html.ParseFragment(bytes.NewReader(frag), ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, n := range nodes {
		if n.Type != html.ElementNode {
			continue
		}
		var id string
		for _, a := range n.Attr {
			if a.Key == "id" {
				id = a.Val
			}
		}
		if id == "" {
			t.Fatalf("a top-level <%s> of the live fragment has no id: the live script cannot place it", n.Data)
		}
		if _, dup := out[id]; dup {
			t.Fatalf("two top-level elements with id %q", id)
		}
		var b strings.Builder
		if err := html.Render(&b, n); err != nil {
			t.Fatal(err)
		}
		out[id] = b.String()
	}
	return out
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
			"charts": p.charts.renders, "why": p.why.renders, "providers": p.providers.renders, "consumers": p.consumers.renders,
			"moves": p.migrations.renders, "totals": p.totals.renders, "reservations": p.reservations.renders,
			"instructions": p.instructions.renders, "events": p.events.renders,
		}
	}
	before := renders()
	// page is what a browser that had every publication shows: each
	// delta's elements replace the ones with their ids.
	page := map[string]string{}
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
	}{
		{"first page", func() {}, all},
		{"nothing changed", func() {}, nil},
		{"the clock moved (ages), no sample", func() { clk.Step(3 * time.Second) }, []string{"providers", "consumers"}},
		{"the overview changed, no sample yet", func() {
			src.set(func(p *partsSource) { p.ov.Advertisements[0] = ad("milan", 3, 0.25, clk.Now(), true) })
		}, []string{"providers"}},
		{"a sample with the new values", func() { clk.Step(2 * time.Second); sample() }, []string{"charts", "providers", "consumers"}},
		{"a sample with the same values, later", func() { clk.Step(5 * time.Second); sample() }, []string{"charts", "providers", "consumers"}},
		{"a provider left, sampled", func() {
			src.set(func(p *partsSource) { p.ov.Advertisements = p.ov.Advertisements[1:] })
			sample()
		}, []string{"charts", "providers"}},
		{"new explanations", func() {
			src.set(func(p *partsSource) { p.exs = []api.PlacementExplanation{explanationOf("lyon", "paris", 0.3)} })
		}, []string{"why"}},
		{"a new list with the same explanations", func() {
			src.set(func(p *partsSource) { p.exs = []api.PlacementExplanation{explanationOf("lyon", "paris", 0.3)} })
		}, []string{"why"}},
		{"a consumer's heartbeat, the same list", func() {
			src.set(func(p *partsSource) { p.ov.Consumers[0].LastSeen = metav1.NewTime(clk.Now().Add(-time.Second)) })
		}, []string{"consumers"}},
		{"a reservation", func() {
			src.set(func(p *partsSource) {
				p.ov.Reservations = []api.OverviewReservation{{ReservationResponse: api.ReservationResponse{
					ReservationID: "r1", ConsumerClusterID: "lyon", ProviderClusterID: "paris", Status: api.PhasePeering, ChunkCount: 1, CreatedAt: metav1.NewTime(clk.Now()),
				}}}
			})
		}, []string{"reservations"}},
		{"its next phase", func() {
			src.set(func(p *partsSource) {
				p.ov.Reservations = []api.OverviewReservation{{ReservationResponse: api.ReservationResponse{
					ReservationID: "r1", ConsumerClusterID: "lyon", ProviderClusterID: "paris", Status: api.PhasePeered, ChunkCount: 1, CreatedAt: metav1.NewTime(clk.Now()),
				}}}
			})
		}, []string{"reservations"}},
		{"no explanation left", func() { src.set(func(p *partsSource) { p.exs = nil }) }, []string{"why"}},
	} {
		step.change()
		parts, err := d.site.renderParts(context.Background())
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		got := bytes.Join(parts, nil)
		want := freshLive(t, d, src)
		// renderLive adds the events list after the panels.
		if !bytes.HasPrefix(got, want) {
			t.Fatalf("%s: the cached page differs from a fresh render\n got %s\nwant %s", step.name, got, want)
		}
		delta := topLevel(t, d.site.delta(parts))
		maps.Copy(page, delta)
		if whole := topLevel(t, got); !maps.Equal(page, whole) {
			var stale []string
			for id, h := range whole {
				if page[id] != h {
					stale = append(stale, id)
				}
			}
			t.Fatalf("%s: a page kept current by the deltas shows stale %v (want every element as the whole fragment has it)", step.name, stale)
		}
		for _, name := range all {
			if _, sent := delta[ids[name]]; sent && !slices.Contains(step.rendered, name) {
				t.Errorf("%s: the delta carries the %s, which did not change", step.name, name)
			}
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
	}
}
