package placement

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

var benchPolicies = []api.PlacementType{api.PlacementStandard, api.PlacementPrice, api.PlacementEco, api.PlacementLatency, api.PlacementWeighted}

// benchFederation builds a federation of n providers spread over the world
// (prices, carbon forecasts, coordinates, 10% with sharing rules, some GPU
// providers) and 50 consumers, 10 per policy, each holding reservations on
// 3 providers. About a third of the providers are full.
func benchFederation(tb testing.TB, n int, policy api.PlacementType) (*Index, []string) {
	tb.Helper()
	r := rand.New(rand.NewPCG(uint64(n), 42))
	ix := NewIndex(DefaultChunkConfig())
	var consumers []string
	for i := range 50 {
		id := fmt.Sprintf("consumer-%02d", i)
		consumers = append(consumers, id)
		pol := policy
		if pol == "" {
			pol = benchPolicies[i%len(benchPolicies)]
		}
		c := consumer(id, pol, located(r.Float64()*140-70, r.Float64()*360-180))
		if pol == api.PlacementWeighted {
			c.Placement.Weights = &api.Weights{Price: 1, Carbon: 2, Distance: 1, FreeCapacity: 0.5}
		}
		ix.UpsertConsumer(c)
	}
	for i := range n {
		id := fmt.Sprintf("provider-%05d", i)
		chunks := 4 + r.IntN(60)
		p := Provider{
			ID: id, LiqoID: "liqo-" + id, Available: r.IntN(50) != 0,
			Resources: corev1.ResourceList{
				corev1.ResourceCPU:    *resource.NewQuantity(int64(2*chunks), resource.DecimalSI),
				corev1.ResourceMemory: *resource.NewQuantity(int64(4*chunks)<<30, resource.BinarySI),
			},
			UnitPrices: corev1.ResourceList{
				corev1.ResourceCPU:    *resource.NewMilliQuantity(int64(10+r.IntN(40)), resource.DecimalSI),
				corev1.ResourceMemory: *resource.NewMilliQuantity(int64(1+r.IntN(6)), resource.DecimalSI),
			},
			Topology:      &api.Topology{Latitude: r.Float64()*140 - 70, Longitude: r.Float64()*360 - 180},
			Renewable:     r.IntN(3) == 0,
			ProbeEndpoint: fmt.Sprintf("10.%d.%d.1:30100", i/256%256, i%256),
		}
		if r.IntN(5) == 0 {
			p.Resources[ResourceGPU] = *resource.NewQuantity(int64(1+r.IntN(4)), resource.DecimalSI)
			p.UnitPrices[ResourceGPU] = resource.MustParse("1.2")
		}
		fc := make([]float64, 24)
		base := 20 + r.Float64()*700
		for h := range fc {
			fc[h] = base * (0.8 + 0.4*r.Float64())
		}
		p.CarbonForecast = fc
		if r.IntN(10) == 0 {
			p.Sharing = &api.Sharing{DeniedConsumers: []string{consumers[r.IntN(50)]}, MaxChunksPerConsumer: int32(2 + r.IntN(6))}
		}
		ix.UpsertProvider(p)
		if r.IntN(3) == 0 { // full: held by some consumer
			ix.SetUsage(id, api.ChunkStandard, consumers[r.IntN(50)], Usage{Live: int32(chunks)})
		}
	}
	for _, c := range consumers {
		for range 3 {
			id := fmt.Sprintf("provider-%05d", r.IntN(n))
			ix.SetUsage(id, api.ChunkStandard, c, Usage{Live: 1, InFlight: int32(r.IntN(2))})
		}
	}
	return ix, consumers
}

// cpuTime is the process's user+system CPU time. On a shared machine
// wall-clock ns/op includes time spent waiting for a core; CPU time per
// operation does not.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchViews calls View round-robin over the consumers, timing each call,
// and reports p99-ns (wall clock) and cpu-ns/op next to ns/op.
func benchViews(b *testing.B, ix *Index, consumers []string) {
	durations := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	cpu0 := cpuTime()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		v := ix.View(consumers[i%len(consumers)], false)
		durations = append(durations, time.Since(start))
		if v.AppliedPlacement == "" {
			b.Fatal("view without an applied placement")
		}
	}
	b.StopTimer()
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(len(durations)), "cpu-ns/op")
	slices.Sort(durations)
	if len(durations) > 0 {
		b.ReportMetric(float64(durations[len(durations)/2].Nanoseconds()), "p50-ns")
		b.ReportMetric(float64(durations[len(durations)*99/100].Nanoseconds()), "p99-ns")
	}
}

// BenchmarkView: 50 consumers (10 per policy) over 100, 1 000 and 10 000
// providers.
func BenchmarkView(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("providers=%d", n), func(b *testing.B) {
			ix, consumers := benchFederation(b, n, "")
			benchViews(b, ix, consumers)
		})
	}
}

// BenchmarkViewPolicy: 10 000 providers, all 50 consumers on one policy.
func BenchmarkViewPolicy(b *testing.B) {
	for _, pol := range benchPolicies {
		b.Run(fmt.Sprintf("providers=10000/policy=%s", pol), func(b *testing.B) {
			ix, consumers := benchFederation(b, 10000, pol)
			benchViews(b, ix, consumers)
		})
	}
}

