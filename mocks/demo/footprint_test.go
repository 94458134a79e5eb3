package demo_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/mocks/demo"
)

// cpuTicks reads this process's user+system CPU time from /proc/self/stat
// (clock ticks, 100 per second on Linux).
func cpuTicks(tb testing.TB) int64 {
	tb.Helper()
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		tb.Skipf("no /proc/self/stat: %v", err)
	}
	// Fields after the parenthesised command name; utime and stime are
	// fields 14 and 15 of the whole line.
	rest := string(b[strings.LastIndexByte(string(b), ')')+2:])
	f := strings.Fields(rest)
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return u + s
}

func rssMiB(tb testing.TB) float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			kb, _ := strconv.ParseFloat(strings.Fields(line)[1], 64)
			return kb / 1024
		}
	}
	return 0
}

// TestIdleFootprint measures the whole demo (default options: three
// providers, the consumer, the broker, the adapter and the autoscaler, all
// in this process) idle for FA_IDLE (default 20 s) once every provider has
// advertised: CPU as a share of one core and memory. It logs the numbers
// (docs/performance.md); it asserts only that the demo keeps running.
func TestIdleFootprint(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the idle measurement takes 20 s")
	}
	window := 20 * time.Second
	if v := os.Getenv("FA_IDLE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatal(err)
		}
		window = d
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fed, err := demo.Start(ctx, demo.Options{DataDir: t.TempDir(), Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = fed.Stop() }()
	d := newDriver(t, fed)
	d.eventually("three providers advertised", 30*time.Second, func() (bool, string) {
		o := d.overview()
		return len(o.Advertisements) == 3, fmt.Sprintf("%d advertisements", len(o.Advertisements))
	})
	runtime.GC()
	before, start := cpuTicks(t), time.Now()
	select {
	case <-time.After(window): // the measurement window, not a wait for a condition
	case <-fed.Done():
		t.Fatal("the demo stopped while idle")
	}
	ticks, elapsed := cpuTicks(t)-before, time.Since(start)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	pct := float64(ticks) / 100 / elapsed.Seconds() * 100
	t.Logf("idle demo over %s: CPU %.1f %% of one core; RSS %.0f MiB, Go heap in use %.0f MiB, goroutines %d",
		elapsed.Round(time.Second), pct, rssMiB(t), float64(ms.HeapInuse)/(1<<20), runtime.NumGoroutine())
}

// BenchmarkWorkloadToggle measures, with a 0 s peering delay and a 1 s
// autoscaler scan, the time from switching the workload on in the consumer
// console (Price policy, 6 pods of 1 CPU: two borrowed chunks) to all pods
// Running; switching it off and the scale-down to zero are not timed.
// Reports p50 and max.
func BenchmarkWorkloadToggle(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fed, err := demo.Start(ctx, demo.Options{
		DataDir: b.TempDir(), PeeringDelay: 0, ScanInterval: time.Second, ScaleDownUnneededTime: time.Second, Logger: testLogger(),
	})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { cancel(); _ = fed.Stop() }()
	d := newDriver(b, fed)
	d.policy("Price", nil)
	var samples []time.Duration
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		d.workload(true, 6)
		d.runningOn(6, map[string]int{"sydney": 2})
		samples = append(samples, time.Since(start))
		b.StopTimer()
		d.off()
		b.StartTimer()
	}
	b.StopTimer()
	sort.Slice(samples, func(i, j int) bool { return samples[i] < samples[j] })
	b.ReportMetric(float64(samples[len(samples)/2].Milliseconds()), "p50-ms")
	b.ReportMetric(float64(samples[len(samples)-1].Milliseconds()), "max-ms")
}
