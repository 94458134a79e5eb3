package web

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

func ad(id string, reserved int32, cost float64, seen time.Time, available bool) api.AdvertisementSnapshot {
	c := 100.0
	return api.AdvertisementSnapshot{
		ClusterID: id, ReservedChunks: reserved, ChunkCount: 4, AvailableChunks: 4 - reserved, CostPerChunk: cost,
		CarbonWeighted: &c, LastSeen: metav1.NewTime(seen), Available: available,
	}
}

func TestHistoryIsBoundedAndCoalesces(t *testing.T) {
	h := newHistory(time.Minute, 10*time.Second)
	t0 := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	// A burst inside one period costs one slot and keeps the newest value.
	h.record(t0, []api.AdvertisementSnapshot{ad("a", 1, 0.1, t0, true)}, nil)
	h.record(t0.Add(2*time.Second), []api.AdvertisementSnapshot{ad("a", 3, 0.1, t0, true)}, nil)
	_, s, _ := h.snapshot()
	if len(s["a"]) != 1 || s["a"][0].reserved != 3 || !s["a"][0].at.Equal(t0) {
		t.Fatalf("burst: %+v, want one sample with the newest value at the first time", s["a"])
	}
	for i := 1; i <= 100; i++ {
		h.record(t0.Add(time.Duration(i)*10*time.Second), []api.AdvertisementSnapshot{ad("a", int32(i%4), 0.1, t0, true)}, nil)
	}
	_, s, _ = h.snapshot()
	if n := len(s["a"]); n > h.max || n < 6 {
		t.Fatalf("ring holds %d samples, want at most %d and a full window", n, h.max)
	}
	end := t0.Add(1000 * time.Second)
	if first := s["a"][0].at; end.Sub(first) > time.Minute {
		t.Fatalf("oldest sample %v is outside the window", end.Sub(first))
	}
	// A provider that left ages out.
	h.record(end.Add(2*time.Minute), nil, nil)
	if ids, _, _ := h.snapshot(); len(ids) != 0 {
		t.Fatalf("departed provider still charted: %v", ids)
	}
}

// TestHistorySnapshotsKeepTheirSamples: a snapshot shares the history's
// arrays, so nothing the history does later may change what it holds: new
// samples, a burst's replacement of the last one, trimming. A sampler tick
// that comes a little early still gets its own slot.
func TestHistorySnapshotsKeepTheirSamples(t *testing.T) {
	const every = 5 * time.Second
	h := newHistory(time.Minute, every)
	t0 := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	at := t0
	rec := func(d time.Duration, reserved int32) {
		at = at.Add(d)
		h.record(at, []api.AdvertisementSnapshot{ad("a", reserved, 0.1, at, true), ad("b", reserved+1, 0.2, at, true)}, nil)
	}
	for i := range 20 { // past the window: the rings were trimmed
		rec(every, int32(i%4))
	}
	_, s0, _ := h.snapshot()
	before := s0["a"][len(s0["a"])-1]
	rec(every-time.Millisecond, 7) // an early tick: a slot of its own
	// The snapshot that ends at the early tick's sample, which the burst
	// below replaces.
	_, snap, _ := h.snapshot()
	want := map[string][]sample{}
	for id, ring := range snap {
		want[id] = slices.Clone(ring)
	}
	if last := snap["a"][len(snap["a"])-2:]; !slices.Equal(last, []sample{before, {at: at, reserved: 7, price: 0.1, hasPrice: true, carbon: 100, hasCO2: true}}) {
		t.Fatalf("an early tick: the last samples are %+v, want %+v and one of its own", last, before)
	}
	rec(time.Second, 9) // a burst: replaces the last sample
	_, s, _ := h.snapshot()
	if last := s["a"][len(s["a"])-1]; last.reserved != 9 || !last.at.Equal(at.Add(-time.Second)) {
		t.Fatalf("a burst: the last sample is %+v, want reserved 9 at the time of the one it replaced", last)
	}
	for i := range 30 {
		rec(every, int32(i%3))
	}
	for id, ring := range want {
		if !slices.Equal(snap[id], ring) {
			t.Fatalf("the snapshot of %s changed after later records:\n got %+v\nwant %+v", id, snap[id], ring)
		}
	}
}

