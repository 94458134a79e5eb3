package reservations

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/deploy/testpoll"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/store"
)

func TestHappyPath(t *testing.T) {
	e := newEnv(t)
	e.advertise("p1", 1)
	e.heartbeat("c1")
	resp := e.reserve("c1", "r1", "p1")
	if resp.Status != api.PhaseGeneratingKubeconfig {
		t.Fatalf("status after create = %s", resp.Status)
	}
	gk := e.mustFind("p1", "gk.c1.p1")
	if gk.Kind != api.KindGenerateKubeconfig || gk.ConsumerClusterID != "c1" || gk.ConsumerLiqoClusterID != "liqo-c1" ||
		gk.ReservationID != "r1" || !slices.Equal(gk.ReservationIDs, []string{"r1"}) || gk.ExpiresAt.IsZero() {
		t.Fatalf("gk = %+v", gk)
	}
	if len(e.instructions("c1")) != 0 {
		t.Fatal("consumer has instructions before the kubeconfig exists")
	}
	e.result("p1", gk.ID, kubeconfig("KUBECONFIG-TEXT"))
	if got := e.phase("r1"); got != api.PhasePeering {
		t.Fatalf("phase after kubeconfig = %s, want Peering", got)
	}
	peer := e.mustFind("c1", "peer-r1")
	if peer.Kind != api.KindPeer || peer.Kubeconfig != "KUBECONFIG-TEXT" || peer.ProviderClusterID != "p1" ||
		peer.ProviderLiqoClusterID != "liqo-p1" || peer.ChunkType != api.ChunkStandard || peer.NodeGroupID != "ng-p1-standard" ||
		peer.ResourceSliceResources.Cpu().String() != "2" || peer.ChunkCount != 1 {
		t.Fatalf("peer = %+v", peer)
	}
	e.result("c1", "peer-r1", peered("vn-1", "vn-1", "vn-2"))
	r, err := e.s.Reservation(e.ctx, "c1", api.RoleConsumer, "r1")
	if err != nil || r.Status != api.PhasePeered || !slices.Equal(r.VirtualNodeNames, []string{"vn-1", "vn-2"}) || r.ActivatedAt == nil {
		t.Fatalf("reservation = %+v, %v", r, err)
	}
	rel, err := e.s.Release(e.ctx, "c1", "r1", 0)
	if err != nil || rel.Status != api.PhaseUnpeering {
		t.Fatalf("release = %+v, %v", rel, err)
	}
	unpeer := e.mustFind("c1", "unpeer-r1")
	if !unpeer.LastChunk || unpeer.Kind != api.KindUnpeer || !unpeer.ExpiresAt.IsZero() {
		t.Fatalf("unpeer = %+v", unpeer)
	}
	// Bug #5: the chunk is still held while Unpeering.
	if got := e.reserved("p1"); got != 1 {
		t.Fatalf("reserved while Unpeering = %d, want 1", got)
	}
	e.heartbeat("c2")
	_, _, err = e.s.Reserve(e.ctx, "c2", "r2", stdReq("p1"))
	wantCode(t, err, api.CodeInsufficientCapacity)

	e.result("c1", "unpeer-r1", ok())
	if got := e.phase("r1"); got != api.PhaseReleased {
		t.Fatalf("phase = %s, want Released", got)
	}
	if got := e.reserved("p1"); got != 0 {
		t.Fatalf("reserved after Released = %d, want 0", got)
	}
	pc := e.mustFind("p1", "pcleanup.c1.p1")
	if pc.Kind != api.KindCleanup || pc.ConsumerClusterID != "c1" {
		t.Fatalf("pcleanup = %+v", pc)
	}
	// No consumer cleanup after a clean release (reference bug #30).
	if _, found := e.find("c1", "cleanup-r1"); found {
		t.Fatal("redundant consumer cleanup after Released")
	}
	e.s.mu.Lock()
	nCreds := len(e.s.st.credentials)
	e.s.mu.Unlock()
	if nCreds != 0 {
		t.Fatal("credential kept after the last reservation of the pair ended")
	}
	// Timeline for the dashboard.
	ov := overviewJSON(t, e.s)
	for _, p := range []api.Phase{api.PhasePending, api.PhaseGeneratingKubeconfig, api.PhaseKubeconfigReady, api.PhasePeering, api.PhasePeered, api.PhaseUnpeering, api.PhaseReleased} {
		if !strings.Contains(ov, `"phase":"`+string(p)+`"`) {
			t.Fatalf("overview history lacks %s", p)
		}
	}
	if strings.Contains(ov, "KUBECONFIG-TEXT") {
		t.Fatal("overview leaks the kubeconfig")
	}
}

