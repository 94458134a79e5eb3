package reservations

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/federation-autoscaler/federation-autoscaler/deploy/testpoll"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// Bug #9: heartbeats renew leases; only silence expires a reservation.
func TestLeases(t *testing.T) {
	e := newEnv(t)
	e.advertise("p1", 3)
	e.heartbeat("c1")
	e.peer("c1", "r1", "p1")
	e.reserve("c1", "r2", "p1") // Peering, credential reused
	// Far beyond the reference's 24 h, heartbeats keep everything alive.
	for range 200 {
		e.clk.Step(10 * time.Minute)
		e.advertise("p1", 3)
		e.heartbeat("c1")
		e.s.sweep(e.ctx)
	}
	if e.phase("r1") != api.PhasePeered || e.phase("r2") != api.PhasePeering {
		t.Fatalf("phases %s %s after renewed leases", e.phase("r1"), e.phase("r2"))
	}
	r, _ := e.s.Reservation(e.ctx, "c1", api.RoleConsumer, "r1")
	if !r.ExpiresAt.Time.Equal(e.clk.Now().Add(DefaultReservationLease)) {
		t.Fatalf("expiresAt %v is not the lease deadline", r.ExpiresAt)
	}
	hb := e.heartbeat("c1", "r1", "gone", "r2", "gone")
	if !slices.Equal(hb.UnknownReservations, []string{"gone"}) {
		t.Fatalf("unknownReservations = %v", hb.UnknownReservations)
	}
	// Silence: just before the deadline nothing happens, at it both expire.
	e.clk.Step(DefaultReservationLease - time.Second)
	e.advertise("p1", 3)
	e.s.sweep(e.ctx)
	if e.phase("r1") != api.PhasePeered {
		t.Fatal("expired early")
	}
	e.clk.Step(time.Second)
	e.s.sweep(e.ctx)
	for _, id := range []string{"r1", "r2"} {
		if got := e.phase(id); got != api.PhaseExpired {
			t.Fatalf("%s = %s, want Expired", id, got)
		}
		e.mustFind("c1", cleanupName(id))
	}
	if _, found := e.find("c1", "peer-r2"); found {
		t.Fatal("peer of an expired reservation still delivered")
	}
	// The silent consumer's Cleanups hold the provider's for
	// ProviderCleanupHold, no longer.
	if _, found := e.find("p1", "pcleanup.c1.p1"); found {
		t.Fatal("provider cleanup delivered while the consumer's cleanups were fresh")
	}
	e.clk.Step(DefaultProviderCleanupHold)
	e.mustFind("p1", "pcleanup.c1.p1")
	if e.reserved("p1") != 0 {
		t.Fatal("chunks not credited on expiry")
	}
	hb = e.heartbeat("c1", "r1")
	if !slices.Equal(hb.UnknownReservations, []string{"r1"}) {
		t.Fatalf("expired reservation not reported unknown: %v", hb.UnknownReservations)
	}
}

func TestProviderStaleness(t *testing.T) {
	e := newEnv(t)
	e.advertise("p1", 4)
	e.heartbeat("c1")
	e.peer("c1", "peered", "p1")
	e.peer("c1", "leaving", "p1")
	e.reserve("c1", "pending", "p1")
	if _, err := e.s.Release(e.ctx, "c1", "leaving", 0); err != nil {
		t.Fatal(err)
	}
	e.clk.Step(DefaultProviderStaleAfter - time.Second)
	e.heartbeat("c1")
	e.s.sweep(e.ctx)
	if e.phase("peered") != api.PhasePeered {
		t.Fatal("stale too early")
	}
	e.clk.Step(time.Second)
	e.s.sweep(e.ctx)
	want := map[string]api.Phase{"peered": api.PhaseFailed, "pending": api.PhaseFailed, "leaving": api.PhaseUnpeering}
	for id, ph := range want {
		if got := e.phase(id); got != ph {
			t.Fatalf("%s = %s, want %s", id, got, ph)
		}
	}
	e.mustFind("c1", "cleanup-peered")
	e.mustFind("c1", "cleanup-pending") // peering had started (credential reused)
	snap, _ := e.s.Advertisement(e.ctx, "p1")
	if snap.Available || snap.AvailableChunks != 0 {
		t.Fatalf("stale snapshot %+v", snap)
	}
	_, _, err := e.s.Reserve(e.ctx, "c1", "new", stdReq("p1"))
	wantCode(t, err, api.CodeServiceUnavailable)
	for _, ng := range e.idx.View("c1", true).NodeGroups {
		if ng.MaxSize > ng.CurrentReserved {
			t.Fatalf("stale provider growable: %+v", ng)
		}
	}
	// A returning advertisement restores the provider.
	e.advertise("p1", 4)
	if _, created, err := e.s.Reserve(e.ctx, "c1", "new", stdReq("p1")); err != nil || !created {
		t.Fatalf("reserve after restore: %v", err)
	}
}

