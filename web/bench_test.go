package web

import (
	"bytes"
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/a-h/templ"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/placement"
	"github.com/federation-autoscaler/federation-autoscaler/web/live"
	"github.com/federation-autoscaler/federation-autoscaler/web/views"
)

// BenchmarkDashboardPublish measures one live update of a large federation
// (20 providers with a full hour of history, 40 reservations, 20 consumers):
// view model, charts and HTML.
func BenchmarkDashboardPublish(b *testing.B) {
	now := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	var ov api.Overview
	for i := range 20 {
		ov.Advertisements = append(ov.Advertisements, ad(fmt.Sprintf("provider-%02d", i), int32(i%4), 0.1+float64(i)/100, now, true))
		ov.Consumers = append(ov.Consumers, api.OverviewConsumer{ClusterID: fmt.Sprintf("consumer-%02d", i), Placement: api.PlacementPrice})
	}
	for i := range 40 {
		r := api.OverviewReservation{ReservationResponse: api.ReservationResponse{ReservationID: fmt.Sprintf("res-%d", i), Status: api.PhasePeered, CreatedAt: metav1.NewTime(now)}}
		for _, p := range []api.Phase{api.PhasePending, api.PhaseGeneratingKubeconfig, api.PhaseKubeconfigReady, api.PhasePeering, api.PhasePeered} {
			r.History = append(r.History, api.PhaseTransition{Phase: p, At: metav1.NewTime(now)})
		}
		ov.Reservations = append(ov.Reservations, r)
	}
	h := newHistory(time.Hour, 5*time.Second)
	// Worst case: every provider's reserved chunks change at every sample.
	for i := 720; i >= 0; i-- {
		for j := range ov.Advertisements {
			ov.Advertisements[j].ReservedChunks = int32((i + j) % 4)
		}
		h.record(now.Add(-time.Duration(i)*5*time.Second), ov.Advertisements, ov.Capacity.ChunkSizes)
	}
	var buf bytes.Buffer
	b.ReportAllocs()
	for b.Loop() {
		buf.Reset()
		vm := buildDashboard(now, ov, h, 2*time.Minute, DefaultCurrency)
		if err := views.DashboardLive(vm).Render(context.Background(), &buf); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(buf.Len()), "bytes/update")
}

// BenchmarkHubBroadcast measures fanning one fragment out to 100 clients.
func BenchmarkHubBroadcast(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := live.NewHub(nil, 1024)
	go h.Run(ctx)
	for range 100 {
		c, err := h.Register(ctx)
		if err != nil {
			b.Fatal(err)
		}
		go drain(c)
	}
	msg := bytes.Repeat([]byte("x"), 32<<10)
	b.ReportAllocs()
	for b.Loop() {
		h.Broadcast(ctx, msg)
	}
}

// federation builds an overview of providers providers and consumers
// consumers with a reservation per consumer (a load-test federation).
func federation(now time.Time, providers, consumers int) api.Overview {
	var ov api.Overview
	for i := range providers {
		ov.Advertisements = append(ov.Advertisements, ad(fmt.Sprintf("provider-%04d", i), int32(i%4), 0.1+float64(i%50)/100, now, true))
	}
	for i := range consumers {
		ov.Consumers = append(ov.Consumers, api.OverviewConsumer{ClusterID: fmt.Sprintf("consumer-%04d", i), Placement: api.PlacementPrice, LastSeen: metav1.NewTime(now)})
		ov.Reservations = append(ov.Reservations, api.OverviewReservation{ReservationResponse: api.ReservationResponse{
			ReservationID: fmt.Sprintf("res-%d", i), Status: api.PhasePeered, CreatedAt: metav1.NewTime(now),
		}})
	}
	ov.Capacity.TotalChunks = int32(4 * providers)
	return ov
}