// Bug #16: one kubeconfig success moves every waiting sibling at once.
func TestSiblingsAdvanceTogether(t *testing.T) {
	e := newEnv(t)
	e.advertise("p1", 3)
	e.heartbeat("c1")
	e.reserve("c1", "r1", "p1")
	e.reserve("c1", "r2", "p1")
	gk := e.mustFind("p1", "gk.c1.p1")
	if !slices.Equal(gk.ReservationIDs, []string{"r1", "r2"}) {
		t.Fatalf("reservationIds = %v", gk.ReservationIDs)
	}
	if n := len(e.instructions("p1")); n != 1 {
		t.Fatalf("provider has %d instructions, want one shared GenerateKubeconfig", n)
	}
	e.result("p1", gk.ID, kubeconfig("K"))
	for _, id := range []string{"r1", "r2"} {
		if got := e.phase(id); got != api.PhasePeering {
			t.Fatalf("%s = %s, want Peering", id, got)
		}
		e.mustFind("c1", peerName(id))
	}
	// A third reservation reuses the staged credential without a new GenerateKubeconfig.
	resp := e.reserve("c1", "r3", "p1")
	if resp.Status != api.PhasePeering || len(e.instructions("p1")) != 0 {
		t.Fatalf("r3 = %s, provider instructions %v", resp.Status, ids(e.instructions("p1")))
	}
}

// Bug #6: a failed Cleanup never turns Released into Failed.
func TestFailedCleanupKeepsReleased(t *testing.T) {
	e := newEnv(t)
	e.advertise("p1", 2)
	e.heartbeat("c1")
	e.peer("c1", "r1", "p1")
	e.peer("c1", "r2", "p1")
	// r2 fails while peered → consumer cleanup.
	if _, err := e.s.Release(e.ctx, "c1", "r1", 0); err != nil {
		t.Fatal(err)
	}
	e.result("c1", "unpeer-r1", failed("liqoctl exploded"))
	if got := e.phase("r1"); got != api.PhaseFailed {
		t.Fatalf("r1 = %s, want Failed after a failed Unpeer", got)
	}
	cl := e.mustFind("c1", "cleanup-r1")
	if cl.LastChunk {
		t.Fatal("cleanup-r1 lastChunk with r2 still peered")
	}
	e.result("c1", "cleanup-r1", failed("could not clean"))
	if got := e.phase("r1"); got != api.PhaseFailed {
		t.Fatalf("r1 = %s", got)
	}
	if _, err := e.s.Release(e.ctx, "c1", "r2", 0); err != nil {
		t.Fatal(err)
	}
	e.result("c1", "unpeer-r2", ok())
	pc := e.mustFind("p1", "pcleanup.c1.p1")
	e.result("p1", pc.ID, failed("provider cleanup failed"))
	if got := e.phase("r2"); got != api.PhaseReleased {
		t.Fatalf("r2 = %s, want Released after a failed provider Cleanup", got)
	}
}

// Bug #7: a late Peer success never resurrects an Unpeering reservation.
func TestLatePeerSuccessKeepsUnpeering(t *testing.T) {
	e := newEnv(t)
	e.advertise("p1", 1)
	e.heartbeat("c1")
	e.reserve("c1", "r1", "p1")
	e.result("p1", "gk.c1.p1", kubeconfig("K"))
	if _, err := e.s.Release(e.ctx, "c1", "r1", 0); err != nil {
		t.Fatal(err)
	}
	if _, found := e.find("c1", "peer-r1"); found {
		t.Fatal("peer-r1 still delivered after release")
	}
	// The agent was already peering: its success arrives late.
	e.result("c1", "peer-r1", peered("vn-1"))
	if got := e.phase("r1"); got != api.PhaseUnpeering {
		t.Fatalf("phase = %s, want Unpeering", got)
	}
	e.mustFind("c1", "unpeer-r1")
	e.result("c1", "unpeer-r1", ok())
	if got := e.phase("r1"); got != api.PhaseReleased {
		t.Fatalf("phase = %s, want Released", got)
	}
	// Late success after Released: still Released.
	e.result("c1", "peer-r1", peered("vn-1"))
	if got := e.phase("r1"); got != api.PhaseReleased {
		t.Fatalf("phase = %s", got)
	}
}

