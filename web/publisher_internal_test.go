package web

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/federation-autoscaler/federation-autoscaler/deploy/testpoll"
	"github.com/federation-autoscaler/federation-autoscaler/internal/signal"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/web/live"
)

// versionedSource is a Versioned OverviewSource whose change signal is
// the broker's own (internal/signal: buffer 1, coalesced, never blocking).
type versionedSource struct {
	ov      api.Overview
	sig     signal.Signal
	sub     atomic.Pointer[<-chan struct{}] // the latest subscription
	version atomic.Uint64
	reads   atomic.Int64
}

func newVersionedSource(ov api.Overview) *versionedSource {
	return &versionedSource{ov: ov}
}

func (v *versionedSource) Overview(context.Context) (api.Overview, error) {
	v.reads.Add(1)
	return v.ov, nil
}

func (v *versionedSource) Subscribe(ctx context.Context) <-chan struct{} {
	ch := v.sig.Subscribe(ctx)
	v.sub.Store(&ch)
	return ch
}

func (v *versionedSource) Version() uint64 { return v.version.Load() }

// change bumps the version and signals it, as the broker does.
func (v *versionedSource) change() {
	v.version.Add(1)
	v.sig.Notify()
}

// unread reports whether a change signal waits in the subscription, not
// yet taken by the publisher.
func (v *versionedSource) unread() bool {
	p := v.sub.Load()
	return p != nil && len(*p) > 0
}

func startDashboard(t testing.TB, src OverviewSource, opts DashboardOptions) (*Dashboard, context.Context) {
	t.Helper()
	d, err := NewDashboard(src, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = d.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return d, ctx
}

func recvFragment(t *testing.T, c *live.Client) {
	t.Helper()
	select {
	case <-c.Send():
	case <-time.After(10 * time.Second):
		t.Fatal("no fragment within 10s")
	}
}

// TestPublisherRendersOnlyForViewers: changes without a viewer render
// nothing and do not even wake the publisher (the signal stays unread); a
// viewer joining gets the current state at once; while it watches, a burst
// of changes is published once per coalescing period; the overview is read
// again only when the version moved.
func TestPublisherRendersOnlyForViewers(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(t0)
	src := newVersionedSource(api.Overview{Advertisements: []api.AdvertisementSnapshot{ad("milan", 1, 0.2, t0, true)}})
	d, ctx := startDashboard(t, src, DashboardOptions{SiteOptions: SiteOptions{Clock: clk, Coalesce: 250 * time.Millisecond, RenderShare: 1, Refresh: time.Second}, SampleEvery: time.Hour})
	pubs := func() int64 { return d.site.publications.Load() }
	waitSampled(t, d, "milan", 1) // the sampler's first read is done

	for range 100 {
		src.change()
	}
	// The refresh tick wakes the publisher: with nobody watching it
	// publishes nothing and leaves the changes unread.
	testpoll.UntilSeen(t, 10*time.Second, "the sampler's and the publisher's tickers", func() (bool, string) {
		n := clk.Waiters()
		return n >= 2, fmt.Sprintf("%d waiters", n)
	})
	clk.Step(time.Second)
	testpoll.UntilSeen(t, 10*time.Second, "the publisher woken by the refresh tick", func() (bool, string) {
		w := d.site.wakes.Load()
		return w >= 1, fmt.Sprintf("%d wakes", w)
	})
	if got := pubs(); got != 0 {
		t.Fatalf("%d publications without a viewer, want 0", got)
	}
	if !src.unread() {
		t.Fatal("the publisher took a change signal with nobody watching")
	}

	c, err := d.site.hub.Register(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer d.site.hub.Unregister(c)
	// A publication sends a joined viewer only the panels that changed
	// (nothing when none did): count the publications, not the messages.
	waitPubs := func(want int64, what string) {
		t.Helper()
		testpoll.UntilSeen(t, 10*time.Second, fmt.Sprintf("%d publications (%s)", want, what), func() (bool, string) {
			got := pubs()
			return got >= want, fmt.Sprintf("%d", got)
		})
		if got := pubs(); got != want {
			t.Fatalf("%d publications %s, want %d", got, what, want)
		}
	}
	recvFragment(t, c) // the whole page, at once
	waitPubs(1, "after a viewer joined")
	readsAfterJoin := src.reads.Load()

	for range 50 {
		src.change()
	}
	if got := pubs(); got != 1 {
		t.Fatalf("a burst inside the coalescing period published %d more times, want 0 before the period ends", got-1)
	}
	clk.Step(250 * time.Millisecond)
	waitPubs(2, "after one period (the burst published once)")
	if got := src.reads.Load() - readsAfterJoin; got != 1 {
		t.Fatalf("the burst's publication read the overview %d times, want 1", got)
	}
	// The change signal that came during the period is taken now, and
	// makes the page due at the end of the next one.
	testpoll.UntilSeen(t, 10*time.Second, "the last change signal taken", func() (bool, string) {
		return !src.unread(), "unread"
	})

	// A refresh with an unchanged version re-renders (ages move) without
	// reading the overview.
	reads := src.reads.Load()
	clk.Step(750 * time.Millisecond) // the refresh period (1s) ends
	waitPubs(3, "after the refresh")
	if got := src.reads.Load(); got != reads {
		t.Fatalf("a refresh at an unchanged version read the overview %d times", got-reads)
	}
}

// TestHistoryIsSampledAtAFixedCadence: the history gets one sample per
// SampleEvery whatever the rate of changes, with or without viewers.
func TestHistoryIsSampledAtAFixedCadence(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(t0)
	src := newVersionedSource(api.Overview{Advertisements: []api.AdvertisementSnapshot{ad("milan", 1, 0.2, t0, true)}})
	d, _ := startDashboard(t, src, DashboardOptions{SiteOptions: SiteOptions{Clock: clk}, SampleEvery: 5 * time.Second, HistoryWindow: time.Hour})
	waitSampled(t, d, "milan", 1)
	for range 200 {
		src.change()
	}
	if got := samplesOf(d, "milan"); got != 1 {
		t.Fatalf("changes added samples: %d, want 1", got)
	}
	for i := 2; i <= 4; i++ {
		clk.Step(5 * time.Second)
		waitSampled(t, d, "milan", i)
	}
}

func samplesOf(d *Dashboard, id string) int {
	_, s, _ := d.hist.snapshot()
	return len(s[id])
}

// waitSampled polls (10 s at most) until the history of id holds n samples.
func waitSampled(t *testing.T, d *Dashboard, id string, n int) {
	t.Helper()
	testpoll.UntilSeen(t, 10*time.Second, fmt.Sprintf("%d samples in the history of %s", n, id), func() (bool, string) {
		got := samplesOf(d, id)
		return got == n, fmt.Sprintf("%d samples", got)
	})
}