// disconnected marks a as disconnected with reservations kept until until.
func disconnected(a api.AdvertisementSnapshot, until time.Time) api.AdvertisementSnapshot {
	a.DisconnectedAt, a.GraceUntil = &metav1.Time{Time: a.LastSeen.Add(90 * time.Second)}, &metav1.Time{Time: until}
	return a
}

func TestBuildDashboard(t *testing.T) {
	now := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	rtt := 12.345
	ov := api.Overview{
		Capacity: api.CapacitySummary{TotalChunks: 12, ReservedChunks: 3, AvailableChunks: 9, ProviderCount: 3, AvailableProviderCount: 2,
			ByChunkType: map[api.ChunkType]api.ChunkCounts{api.ChunkStandard: {TotalChunks: 12, ReservedChunks: 3, AvailableChunks: 9}}},
		Advertisements: []api.AdvertisementSnapshot{
			ad("zeta", 0, 0, now.Add(-10*time.Minute), true),
			ad("alpha", 3, 0.25, now.Add(-3*time.Second), true),
			ad("mid", 0, 0.5, now, false),
		},
		Consumers: []api.OverviewConsumer{
			{ClusterID: "rome", Placement: api.PlacementPrice, AppliedPlacement: api.PlacementStandard, ChosenProvider: "alpha", MeasuredRTT: &rtt,
				MeasuredLatencies: map[string]float64{"mid": 80.06, "alpha": rtt}},
			{ClusterID: "turin"},
		},
		Reservations: []api.OverviewReservation{
			{ReservationResponse: api.ReservationResponse{ReservationID: "old", Status: api.PhaseReleased, CreatedAt: metav1.NewTime(now.Add(-time.Hour))}},
			{ReservationResponse: api.ReservationResponse{ReservationID: "live", Status: api.PhasePeering, ChunkCount: 2, CreatedAt: metav1.NewTime(now.Add(-time.Minute))},
				History: []api.PhaseTransition{{Phase: api.PhasePending, At: metav1.NewTime(now.Add(-time.Minute))}, {Phase: api.PhasePeering, At: metav1.NewTime(now)}}},
			{ReservationResponse: api.ReservationResponse{ReservationID: "kept", Status: api.PhasePeered, ChunkCount: 1, CreatedAt: metav1.NewTime(now.Add(-2 * time.Hour)),
				GraceUntil: &metav1.Time{Time: now.Add(time.Minute)}}},
		},
	}
	h := newHistory(time.Hour, 5*time.Second)
	h.record(now.Add(-2*time.Minute), ov.Advertisements, ov.Capacity.ChunkSizes)
	h.record(now, ov.Advertisements, ov.Capacity.ChunkSizes)
	// Not charted: it stopped advertising before the history began.
	ov.Advertisements = append(ov.Advertisements, disconnected(ad("gone", 1, 0.5, now.Add(-2*time.Minute), false), now.Add(3*time.Minute+4*time.Second)))
	vm := buildDashboard(now, ov, h, 2*time.Minute, DefaultCurrency)

	var ids []string
	for _, p := range vm.Providers {
		ids = append(ids, p.ID+":"+p.Price+":"+p.HealthLabel+":"+p.Seen.Clock)
		// The page's script counts the age from At, in Unix ms.
		if ms, err := strconv.ParseInt(p.Seen.At, 10, 64); err != nil || time.UnixMilli(ms).UTC().Format("15:04:05") != p.Seen.Clock {
			t.Errorf("provider %s was seen at %q (Unix ms), shown as %s", p.ID, p.Seen.At, p.Seen.Clock)
		}
	}
	want := "alpha:0.2500 EUR/h:available:07:59:57,gone:0.5000 EUR/h:disconnected, grace until 08:03:04:07:58:00,mid:0.5000 EUR/h:unavailable:08:00:00,zeta:unpriced:stale:07:50:00"
	if got := strings.Join(ids, ","); got != want {
		t.Fatalf("providers\n got %s\nwant %s", got, want)
	}
	if c := vm.Consumers[0]; c.Policy != "Price (applied: Standard)" || c.RTT != "alpha 12.3 ms · mid 80.1 ms" || c.Chosen != "alpha" {
		t.Fatalf("consumer row %+v", c)
	}
	if c := vm.Consumers[1]; c.RTT != "not measured" || c.Chosen != "none growable now" {
		t.Fatalf("consumer without room or RTTs: %+v", c)
	}
	if vm.Reservations[0].ID != "live" || len(vm.Reservations[0].Timeline) != 2 || !vm.Reservations[0].Timeline[1].Current {
		t.Fatalf("live reservations first with their timeline: %+v", vm.Reservations)
	}
	if r := vm.Reservations[1]; r.ID != "kept" || r.Phase != "Peered, provider disconnected, grace until 08:01:00" || r.PhaseClass != "warn" {
		t.Fatalf("a reservation in its disconnect grace: %+v", r)
	}
	var ranges []string
	for _, r := range vm.Ranges {
		ranges = append(ranges, fmt.Sprintf("%s/%v", r.ID, r.Default))
	}
	if strings.Join(ranges, " ") != "5m/false 15m/false 1h/true" {
		t.Fatalf("ranges %v, want 5m, 15m and 1h (default) within the 1 h window", ranges)
	}
	five := vm.Ranges[0].Charts
	if len(five) != 3 || len(five[0].Lines) != 3 || len(five[1].Lines) != 2 {
		t.Fatalf("charts: %d, lines reserved %d, price %d (zeta is unpriced)", len(five), len(five[0].Lines), len(five[1].Lines))
	}
	if five[0].XTicks[0].Label != "-5m" || five[0].XTicks[5].Label != "08:00:00" || vm.Ranges[2].Charts[0].XTicks[0].Label != "-60m" {
		t.Fatalf("the 5-minute range spans 5 minutes, the hour one 60: %+v", five[0].XTicks)
	}
	if h := five[1].Lines[0].Hover; len(h) == 0 || !strings.HasPrefix(h[0].Title, "alpha: 0.2500 EUR/h at ") {
		t.Fatalf("hover points of alpha's price: %+v", h)
	}
}