func TestReleaseBeforePeering(t *testing.T) {
	e := newEnv(t)
	e.advertise("p1", 1)
	e.heartbeat("c1")
	e.reserve("c1", "r1", "p1")
	rel, err := e.s.Release(e.ctx, "c1", "r1", 0)
	if err != nil || rel.Status != api.PhaseReleased {
		t.Fatalf("release = %+v, %v", rel, err)
	}
	if _, found := e.find("c1", "unpeer-r1"); found {
		t.Fatal("Unpeer issued for a reservation that never peered")
	}
	if _, found := e.find("p1", "gk.c1.p1"); found {
		t.Fatal("GenerateKubeconfig still delivered though nobody waits")
	}
	e.mustFind("p1", "pcleanup.c1.p1")
	if e.reserved("p1") != 0 {
		t.Fatal("chunk not credited")
	}
	// A late kubeconfig result is an idempotent replay: no credential staged.
	e.result("p1", "gk.c1.p1", kubeconfig("K"))
	e.s.mu.Lock()
	n := len(e.s.st.credentials)
	e.s.mu.Unlock()
	if n != 0 {
		t.Fatal("late kubeconfig staged")
	}
	// Releasing again answers the current phase.
	rel, err = e.s.Release(e.ctx, "c1", "r1", 0)
	if err != nil || rel.Status != api.PhaseReleased {
		t.Fatalf("second release = %+v, %v", rel, err)
	}
}

func TestGenerateKubeconfigFailure(t *testing.T) {
	e := newEnv(t)
	e.advertise("p1", 3)
	e.heartbeat("c1")
	e.reserve("c1", "r1", "p1")
	e.reserve("c1", "r2", "p1")
	if _, err := e.s.Release(e.ctx, "c1", "r2", 0); err != nil {
		t.Fatal(err)
	}
	e.result("p1", "gk.c1.p1", failed("no liqoctl"))
	if got := e.phase("r1"); got != api.PhaseFailed {
		t.Fatalf("r1 = %s, want Failed", got)
	}
	if got := e.phase("r2"); got != api.PhaseReleased {
		t.Fatalf("terminal r2 changed to %s", got)
	}
	if _, found := e.find("c1", "cleanup-r1"); found {
		t.Fatal("consumer cleanup for a reservation that never started peering")
	}
	// Re-arm: a new reservation gets the GenerateKubeconfig again.
	e.reserve("c1", "r3", "p1")
	gk := e.mustFind("p1", "gk.c1.p1")
	if !slices.Equal(gk.ReservationIDs, []string{"r3"}) || gk.ReservationID != "r3" {
		t.Fatalf("re-armed gk = %+v", gk)
	}
}

func TestPeerFailure(t *testing.T) {
	e := newEnv(t)
	e.advertise("p1", 1)
	e.heartbeat("c1")
	e.reserve("c1", "r1", "p1")
	e.result("p1", "gk.c1.p1", kubeconfig("K"))
	e.result("c1", "peer-r1", failed("tunnel down"))
	if got := e.phase("r1"); got != api.PhaseFailed {
		t.Fatalf("phase = %s", got)
	}
	cl := e.mustFind("c1", "cleanup-r1")
	if !cl.LastChunk || cl.ProviderClusterID != "p1" {
		t.Fatalf("cleanup = %+v", cl)
	}
	// The provider revokes the credential only after the consumer's
	// teardown (TestProviderCleanupWaitsForTheConsumer).
	e.result("c1", "cleanup-r1", ok())
	e.mustFind("p1", "pcleanup.c1.p1")
}

