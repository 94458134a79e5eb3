//go:build !simkube

package agentcmd

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/adapter/localapi"
	"github.com/federation-autoscaler/federation-autoscaler/deploy/brokerproc"
	"github.com/federation-autoscaler/federation-autoscaler/deploy/testbin"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// haBrokers runs the broker as replicas of the binary with --store
// kubernetes --leader-elect on the federation's API server. Each first
// starts on an ephemeral loopback port it binds itself (no port picked
// beforehand that another process could take meanwhile), the bundles list
// the addresses the replicas logged, and a killed replica comes back on
// its address.
type haBrokers struct {
	tb     testing.TB
	binary string
	args   []string
	addrs  []brokerproc.Options // replica i listens on addrs[i] (ephemeral before its first start)

	mu    sync.Mutex
	reps  []*brokerproc.Process // replica i's process, nil when stopped
	kills []func()              // brokerproc's end-of-test kills, run after the federation's graceful stop
}

func newHABrokers(tb testing.TB, n int) *haBrokers {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	bin, err := testbin.Build(ctx, tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	h := &haBrokers{tb: tb, binary: bin, reps: make([]*brokerproc.Process, n), addrs: make([]brokerproc.Options, n)}
	// Registered before the federation's cleanup (which stops the replicas
	// gracefully), so it runs after it.
	tb.Cleanup(func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, kill := range h.kills {
			kill()
		}
	})
	return h
}

// onCleanup collects a replica's end-of-test kill (brokerproc.TryLaunch).
func (h *haBrokers) onCleanup(kill func()) {
	h.mu.Lock()
	h.kills = append(h.kills, kill)
	h.mu.Unlock()
}

// setup installs the broker CRDs and namespace, starts the replicas and
// returns the bundles' broker URL list: the addresses they listen on.
func (h *haBrokers) setup(f *federation) string {
	store := brokerproc.KubeStore(h.tb, f.env, "fa-broker")
	h.args = append([]string{"--pki-dir", f.pkiDir, "--leader-elect", "--rate-limit-burst", "1000", "--rate-limit-rps", "1000"}, store...)
	h.startAll()
	var urls []string
	for _, a := range h.addrs {
		urls = append(urls, "https://"+a.Listen)
	}
	return strings.Join(urls, ",")
}

// start (re)starts replica i, on its API address once it has one (its
// dashboard always on an ephemeral port); killLeader calls it from its own
// goroutine, so it returns the error instead of failing the test.
func (h *haBrokers) start(i int) error {
	h.mu.Lock()
	addr := h.addrs[i]
	h.mu.Unlock()
	p, err := brokerproc.TryLaunch(h.onCleanup, h.binary, addr, h.args...)
	if err != nil {
		return err
	}
	h.mu.Lock()
	h.reps[i] = p
	h.addrs[i] = brokerproc.Options{Listen: p.APIAddr}
	h.mu.Unlock()
	return nil
}

// startAll starts the replicas that are not running and waits for a
// leader.
func (h *haBrokers) startAll() {
	for i := range h.addrs {
		h.mu.Lock()
		running := h.reps[i] != nil
		h.mu.Unlock()
		if running {
			continue
		}
		if err := h.start(i); err != nil {
			h.tb.Fatal(err)
		}
	}
	if _, l := h.leader(); l == nil {
		h.tb.Fatal("no broker replica became the leader within 60s")
	}
}

// stopAll stops every replica with SIGTERM (a graceful stop).
func (h *haBrokers) stopAll() {
	h.mu.Lock()
	reps := slices.Clone(h.reps)
	clear(h.reps)
	h.mu.Unlock()
	for _, p := range reps {
		if p == nil {
			continue
		}
		if err := p.Stop(h.tb); err != nil {
			h.tb.Errorf("broker replica %s after SIGTERM: %v", p.APIAddr, err)
		}
	}
}