func TestGarbageCollection(t *testing.T) {
	e := newEnv(t)
	e.advertise("p1", 1)
	e.heartbeat("c1")
	e.reserve("c1", "r1", "p1")
	if _, err := e.s.Release(e.ctx, "c1", "r1", 0); err != nil {
		t.Fatal(err)
	}
	next := e.s.sweep(e.ctx)
	if !next.Equal(t0.Add(DefaultProviderStaleAfter)) { // the provider's freshness deadline comes first
		t.Fatalf("next sweep at %v", next)
	}
	e.clk.Step(DefaultEnforcedGC)
	e.heartbeat("c1")
	e.advertise("p1", 1)
	e.s.sweep(e.ctx)
	wantCode(t, e.s.PostResult(e.ctx, "p1", api.RoleProvider, "gk.c1.p1", kubeconfig("K")), api.CodeNotFound)
	if _, err := e.s.Reservation(e.ctx, "c1", api.RoleConsumer, "r1"); err != nil {
		t.Fatal("terminal reservation collected too early")
	}
	e.clk.Step(DefaultTerminalGC - DefaultEnforcedGC)
	e.heartbeat("c1")
	e.advertise("p1", 1)
	e.s.sweep(e.ctx)
	_, err := e.s.Reservation(e.ctx, "c1", api.RoleConsumer, "r1")
	wantCode(t, err, api.CodeNotFound)
	// A replay of a collected id creates anew.
	if _, created, err := e.s.Reserve(e.ctx, "c1", "r1", stdReq("p1")); err != nil || !created {
		t.Fatalf("replay after GC: created=%v err=%v", created, err)
	}
	e.restart()
	if got := e.phase("r1"); got != api.PhaseGeneratingKubeconfig {
		t.Fatalf("after restart r1 = %s", got)
	}
}