func TestTickLabel(t *testing.T) {
	for in, want := range map[float64]string{0: "0", 0.05: "0.05", 500: "500", 1000: "1000", 5000: "5000", 2e6: "2e+06"} {
		if got := tickLabel(in); got != want {
			t.Errorf("tickLabel(%v) = %q, want %q", in, got, want)
		}
	}
}

func TestNiceCeil(t *testing.T) {
	for in, want := range map[float64]float64{0: 1, 0.116: 0.2, 3: 5, 320: 500, 1000: 1000, 7: 10} {
		if got := niceCeil(in); got < want*0.999 || got > want*1.001 {
			t.Errorf("niceCeil(%v) = %v, want %v", in, got, want)
		}
	}
}

func TestChartStepsAreCompact(t *testing.T) {
	now := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	at := func(sec int) time.Time { return now.Add(-5*time.Minute + time.Duration(sec)*time.Second) }
	series := map[string][]sample{
		// Constant: two vertices (start and now) whatever the sample count.
		"flat": {{at: at(0), reserved: 2}, {at: at(60), reserved: 2}, {at: at(120), reserved: 2}},
		// One change: start, step up (two vertices), hold to now.
		"step": {{at: at(0), reserved: 0}, {at: at(150), reserved: 2}},
		// Flapping within one SVG unit collapses.
		"flap": {{at: at(0), reserved: 1}, {at: at(150), reserved: 3}, {at: at(150).Add(100 * time.Millisecond), reserved: 1}},
	}
	ids := []string{"flap", "flat", "step"}
	points := chartSeries(now, now.Add(-5*time.Minute), ids, series, func(s sample) (float64, bool) { return s.reserved, true })
	c := buildChart("r", "r", "chunks", now, 5*time.Minute, ids, points, func(v float64) string { return fmt.Sprint(v) })
	got := map[string]int{}
	for _, l := range c.Lines {
		got[l.Name] = len(strings.Fields(l.Points))
	}
	if got["flat"] != 2 || got["step"] != 4 || got["flap"] != 2 {
		t.Fatalf("vertices per line %v, want flat 2, step 4, flap 2", got)
	}
	for _, l := range c.Lines {
		if l.Name == "step" && (len(l.Hover) != 2 || l.Hover[1].Title != "step: 2 at 07:57:30") {
			t.Fatalf("hover points of step: %+v, want its two values with their times", l.Hover)
		}
	}
}

