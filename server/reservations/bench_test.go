package reservations

import (
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/deploy/testpoll"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/loadgen"
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
			v, err := e.s.Instructions(e.ctx, "c1", api.RoleConsumer, time.Minute)
			if err != nil || len(v) != 1 || v[0].ID != peerName(id) {
				b.Errorf("hop %d woke with %v, %v", i, ids(v), err)
			}
			got <- time.Now()
		}()
		testpoll.UntilSeen(b, time.Minute, "the long-poll waiting", func() (bool, string) {
			n := e.s.Waiters()
			return n == 1, fmt.Sprintf("%d waiters", n)
		})
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

// BenchmarkHeartbeat10000 measures one consumer heartbeat listing 10 000
// reservation ids (api.MaxHeartbeatReservations), each call durable (fsynced)
// before it returns (target < 10 ms). unknown: every id is unknown to the
// broker (the answer lists all of them); held: the consumer holds 2 000
// live reservations, lists them and 8 000 unknown ids. lock-wait-*-us is
// how long a probe waited for the state lock meanwhile.
func BenchmarkHeartbeat10000(b *testing.B) {
	for _, held := range []int{0, 2000} {
		name := "unknown"
		if held > 0 {
			name = "held"
		}
		b.Run(name, func(b *testing.B) {
			e := newEnv(b)
			e.advertise("p1", held+1)
			e.heartbeat("c1")
			listed := make([]string, 0, 10000)
			for i := range held {
				id := fmt.Sprintf("res-%08d", i)
				e.reserve("c1", id, "p1")
				listed = append(listed, id)
			}
			for i := len(listed); i < 10000; i++ {
				listed = append(listed, fmt.Sprintf("res-unknown-%08d", i))
			}
			req := api.HeartbeatRequest{ClusterID: "c1", LiqoClusterID: "liqo-c1", Reservations: listed}
			// A probe takes the state lock every 100 µs, as another
			// tenant's call would: its waits bound the heartbeats'
			// critical sections (plus scheduling on a busy machine).
			probe := startLockProbe(e.s)
			b.ResetTimer()
			for range b.N {
				resp, err := e.s.Heartbeat(e.ctx, "c1", req)
				if err != nil {
					b.Fatal(err)
				}
				if len(resp.UnknownReservations) != 10000-held {
					b.Fatalf("%d unknown, want %d", len(resp.UnknownReservations), 10000-held)
				}
			}
			b.StopTimer()
			probe.report(b)
		})
	}
}

// BenchmarkOverviewAtScale measures one overview read (what the dashboard's
// sampler does every 5 s) with the load generator's population of providers
// and consumers registered. lock-wait-*-us is how long a probe waited for
// the state lock meanwhile: what an agent's call waits behind the read.
func BenchmarkOverviewAtScale(b *testing.B) {
	for _, n := range []int{500, 4900} {
		b.Run(fmt.Sprintf("%d+%d", n, n), func(b *testing.B) {
			e := newEnv(b)
			for i := range n {
				id := fmt.Sprintf("p-%05d", i)
				if _, err := e.s.Advertise(e.ctx, id, loadgen.Advertisement(id, i)); err != nil {
					b.Fatal(err)
				}
			}
			for i := range n {
				id := fmt.Sprintf("c-%05d", i)
				if _, err := e.s.Heartbeat(e.ctx, id, loadgen.Heartbeat(id, i)); err != nil {
					b.Fatal(err)
				}
			}
			// The first read builds the placement caches a running
			// broker keeps warm.
			if _, err := e.s.Overview(e.ctx); err != nil {
				b.Fatal(err)
			}
			probe := startLockProbe(e.s)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				ov, err := e.s.Overview(e.ctx)
				if err != nil {
					b.Fatal(err)
				}
				if len(ov.Consumers) != n || len(ov.Advertisements) != n {
					b.Fatalf("overview of %d consumers and %d providers, want %d each", len(ov.Consumers), len(ov.Advertisements), n)
				}
			}
			b.StopTimer()
			probe.report(b)
		})
	}
}

// lockProbe takes a Service's state lock every 100 µs, as another tenant's
// call would, and keeps how long each take waited.
type lockProbe struct {
	stop  chan struct{}
	waits chan []time.Duration
}

func startLockProbe(s *Service) *lockProbe {
	p := &lockProbe{stop: make(chan struct{}), waits: make(chan []time.Duration)}
	go func() {
		var w []time.Duration
		for {
			select {
			case <-p.stop:
				p.waits <- w
				return
			case <-time.After(100 * time.Microsecond):
			}
			start := time.Now()
			s.mu.Lock()
			w = append(w, time.Since(start))
			s.mu.Unlock()
		}
	}()
	return p
}

// report stops the probe and reports the p99 and the longest wait.
func (p *lockProbe) report(b *testing.B) {
	close(p.stop)
	w := <-p.waits
	slices.Sort(w)
	if len(w) > 0 {
		b.ReportMetric(float64(w[(len(w)*99)/100].Microseconds()), "lock-wait-p99-us")
		b.ReportMetric(float64(w[len(w)-1].Microseconds()), "lock-wait-max-us")
	}
}
