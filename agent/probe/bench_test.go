package probe

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
)

// BenchmarkEstimatorUnderLoad measures how far each estimator lands from a
// path's true round trip when the CPU is busy: a real UDP responder on
// loopback delays every echo by the path's 20 ms (as the experiments' UDP
// network does) while burners keep every core busy, and each iteration
// probes it 5 times over UDP. It reports the median and the 90th
// percentile of |estimate − 20 ms| for the minimum (Estimate) and the
// median of the probes. Scheduling delay is one-sided (it only adds), so
// the minimum should stay closer.
//
//	go test -run '^$' -bench EstimatorUnderLoad -benchtime 200x ./agent/probe/
func BenchmarkEstimatorUnderLoad(b *testing.B) {
	const path = 20 * time.Millisecond
	for _, burners := range []int{0, 2 * runtime.GOMAXPROCS(0), 8 * runtime.GOMAXPROCS(0)} {
		b.Run(fmt.Sprintf("burners=%d", burners), func(b *testing.B) {
			r, err := Listen("127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			r.SetDelay(path)
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			wg.Go(func() { _ = r.Serve(ctx) })
			for range burners {
				wg.Go(func() { burn(ctx) })
			}
			var errMin, errMedian []float64
			b.ResetTimer()
			for range b.N {
				rtts, err := UDP{}.Probe(ctx, r.Addr().String(), 5, 300*time.Millisecond)
				if err != nil {
					continue
				}
				xs := make([]float64, len(rtts))
				for i, d := range rtts {
					xs[i] = ms(d)
				}
				errMin = append(errMin, math.Abs(Estimate(rtts)-ms(path)))
				errMedian = append(errMedian, math.Abs(Median(xs)-ms(path)))
			}
			b.StopTimer()
			cancel()
			wg.Wait()
			b.ReportMetric(quantile(errMin, 0.5), "min-err-p50-ms")
			b.ReportMetric(quantile(errMin, 0.9), "min-err-p90-ms")
			b.ReportMetric(quantile(errMedian, 0.5), "median-err-p50-ms")
			b.ReportMetric(quantile(errMedian, 0.9), "median-err-p90-ms")
		})
	}
}

// BenchmarkMeasureConcurrency measures 70 endpoints (each a loopback
// responder with a 20 ms path) in one Measure with the concurrency bound
// and with every endpoint at once, reporting the median |estimate − 20 ms|.
//
//	go test -run '^$' -bench MeasureConcurrency -benchtime 20x ./agent/probe/
func BenchmarkMeasureConcurrency(b *testing.B) {
	const path, endpoints = 20 * time.Millisecond, 70
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var eps []string
	for range endpoints {
		r, err := Listen("127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		r.SetDelay(path)
		go func() { _ = r.Serve(ctx) }()
		eps = append(eps, r.Addr().String())
	}
	for _, conc := range []int{DefaultConcurrency, endpoints} {
		b.Run(fmt.Sprintf("concurrency=%d", conc), func(b *testing.B) {
			var errs []float64
			for range b.N {
				p := NewProber(ProberConfig{Concurrency: conc, TTL: time.Nanosecond})
				for _, rtt := range p.Measure(ctx, eps) {
					errs = append(errs, math.Abs(rtt-ms(path)))
				}
			}
			b.ReportMetric(quantile(errs, 0.5), "err-p50-ms")
			b.ReportMetric(quantile(errs, 0.9), "err-p90-ms")
		})
	}
}

func burn(ctx context.Context) {
	x := 1.0
	for ctx.Err() == nil {
		for range 100_000 {
			x = math.Sqrt(x + 1)
		}
	}
	_ = x
}

func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Sorted(slices.Values(xs))
	return s[int(q*float64(len(s)-1))]
}
