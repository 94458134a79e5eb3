package agentcmd

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/federation-autoscaler/federation-autoscaler/agent/liqo"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/pki"
)

// procStats reads a process's resident set (bytes) and its user+system CPU
// time (clock ticks) from /proc.
func procStats(t *testing.T, pid int) (rss int64, ticks int64) {
	t.Helper()
	status, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			rss = kb * 1024
		}
	}
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the command name (which is in parentheses).
	rest := strings.Fields(string(stat)[strings.LastIndexByte(string(stat), ')')+2:])
	ut, _ := strconv.ParseInt(rest[11], 10, 64)
	st, _ := strconv.ParseInt(rest[12], 10, 64)
	return rss, ut + st
}

// TestIdleFootprint runs the agent binary named by FA_AGENT_BINARY (built
// with `go build -o`) as a provider and as a consumer against a broker and
// a real kube-apiserver, lets each settle, and reports its resident memory
// and CPU use over FA_FOOTPRINT_WINDOW (default 60s) of idling. Targets:
// ≤ 50 MiB RSS, ≤ 1 % of a core.
func TestIdleFootprint(t *testing.T) {
	bin := os.Getenv("FA_AGENT_BINARY")
	if bin == "" {
		t.Skip("FA_AGENT_BINARY is not set: build the binary and point it there to measure the idle footprint")
	}
	window := time.Minute
	if v := os.Getenv("FA_FOOTPRINT_WINDOW"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatal(err)
		}
		window = d
	}
	driver := "sim"
	if v := os.Getenv("FA_FOOTPRINT_DRIVER"); v != "" {
		driver = v // "liqoctl": the agent without the in-process Liqo simulation
	}
	f := newFederation(t)
	if driver == "liqoctl" {
		// The agent reads the cluster's Liqo id from Liqo's clusterid
		// ConfigMap; lay it down as Liqo's install would.
		f.env.EnsureNamespace(t, liqo.DefaultNamespace)
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: liqo.DefaultNamespace, Name: liqo.ClusterIDConfigMapName,
			Labels: map[string]string{liqo.ClusterIDConfigMapLabel: liqo.ClusterIDConfigMapLabelValue}},
			Data: map[string]string{liqo.ClusterIDConfigMapKey: "idle-liqo"}}
		if err := f.env.Client.Create(context.Background(), cm); err != nil {
			t.Fatal(err)
		}
	}
	for _, role := range []api.Role{api.RoleProvider, api.RoleConsumer} {
		t.Run(string(role), func(t *testing.T) {
			id := "idle-" + string(role)
			bundle := filepath.Join(f.pkiDir, id+".tar.gz")
			if err := pki.WriteJoinBundle(f.pkiDir, id, role, "https://"+f.brokerAddr, bundle, false, time.Now()); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			args := []string{"agent", "--role", string(role), "--bundle", bundle, "--kubeconfig", f.env.Kubeconfig,
				"--namespace", "fa-consumer", "--liqo-driver", driver, "--install-crds=false", "--health-listen", "127.0.0.1:0",
				"--local-api-listen", "127.0.0.1:0", "--log-level", "warn"}
			if driver == "liqoctl" && os.Getenv("FA_LIQOCTL") == "" {
				// The agent checks that liqoctl exists; an idle agent never runs it.
				args = append(args, "--liqoctl-path", "/bin/true")
			} else if driver == "liqoctl" {
				args = append(args, "--liqoctl-path", os.Getenv("FA_LIQOCTL"))
			}
			cmd := exec.CommandContext(ctx, bin, args...)
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() {
				cancel()
				_ = cmd.Wait()
			}()
			// Settle: the first advertisement or heartbeat, caches synced.
			settle := time.NewTimer(15 * time.Second) // fixed warm-up before sampling, part of the measurement protocol
			<-settle.C
			rss0, ticks0 := procStats(t, cmd.Process.Pid)
			start := time.Now()
			maxRSS := rss0
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			for time.Since(start) < window {
				<-tick.C
				if rss, _ := procStats(t, cmd.Process.Pid); rss > maxRSS {
					maxRSS = rss
				}
			}
			_, ticks1 := procStats(t, cmd.Process.Pid)
			elapsed := time.Since(start).Seconds()
			cpu := float64(ticks1-ticks0) / 100 / elapsed * 100 // USER_HZ = 100
			t.Logf("%s agent (--liqo-driver %s) idle over %.0fs: RSS max %.1f MiB, CPU %.2f %% of a core", role, driver, elapsed, float64(maxRSS)/(1<<20), cpu)
			if maxRSS > 50<<20 {
				t.Errorf("RSS %.1f MiB over the 50 MiB target", float64(maxRSS)/(1<<20))
			}
			if cpu > 1 {
				t.Errorf("CPU %.2f %% over the 1 %% target", cpu)
			}
		})
	}
}
