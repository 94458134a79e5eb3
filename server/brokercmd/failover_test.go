package brokercmd_test

import (
	"context"
	"math/rand/v2"
	"net/http"
	"slices"
	"syscall"
	"testing"
	"time"

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
	args := append([]string{"--pki-dir", p.Dir, "--rate-limit-burst", "100000", "--rate-limit-rps", "100000", "--leader-elect"}, kubeStoreArgs(t)...)
	procs, url := startReplicas(t, replicas, args)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l, wg := startChurn(ctx, t, p, url, consumers, chunks)
	probe := p.NewClient(t, "", "probe", api.RoleConsumer, 1)

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 11))
	var takeovers []time.Duration
	for range kills {
		time.Sleep(time.Duration(200+rng.IntN(1500)) * time.Millisecond) // a random moment to kill at
		// A leader that could not renew its Lease in time (a starved
		// machine) exits by design: replace such replicas first.
		procs = replaceExited(t, procs, args)
		url.set(apiURLs(procs)...)
		leader := waitLeader(t, procs)
		killed := time.Now()
		_ = leader.cmd.Process.Signal(syscall.SIGKILL)
		t.Logf("leader %s killed: %v", leader.apiAddr, <-leader.exited)
		procs = slices.DeleteFunc(procs, func(pr *process) bool { return pr == leader })
		takeovers = append(takeovers, firstWrite(t, probe, procs, killed))
		t.Logf("new leader's load: %v", waitLeader(t, procs).loadLines())
		// The replacement joins as a standby.
		procs = append(procs, launchBroker(t, args...))
		url.set(apiURLs(procs)...)
	}
	cancel()
	wg.Wait()
	procs = replaceExited(t, procs, args)
	leader := waitLeader(t, procs)
	sorted := slices.Clone(takeovers)
	slices.Sort(sorted)
	t.Logf("takeover (leader SIGKILLed → first write served) over %d kills: p50 %s, max %s, all %v",
		len(sorted), sorted[len(sorted)/2].Round(time.Millisecond), sorted[len(sorted)-1].Round(time.Millisecond), takeovers)
	verifyAcked(t, p, leader, l, consumers)

	// A graceful stop (a rollout) releases the Lease: the handover does not
	// wait for it to expire.
	stopped := time.Now()
	if err := leader.stop(t); err != nil {
		t.Errorf("graceful stop of the leader: %v", err)
	}
	procs = slices.DeleteFunc(procs, func(pr *process) bool { return pr == leader })
	t.Logf("handover after SIGTERM (stop → first write served): %s", firstWrite(t, probe, procs, stopped).Round(time.Millisecond))
}

// startReplicas launches n replicas with args and returns them, with the
// clients' URL switch over them, once one leads.
func startReplicas(t *testing.T, n int, args []string) ([]*process, *switchable) {
	t.Helper()
	var procs []*process
	for range n {
		procs = append(procs, launchBroker(t, args...))
	}
	url := &switchable{}
	url.set(apiURLs(procs)...)
	waitLeader(t, procs)
	return procs, url
}

// replaceExited starts a new replica for each one that has exited.
func replaceExited(t *testing.T, procs []*process, args []string) []*process {
	t.Helper()
	out := procs[:0]
	for _, pr := range procs {
		select {
		case err := <-pr.exited:
			t.Logf("replica %s exited by itself (%v); starting another", pr.apiAddr, err)
			out = append(out, launchBroker(t, args...))
		default:
			out = append(out, pr)
		}
	}
	return out
}

func apiURLs(procs []*process) []string {
	var out []string
	for _, pr := range procs {
		out = append(out, "https://"+pr.apiAddr)
	}
	return out
}

// waitLeader returns the replica whose /readyz says it serves.
func waitLeader(t *testing.T, procs []*process) *process {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		for _, pr := range procs {
			resp, err := http.Get("http://" + pr.dashAddr + "/readyz")
			if err != nil {
				continue
			}
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return pr
			}
		}
		time.Sleep(20 * time.Millisecond) // polling the replicas' readiness
	}
	t.Fatal("no replica became the leader within 60s")
	return nil
}

// firstWrite sends a heartbeat (a durable write) to the replicas in turn
// until one acknowledges it, and returns how long after since that was.
func firstWrite(t *testing.T, c *resttest.Client, procs []*process, since time.Time) time.Duration {
	t.Helper()
	deadline := since.Add(60 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		c.BaseURL = "https://" + procs[i%len(procs)].apiAddr
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
