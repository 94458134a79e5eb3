// Package brokerproc runs `federation-autoscaler broker` as a child process
// for the tests that need a real broker process: the broker command's crash,
// failover and fencing tests and the agents' HA test. It starts a broker on
// the addresses asked for (ephemeral loopback ports by default), learns the
// addresses it listens on from its log, tells the leader of a set of
// replicas from the standbys by /readyz, and stops or kills it; KubeStore
// prepares a Kubernetes store for the replicas on a test control plane.
// Every process it starts is SIGKILLed when its test ends.
package brokerproc

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	brokercrds "github.com/federation-autoscaler/federation-autoscaler/deploy/crds/broker"
	"github.com/federation-autoscaler/federation-autoscaler/deploy/testcluster"
)

// Options say where a broker listens. An empty address is an ephemeral
// loopback port ("127.0.0.1:0"); a fixed one lets a restarted replica come
// back at the URL the agents' bundles list.
type Options struct {
	Listen, DashboardListen string
}

// Process is a running `federation-autoscaler broker`.
type Process struct {
	// Cmd is the child process (signal it through Cmd.Process).
	Cmd *exec.Cmd
	// APIAddr and DashAddr are the addresses it logged it listens on.
	APIAddr, DashAddr string
	// StartLogs are its log lines up to the second address.
	StartLogs []string
	// Exited receives Cmd.Wait's result once, when the process has ended.
	Exited chan error

	mu sync.Mutex
	// loads are the store's "state loaded" (and "re-created": the
	// fencing of a stalled writer) log lines after the start.
	loads []string
}

// StartupTimeout bounds how long Launch waits for a broker to log both
// addresses, and WaitReady for /readyz to answer 200.
const StartupTimeout = 60 * time.Second

var addrRE = regexp.MustCompile(`addr=(\S+)`)

// Start starts the broker and waits until /readyz answers 200.
func Start(tb testing.TB, binary string, o Options, args ...string) *Process {
	tb.Helper()
	p := Launch(tb, binary, o, args...)
	p.WaitReady(tb)
	return p
}

// Launch starts the broker (the binary's broker subcommand with args) and
// waits until it has logged both addresses (a standby replica is never
// ready, so Launch does not wait for /readyz). It fails the test if the
// broker does not come up; the broker is SIGKILLed when the test ends.
func Launch(tb testing.TB, binary string, o Options, args ...string) *Process {
	tb.Helper()
	p, err := TryLaunch(tb.Cleanup, binary, o, args...)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// TryLaunch is Launch returning the error instead of failing the test (for
// a goroutine other than the test's, which must not call tb.Fatal).
// onCleanup registers the SIGKILL that ends the broker when its owner is
// done: tb.Cleanup, or an owner's own list when its graceful stop runs in
// a cleanup registered earlier (cleanups run last-in first-out, so a kill
// registered by a mid-test restart would run before that stop).
func TryLaunch(onCleanup func(func()), binary string, o Options, args ...string) (*Process, error) {
	listen, dash := cmp.Or(o.Listen, "127.0.0.1:0"), cmp.Or(o.DashboardListen, "127.0.0.1:0")
	cmd := exec.Command(binary, append([]string{"broker", "--listen", listen, "--dashboard-listen", dash}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, fmt.Errorf("broker log pipe: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the broker: %w", err)
	}
	p := &Process{Cmd: cmd, Exited: make(chan error, 1)}
	onCleanup(func() { _ = cmd.Process.Kill() }) // SIGKILL ends a stopped one too
	found := make(chan struct{})
	go func() {
		p.readLog(stderr, found)
		p.Exited <- cmd.Wait()
	}()
	select {
	case <-found:
	case <-time.After(StartupTimeout):
		_ = cmd.Process.Kill()
		return nil, fmt.Errorf("broker (--listen %s) did not log its addresses within %s", listen, StartupTimeout)
	}
	if p.APIAddr == "" || p.DashAddr == "" {
		err := <-p.Exited
		return nil, fmt.Errorf("broker (--listen %s) exited before listening (%v):\n%s", listen, err, strings.Join(p.StartLogs, "\n"))
	}
	return p, nil
}

// readLog reads the broker's log to its end: the start lines until both
// addresses are known (then it closes found), the store's load lines after
// that. found is closed at the end at the latest.
func (p *Process) readLog(stderr io.Reader, found chan<- struct{}) {
	sc := bufio.NewScanner(stderr)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	signalled := false
	for sc.Scan() {
		line := sc.Text()
		if signalled {
			if strings.Contains(line, "state loaded") || strings.Contains(line, "re-created") {
				p.mu.Lock()
				p.loads = append(p.loads, line)
				p.mu.Unlock()
			}
			continue // drain
		}
		p.StartLogs = append(p.StartLogs, line)
		if m := addrRE.FindStringSubmatch(line); m != nil {
			switch {
			case strings.Contains(line, "Broker API listening"):
				p.APIAddr = m[1]
			case strings.Contains(line, "Dashboard listening"):
				p.DashAddr = m[1]
			}
		}
		if p.APIAddr != "" && p.DashAddr != "" {
			signalled = true
			close(found)
		}
	}
	_, _ = io.Copy(io.Discard, stderr)
	if !signalled {
		close(found)
	}
}

// LoadLines returns the store's "state loaded" and "re-created" log lines
// so far.
func (p *Process) LoadLines() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.loads)
}

