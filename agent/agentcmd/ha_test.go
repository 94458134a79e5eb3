//go:build !simkube

package agentcmd

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/federation-autoscaler/federation-autoscaler/adapter/localapi"
	brokercrds "github.com/federation-autoscaler/federation-autoscaler/deploy/crds/broker"
	"github.com/federation-autoscaler/federation-autoscaler/deploy/testbin"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// haBrokers runs the broker as replicas of the binary with --store
// kubernetes --leader-elect on the federation's API server, each on fixed
// loopback ports so that a killed replica comes back at the URL the
// bundles list.
type haBrokers struct {
	tb     testing.TB
	binary string
	args   []string
	logDir string

	mu   sync.Mutex
	reps []*haReplica
}

type haReplica struct {
	api, dash string
	cmd       *exec.Cmd
	exited    chan error
}

func newHABrokers(tb testing.TB, n int) *haBrokers {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	bin, err := testbin.Build(ctx, tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	h := &haBrokers{tb: tb, binary: bin, logDir: tb.TempDir()}
	for range n {
		h.reps = append(h.reps, &haReplica{api: freePort(tb), dash: freePort(tb)})
	}
	tb.Cleanup(h.killAll)
	return h
}

// setup installs the broker CRDs and namespace and returns the bundles'
// broker URL list.
func (h *haBrokers) setup(f *federation) string {
	ctx := context.Background()
	if err := brokercrds.Install(ctx, f.env.Config); err != nil {
		h.tb.Fatal(err)
	}
	if err := f.env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fa-broker"}}); err != nil {
		h.tb.Fatal(err)
	}
	h.args = []string{"broker", "--pki-dir", f.pkiDir, "--store", "kubernetes", "--kubeconfig", f.env.Kubeconfig,
		"--namespace", "fa-broker", "--leader-elect", "--rate-limit-burst", "1000", "--rate-limit-rps", "1000"}
	var urls []string
	for _, r := range h.reps {
		urls = append(urls, "https://"+r.api)
	}
	return strings.Join(urls, ",")
}

// start (re)starts replica r; its log goes to a file of the test.
func (h *haBrokers) start(r *haReplica) {
	h.tb.Helper()
	log, err := os.OpenFile(filepath.Join(h.logDir, strings.ReplaceAll(r.api, ":", "_")+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		h.tb.Fatal(err)
	}
	cmd := exec.Command(h.binary, append(slices.Clone(h.args), "--listen", r.api, "--dashboard-listen", r.dash)...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		h.tb.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait(); _ = log.Close() }()
	h.mu.Lock()
	r.cmd, r.exited = cmd, exited
	h.mu.Unlock()
}

func (h *haBrokers) startAll() {
	for _, r := range h.reps {
		h.start(r)
	}
	if h.leader() == nil {
		h.tb.Fatal("no broker replica became the leader within 60s")
	}
}

// stopAll stops every replica with SIGTERM (a graceful stop).
func (h *haBrokers) stopAll() {
	for _, r := range h.reps {
		h.mu.Lock()
		cmd, exited := r.cmd, r.exited
		h.mu.Unlock()
		if cmd == nil {
			continue
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				h.tb.Errorf("broker replica %s after SIGTERM: %v", r.api, err)
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			h.tb.Errorf("broker replica %s did not stop within 30s of SIGTERM (killed: %v)", r.api, <-exited)
		}
		h.mu.Lock()
		r.cmd = nil
		h.mu.Unlock()
	}
}

func (h *haBrokers) killAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.reps {
		if r.cmd != nil {
			_ = r.cmd.Process.Kill()
			h.tb.Logf("broker replica %s stopped at the end: %v", r.api, <-r.exited)
			r.cmd = nil
		}
	}
}

// leader returns the replica whose /readyz is 200 (nil after 60 s).
func (h *haBrokers) leader() *haReplica {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		for _, r := range h.reps {
			resp, err := http.Get("http://" + r.dash + "/readyz")
			if err != nil {
				continue
			}
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return r
			}
		}
		time.Sleep(20 * time.Millisecond) // polling the replicas' readiness
	}
	return nil
}

// killLeader SIGKILLs the leader, restarts that replica as a standby on
// the same ports, and returns how long after the kill the consumer's
// broker client (the agents' client, with the bundle's URL list) had a
// write acknowledged.
func (h *haBrokers) killLeader(f *federation) (time.Duration, error) {
	l := h.leader()
	if l == nil {
		return 0, fmt.Errorf("no leader to kill")
	}
	h.mu.Lock()
	cmd, exited := l.cmd, l.exited
	h.mu.Unlock()
	killed := time.Now()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return 0, err
	}
	if err := <-exited; err == nil {
		return 0, fmt.Errorf("leader %s exited cleanly on SIGKILL", l.api)
	}
	h.start(l)
	for time.Since(killed) < 60*time.Second {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := f.broker.Heartbeat(ctx, api.HeartbeatRequest{ClusterID: "consumer-1", LiqoClusterID: "consumer-1"})
		cancel()
		if err == nil {
			return time.Since(killed), nil
		}
	}
	return 0, fmt.Errorf("no write acknowledged within 60s of killing the leader at %s", l.api)
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
