package reservations

import (
	"fmt"
	"testing"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

func reconcileAll(t *testing.T, e *env) int {
	t.Helper()
	n, err := e.s.ReconcileAll(e.ctx)
	if err != nil {
		t.Fatalf("ReconcileAll: %v", err)
	}
	return n
}

// TestReconcileAllOnce: a new leader's Reconcile reaches every active
// cluster once; another leader taking over (a restart on the same store)
// while they are pending, or shortly after they were answered, sends none.
func TestReconcileAllOnce(t *testing.T) {
	e := newEnv(t)
	e.advertise("p1", 4)
	e.heartbeat("c1")
	e.peer("c1", "r1", "p1")
	e.heartbeat("c-idle") // heartbeated, holds nothing: still active
	e.s.mu.Lock()
	e.s.st.consumers["c-gone"] = &consumer{rec: e.s.st.consumers["c-idle"].rec}
	e.s.st.consumers["c-gone"].rec.Heartbeat.ClusterID = "c-gone"
	e.s.st.consumers["c-gone"].rec.LastSeen = t0.Add(-2 * DefaultReservationLease)
	e.s.mu.Unlock()

	if n := reconcileAll(t, e); n != 3 {
		t.Fatalf("issued %d Reconciles, want 3 (p1, c1, c-idle; not the long-silent c-gone)", n)
	}
	e.mustFind("p1", preconcileName("p1"))
	e.mustFind("c1", reconcileName("c1"))
	e.mustFind("c-idle", reconcileName("c-idle"))
	if _, ok := e.find("c-gone", reconcileName("c-gone")); ok {
		t.Error("c-gone, silent for longer than the reservation lease, got a Reconcile")
	}

	steps := []struct {
		name  string
		do    func()
		issue int
	}{
		{"again while pending", func() {}, 0},
		{"a takeover while pending (leadership flaps)", e.restart, 0},
		{"a takeover just after the answers", func() {
			e.result("p1", preconcileName("p1"), ok())
			e.result("c1", reconcileName("c1"), ok())
			e.result("c-idle", reconcileName("c-idle"), ok())
			e.clk.Step(ReconcileQuiet / 2)
			e.restart()
		}, 0},
		{"a takeover once the quiet period is over", func() {
			e.clk.Step(ReconcileQuiet)
			e.advertise("p1", 4)
			e.heartbeat("c1", "r1")
			e.heartbeat("c-idle")
			e.restart()
		}, 3},
	}
	for _, st := range steps {
		st.do()
		if n := reconcileAll(t, e); n != st.issue {
			t.Errorf("%s: issued %d Reconciles, want %d", st.name, n, st.issue)
		}
	}
}

// TestReconcileResult: what the agents report brings the ledger in line.
func TestReconcileResult(t *testing.T) {
	vns := func(res, node, phase string) api.InstructionResultRequest {
		return api.InstructionResultRequest{Status: api.ResultSucceeded, Payload: &api.InstructionPayload{
			Kind: api.PayloadReconcile, VirtualNodeStates: []api.VirtualNodeStateReport{{ReservationID: res, VirtualNodeName: node, Phase: phase}}}}
	}
	cases := []struct {
		name      string
		report    api.InstructionResultRequest
		wantPhase api.Phase
		wantNodes []string
		peerOpen  bool
	}{
		{"a running virtual node completes the Peer the ledger lost", vns("r1", "vk-r1", api.VirtualNodeRunning), api.PhasePeered, []string{"vk-r1"}, false},
		{"a node still creating changes nothing", vns("r1", "vk-r1", "Creating"), api.PhasePeering, nil, true},
		{"another consumer's reservation is ignored", api.InstructionResultRequest{Status: api.ResultSucceeded, Payload: &api.InstructionPayload{
			Kind: api.PayloadReconcile, VirtualNodeStates: []api.VirtualNodeStateReport{{ReservationID: "r-other", VirtualNodeName: "x", Phase: api.VirtualNodeRunning}}}}, api.PhasePeering, nil, true},
		{"a failed Reconcile changes nothing", failed("boom"), api.PhasePeering, nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.advertise("p1", 4)
			e.heartbeat("c1")
			e.heartbeat("c2")
			e.reserve("c1", "r1", "p1")
			e.result("p1", gkName("c1", "p1"), kubeconfig("k"))
			e.reserve("c2", "r-other", "p1")
			if got := e.phase("r1"); got != api.PhasePeering {
				t.Fatalf("phase %s, want Peering", got)
			}
			reconcileAll(t, e)
			e.result("c1", reconcileName("c1"), tc.report)
			if got := e.phase("r1"); got != tc.wantPhase {
				t.Errorf("phase %s, want %s", got, tc.wantPhase)
			}
			e.s.mu.Lock()
			nodes := e.s.st.reservations["r1"].VirtualNodeNames
			e.s.mu.Unlock()
			if len(nodes) != len(tc.wantNodes) || len(nodes) > 0 && nodes[0] != tc.wantNodes[0] {
				t.Errorf("virtual nodes %v, want %v", nodes, tc.wantNodes)
			}
			if _, open := e.find("c1", peerName("r1")); open != tc.peerOpen {
				t.Errorf("Peer still delivered: %v, want %v", open, tc.peerOpen)
			}
			// The agent's own Peer result, arriving late, is a replay.
			e.result("c1", peerName("r1"), peered("vk-r1"))
			if got := e.phase("r1"); got != api.PhasePeered {
				t.Errorf("after the Peer result: phase %s, want Peered", got)
			}
			if got := e.reserved("p1"); got != 2 {
				t.Errorf("reserved %d chunks, want 2", got)
			}
		})
	}
}

