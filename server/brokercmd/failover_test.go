package brokercmd_test

import (
	"context"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/deploy/brokerproc"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/rest/resttest"
)

// TestFailoverUnderChurn runs three broker replicas with --leader-elect on
// one real kube-apiserver, agents churning through all of them, and
// SIGKILLs the leader at random moments. Every acknowledged reservation
// must survive in its phase, chunks must add up, and the agents go on
// without restarts. It reports the takeover time: leader killed → first
// write the new leader answers.
func TestFailoverUnderChurn(t *testing.T) {
	if testing.Short() {
		t.Skip("failover test runs child brokers")
	}
	const (
		replicas  = 3
		kills     = 10
		consumers = 4
		chunks    = 10
	)
	p := resttest.NewPKI(t)
	h := startHA(t, p, replicas, kubeStoreArgs(t), consumers, chunks)
	probe := p.NewClient(t, "", "probe", api.RoleConsumer, 1)

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 11))
	var takeovers []time.Duration
	for range kills {
		time.Sleep(time.Duration(200+rng.IntN(1500)) * time.Millisecond) // a random moment to kill at
		leader := h.leader(t)
		killed := time.Now()
		_ = leader.Cmd.Process.Signal(syscall.SIGKILL)
		t.Logf("leader %s killed: %v", leader.APIAddr, <-leader.Exited)
		h.drop(leader)
		takeovers = append(takeovers, firstWrite(t, probe, h.procs, killed))
		t.Logf("new leader's load: %v", waitLeader(t, h.procs).LoadLines())
		h.addStandby(t)
	}
	sorted := slices.Clone(takeovers)
	slices.Sort(sorted)
	t.Logf("takeover (leader SIGKILLed → first write served) over %d kills: p50 %s, max %s, all %v",
		len(sorted), sorted[len(sorted)/2].Round(time.Millisecond), sorted[len(sorted)-1].Round(time.Millisecond), takeovers)
	leader := h.finish(t)

	// A graceful stop (a rollout) releases the Lease: the handover does not
	// wait for it to expire.
	stopped := time.Now()
	if err := leader.Stop(t); err != nil {
		t.Errorf("graceful stop of the leader: %v", err)
	}
	h.drop(leader)
	t.Logf("handover after SIGTERM (stop → first write served): %s", firstWrite(t, probe, h.procs, stopped).Round(time.Millisecond))
}

// haRun is the frame of the failover and fencing tests: broker replicas
// with --leader-elect on one store, one provider and consumer loops
// churning through them.
type haRun struct {
	p         *resttest.PKI
	args      []string
	procs     []*brokerproc.Process
	url       *switchable
	l         *ledger
	wg        *sync.WaitGroup
	cancel    context.CancelFunc
	consumers int
}

// startHA starts replicas on the store of storeArgs, once one leads the
// churn of consumers consumer loops and a provider of chunks chunks.
func startHA(t *testing.T, p *resttest.PKI, replicas int, storeArgs []string, consumers, chunks int) *haRun {
	t.Helper()
	h := &haRun{p: p, consumers: consumers,
		args: append([]string{"--pki-dir", p.Dir, "--rate-limit-burst", "100000", "--rate-limit-rps", "100000", "--leader-elect"}, storeArgs...)}
	h.procs, h.url = startReplicas(t, replicas, h.args)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	h.cancel = cancel
	h.l, h.wg = startChurn(ctx, t, p, h.url, consumers, chunks)
	return h
}

// leader returns the leader once one leads. A leader that could not renew
// its Lease in time (a starved machine) exits by design: such replicas are
// replaced first, and the agents pointed at the replicas.
func (h *haRun) leader(t *testing.T) *brokerproc.Process {
	t.Helper()
	h.procs = replaceExited(t, h.procs, h.args)
	h.url.set(apiURLs(h.procs)...)
	return waitLeader(t, h.procs)
}

// drop removes a replica the test killed or stalled from the set.
func (h *haRun) drop(gone *brokerproc.Process) {
	h.procs = slices.DeleteFunc(h.procs, func(pr *brokerproc.Process) bool { return pr == gone })
}

// addStandby starts a replica, which joins as a standby, and points the
// agents at it too.
func (h *haRun) addStandby(t *testing.T) {
	t.Helper()
	h.procs = append(h.procs, launchBroker(t, h.args...))
	h.url.set(apiURLs(h.procs)...)
}

// finish stops the churn, waits for its loops, and checks every
// acknowledged reservation on the leader (verifyAcked), which it returns.
func (h *haRun) finish(t *testing.T) *brokerproc.Process {
	t.Helper()
	h.cancel()
	h.wg.Wait()
	leader := h.leader(t)
	verifyAcked(t, h.p, leader, h.l, h.consumers)
	return leader
}

// startReplicas launches n replicas with args and returns them, with the
// clients' URL switch over them, once one leads.
func startReplicas(t *testing.T, n int, args []string) ([]*brokerproc.Process, *switchable) {
	t.Helper()
	var procs []*brokerproc.Process
	for range n {
		procs = append(procs, launchBroker(t, args...))
	}
	url := &switchable{}
	url.set(apiURLs(procs)...)
	waitLeader(t, procs)
	return procs, url
}

// replaceExited starts a new replica for each one that has exited.
func replaceExited(t *testing.T, procs []*brokerproc.Process, args []string) []*brokerproc.Process {
	t.Helper()
	out := procs[:0]
	for _, pr := range procs {
		select {
		case err := <-pr.Exited:
			t.Logf("replica %s exited by itself (%v); starting another", pr.APIAddr, err)
			out = append(out, launchBroker(t, args...))
		default:
			out = append(out, pr)
		}
	}
	return out
}

func apiURLs(procs []*brokerproc.Process) []string {
	var out []string
	for _, pr := range procs {
		out = append(out, "https://"+pr.APIAddr)
	}
	return out
}

// waitLeader returns the replica whose /readyz says it serves.
func waitLeader(t *testing.T, procs []*brokerproc.Process) *brokerproc.Process {
	t.Helper()
	l := brokerproc.Leader(procs, 60*time.Second)
	if l == nil {
		t.Fatal("no replica became the leader within 60s")
	}
	return l
}

// firstWrite sends a heartbeat (a durable write) to the replicas in turn
// until one acknowledges it, and returns how long after since that was.
func firstWrite(t *testing.T, c *resttest.Client, procs []*brokerproc.Process, since time.Time) time.Duration {
	t.Helper()
	deadline := since.Add(60 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		c.BaseURL = "https://" + procs[i%len(procs)].APIAddr
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		r, err := c.Do(ctx, "POST", "/api/v1/heartbeat", map[string]any{"clusterId": "probe", "liqoClusterId": "liqo-probe"})
		cancel()
		if err == nil && r.Status == http.StatusOK {
			return time.Since(since)
		}
		time.Sleep(10 * time.Millisecond) // the next replica
	}
	t.Fatal("no replica served a write within 60s of the leader's death")
	return 0
}