func TestLongPollWakesOnIssue(t *testing.T) {
	e := newEnv(t)
	e.advertise("p1", 1)
	e.heartbeat("c1")
	got := make(chan []api.InstructionView, 1)
	go func() {
		v, _ := e.s.Instructions(e.ctx, "p1", api.RoleProvider, 30*time.Second)
		got <- v
	}()
	testpoll.Until(t, 10*time.Second, "the waiter to block", func() bool { return e.s.Waiters() == 1 })
	if n := testutil.ToFloat64(gauge(t, e.s, "fa_broker_longpoll_waiters")); n != 1 {
		t.Fatalf("waiters gauge = %v", n)
	}
	e.reserve("c1", "r1", "p1")
	select {
	case v := <-got:
		if len(v) != 1 || v[0].ID != "gk.c1.p1" {
			t.Fatalf("woke with %v", ids(v))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("waiter not woken")
	}
	testpoll.Until(t, 10*time.Second, "the waiter count to drop", func() bool { return e.s.Waiters() == 0 })

	// The consumer waits; the provider's result wakes it with the Peer.
	go func() {
		v, _ := e.s.Instructions(e.ctx, "c1", api.RoleConsumer, 30*time.Second)
		got <- v
	}()
	testpoll.Until(t, 10*time.Second, "the consumer to wait", func() bool { return e.s.Waiters() == 1 })
	e.result("p1", "gk.c1.p1", kubeconfig("K"))
	select {
	case v := <-got:
		if len(v) != 1 || v[0].ID != "peer-r1" || v[0].Kubeconfig != "K" {
			t.Fatalf("woke with %v", ids(v))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("consumer not woken")
	}
}

func TestLongPollTimeoutAndCancel(t *testing.T) {
	e := newEnv(t)
	got := make(chan []api.InstructionView, 1)
	go func() {
		v, _ := e.s.Instructions(e.ctx, "c1", api.RoleConsumer, 5*time.Minute) // capped at MaxWait
		got <- v
	}()
	testpoll.Until(t, 10*time.Second, "the waiter's timer", func() bool { return e.clk.HasWaiters() && e.s.Waiters() == 1 })
	e.clk.Step(DefaultMaxWait)
	select {
	case v := <-got:
		if v == nil || len(v) != 0 {
			t.Fatalf("timeout returned %v", v)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("wait not capped at MaxWait")
	}
	ctx, cancel := context.WithCancel(e.ctx)
	go func() {
		v, _ := e.s.Instructions(ctx, "c1", api.RoleConsumer, time.Minute)
		got <- v
	}()
	testpoll.Until(t, 10*time.Second, "the waiter", func() bool { return e.s.Waiters() == 1 })
	cancel()
	select {
	case <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("cancel ignored")
	}
}

func TestRestartRestoresState(t *testing.T) {
	e := newEnv(t)
	e.advertise("p1", 4)
	e.advertise("p2", 2)
	e.heartbeat("c1")
	e.heartbeat("c2")
	e.peer("c1", "a", "p1")
	e.reserve("c1", "b", "p1")
	e.reserve("c2", "c", "p2")
	if _, err := e.s.Release(e.ctx, "c1", "a", 0); err != nil {
		t.Fatal(err)
	}
	before := overviewJSON(t, e.s)
	beforeC1, beforeP2 := ids(e.instructions("c1")), ids(e.instructions("p2"))
	e.restart()
	if after := overviewJSON(t, e.s); after != before {
		t.Fatalf("overview changed across restart:\nbefore %s\nafter  %s", before, after)
	}
	if !slices.Equal(ids(e.instructions("c1")), beforeC1) || !slices.Equal(ids(e.instructions("p2")), beforeP2) {
		t.Fatal("instructions changed across restart")
	}
	if got := e.reserved("p1"); got != 2 {
		t.Fatalf("reserved recomputed as %d, want 2", got)
	}
	// The consumer registry survived: no 412.
	if _, created, err := e.s.Reserve(e.ctx, "c2", "d", stdReq("p2")); err != nil || !created {
		t.Fatalf("reserve after restart: %v", err)
	}
	// The staged credential survived: the Peer still carries it.
	if v := e.mustFind("c1", "peer-b"); v.Kubeconfig == "" {
		t.Fatal("credential lost")
	}
	// A restart does not count the downtime against leases.
	e.clk.Step(time.Hour)
	e.restart()
	e.s.sweep(e.ctx)
	if got := e.phase("b"); got != api.PhasePeering {
		t.Fatalf("b = %s after a restart following downtime", got)
	}
	// The provider's last advertisement is older than the staleness window:
	// no new reservations until it advertises, but its reservations get a
	// full window to come back.
	_, _, err := e.s.Reserve(e.ctx, "c2", "e", stdReq("p2"))
	wantCode(t, err, api.CodeServiceUnavailable)
	e.clk.Step(DefaultProviderStaleAfter - time.Second)
	e.heartbeat("c1")
	e.heartbeat("c2")
	e.advertise("p1", 4)
	e.s.sweep(e.ctx)
	if got := e.phase("c"); got != api.PhaseGeneratingKubeconfig {
		t.Fatalf("c = %s within the grace window", got)
	}
	e.clk.Step(time.Second)
	e.s.sweep(e.ctx)
	if got, gotB := e.phase("c"), e.phase("b"); got != api.PhaseFailed || gotB != api.PhasePeering {
		t.Fatalf("after the grace window c = %s (want Failed), b = %s (want Peering)", got, gotB)
	}
}

func TestFailedCommitRollsBack(t *testing.T) {
	e := newEnv(t)
	e.advertise("p1", 1)
	e.heartbeat("c1")
	e.st.fail.Store(true)
	_, _, err := e.s.Reserve(e.ctx, "c1", "r1", stdReq("p1"))
	if err == nil || api.CodeOf(err) != api.CodeInternalError {
		t.Fatalf("err = %v", err)
	}
	e.st.fail.Store(false)
	if e.reserved("p1") != 0 {
		t.Fatal("failed reserve kept its chunk")
	}
	if _, err := e.s.Reservation(e.ctx, "c1", api.RoleConsumer, "r1"); !api.IsCode(err, api.CodeNotFound) {
		t.Fatalf("failed reservation still visible: %v", err)
	}
	e.reserve("c1", "r1", "p1")
}

func TestSubscribe(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithCancel(e.ctx)
	ch := e.s.Subscribe(ctx)
	e.advertise("p1", 1)
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("no change notification")
	}
	cancel()
	testpoll.Until(t, 10*time.Second, "the channel to close", func() bool {
		select {
		case _, open := <-ch:
			return !open
		default:
			return false
		}
	})
}

func TestUnknownPolicyWarns(t *testing.T) {
	e := newEnv(t)
	_, err := e.s.Heartbeat(e.ctx, "c1", api.HeartbeatRequest{ClusterID: "c1", LiqoClusterID: "l", Placement: &api.Placement{Type: "Greenest"}})
	if err != nil {
		t.Fatal(err)
	}
	ov, _ := e.s.Overview(e.ctx)
	if len(ov.Warnings) != 1 || !strings.Contains(ov.Warnings[0], "Greenest") || ov.Consumers[0].AppliedPlacement != api.PlacementStandard {
		t.Fatalf("overview = %+v", ov)
	}
	ng, _ := e.s.NodeGroups(e.ctx, "c1", false)
	if ng.AppliedPlacement != api.PlacementStandard || ng.NodeGroups == nil {
		t.Fatalf("view = %+v", ng)
	}
}

func TestAdvertiseValidation(t *testing.T) {
	neg := -1.0
	tests := []struct {
		name  string
		mod   func(*api.AdvertisementRequest)
		field string
	}{
		{"cluster id", func(r *api.AdvertisementRequest) { r.ClusterID = "Bad_Id" }, "clusterId"},
		{"liqo id", func(r *api.AdvertisementRequest) { r.LiqoClusterID = "" }, "liqoClusterId"},
		{"resources", func(r *api.AdvertisementRequest) { r.Resources = nil }, "resources"},
		{"carbon", func(r *api.AdvertisementRequest) { r.CarbonIntensity = &neg }, "carbonIntensity"},
		{"forecast", func(r *api.AdvertisementRequest) { r.CarbonForecast = []float64{1, -2} }, "carbonForecast[1]"},
		{"price", func(r *api.AdvertisementRequest) { r.UnitPrices = rl("-1", "0") }, "unitPrices[cpu]"},
	}
	e := newEnv(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := api.AdvertisementRequest{ClusterID: "p1", LiqoClusterID: "l", Resources: rl("4", "8Gi")}
			tc.mod(&req)
			_, err := e.s.Advertise(e.ctx, "p1", req)
			wantCode(t, err, api.CodeInvalidRequest)
			if !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("error %q does not name %s", err, tc.field)
			}
		})
	}
	_, err := e.s.Advertise(e.ctx, "p2", api.AdvertisementRequest{ClusterID: "p1", LiqoClusterID: "l", Resources: rl("4", "8Gi")})
	wantCode(t, err, api.CodeForbidden)
	resp := e.advertise("p1", 3)
	if !resp.Accepted || resp.ChunkCount != 3 || resp.ChunkCounts[api.ChunkStandard] != 3 || resp.NextReportIn != "30s" || resp.ChunkResources.Cpu().String() != "2" {
		t.Fatalf("response = %+v", resp)
	}
	e.heartbeat("c1")
	e.reserve("c1", "r1", "p1")
	resp = e.advertise("p1", 3)
	if len(resp.Instructions) != 1 || resp.Instructions[0].ID != "gk.c1.p1" {
		t.Fatalf("piggybacked = %v", ids(resp.Instructions))
	}
}