// TestReconcileAdvertisement: a provider's Reconcile answer is applied as
// its advertisement; one it could not have posted is refused.
func TestReconcileAdvertisement(t *testing.T) {
	e := newEnv(t)
	e.advertise("p1", 4)
	reconcileAll(t, e)
	ad := func(id string, n int) api.InstructionResultRequest {
		return api.InstructionResultRequest{Status: api.ResultSucceeded, Payload: &api.InstructionPayload{Kind: api.PayloadReconcile,
			Advertisement: &api.AdvertisementRequest{ClusterID: id, LiqoClusterID: "liqo-" + id, Resources: rl(fmt.Sprint(2*n), fmt.Sprintf("%dGi", 4*n))}}}
	}
	err := e.s.PostResult(e.ctx, "p1", api.RoleProvider, preconcileName("p1"), ad("p2", 9))
	wantCode(t, err, api.CodeForbidden)
	e.mustFind("p1", preconcileName("p1")) // refused: still pending

	e.clk.Step(10 * time.Second)
	e.result("p1", preconcileName("p1"), ad("p1", 7))
	e.s.mu.Lock()
	p := e.s.st.providers["p1"]
	chunks, seen := p.chunks[api.ChunkStandard], p.rec.LastSeen
	e.s.mu.Unlock()
	if chunks != 7 || !seen.Equal(t0.Add(10*time.Second)) {
		t.Errorf("after the Reconcile: %d chunks seen at %s, want 7 at %s", chunks, seen, t0.Add(10*time.Second))
	}
	e.restart()
	e.s.mu.Lock()
	chunks = e.s.st.providers["p1"].chunks[api.ChunkStandard]
	e.s.mu.Unlock()
	if chunks != 7 {
		t.Errorf("after a restart: %d chunks, want 7 (the Reconcile's advertisement is stored)", chunks)
	}

	// A consumer's Reconcile carries virtual nodes, not an advertisement.
	e.heartbeat("c1")
	e.clk.Step(2 * ReconcileQuiet)
	e.heartbeat("c1")
	reconcileAll(t, e)
	err = e.s.PostResult(e.ctx, "c1", api.RoleConsumer, reconcileName("c1"), ad("c1", 1))
	wantCode(t, err, api.CodeInvalidRequest)
}
