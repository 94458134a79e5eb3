package democmd

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/deploy/testpoll"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// BenchmarkCtrlC measures what a user's Ctrl-C on `make demo` costs: the
// real binary runs `demo` (three providers, ephemeral ports), is sent
// SIGINT once it is serving — with the workload on, once the federation is
// busy borrowing — and the time until the process has exited is recorded.
// It reports the p50, p99 and max of those stops (run it with
// -benchtime=50x for 50 starts and stops per variant).
func BenchmarkCtrlC(b *testing.B) {
	bin := filepath.Join(b.TempDir(), "federation-autoscaler")
	//nolint:staticcheck // SA1019: under `go test` GOROOT is the toolchain that must build the binary too.
	build := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", bin, ".")
	build.Dir = filepath.Join("..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("building the binary: %v\n%s", err, out)
	}
	for _, workload := range []bool{false, true} {
		b.Run(fmt.Sprintf("workload=%v", workload), func(b *testing.B) {
			stops := make([]time.Duration, 0, b.N)
			for range b.N {
				b.StopTimer()
				d := startDemo(b, bin, workload)
				b.StartTimer()
				stops = append(stops, d.interrupt(b))
			}
			slices.Sort(stops)
			pct := func(p float64) float64 {
				return float64(stops[int(p*float64(len(stops)-1))].Microseconds()) / 1000
			}
			b.ReportMetric(pct(0.5), "p50-ms")
			b.ReportMetric(pct(0.99), "p99-ms")
			b.ReportMetric(pct(1), "max-ms")
		})
	}
}

type demoProcess struct {
	cmd    *exec.Cmd
	exited chan error
	out    *syncBuffer
}

var dashboardRE = regexp.MustCompile(`Broker dashboard\s+(http://\S+)`)

// startDemo starts the binary's demo and waits until it serves (and, with
// workload, until the broker holds a reservation).
func startDemo(tb testing.TB, bin string, workload bool) *demoProcess {
	tb.Helper()
	args := []string{"demo", "--base-port", "0", "--data-dir", tb.TempDir(), "--peering-delay", "0s", "--scan-interval", "1s"}
	if workload {
		args = append(args, "--workload")
	}
	d := &demoProcess{cmd: exec.Command(bin, args...), exited: make(chan error, 1), out: &syncBuffer{}}
	stdout, err := d.cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	d.cmd.Stderr = d.out
	if err := d.cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = d.cmd.Process.Kill() })
	banner := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		var dash string
		for sc.Scan() {
			line := sc.Text()
			_, _ = d.out.Write([]byte(line + "\n"))
			if m := dashboardRE.FindStringSubmatch(line); m != nil {
				dash = m[1]
			}
			if strings.Contains(line, "Ctrl-C stops") {
				banner <- dash
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		d.exited <- d.cmd.Wait()
	}()
	var dash string
	select {
	case dash = <-banner:
	case err := <-d.exited:
		tb.Fatalf("demo exited before serving: %v\n%s", err, d.out)
	case <-time.After(2 * time.Minute):
		tb.Fatalf("demo not serving after 2 min:\n%s", d.out)
	}
	if workload {
		testpoll.UntilReport(tb, 2*time.Minute, "a reservation after the workload was switched on", func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			return reservations(ctx, dash) > 0
		}, func() string { return "no reservation; demo output:\n" + d.out.String() })
	}
	return d
}

// reservations counts the broker's reservations (0 on any error).
func reservations(ctx context.Context, dashboard string) int {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, dashboard+"/api/v1/overview", nil)
	if err != nil {
		return 0
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	var o api.Overview
	if json.NewDecoder(resp.Body).Decode(&o) != nil {
		return 0
	}
	return len(o.Reservations)
}

// interrupt sends SIGINT and returns how long the process took to exit; a
// stop that fails or takes over 30 s fails the benchmark.
func (d *demoProcess) interrupt(tb testing.TB) time.Duration {
	tb.Helper()
	start := time.Now()
	if err := d.cmd.Process.Signal(os.Interrupt); err != nil {
		tb.Fatal(err)
	}
	select {
	case err := <-d.exited:
		took := time.Since(start)
		if err != nil {
			tb.Fatalf("demo exited with %v after Ctrl-C:\n%s", err, d.out)
		}
		return took
	case <-time.After(30 * time.Second):
		_ = d.cmd.Process.Signal(os.Kill)
		tb.Fatalf("demo still running 30 s after Ctrl-C:\n%s", d.out)
		return 0
	}
}