func TestCollector(t *testing.T) {
	e := newEnv(t)
	e.advertise("p1", 2)
	e.heartbeat("c1")
	e.reserve("c1", "r1", "p1")
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(e.s.Collector()); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP fa_broker_chunks_reserved Chunks held by live reservations per provider and chunk type.
# TYPE fa_broker_chunks_reserved gauge
fa_broker_chunks_reserved{chunk_type="standard",provider="p1"} 1
# HELP fa_broker_chunks_total Chunks advertised per provider and chunk type.
# TYPE fa_broker_chunks_total gauge
fa_broker_chunks_total{chunk_type="standard",provider="p1"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "fa_broker_chunks_total", "fa_broker_chunks_reserved"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.ToFloat64(gauge(t, e.s, "fa_broker_reservations", "GeneratingKubeconfig")); n != 1 {
		t.Fatalf("reservations{GeneratingKubeconfig} = %v", n)
	}
}

// gauge extracts one metric of the collector as a collector of its own.
func gauge(t *testing.T, s *Service, name string, labels ...string) prometheus.Collector {
	t.Helper()
	ch := make(chan prometheus.Metric, 64)
	s.Collector().Collect(ch)
	close(ch)
	for m := range ch {
		d := m.Desc().String()
		if !strings.Contains(d, `"`+name+`"`) {
			continue
		}
		match := true
		for _, l := range labels {
			if !strings.Contains(metricString(m), l) {
				match = false
			}
		}
		if match {
			return constCollector{m}
		}
	}
	t.Fatalf("metric %s%v not found", name, labels)
	return nil
}

type constCollector struct{ m prometheus.Metric }

func (c constCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.m.Desc() }
func (c constCollector) Collect(ch chan<- prometheus.Metric) { ch <- c.m }

func metricString(m prometheus.Metric) string {
	var pb dto.Metric
	_ = m.Write(&pb)
	return pb.String()
}

func TestRunSweepsOnDeadline(t *testing.T) {
	e := newEnv(t)
	e.advertise("p1", 1)
	e.heartbeat("c1")
	e.peer("c1", "r1", "p1")
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- e.s.Run(ctx) }()
	testpoll.Until(t, 10*time.Second, "Run to sleep", e.clk.HasWaiters)
	e.clk.Step(DefaultProviderStaleAfter)
	testpoll.Until(t, 10*time.Second, "the stale provider's reservation to fail", func() bool { return e.phase("r1") == api.PhaseFailed })
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
	}
}

func TestCloseEndsWaitersAndRefusesWrites(t *testing.T) {
	e := newEnv(t)
	e.advertise("p1", 1)
	e.heartbeat("c1")
	got := make(chan struct{})
	go func() {
		_, _ = e.s.Instructions(e.ctx, "c1", api.RoleConsumer, time.Minute)
		close(got)
	}()
	testpoll.Until(t, 10*time.Second, "the waiter", func() bool { return e.s.Waiters() == 1 })
	if err := e.s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("Close left a long-poll waiting")
	}
	if _, _, err := e.s.Reserve(e.ctx, "c1", "r1", stdReq("p1")); api.CodeOf(err) != api.CodeInternalError {
		t.Fatalf("reserve after Close: %v", err)
	}
}