// TestPaletteHasNoGreenOrRed: a provider's colour must not suggest a clean
// (green) or dirty/bad (red) grid.
func TestPaletteHasNoGreenOrRed(t *testing.T) {
	for _, c := range palette {
		var r, g, b int
		if _, err := fmt.Sscanf(c, "#%02x%02x%02x", &r, &g, &b); err != nil {
			t.Fatal(err)
		}
		hue := hueOf(float64(r)/255, float64(g)/255, float64(b)/255)
		if (hue >= 75 && hue <= 165) || hue <= 10 || hue >= 350 {
			t.Errorf("%s has hue %.0f°: greens (75–165°) and reds (350–10°) are not used", c, hue)
		}
	}
}

func hueOf(r, g, b float64) float64 {
	mx, mn := max(r, g, b), min(r, g, b)
	d := mx - mn
	if d == 0 {
		return 200 // grey: neutral
	}
	var h float64
	switch mx {
	case r:
		h = math.Mod((g-b)/d, 6)
	case g:
		h = (b-r)/d + 2
	default:
		h = (r-g)/d + 4
	}
	h *= 60
	if h < 0 {
		h += 360
	}
	return h
}

type flakySource struct {
	fail atomic.Bool
}

func (f *flakySource) Overview(context.Context) (api.Overview, error) {
	if f.fail.Load() {
		return api.Overview{}, errors.New("store closed")
	}
	return api.Overview{}, nil
}

func (f *flakySource) Subscribe(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{})
	go func() { <-ctx.Done(); close(ch) }()
	return ch
}

