package web

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
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
		h.record(now.Add(-time.Duration(i)*5*time.Second), ov.Advertisements)
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
	var clients []*live.Client
	for range 100 {
		c, err := h.Register(ctx)
		if err != nil {
			b.Fatal(err)
		}
		clients = append(clients, c)
		go func() {
			for {
				select {
				case <-c.Send():
				case <-c.Done():
					return
				}
			}
		}()
	}
	msg := bytes.Repeat([]byte("x"), 32<<10)
	b.ReportAllocs()
	for b.Loop() {
		h.Broadcast(ctx, msg)
	}
}