// BenchmarkPublisherPerChange guards what the dashboard's live publisher
// costs per change of the broker's state: a federation of 500 providers and
// 500 consumers changing 50 times a second (500+500 agents' heartbeats and
// advertisements), on a fake clock. "no-viewer" must stay near zero (the
// change is only noted); "one-viewer" pays one overview read, view model and
// render per coalescing period (1 s), amortised over the changes in it.
// ns/change and allocs/change include the publisher goroutine's work.
//
// "one-viewer-explained" adds every consumer's "why this provider"
// explanation (computed once by a real placement.Index, as the broker's
// cache hands them out while the placement state is unchanged): the
// per-change cost of showing 500 explanations and the savings totals.
func BenchmarkPublisherPerChange(b *testing.B) {
	for _, bc := range []struct {
		name      string
		viewers   int
		explained bool
	}{{"no-viewer", 0, false}, {"one-viewer", 1, false}, {"one-viewer-explained", 1, true}} {
		viewers := bc.viewers
		b.Run(bc.name, func(b *testing.B) {
			t0 := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
			clk := clocktesting.NewFakeClock(t0)
			vs := newVersionedSource(federation(t0, 500, 500))
			src := OverviewSource(vs)
			if bc.explained {
				src = explainedSource{vs, explanations(t0, vs.ov)}
			}
			d, ctx := startDashboard(b, src, DashboardOptions{SiteOptions: SiteOptions{Clock: clk}, SampleEvery: time.Hour})
			if viewers == 1 {
				c, err := d.site.hub.Register(ctx)
				if err != nil {
					b.Fatal(err)
				}
				defer d.site.hub.Unregister(c)
				go drain(c)
			}
			const perChange = 20 * time.Millisecond // 50 changes a second
			// The publisher takes a change only when no publication is due
			// (the signal waits meanwhile). With a viewer the loop waits
			// for it after each change, so that the fake clock never runs
			// ahead of the publications (a broker's publisher keeps up
			// with its clock); without one nobody takes the changes.
			keepUp := func() {
				for viewers > 0 {
					if due := d.site.dueAt.Load(); due == 0 && !vs.unread() || due != 0 && clk.Now().Before(time.Unix(0, due)) {
						return
					}
					time.Sleep(20 * time.Microsecond) // a poll: spinning would count as CPU
				}
			}
			vs.change()
			keepUp()
			pubs0 := d.site.publications.Load()
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := processCPU()
			for b.Loop() {
				vs.change()
				clk.Step(perChange)
				keepUp()
			}
			cpu := processCPU() - cpu0
			b.StopTimer()
			pubs := d.site.publications.Load() - pubs0
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/change")
			// CPU time says what a change costs without the waits for a core
			// on a loaded machine (the benchmark's own handoffs included).
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/change")
			b.ReportMetric(float64(pubs)/float64(b.N), "publications/change")
			if viewers == 0 && pubs != 0 {
				b.Fatalf("%d publications without a viewer", pubs)
			}
		})
	}
}

// explainedSource adds a fixed list of explanations to a versioned source.
type explainedSource struct {
	*versionedSource
	list []api.PlacementExplanation
}

func (e explainedSource) Explanations(context.Context) ([]api.PlacementExplanation, error) {
	return e.list, nil
}

// explanations explains every consumer of ov with a real placement.Index
// over ov's providers (priced, located, with room).
func explanations(now time.Time, ov api.Overview) []api.PlacementExplanation {
	ix := placement.NewIndex(placement.DefaultChunkConfig(), placement.WithClock(func() time.Time { return now }))
	for i, a := range ov.Advertisements {
		ix.UpsertProvider(placement.Provider{
			ID: a.ClusterID, Available: true,
			Resources:  corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("16Gi")},
			UnitPrices: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(fmt.Sprintf("0.0%d", 1+i%9)), corev1.ResourceMemory: resource.MustParse("0.001")},
			Topology:   &api.Topology{Latitude: 40 + float64(i%20), Longitude: float64(i % 30)},
		})
	}
	var out []api.PlacementExplanation
	for _, c := range ov.Consumers {
		ix.UpsertConsumer(placement.Consumer{ID: c.ClusterID, Placement: api.Placement{Type: c.Placement}})
		out = append(out, ix.Explain(c.ClusterID, nil))
	}
	return out
}

// processCPU is the process's user+system CPU time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// drain reads c's messages until the hub drops it, like a browser would.
func drain(c *live.Client) {
	for {
		select {
		case <-c.Send():
		case <-c.Done():
			return
		}
	}
}