func TestPublishShowsAndClearsBackendProblems(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	src := &flakySource{}
	d, err := NewDashboard(src, DashboardOptions{})
	if err != nil {
		t.Fatal(err)
	}
	go d.site.hub.Run(ctx)
	// The hub keeps a fragment only while a client is connected.
	c, err := d.site.hub.Register(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer d.site.hub.Unregister(c)
	last := func() string { return string(<-c.Send()) }
	src.fail.Store(true)
	d.site.publish(ctx)
	if got := last(); !strings.Contains(got, `data-testid="backend-state"`) || strings.Contains(got, "store closed") {
		t.Fatalf("failing backend: pushed %q; want the notice without the internal error", got)
	}
	src.fail.Store(false)
	d.site.publish(ctx)
	if got := last(); !strings.Contains(got, `<div id="backend-state" hidden>`) || !strings.Contains(got, `id="live-summary"`) {
		t.Fatalf("recovered backend: pushed %q; want the state and a hidden notice", got)
	}
	// Failing again: the viewer is sent the notice alone (it keeps the
	// panels it shows); a viewer joining now gets those panels and the
	// notice.
	src.fail.Store(true)
	d.site.publish(ctx)
	if got := last(); !strings.Contains(got, `data-testid="backend-state"`) || strings.Contains(got, `id="live-summary"`) {
		t.Fatalf("failing again: pushed %q; want the notice alone", got)
	}
	late, err := d.site.hub.Register(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer d.site.hub.Unregister(late)
	if got := string(<-late.Send()); !strings.Contains(got, `id="live-summary"`) || !strings.Contains(got, `data-testid="backend-state"`) || strings.Contains(got, `<div id="backend-state" hidden>`) {
		t.Fatalf("a viewer joining while the backend fails got %q; want the last panels and the notice", got)
	}
}

// TestShorterRangesAreTheEndsOfTheLongest: a range's lines cut from the
// longest range's points are the lines computed over that range alone,
// including a provider whose only samples are older than the range, one
// without the metric and one whose metric starts inside the range.
func TestShorterRangesAreTheEndsOfTheLongest(t *testing.T) {
	now := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	at := func(ago time.Duration) time.Time { return now.Add(-ago) }
	series := map[string][]sample{
		"old":     {{at: at(50 * time.Minute), reserved: 1, hasPrice: true, price: 0.1}},
		"steady":  {{at: at(55 * time.Minute), reserved: 1}, {at: at(10 * time.Minute), reserved: 2}, {at: at(time.Minute), reserved: 3}},
		"late":    {{at: at(20 * time.Minute), reserved: 0}, {at: at(2 * time.Minute), reserved: 4, hasPrice: true, price: 0.3}},
		"edge":    {{at: at(5 * time.Minute), reserved: 7}},
		"nothing": nil,
	}
	ids := []string{"edge", "late", "nothing", "old", "steady"}
	for name, m := range map[string]metric{
		"reserved": func(s sample) (float64, bool) { return s.reserved, true },
		"price":    func(s sample) (float64, bool) { return s.price, s.hasPrice },
	} {
		longest := chartSeries(now, at(time.Hour), ids, series, m)
		for _, span := range []time.Duration{time.Hour, 15 * time.Minute, 5 * time.Minute, time.Minute} {
			got, gotMax := within(longest, at(span))
			want := chartSeries(now, at(span), ids, series, m)
			wantMax := 0.0
			for i := range want {
				if len(want[i]) == 0 {
					want[i] = nil
				}
				for _, p := range want[i] {
					wantMax = max(wantMax, p.v)
				}
			}
			if !reflect.DeepEqual(got, want) || gotMax != wantMax {
				t.Errorf("%s over %v: got %v (max %v), want %v (max %v)", name, span, got, gotMax, want, wantMax)
			}
		}
	}
}

// A provider that prices only some resources of a chunk is unpriced: the
// price chart draws no line for it (not one at 0), as the table says
// "unpriced"; one pricing everything at 0 is drawn at 0.
func TestPriceChartLeavesUnpricedOut(t *testing.T) {
	now := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	sizes := map[api.ChunkType]corev1.ResourceList{api.ChunkStandard: {corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi")}}
	half := ad("half", 0, 0, now, true)
	half.UnitPrices = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0.05")}
	free := ad("free", 0, 0, now, true)
	free.UnitPrices = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0"), corev1.ResourceMemory: resource.MustParse("0")}
	ov := api.Overview{Advertisements: []api.AdvertisementSnapshot{half, free, ad("dear", 0, 0.5, now, true)}, Capacity: api.CapacitySummary{ChunkSizes: sizes}}
	h := newHistory(time.Hour, 5*time.Second)
	h.record(now.Add(-time.Minute), ov.Advertisements, sizes)
	h.record(now, ov.Advertisements, sizes)
	vm := buildDashboard(now, ov, h, 2*time.Minute, DefaultCurrency)
	var lines []string
	for _, c := range vm.Ranges[0].Charts {
		if !strings.HasPrefix(c.ID, "price-") {
			continue
		}
		for _, l := range c.Lines {
			lines = append(lines, l.LastTitle)
		}
	}
	if got, want := strings.Join(lines, ", "), "dear: 0.5000 EUR/h at 08:00:00, free: 0.0000 EUR/h at 08:00:00"; got != want {
		t.Fatalf("price lines %q, want %q (half prices cpu only: unpriced)", got, want)
	}
	for _, p := range vm.Providers {
		if p.ID == "half" && p.Price != "unpriced" {
			t.Fatalf("the table prices half at %q", p.Price)
		}
	}
}