// leader returns the replica whose /readyz is 200 and its index (nil after
// 60 s).
func (h *haBrokers) leader() (int, *brokerproc.Process) {
	h.mu.Lock()
	reps := slices.DeleteFunc(slices.Clone(h.reps), func(p *brokerproc.Process) bool { return p == nil })
	h.mu.Unlock()
	l := brokerproc.Leader(reps, 60*time.Second)
	if l == nil {
		return -1, nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Index(h.reps, l), l
}

// killLeader SIGKILLs the leader, restarts that replica as a standby on
// the same ports, and returns how long after the kill the consumer's
// broker client (the agents' client, with the bundle's URL list) had a
// write acknowledged.
func (h *haBrokers) killLeader(f *federation) (time.Duration, error) {
	i, l := h.leader()
	if l == nil {
		return 0, fmt.Errorf("no leader to kill")
	}
	killed := time.Now()
	if err := l.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return 0, err
	}
	if err := <-l.Exited; err == nil {
		return 0, fmt.Errorf("leader %s exited cleanly on SIGKILL", l.APIAddr)
	}
	if err := h.start(i); err != nil {
		return 0, fmt.Errorf("restarting the killed leader as a standby: %w", err)
	}
	for time.Since(killed) < 60*time.Second {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := f.broker.Heartbeat(ctx, api.HeartbeatRequest{ClusterID: "consumer-1", LiqoClusterID: "consumer-1"})
		cancel()
		if err == nil {
			return time.Since(killed), nil
		}
	}
	return 0, fmt.Errorf("no write acknowledged within 60s of killing the leader at %s", l.APIAddr)
}

// haCycle is cycle with the Cluster Autoscaler's patience: a reserve or a
// release that failed (a takeover in progress) is sent again with the same
// reservation id until acknowledged.
func (f *federation) haCycle(id string) {
	f.tb.Helper()
	f.eventually("a growable node group", f.growable)
	f.eventually(id+" reserve acknowledged", func() bool {
		st := f.reserve(id)
		return st == http.StatusCreated || st == http.StatusOK
	})
	f.eventually(id+" Running", func() bool {
		v, ok := f.virtualNode(id)
		return ok && v.Phase == localapi.PhaseRunning && v.ProviderID == "liqo://provider-1/"+id
	})
	f.eventually(id+" Peered", func() bool { return f.phase(id) == api.PhasePeered })
	f.eventually(id+" release acknowledged", func() bool {
		return f.call("DELETE", localapi.PathReservations+"/"+id, nil, nil, nil) == http.StatusAccepted
	})
	f.eventually(id+" Released", func() bool { return f.phase(id) == api.PhaseReleased })
	f.eventually(id+" virtual node gone", func() bool { _, ok := f.virtualNode(id); return !ok })
}

// TestHAFailover: the real agents (Run, simulated Liqo) with a bundle that
// lists three broker replicas on one real kube-apiserver; the leader is
// SIGKILLed at a random moment of each reserve → peer → release cycle.
// Every acknowledged reservation ends Released, each was peered exactly
// once, nothing stays reserved, and the agents went on without restarts.
// It reports the takeover as the agents' client sees it.
func TestHAFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("runs broker replicas")
	}
	const (
		replicas = 3
		kills    = 10
	)
	f := buildFederation(t, newHABrokers(t, replicas))
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 14))
	var takeovers []time.Duration
	for i := range kills {
		id := fmt.Sprintf("res-ha-%02d", i)
		delay := time.Duration(rng.IntN(2500)) * time.Millisecond
		type result struct {
			d   time.Duration
			err error
		}
		done := make(chan result, 1)
		go func() {
			time.Sleep(delay) // a random moment of the cycle to kill at
			d, err := f.ha.killLeader(f)
			done <- result{d, err}
		}()
		f.haCycle(id)
		r := <-done
		if r.err != nil {
			t.Fatalf("cycle %s: %v", id, r.err)
		}
		takeovers = append(takeovers, r.d)
	}
	if n := f.driver.peerCalls(); n != kills {
		t.Errorf("Peer ran %d times for %d reservations, want once each", n, kills)
	}
	for i := range kills {
		if n := f.slices(fmt.Sprintf("res-ha-%02d", i)); n != 0 {
			t.Errorf("res-ha-%02d: %d ResourceSlices left after its release", i, n)
		}
	}
	var view api.NodeGroupListResponse
	if st := f.call("GET", localapi.PathNodeGroups, nil, nil, &view); st != http.StatusOK {
		t.Fatalf("node groups: %d", st)
	}
	for _, g := range view.NodeGroups {
		if g.CurrentReserved != 0 {
			t.Errorf("node group %s: %d chunks reserved after every reservation was released", g.ID, g.CurrentReserved)
		}
	}
	sorted := slices.Clone(takeovers)
	slices.Sort(sorted)
	t.Logf("takeover as the agents' client sees it (leader SIGKILLed → a write acknowledged) over %d kills: p50 %s, max %s, all %v",
		len(sorted), sorted[len(sorted)/2].Round(time.Millisecond), sorted[len(sorted)-1].Round(time.Millisecond), takeovers)
}