// BenchmarkSetUsage: re-keying one group in the trees (10 000 providers).
func BenchmarkSetUsage(b *testing.B) {
	ix, consumers := benchFederation(b, 10000, "")
	ids := make([]string, 10000)
	for i := range ids {
		ids[i] = fmt.Sprintf("provider-%05d", i)
	}
	b.ReportAllocs()
	cpu0 := cpuTime()
	n := 0
	for i := 0; b.Loop(); i++ {
		ix.SetUsage(ids[i%len(ids)], api.ChunkStandard, consumers[i%50], Usage{Live: int32(i % 3)})
		n++
	}
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(n), "cpu-ns/op")
}

// BenchmarkExplain: one consumer's explanation (every provider read and
// ranked, the Standard choice beside it), and the cheap Spend, over 100
// and 1 000 providers (mixed policies). The dashboard pays Explain once per
// consumer per change while watched; nothing on the agents' paths does.
func BenchmarkExplain(b *testing.B) {
	for _, n := range []int{100, 1000} {
		ix, consumers := benchFederation(b, n, "")
		b.Run(fmt.Sprintf("providers=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			cpu0 := cpuTime()
			k := 0
			for i := 0; b.Loop(); i++ {
				_ = ix.Explain(consumers[i%len(consumers)], nil)
				k++
			}
			b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(k), "cpu-ns/op")
		})
		b.Run(fmt.Sprintf("spend/providers=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				_ = ix.Spend(consumers[i%len(consumers)])
			}
		})
	}
}

// BenchmarkReevaluate is the broker's re-evaluation run: every consumer of
// benchFederation (50, all policies, each holding 3 groups) against n
// providers. One op is the whole run (the broker's per-interval cost).
func BenchmarkReevaluate(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("providers=%d", n), func(b *testing.B) {
			ix, consumers := benchFederation(b, n, "")
			th := DefaultThresholds()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				for _, c := range consumers {
					_ = ix.Reevaluate(c, nil, th)
				}
			}
		})
	}
}

// BenchmarkViewChoice: the Choice view lists every provider with room for
// the consumer (O(open providers)), each scored; 50 consumers on Choice.
func BenchmarkViewChoice(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("providers=%d", n), func(b *testing.B) {
			ix, consumers := benchFederation(b, n, api.PlacementChoice)
			benchViews(b, ix, consumers)
		})
	}
}

// BenchmarkNearestAtScale: 4 900 providers spread like the load
// generator's population (lat = i%170−85, lon = i%360−180) and 4 900
// located Latency consumers (lat = i%170−85, lon = 7i%360−180). ns/op is
// one consumer's View with the distance index warm; it also reports the
// heap the distance state holds once every consumer has viewed (held-B,
// HeapAlloc after GC, after minus before the first views), the first View
// after coordEpoch moved (a provider moved; median of 21) and every
// consumer's View after such a move (an overview).
func BenchmarkNearestAtScale(b *testing.B) {
	const n = 4900
	heap := func() int64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return int64(m.HeapAlloc)
	}
	provider := func(i int, lon float64) Provider {
		return prov(fmt.Sprintf("provider-%04d", i), 8+i%32, at(float64(i%170-85), lon), priced("0.02", "0.005"))
	}
	ix := NewIndex(DefaultChunkConfig())
	ids := make([]string, n)
	for i := range n {
		ix.UpsertProvider(provider(i, float64(i%360-180)))
		ids[i] = fmt.Sprintf("consumer-%04d", i)
		ix.UpsertConsumer(consumer(ids[i], api.PlacementLatency, located(float64(i%170-85), float64((i*7)%360-180))))
	}
	before := heap()
	for _, id := range ids {
		ix.View(id, false)
	}
	after := heap()
	var firsts []time.Duration
	for k := range 21 {
		ix.UpsertProvider(provider(k, float64(k%360-180)+0.5*float64(k%2+1)))
		start := time.Now()
		ix.View(ids[(k*97)%n], false)
		firsts = append(firsts, time.Since(start))
	}
	slices.Sort(firsts)
	ix.UpsertProvider(provider(0, 1))
	start := time.Now()
	for _, id := range ids {
		ix.View(id, false)
	}
	overview := time.Since(start)
	b.ReportAllocs()
	cpu0 := cpuTime()
	views := 0
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if v := ix.View(ids[i%n], false); !v.LatencyShortlist {
			b.Fatal("no Latency shortlist")
		}
		views++
	}
	b.StopTimer()
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(views), "cpu-ns/op")
	b.ReportMetric(float64(before), "heap-before-B")
	b.ReportMetric(float64(after), "heap-after-B")
	b.ReportMetric(float64(after-before), "held-B")
	b.ReportMetric(float64(firsts[len(firsts)/2].Nanoseconds()), "first-view-after-move-ns")
	b.ReportMetric(float64(overview.Nanoseconds()), "all-views-after-move-ns")
}
