package reservations

import (
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// BenchmarkReserveDurable measures durable reservation commits (each fsynced
// before it returns) from many concurrent callers.
func BenchmarkReserveDurable(b *testing.B) {
	e := newEnv(b)
	e.advertise("p1", b.N+1)
	e.heartbeat("c1")
	var n atomic.Int64
	b.SetParallelism(64)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			id := fmt.Sprintf("bench-%d", n.Add(1))
			if _, _, err := e.s.Reserve(e.ctx, "c1", id, stdReq("p1")); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "commits/s")
	b.ReportMetric(float64(b.N)/float64(e.st.applies.Load()), "commits/fsync")
}

// BenchmarkInstructionHop measures one hop at the domain level: a provider
// posts its GenerateKubeconfig result and the consumer's waiting long-poll
// returns the Peer.
func BenchmarkInstructionHop(b *testing.B) {
	e := newEnv(b)
	e.advertise("p1", 2)
	e.heartbeat("c1")
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		id := fmt.Sprintf("hop-%d", i)
		e.reserve("c1", id, "p1")
		got := make(chan time.Time, 1)
		go func() {
			v, err := e.s.Instructions(e.ctx, "c1", time.Minute)
			if err != nil || len(v) != 1 || v[0].ID != peerName(id) {
				b.Errorf("hop %d woke with %v, %v", i, ids(v), err)
			}
			got <- time.Now()
		}()
		for e.s.Waiters() != 1 {
			time.Sleep(10 * time.Microsecond)
		}
		b.StartTimer()
		start := time.Now()
		e.result("p1", gkName("c1", "p1"), kubeconfig("K"))
		end := <-got
		b.StopTimer()
		lat = append(lat, end.Sub(start))
		// Clean up so the next iteration needs a new kubeconfig.
		e.result("c1", peerName(id), failed("bench"))
		e.result("c1", cleanupName(id), ok())
		e.result("p1", pcleanupName("c1", "p1"), ok())
		b.StartTimer()
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[(len(lat)*99)/100].Microseconds())/1000, "p99-ms")
	_ = api.KindPeer
}