// BenchmarkDashboardLive guards what one live publication of a 250 + 250
// federation costs (a full hour of history, every consumer explained by a
// real placement.Index) by what changed since the last one:
//   - "unchanged": a second passed; the cached panels are reused (the page
//     counts ages itself);
//   - "heartbeats": a second of the agents' cadences at 250 + 250 (25
//     providers' advertisements or heartbeats and 17 consumers' heartbeats
//     moved their last-seen moments): those rows are rendered and sent;
//   - "new-sample": a history sample every iteration (5 s); each chart range
//     is drawn at its cadence (every sample for 5 minutes, every third for
//     15, every twelfth for the hour);
//   - "new-explanations": the why panel is rendered again;
//   - "uncached": the whole page from scratch (what every publication cost
//     before the parts were cached).
//
// bytes/publication is what a connected viewer is sent, on average (the
// changed rows, chart ranges and panels), bytes/page the whole fragment a
// joining viewer is sent.
func BenchmarkDashboardLive(b *testing.B) {
	t0 := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	ov := federation(t0, 250, 250)
	exs := explanations(t0, ov)
	for _, bc := range []string{"unchanged", "heartbeats", "new-sample", "new-explanations", "uncached"} {
		b.Run(bc, func(b *testing.B) {
			clk := clocktesting.NewFakeClock(t0)
			src := &partsSource{ov: ov, exs: exs}
			d, err := NewDashboard(src, DashboardOptions{SiteOptions: SiteOptions{Clock: clk}})
			if err != nil {
				b.Fatal(err)
			}
			// A full hour of samples, every provider's reserved chunks
			// changing every minute.
			ads := append([]api.AdvertisementSnapshot(nil), ov.Advertisements...)
			for i := range 720 {
				for j := range ads {
					ads[j].ReservedChunks = int32((i/12 + j) % 4)
				}
				d.hist.record(clk.Now(), ads, nil)
				clk.Step(5 * time.Second)
			}
			ctx := context.Background()
			var buf bytes.Buffer
			// Bytes sent to a viewer over the publications timed, and of the
			// whole page at the last.
			var sent, pubs, page int
			publish := func() {
				parts, err := d.site.renderParts(ctx)
				if err != nil {
					b.Fatal(err)
				}
				sent, pubs, page = sent+len(d.site.delta(parts)), pubs+1, 0
				for _, p := range parts {
					page += p.html.len()
				}
			}
			publish() // the parts are cached
			sent, pubs = 0, 0
			next := 0 // the next agent to be seen
			b.ReportAllocs()
			for b.Loop() {
				if bc == "new-sample" {
					clk.Step(5 * time.Second) // SampleEvery
				} else {
					clk.Step(time.Second)
				}
				switch bc {
				case "heartbeats":
					src.set(func(p *partsSource) {
						seen := metav1.NewTime(clk.Now())
						for range 25 {
							p.ov.Advertisements[next%len(p.ov.Advertisements)].LastSeen = seen
							next++
						}
						for k := range 17 {
							p.ov.Consumers[(next+k)%len(p.ov.Consumers)].LastSeen = seen
						}
					})
				case "new-sample":
					d.hist.record(clk.Now(), ads, nil)
				case "new-explanations":
					src.set(func(p *partsSource) { p.exs = append([]api.PlacementExplanation(nil), exs...) })
				case "uncached":
					buf.Reset()
					vm := buildDashboard(clk.Now(), ov, d.hist, d.opts.StaleAfter, d.site.currency)
					for _, ex := range exs {
						vm.Why = append(vm.Why, buildWhy(ex, d.site.currency, DashboardWhyRows))
					}
					vm.Totals = buildTotals(ov.Consumers, exs, d.site.currency)
					if err := templ.Join(views.DashboardLive(vm), views.EventList(vm)).Render(ctx, &buf); err != nil {
						b.Fatal(err)
					}
					sent, pubs, page = sent+buf.Len(), pubs+1, buf.Len()
					continue
				}
				publish()
			}
			// What a connected viewer is sent: the panels that changed.
			b.ReportMetric(float64(sent)/float64(max(pubs, 1)), "bytes/publication")
			b.ReportMetric(float64(page), "bytes/page")
			// The cache working is part of the guard: an unchanged page
			// renders neither the charts nor the explanations again.
			if bc == "unchanged" && (d.parts.charts.renders != 1 || d.parts.why.renders != 1) {
				b.Fatalf("an unchanged page rendered the charts %d times and the explanations %d times, want once each", d.parts.charts.renders, d.parts.why.renders)
			}
		})
	}
}