// ready reports whether the broker's /readyz answers 200 (it leads, or
// runs without leader election).
func (p *Process) ready() bool {
	resp, err := http.Get("http://" + p.DashAddr + "/readyz")
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// WaitReady polls /readyz until it answers 200; after StartupTimeout it
// kills the broker and fails the test.
func (p *Process) WaitReady(tb testing.TB) {
	tb.Helper()
	if Leader([]*Process{p}, StartupTimeout) == nil {
		_ = p.Cmd.Process.Kill()
		tb.Fatalf("broker %s never became ready within %s", p.APIAddr, StartupTimeout)
	}
}

// Leader polls the replicas' /readyz until one answers 200 and returns it;
// nil when none did within the deadline.
func Leader(procs []*Process, within time.Duration) *Process {
	deadline := time.Now().Add(within)
	for {
		for _, p := range procs {
			if p.ready() {
				return p
			}
		}
		if time.Now().After(deadline) {
			return nil
		}
		time.Sleep(20 * time.Millisecond) // polling the replicas' readiness
	}
}

// Kill SIGKILLs the broker and waits for it to be gone.
func (p *Process) Kill(tb testing.TB) {
	tb.Helper()
	if err := p.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		tb.Fatalf("kill broker %s: %v", p.APIAddr, err)
	}
	tb.Logf("broker %s killed: %v", p.APIAddr, <-p.Exited)
}

// StopTimeout bounds how long Stop waits after SIGTERM.
const StopTimeout = 30 * time.Second

// Stop sends SIGTERM (a graceful stop) and returns the exit error; a
// broker still running StopTimeout later is killed and Stop says so.
func (p *Process) Stop(tb testing.TB) error {
	tb.Helper()
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		tb.Fatalf("sigterm broker %s: %v", p.APIAddr, err)
	}
	select {
	case err := <-p.Exited:
		return err
	case <-time.After(StopTimeout):
		_ = p.Cmd.Process.Kill()
		return fmt.Errorf("broker %s did not stop within %s of SIGTERM (killed: %v)", p.APIAddr, StopTimeout, <-p.Exited)
	}
}

// KubeStore installs the broker's CRDs on the control plane, creates the
// namespace and returns the broker flags of a Kubernetes store in it.
func KubeStore(tb testing.TB, env *testcluster.Env, namespace string) []string {
	tb.Helper()
	ctx := context.Background()
	if err := brokercrds.Install(ctx, env.Config); err != nil {
		tb.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if err := env.Client.Create(ctx, ns); err != nil {
		tb.Fatal(err)
	}
	return []string{"--store", "kubernetes", "--kubeconfig", env.Kubeconfig, "--namespace", namespace}
}
