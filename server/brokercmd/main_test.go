package brokercmd_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/deploy/testbin"
)

// binary is the federation-autoscaler binary built once by TestMain.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fa-brokercmd-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if binary, err = testbin.Build(context.Background(), dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// process is a running `federation-autoscaler broker`.
type process struct {
	cmd       *exec.Cmd
	apiAddr   string
	dashAddr  string
	startLogs []string
	exited    chan error

	mu sync.Mutex
	// loads are the store's "state loaded" (and "re-created": the
	// fencing of a stalled writer) log lines after the start.
	loads []string
}

// loadLines returns the store's "state loaded" and "re-created" log lines
// so far.
func (p *process) loadLines() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.loads)
}

var addrRE = regexp.MustCompile(`addr=(\S+)`)

// startBroker starts the broker on ephemeral loopback ports and waits until
// /readyz answers 200.
func startBroker(tb testing.TB, args ...string) *process {
	tb.Helper()
	p := launchBroker(tb, args...)
	p.waitReady(tb)
	return p
}

// launchBroker starts the broker on ephemeral loopback ports and waits until
// it has logged both addresses (a standby replica is never ready).
func launchBroker(tb testing.TB, args ...string) *process {
	tb.Helper()
	cmd := exec.Command(binary, append([]string{"broker", "--listen", "127.0.0.1:0", "--dashboard-listen", "127.0.0.1:0"}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	p := &process{cmd: cmd, exited: make(chan error, 1)}
	tb.Cleanup(func() { _ = cmd.Process.Kill() }) // SIGKILL ends a stopped one too
	found := make(chan struct{})
	go func() {
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
			p.startLogs = append(p.startLogs, line)
			if m := addrRE.FindStringSubmatch(line); m != nil {
				switch {
				case strings.Contains(line, "Broker API listening"):
					p.apiAddr = m[1]
				case strings.Contains(line, "Dashboard listening"):
					p.dashAddr = m[1]
				}
			}
			if p.apiAddr != "" && p.dashAddr != "" {
				signalled = true
				close(found)
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		if !signalled {
			close(found)
		}
		p.exited <- cmd.Wait()
	}()
	select {
	case <-found:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		tb.Fatalf("broker did not log its addresses in time")
	}
	if p.apiAddr == "" || p.dashAddr == "" {
		err := <-p.exited
		tb.Fatalf("broker exited before listening (%v):\n%s", err, strings.Join(p.startLogs, "\n"))
	}
	return p
}

// waitReady polls /readyz until it answers 200.
func (p *process) waitReady(tb testing.TB) {
	tb.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + p.dashAddr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			_ = p.cmd.Process.Kill()
			tb.Fatalf("broker never became ready: %v", err)
		}
		time.Sleep(5 * time.Millisecond) // polling readiness
	}
}

// kill SIGKILLs the broker and waits for it to be gone.
func (p *process) kill(tb testing.TB) {
	tb.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		tb.Fatalf("kill: %v", err)
	}
	tb.Logf("broker killed: %v", <-p.exited)
}

// stop sends SIGTERM and returns the exit error.
func (p *process) stop(tb testing.TB) error {
	tb.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		tb.Fatalf("sigterm: %v", err)
	}
	select {
	case err := <-p.exited:
		return err
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		return fmt.Errorf("broker did not stop within 30s of SIGTERM")
	}
}

func run(tb testing.TB, env []string, args ...string) (string, error) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
