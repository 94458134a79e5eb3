package rest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/deploy/testpoll"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/rest/resttest"
)

type peerArrival struct {
	in api.InstructionView
	at time.Time
}

// consumerWaiter long-polls for the consumer like an agent: a Peer is
// handed to the benchmark (which answers it), every other instruction is
// answered Succeeded at once.
func consumerWaiter(ctx context.Context, c *resttest.Client, peers chan<- peerArrival, resume <-chan struct{}) {
	for ctx.Err() == nil {
		r, err := c.Do(ctx, "GET", "/api/v1/instructions?wait=30s", nil)
		if err != nil {
			return
		}
		now := time.Now()
		var list api.InstructionListResponse
		if json.Unmarshal(r.Body, &list) != nil {
			return
		}
		for _, in := range list.Instructions {
			if in.Kind == api.KindPeer {
				peers <- peerArrival{in: in, at: now}
				select {
				case <-resume:
				case <-ctx.Done():
					return
				}
				continue
			}
			if _, err := c.Do(ctx, "POST", "/api/v1/instructions/"+in.ID+"/result", api.InstructionResultRequest{Status: api.ResultSucceeded}); err != nil {
				return
			}
		}
	}
}

// BenchmarkInstructionHop measures one instruction hop over real mTLS with
// long-poll: the provider posts its GenerateKubeconfig result and the
// consumer's waiting long-poll returns holding the Peer instruction.
// Reported: p50-ms and p99-ms of that hop (target p99 <= 50 ms).
func BenchmarkInstructionHop(b *testing.B) {
	br := startBroker(b)
	prov := br.client(b, "prov-a", api.RoleProvider)
	cons := br.client(b, "cons-a", api.RoleConsumer)
	waiterClient := br.client(b, "cons-a", api.RoleConsumer)
	mustStatus(b, prov.Must(b, "POST", "/api/v1/advertisements", advertisement("prov-a", 1000)), 200)
	mustStatus(b, cons.Must(b, "POST", "/api/v1/heartbeat", heartbeat("cons-a")), 200)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	peers := make(chan peerArrival)
	resume := make(chan struct{})
	go consumerWaiter(ctx, waiterClient, peers, resume)

	kubeconfig := api.InstructionResultRequest{Status: api.ResultSucceeded,
		Payload: &api.InstructionPayload{Kind: api.PayloadKubeconfig, Kubeconfig: "apiVersion: v1\nkind: Config\n"}}
	hops := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	b.StopTimer()
	for i := range b.N {
		res := fmt.Sprintf("hop-%06d", i)
		// Untimed: the consumer's long-poll is parked with nothing pending.
		testpoll.Until(b, 10*time.Second, "the consumer's long-poll parked", func() bool { return br.svc.Waiters() == 1 })
		mustStatus(b, cons.Must(b, "POST", "/api/v1/reservations", reservation("prov-a"), api.HeaderReservationID, res), 201)
		gk := pendingOf(b, prov, api.KindGenerateKubeconfig, res)

		b.StartTimer()
		start := time.Now()
		mustStatus(b, prov.Must(b, "POST", "/api/v1/instructions/"+gk.ID+"/result", kubeconfig), 200)
		got := <-peers
		b.StopTimer()
		if got.in.ReservationID != res {
			b.Fatalf("waiter got the Peer of %s, want %s", got.in.ReservationID, res)
		}
		hops = append(hops, got.at.Sub(start))

		// Untimed: finish the reservation so the next one needs a new
		// GenerateKubeconfig (the pair's credential goes with its last
		// reservation).
		mustStatus(b, cons.Must(b, "POST", "/api/v1/instructions/"+got.in.ID+"/result", api.InstructionResultRequest{Status: api.ResultSucceeded}), 200)
		mustStatus(b, cons.Must(b, "DELETE", "/api/v1/reservations/"+res, nil), 202)
		resume <- struct{}{}
		testpoll.Until(b, 10*time.Second, "the reservation Released", func() bool {
			r, err := br.svc.Reservation(ctx, "cons-a", api.RoleConsumer, res)
			return err == nil && r.Status == api.PhaseReleased
		})
		for _, in := range pending(b, prov) { // provider-side Cleanup
			mustStatus(b, prov.Must(b, "POST", "/api/v1/instructions/"+in.ID+"/result", api.InstructionResultRequest{Status: api.ResultSucceeded}), 200)
		}
	}
	slices.Sort(hops)
	b.ReportMetric(ms(hops[len(hops)/2]), "p50-ms")
	b.ReportMetric(ms(hops[(len(hops)*99)/100]), "p99-ms")
}

// BenchmarkReserveHTTP measures durable reservation commits per second
// over HTTPS with parallel clients (each op: POST /api/v1/reservations →
// 201 after the commit is on disk).
func BenchmarkReserveHTTP(b *testing.B) {
	br := startBroker(b)
	prov := br.client(b, "prov-a", api.RoleProvider)
	mustStatus(b, prov.Must(b, "POST", "/api/v1/advertisements", advertisement("prov-a", 1_000_000)), 200)
	cons := br.pki.NewClient(b, br.url, "cons-a", api.RoleConsumer, 128)
	mustStatus(b, cons.Must(b, "POST", "/api/v1/heartbeat", heartbeat("cons-a")), 200)
	// Open the connections (TLS handshakes) before timing.
	var wg sync.WaitGroup
	for range 128 {
		wg.Add(1)
		go func() { defer wg.Done(); cons.Must(b, "GET", "/healthz", nil) }()
	}
	wg.Wait()
	var seq atomic.Int64
	b.SetParallelism(64) // 128 requests in flight: throughput = in-flight / (fsync latency)
	b.ResetTimer()
	cpu0 := cpuTime(b)
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			id := fmt.Sprintf("bench-%08d", seq.Add(1))
			r, err := cons.Do(context.Background(), "POST", "/api/v1/reservations", reservation("prov-a"), api.HeaderReservationID, id)
			if err != nil || r.Status != 201 {
				b.Errorf("reserve %s: %v %v", id, err, r)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "commits/s")
	// CPU time (user+system, client and server together: one process) per
	// commit: on a loaded machine commits/s measures the CPU share the
	// benchmark got; this says what an idle machine would sustain.
	b.ReportMetric(float64((cpuTime(b)-cpu0).Microseconds())/float64(b.N), "cpu-us/op")
}

// cpuTime is the process's user+system CPU time so far.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func mustStatus(tb testing.TB, r *resttest.Response, status int) {
	tb.Helper()
	if r.Status != status {
		tb.Fatalf("status %d, want %d: %s", r.Status, status, r.Body)
	}
}

func pending(tb testing.TB, c *resttest.Client) []api.InstructionView {
	tb.Helper()
	r := c.Must(tb, "GET", "/api/v1/instructions", nil)
	var list api.InstructionListResponse
	if err := r.Decode(&list); err != nil {
		tb.Fatal(err)
	}
	return list.Instructions
}

func pendingOf(tb testing.TB, c *resttest.Client, kind api.InstructionKind, res string) api.InstructionView {
	tb.Helper()
	in, ok := findInstruction(pending(tb, c), kind, res)
	if !ok {
		tb.Fatalf("no pending %s for %s", kind, res)
	}
	return in
}
