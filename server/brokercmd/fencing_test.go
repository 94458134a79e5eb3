package brokercmd_test

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/rest/resttest"
	"github.com/federation-autoscaler/federation-autoscaler/server/store"
	"github.com/federation-autoscaler/federation-autoscaler/server/store/kube"
)

// TestStalledLeaderFenced SIGSTOPs the leader at random moments under
// churn, lets a standby take over and go on (it deletes the credentials
// of every pair whose last reservation ends), then SIGCONTs the stalled
// leader: it must exit (it lost the Lease) and nothing it still had to
// write may come back — the state in the API server equals the new
// leader's, and no credential outlives its pair.
func TestStalledLeaderFenced(t *testing.T) {
	if testing.Short() {
		t.Skip("runs child brokers on a real kube-apiserver")
	}
	const (
		stops     = 6
		consumers = 4
		chunks    = 10
	)
	p := resttest.NewPKI(t)
	storeArgs, env := kubeStore(t)
	h := startHA(t, p, 2, storeArgs, consumers, chunks)

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 13))
	for range stops {
		time.Sleep(time.Duration(200+rng.IntN(1500)) * time.Millisecond) // a random moment to stall at
		leader := h.leader(t)
		if err := leader.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		h.drop(leader)
		h.addStandby(t)
		waitLeader(t, h.procs)
		time.Sleep(2 * time.Second) // the new leader churns on: pairs end, credentials go
		if err := leader.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-leader.Exited:
			t.Logf("stalled leader %s resumed and exited: %v; fencing: %v", leader.APIAddr, err, leader.LoadLines())
		case <-time.After(30 * time.Second):
			t.Fatalf("the stalled leader %s still runs 30s after SIGCONT: two leaders", leader.APIAddr)
		}
	}
	leader := h.finish(t)

	// What the API server holds is what the leader serves.
	st, err := kube.Open(env.Config, kube.Options{Namespace: "fa-broker", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := st.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ov := overview(t, leader)
	served := map[string]api.Phase{}
	live := map[string]bool{}
	for _, r := range ov.Reservations {
		served[r.ReservationID] = r.Status
		if !r.Status.Terminal() {
			live[store.PairKey(r.ConsumerClusterID, r.ProviderClusterID)] = true
		}
	}
	stored := map[string]api.Phase{}
	for _, r := range snap.Reservations {
		stored[r.ID] = r.Phase
	}
	for id, ph := range stored {
		if served[id] != ph {
			t.Errorf("reservation %s: %s in the API server, %q served", id, ph, served[id])
		}
	}
	if len(stored) != len(served) {
		t.Errorf("%d reservations in the API server, %d served", len(stored), len(served))
	}
	var creds []string
	for _, c := range snap.Credentials {
		creds = append(creds, c.Key())
		if !live[c.Key()] {
			t.Errorf("credential %s is stored but its pair has no live reservation: re-created after its pair ended", c.Key())
		}
	}
	t.Logf("%d reservations, credentials of %s; live pairs %v", len(stored), strings.Join(creds, ","), live)
}