// A failed Peer issues the consumer's Cleanup and the provider's at once;
// the provider's (it revokes the peering credential the consumer's liqoctl
// unpeer reads the provider with) is delivered only once the consumer has
// answered its own, whatever the answer, or once ProviderCleanupHold has
// passed without one. A long-polling provider is woken by the answer.
func TestProviderCleanupWaitsForTheConsumer(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer func(e *env)
	}{
		{"consumer cleaned up", func(e *env) { e.result("c1", "cleanup-r1", ok()) }},
		{"consumer cleanup failed", func(e *env) { e.result("c1", "cleanup-r1", failed("liqoctl unpeer failed")) }},
		{"consumer silent for the hold", func(e *env) { e.clk.Step(DefaultProviderCleanupHold) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.advertise("p1", 1)
			e.heartbeat("c1")
			e.reserve("c1", "r1", "p1")
			e.result("p1", "gk.c1.p1", kubeconfig("K"))
			e.result("c1", "peer-r1", failed("tunnel down"))
			e.mustFind("c1", "cleanup-r1")
			e.clk.Step(DefaultProviderCleanupHold - time.Second)
			if v, found := e.find("p1", "pcleanup.c1.p1"); found {
				t.Fatalf("provider cleanup delivered before the consumer's teardown: %+v", v)
			}
			tc.answer(e)
			e.mustFind("p1", "pcleanup.c1.p1")
		})
	}

	t.Run("long-polling provider woken", func(t *testing.T) {
		e := newEnv(t)
		e.advertise("p1", 1)
		e.heartbeat("c1")
		e.reserve("c1", "r1", "p1")
		e.result("p1", "gk.c1.p1", kubeconfig("K"))
		e.result("c1", "peer-r1", failed("tunnel down"))
		got := make(chan []api.InstructionView, 1)
		go func() {
			v, _ := e.s.Instructions(e.ctx, "p1", api.RoleProvider, 30*time.Second)
			got <- v
		}()
		testpoll.Until(t, 10*time.Second, "the provider to wait", func() bool { return e.s.Waiters() == 1 })
		e.result("c1", "cleanup-r1", ok())
		select {
		case v := <-got:
			if len(v) != 1 || v[0].ID != "pcleanup.c1.p1" {
				t.Fatalf("woke with %v", ids(v))
			}
		case <-time.After(10 * time.Second):
			t.Fatal("provider not woken by the consumer's cleanup result")
		}
	})
}

// Bug #15: names of pairs with hyphenated ids cannot collide.
func TestNamesDoNotCollide(t *testing.T) {
	e := newEnv(t)
	e.advertise("b-c", 1)
	e.advertise("c", 1)
	e.heartbeat("a")
	e.heartbeat("a-b")
	e.reserve("a", "r1", "b-c")
	e.reserve("a-b", "r2", "c")
	if _, found := e.find("b-c", "gk.a.b-c"); !found {
		t.Fatal("gk for (a, b-c) missing")
	}
	if _, found := e.find("c", "gk.a-b.c"); !found {
		t.Fatal("gk for (a-b, c) missing")
	}
	e.result("b-c", "gk.a.b-c", kubeconfig("K1"))
	e.result("c", "gk.a-b.c", kubeconfig("K2"))
	if v := e.mustFind("a", "peer-r1"); v.Kubeconfig != "K1" {
		t.Fatalf("peer-r1 kubeconfig %q", v.Kubeconfig)
	}
	if v := e.mustFind("a-b", "peer-r2"); v.Kubeconfig != "K2" {
		t.Fatalf("peer-r2 kubeconfig %q", v.Kubeconfig)
	}
}

func TestResultValidation(t *testing.T) {
	e := newEnv(t)
	e.advertise("p1", 1)
	e.heartbeat("c1")
	e.reserve("c1", "r1", "p1")
	tests := []struct {
		name, cn, id string
		req          api.InstructionResultRequest
		code         string
	}{
		{"bad status", "p1", "gk.c1.p1", api.InstructionResultRequest{Status: "Done"}, api.CodeInvalidRequest},
		{"failed without error", "p1", "gk.c1.p1", api.InstructionResultRequest{Status: api.ResultFailed}, api.CodeInvalidRequest},
		{"failed without message", "p1", "gk.c1.p1", api.InstructionResultRequest{Status: api.ResultFailed, Error: &api.ErrorEnvelope{Code: "X"}}, api.CodeInvalidRequest},
		{"bad payload kind", "p1", "gk.c1.p1", api.InstructionResultRequest{Status: api.ResultSucceeded, Payload: &api.InstructionPayload{Kind: "Other"}}, api.CodeInvalidRequest},
		{"kubeconfig missing", "p1", "gk.c1.p1", ok(), api.CodeInvalidRequest},
		{"unknown", "p1", "gk.nope.p1", ok(), api.CodeNotFound},
		{"not target", "c1", "gk.c1.p1", kubeconfig("K"), api.CodeForbidden},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wantCode(t, e.s.PostResult(e.ctx, tc.cn, e.role(tc.cn), tc.id, tc.req), tc.code)
		})
	}
	if got := e.phase("r1"); got != api.PhaseGeneratingKubeconfig {
		t.Fatalf("rejected results changed the phase to %s", got)
	}
	e.result("p1", "gk.c1.p1", kubeconfig("K"))
	// Idempotent replay, even with a different outcome.
	e.result("p1", "gk.c1.p1", failed("late"))
	if got := e.phase("r1"); got != api.PhasePeering {
		t.Fatalf("replay changed the phase to %s", got)
	}
}

