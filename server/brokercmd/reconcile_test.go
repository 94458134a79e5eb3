package brokercmd_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/federation-autoscaler/federation-autoscaler/deploy/brokerproc"
	brokercrds "github.com/federation-autoscaler/federation-autoscaler/deploy/crds/broker"
	"github.com/federation-autoscaler/federation-autoscaler/deploy/testcluster"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/rest/resttest"
)

// TestReconcileOnLeaderChange: the agents' state drifts from the ledger
// while the leader dies (the consumer peered but its Peer result never
// reached the store; the provider's capacity shrank and it has not
// advertised since). The new leader sends both a Reconcile; their answers
// make the ledger equal their state. Leadership flapping before the
// answers, or a takeover after them, sends no second Reconcile.
func TestReconcileOnLeaderChange(t *testing.T) {
	if testing.Short() {
		t.Skip("runs child brokers on a real kube-apiserver")
	}
	p := resttest.NewPKI(t)
	storeArgs, env := kubeStore(t)
	args := append([]string{"--pki-dir", p.Dir, "--leader-elect"}, storeArgs...)
	procs, url := startReplicas(t, 2, args)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	prov := &agent{c: p.NewClient(t, "", "prov-a", api.RoleProvider, 2), url: url}
	cons := &agent{c: p.NewClient(t, "", "cons-0", api.RoleConsumer, 2), url: url}
	const res = "cons-0-r000"

	// Reserve and peer, but the Peer result never reaches the broker.
	ad := func(chunks int) api.AdvertisementRequest {
		return api.AdvertisementRequest{ClusterID: "prov-a", LiqoClusterID: "liqo-prov-a", Resources: rl(2*chunks, 4*chunks)}
	}
	mustOK(t, prov, "POST", "/api/v1/advertisements", ad(10))
	mustOK(t, cons, "POST", "/api/v1/heartbeat", api.HeartbeatRequest{ClusterID: "cons-0", LiqoClusterID: "liqo-cons-0"})
	mustOK(t, cons, "POST", "/api/v1/reservations", api.ReservationRequest{ProviderClusterID: "prov-a", ChunkCount: 1, ChunkType: api.ChunkStandard}, api.HeaderReservationID, res)
	gk := waitInstruction(ctx, t, prov, api.KindGenerateKubeconfig)
	if !succeed(ctx, prov, gk, &api.InstructionPayload{Kind: api.PayloadKubeconfig, Kubeconfig: "apiVersion: v1\nkind: Config\n"}) {
		t.Fatal("GenerateKubeconfig result refused")
	}
	waitInstruction(ctx, t, cons, api.KindPeer) // handled locally; its result is lost with the leader

	// Drift, then the leader dies; a replacement joins as a standby.
	procs = killLeader(t, procs, args, url)
	rec := waitInstruction(ctx, t, cons, api.KindReconcile)
	prec := waitInstruction(ctx, t, prov, api.KindReconcile)
	waitStored(ctx, t, env, rec.ID, prec.ID)

	// Leadership flaps before the agents answer: no second Reconcile.
	procs = killLeader(t, procs, args, url)
	for _, want := range []api.InstructionView{rec, prec} {
		a := cons
		if want.ID == prec.ID {
			a = prov
		}
		got := waitInstruction(ctx, t, a, api.KindReconcile)
		if got.ID != want.ID || !got.IssuedAt.Equal(&want.IssuedAt) {
			t.Errorf("after the flap: Reconcile %s issued at %s, want the first leader's %s issued at %s", got.ID, got.IssuedAt, want.ID, want.IssuedAt)
		}
	}

	// The agents answer with their state.
	if !succeed(ctx, cons, rec, &api.InstructionPayload{Kind: api.PayloadReconcile, VirtualNodeStates: []api.VirtualNodeStateReport{
		{ReservationID: res, VirtualNodeName: "vk-" + res, Phase: api.VirtualNodeRunning}}}) {
		t.Fatal("the consumer's Reconcile result was refused")
	}
	shrunk := ad(6)
	if !succeed(ctx, prov, prec, &api.InstructionPayload{Kind: api.PayloadReconcile, Advertisement: &shrunk}) {
		t.Fatal("the provider's Reconcile result was refused")
	}
	leader := waitLeader(t, procs)
	checkReconciled(t, leader, res, 6)

	// A takeover after the answers: the state is kept, no new Reconcile.
	procs = killLeader(t, procs, args, url)
	leader = waitLeader(t, procs)
	checkReconciled(t, leader, res, 6)
	ov := overview(t, leader)
	for _, in := range append(ov.ReservationInstructions, ov.ProviderInstructions...) {
		if in.Kind == api.KindReconcile && (!in.Enforced || !in.IssuedAt.Equal(&rec.IssuedAt) && !in.IssuedAt.Equal(&prec.IssuedAt)) {
			t.Errorf("after the answers and another takeover: Reconcile %s enforced=%v issued at %s: a second round", in.ID, in.Enforced, in.IssuedAt)
		}
	}
}

