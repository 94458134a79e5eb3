package reservations

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// The provider's own snapshot carries its live loans (with their cost at the
// current prices), its chunks per type and its sharing rules; the overview
// carries the same chunks and rules but no loans.
func TestProviderSnapshotLoansChunksSharing(t *testing.T) {
	e := newEnv(t)
	sharing := &api.Sharing{DeniedConsumers: []string{"c9"}, MaxChunksPerConsumer: 3}
	e.advertise("p1", 4, func(r *api.AdvertisementRequest) {
		// A standard chunk (2 cpu, 4Gi) costs 2×0.01 + 4×0.002 = 0.028 per hour.
		r.UnitPrices = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0.01"), corev1.ResourceMemory: resource.MustParse("0.002")}
		r.Sharing = sharing
	})
	e.advertise("p2", 4) // unpriced
	e.heartbeat("c1")
	e.heartbeat("c2")
	e.reserve("c1", "r1", "p1")
	e.clk.Step(1e9)
	e.reserve("c2", "r2", "p1")
	e.clk.Step(1e9)
	e.reserve("c2", "r3", "p1")
	e.reserve("c1", "other", "p2")
	if _, err := e.s.Release(e.ctx, "c2", "r3", 0); err != nil {
		t.Fatal(err)
	}
	if p := e.phase("r3"); !p.Terminal() {
		t.Fatalf("r3 is %s after release of a pending reservation, want terminal", p)
	}

	snap, err := e.s.Advertisement(e.ctx, "p1")
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		id, consumer string
	}{{"r1", "c1"}, {"r2", "c2"}}
	if len(snap.Loans) != len(want) {
		t.Fatalf("loans = %+v, want %v", snap.Loans, want)
	}
	for i, w := range want {
		l := snap.Loans[i]
		if l.ReservationID != w.id || l.ConsumerClusterID != w.consumer || l.ChunkCount != 1 || l.ChunkType != api.ChunkStandard || l.Status.Terminal() {
			t.Errorf("loan %d = %+v, want %s of %s, 1 standard chunk, live", i, l, w.id, w.consumer)
		}
		if l.CostPerHour == nil || *l.CostPerHour < 0.0279999 || *l.CostPerHour > 0.0280001 {
			t.Errorf("loan %s costs %v per hour, want 0.028", l.ReservationID, l.CostPerHour)
		}
		if l.CreatedAt.IsZero() {
			t.Errorf("loan %s has no creation time", l.ReservationID)
		}
	}
	if got := snap.Chunks[api.ChunkStandard]; got != (api.ChunkCounts{TotalChunks: 4, ReservedChunks: 2, AvailableChunks: 2}) {
		t.Errorf("chunks = %+v, want 4 total, 2 reserved, 2 available", got)
	}
	if snap.Sharing == nil || snap.Sharing.MaxChunksPerConsumer != 3 || len(snap.Sharing.DeniedConsumers) != 1 || snap.Sharing.DeniedConsumers[0] != "c9" {
		t.Errorf("sharing = %+v, want %+v", snap.Sharing, sharing)
	}
	// The snapshot's rule set is a copy: changing it leaves the broker's alone.
	snap.Sharing.DeniedConsumers[0] = "changed"

	p2, err := e.s.Advertisement(e.ctx, "p2")
	if err != nil {
		t.Fatal(err)
	}
	if len(p2.Loans) != 1 || p2.Loans[0].ReservationID != "other" || p2.Loans[0].CostPerHour != nil {
		t.Errorf("p2 loans = %+v, want only \"other\", unpriced", p2.Loans)
	}

	ov, err := e.s.Overview(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range ov.Advertisements {
		if len(a.Loans) != 0 {
			t.Errorf("overview row %s carries loans %+v", a.ClusterID, a.Loans)
		}
		if a.ClusterID == "p1" {
			if a.Sharing == nil || a.Sharing.DeniedConsumers[0] != "c9" {
				t.Errorf("overview sharing of p1 = %+v, want the advertised rules", a.Sharing)
			}
			if a.Chunks[api.ChunkStandard] != snap.Chunks[api.ChunkStandard] {
				t.Errorf("overview chunks %+v ≠ snapshot chunks %+v", a.Chunks, snap.Chunks)
			}
		}
	}
	if got := ov.Capacity.ByChunkType[api.ChunkStandard]; got != (api.ChunkCounts{TotalChunks: 8, ReservedChunks: 3, AvailableChunks: 5}) {
		t.Errorf("federation totals = %+v, want 8 total, 3 reserved, 5 available", got)
	}
}

