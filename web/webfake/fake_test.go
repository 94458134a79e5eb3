package webfake

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/web"
)

func waitSignal(t *testing.T, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal("no change signal")
	}
}

func TestWorkloadLifecycle(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	f := New(nil)
	sub := f.Subscribe(ctx)
	c := f.Consumer()
	if err := c.SetPolicy(ctx, api.Placement{Type: api.PlacementPrice}); err != nil {
		t.Fatal(err)
	}
	waitSignal(t, sub)
	if err := c.SetWorkload(ctx, web.Workload{Enabled: true, Replicas: 5, PodCPU: resource.MustParse("1"), PodMemory: resource.MustParse("1Gi")}); err != nil {
		t.Fatal(err)
	}
	waitSignal(t, sub)
	st, _ := c.Status(ctx)
	if len(st.Reservations) != 1 || st.Reservations[0].ProviderClusterID != "paris" || st.Reservations[0].ChunkCount != 3 {
		t.Fatalf("5 one-core pods on 2-core chunks under Price: %+v, want 3 chunks on paris", st.Reservations)
	}
	for f.Step() {
	}
	st, _ = c.Status(ctx)
	if st.Reservations[0].Phase != api.PhasePeered || len(st.VirtualNodes) != 3 || st.VirtualNodes[0].State != "Ready" {
		t.Fatalf("after stepping: %+v %+v", st.Reservations, st.VirtualNodes)
	}
	w, _ := c.Workload(ctx)
	if w.Running != 5 || w.Pending != 0 {
		t.Fatalf("workload %d running, %d pending", w.Running, w.Pending)
	}
	ov, _ := f.Overview(ctx)
	if ov.Capacity.ReservedChunks != 3 || len(ov.Reservations[0].History) != 5 {
		t.Fatalf("overview: reserved %d, history %+v", ov.Capacity.ReservedChunks, ov.Reservations[0].History)
	}
	if err := c.SetWorkload(ctx, web.Workload{PodCPU: resource.MustParse("1"), PodMemory: resource.MustParse("1Gi")}); err != nil {
		t.Fatal(err)
	}
	for f.Step() {
	}
	ov, _ = f.Overview(ctx)
	if ov.Capacity.ReservedChunks != 0 || ov.Reservations[0].Status != api.PhaseReleased {
		t.Fatalf("after switching off: reserved %d, phase %s", ov.Capacity.ReservedChunks, ov.Reservations[0].Status)
	}
	cancel()
	for range sub {
	}
}

func TestManualReservationErrors(t *testing.T) {
	ctx := context.Background()
	c := New(nil).Consumer()
	if _, err := c.CreateReservation(ctx, web.ReservationSpec{ProviderClusterID: "atlantis", ChunkType: api.ChunkStandard, ChunkCount: 1}); err == nil {
		t.Fatal("unknown provider accepted")
	}
	if _, err := c.CreateReservation(ctx, web.ReservationSpec{ProviderClusterID: "milan", ChunkType: api.ChunkStandard, ChunkCount: 9}); err == nil {
		t.Fatal("more chunks than free accepted")
	}
	if err := c.ReleaseReservation(ctx, "res-404"); err == nil {
		t.Fatal("release of an unknown reservation accepted")
	}
}