func rl(cpu, memGi int) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(int64(cpu), resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(int64(memGi)<<30, resource.BinarySI)}
}

func mustOK(t *testing.T, a *agent, method, path string, body any, header ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, ok := a.do(ctx, method, path, body, header...)
	if !ok || r.Status >= 300 {
		t.Fatalf("%s %s: %v %+v", method, path, ok, r)
	}
}

// waitInstruction polls until an instruction of kind is delivered to a.
func waitInstruction(ctx context.Context, t *testing.T, a *agent, kind api.InstructionKind) api.InstructionView {
	t.Helper()
	for ctx.Err() == nil {
		for _, in := range a.instructions(ctx) {
			if in.Kind == kind {
				return in
			}
		}
	}
	t.Fatalf("no %s instruction delivered", kind)
	return api.InstructionView{}
}

// waitStored polls the API server until the Instruction objects exist (the
// leader's ReconcileAll is durable, not only in its memory).
func waitStored(ctx context.Context, t *testing.T, env *testcluster.Env, names ...string) {
	t.Helper()
	for _, name := range names {
		for {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(schema.GroupVersionKind{Group: brokercrds.Group, Version: brokercrds.Version, Kind: "Instruction"})
			err := env.Client.Get(ctx, client.ObjectKey{Namespace: "fa-broker", Name: name}, u)
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("instruction %s never stored: %v", name, err)
			}
			time.Sleep(20 * time.Millisecond) // polling the API server
		}
	}
}

// killLeader SIGKILLs the leader, waits for another replica to lead and
// starts a standby in its place.
func killLeader(t *testing.T, procs []*brokerproc.Process, args []string, url *switchable) []*brokerproc.Process {
	t.Helper()
	leader := waitLeader(t, procs)
	_ = leader.Cmd.Process.Signal(syscall.SIGKILL)
	t.Logf("leader %s killed: %v", leader.APIAddr, <-leader.Exited)
	procs = slices.DeleteFunc(procs, func(pr *brokerproc.Process) bool { return pr == leader })
	procs = append(procs, launchBroker(t, args...))
	url.set(apiURLs(procs)...)
	waitLeader(t, procs)
	return procs
}

func overview(t *testing.T, pr *brokerproc.Process) api.Overview {
	t.Helper()
	resp, err := http.Get("http://" + pr.DashAddr + "/api/v1/overview")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ov api.Overview
	if err := json.NewDecoder(resp.Body).Decode(&ov); err != nil {
		t.Fatal(err)
	}
	return ov
}

// checkReconciled: reservation res is Peered on its agent's virtual node,
// its Peer enforced, and the provider advertises chunks chunks.
func checkReconciled(t *testing.T, leader *brokerproc.Process, res string, chunks int32) {
	t.Helper()
	ov := overview(t, leader)
	for _, r := range ov.Reservations {
		if r.ReservationID != res {
			continue
		}
		if r.Status != api.PhasePeered || !slices.Equal(r.VirtualNodeNames, []string{"vk-" + res}) {
			t.Errorf("reservation %s: %s on %v, want Peered on [vk-%s] (the consumer's Reconcile)", res, r.Status, r.VirtualNodeNames, res)
		}
	}
	for _, in := range ov.ReservationInstructions {
		if in.Kind == api.KindPeer && !in.Enforced {
			t.Errorf("Peer %s still pending after the consumer reported the running node", in.ID)
		}
	}
	if len(ov.Advertisements) != 1 || ov.Advertisements[0].ChunkCount != chunks || ov.Capacity.ReservedChunks != 1 {
		t.Errorf("advertisements %+v, reserved %d: want prov-a with %d chunks, 1 reserved (the provider's Reconcile)", ov.Advertisements, ov.Capacity.ReservedChunks, chunks)
	}
}