// The overview's chosen provider is the consumer's growable group under its
// policy (the placement view), not what its heartbeat last reported.
func TestOverviewChosenProvider(t *testing.T) {
	e := newEnv(t)
	price := func(cpu string) func(*api.AdvertisementRequest) {
		return func(r *api.AdvertisementRequest) {
			r.UnitPrices = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("0.001")}
		}
	}
	e.advertise("p1", 2, price("0.05"))
	e.advertise("p2", 1, price("0.01"))
	hb := func(c string, p api.PlacementType, reported string) {
		t.Helper()
		if _, err := e.s.Heartbeat(e.ctx, c, api.HeartbeatRequest{ClusterID: c, LiqoClusterID: "liqo-" + c,
			Placement: &api.Placement{Type: p}, ChosenProvider: reported}); err != nil {
			t.Fatal(err)
		}
	}
	chosen := func(c string) (string, *float64) {
		t.Helper()
		ov, err := e.s.Overview(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, row := range ov.Consumers {
			if row.ClusterID == c {
				return row.ChosenProvider, row.MeasuredRTT
			}
		}
		t.Fatalf("no overview row for %s", c)
		return "", nil
	}
	cases := []struct {
		name     string
		policy   api.PlacementType
		reported string
		reserve  bool
		want     string
	}{
		// Standard: both fully free, same score; ties by provider id.
		{"standard", api.PlacementStandard, "", false, "p1"},
		// Price: the cheaper p2, whatever the heartbeat last said.
		{"price, stale report", api.PlacementPrice, "p1", false, "p2"},
		// Choice: both growable; the consumer agent's pick (p2, not the
		// first by id) is the one shown.
		{"choice, the consumer's pick", api.PlacementChoice, "p2", false, "p2"},
		// Only the pick changes (no placement input does, so the epoch
		// stands): the overview follows it, not a pick cached before.
		{"choice, the consumer picks again", api.PlacementChoice, "p1", false, "p1"},
		// p2 full: the view spills to p1.
		{"price, cheapest full", api.PlacementPrice, "p2", true, "p1"},
		// Choice with the pick full: the pick is stale, ignored.
		{"choice, a pick without room", api.PlacementConsumerChoice, "p2", false, "p1"},
	}
	for _, tc := range cases {
		hb("c1", tc.policy, tc.reported)
		if tc.reserve {
			e.peer("c1", "r-full", "p2") // settled: a peering in flight would make the view wait instead
		}
		if got, _ := chosen("c1"); got != tc.want {
			t.Errorf("%s: chosen %q, want %q", tc.name, got, tc.want)
		}
	}
	// The RTT shown is the one measured to the chosen provider.
	if _, err := e.s.Heartbeat(e.ctx, "c2", api.HeartbeatRequest{ClusterID: "c2", LiqoClusterID: "liqo-c2",
		Placement: &api.Placement{Type: api.PlacementPrice}, MeasuredLatencies: map[string]float64{"p1": 40, "p2": 7}}); err != nil {
		t.Fatal(err)
	}
	if got, rtt := chosen("c2"); got != "p1" || rtt == nil || *rtt != 40 {
		t.Errorf("c2: chosen %q rtt %v, want p1 (p2 is full) at 40 ms", got, rtt)
	}
}