// Bug #22: polling writes nothing.
func TestPollingDoesNotWrite(t *testing.T) {
	e := newEnv(t)
	e.advertise("p1", 1)
	e.heartbeat("c1")
	e.reserve("c1", "r1", "p1")
	before := e.st.applies.Load()
	for range 20 {
		e.instructions("p1")
		e.instructions("c1")
	}
	if got := e.st.applies.Load(); got != before {
		t.Fatalf("polling wrote %d times", got-before)
	}
}

func TestInstructionOrder(t *testing.T) {
	e := newEnv(t)
	e.advertise("p1", 3)
	e.heartbeat("c1")
	e.peer("c1", "r1", "p1")
	e.reserve("c1", "r2", "p1") // Peering (credential reused)
	if _, err := e.s.Release(e.ctx, "c1", "r1", 0); err != nil {
		t.Fatal(err)
	}
	got := ids(e.instructions("c1"))
	if !slices.Equal(got, []string{"peer-r2", "unpeer-r1"}) {
		t.Fatalf("order = %v", got)
	}
	// Not the last chunk: r2 is still live.
	if v := e.mustFind("c1", "unpeer-r1"); v.LastChunk {
		t.Fatal("lastChunk with a live sibling")
	}
}

func TestOverviewHasNoSecrets(t *testing.T) {
	e := newEnv(t)
	e.advertise("p1", 2, func(r *api.AdvertisementRequest) {
		r.UnitPrices = rl("0.01", "0.005")
		c := 100.0
		r.CarbonIntensity = &c
	})
	e.heartbeat("c1")
	e.reserve("c1", "r1", "p1")
	e.result("p1", "gk.c1.p1", kubeconfig("SECRET-KUBECONFIG"))
	ov, err := e.s.Overview(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(ov)
	if strings.Contains(string(b), "SECRET-KUBECONFIG") {
		t.Fatal("overview leaks the kubeconfig")
	}
	if ov.Capacity.TotalChunks != 2 || ov.Capacity.ReservedChunks != 1 || ov.Capacity.AvailableChunks != 1 ||
		ov.Capacity.ByChunkType[api.ChunkStandard].ReservedChunks != 1 || ov.Capacity.ChunkSizes[api.ChunkGPU] == nil {
		t.Fatalf("capacity = %+v", ov.Capacity)
	}
	if len(ov.Advertisements) != 1 || ov.Advertisements[0].CostPerChunk <= 0 || ov.Advertisements[0].CarbonWeighted == nil {
		t.Fatalf("advertisements = %+v", ov.Advertisements)
	}
	if len(ov.ProviderInstructions) != 1 || len(ov.ReservationInstructions) != 1 || len(ov.Consumers) != 1 {
		t.Fatalf("overview = %s", b)
	}
	_ = store.PairKey
}

func TestLastDeliveredInMemory(t *testing.T) {
	e := newEnv(t)
	e.advertise("p1", 1)
	e.heartbeat("c1")
	e.reserve("c1", "r1", "p1")
	ov, _ := e.s.Overview(e.ctx)
	if ov.ProviderInstructions[0].LastDeliveredAt != nil {
		t.Fatal("delivered before any poll")
	}
	e.instructions("p1")
	ov, _ = e.s.Overview(e.ctx)
	if d := ov.ProviderInstructions[0].LastDeliveredAt; d == nil || !d.Time.Equal(t0) {
		t.Fatalf("lastDeliveredAt = %v", d)
	}
}

// Bug #22: an instruction past its deadline is not delivered, even before
// the sweep removes it.
func TestExpiredInstructionNotDelivered(t *testing.T) {
	e := newEnv(t)
	e.advertise("p1", 1)
	e.heartbeat("c1")
	e.reserve("c1", "r1", "p1")
	e.result("p1", "gk.c1.p1", kubeconfig("K"))
	v := e.mustFind("c1", "peer-r1")
	if !v.ExpiresAt.Time.Equal(t0.Add(DefaultReservationLease)) {
		t.Fatalf("peer expiresAt = %v", v.ExpiresAt)
	}
	e.clk.Step(DefaultReservationLease)
	if _, found := e.find("c1", "peer-r1"); found {
		t.Fatal("expired Peer delivered")
	}
}
