package rest_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/placement"
	"github.com/federation-autoscaler/federation-autoscaler/server/reservations"
	"github.com/federation-autoscaler/federation-autoscaler/server/rest"
	"github.com/federation-autoscaler/federation-autoscaler/server/rest/resttest"
	"github.com/federation-autoscaler/federation-autoscaler/server/store/bolt"
)

var nodeGroupPolicies = []api.PlacementType{api.PlacementStandard, api.PlacementPrice, api.PlacementEco, api.PlacementLatency, api.PlacementWeighted}

// startFederation serves the real broker (domain on a bbolt file without
// fsync, which only the setup writes) over mTLS and fills it through the
// domain with n providers (prices, carbon forecasts, coordinates) and 50
// consumers, 10 per policy, each holding one reservation.
func startFederation(b *testing.B, n int) (*resttest.PKI, string, []string) {
	b.Helper()
	pki := resttest.NewPKI(b)
	clock := testingclock.NewFakeClock(time.Now())
	st, err := bolt.OpenFile(filepath.Join(b.TempDir(), "broker.db"), bolt.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	chunks := placement.DefaultChunkConfig()
	svc, err := reservations.New(reservations.Config{
		Store: st, Clock: clock, ChunkConfig: chunks,
		Placer: placement.NewIndex(chunks, placement.WithClock(clock.Now)),
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan struct{})
	go func() { defer close(runDone); _ = svc.Run(ctx) }()
	app := rest.NewApp(rest.Config{
		Broker: svc, RateLimitBurst: 1_000_000, RateLimitRPS: 1_000_000,
		Metrics: prometheus.NewRegistry(), BaseContext: func() context.Context { return ctx },
	})
	b.Cleanup(func() {
		<-runDone
		if err := svc.Close(); err != nil {
			b.Errorf("close: %v", err)
		}
	})
	url := resttest.Serve(b, app, pki.ServerTLS(b))
	b.Cleanup(cancel)

	r := rand.New(rand.NewPCG(uint64(n), 1))
	for i := range n {
		id := fmt.Sprintf("provider-%05d", i)
		chunks := 4 + r.IntN(60)
		fc := make([]float64, 24)
		base := 20 + r.Float64()*700
		for h := range fc {
			fc[h] = base * (0.8 + 0.4*r.Float64())
		}
		req := api.AdvertisementRequest{
			ClusterID: id, LiqoClusterID: "liqo-" + id,
			Resources: corev1.ResourceList{
				corev1.ResourceCPU:    *resource.NewQuantity(int64(2*chunks), resource.DecimalSI),
				corev1.ResourceMemory: *resource.NewQuantity(int64(4*chunks)<<30, resource.BinarySI),
			},
			UnitPrices: corev1.ResourceList{
				corev1.ResourceCPU:    *resource.NewMilliQuantity(int64(10+r.IntN(40)), resource.DecimalSI),
				corev1.ResourceMemory: *resource.NewMilliQuantity(int64(1+r.IntN(6)), resource.DecimalSI),
			},
			CarbonForecast: fc,
			Topology:       &api.Topology{Latitude: r.Float64()*140 - 70, Longitude: r.Float64()*360 - 180},
			Renewable:      r.IntN(3) == 0,
			ProbeEndpoint:  fmt.Sprintf("10.%d.%d.1:30100", i/256%256, i%256),
		}
		if _, err := svc.Advertise(ctx, id, req); err != nil {
			b.Fatalf("advertise %s: %v", id, err)
		}
	}
	var consumers []string
	for i := range 50 {
		id := fmt.Sprintf("consumer-%02d", i)
		consumers = append(consumers, id)
		lat, lon := r.Float64()*140-70, r.Float64()*360-180
		hb := api.HeartbeatRequest{
			ClusterID: id, LiqoClusterID: "liqo-" + id,
			Placement: &api.Placement{Type: nodeGroupPolicies[i%len(nodeGroupPolicies)]},
			Latitude:  &lat, Longitude: &lon,
		}
		if hb.Placement.Type == api.PlacementWeighted {
			hb.Placement.Weights = &api.Weights{Price: 1, Carbon: 2, Distance: 1, FreeCapacity: 0.5}
		}
		if _, err := svc.Heartbeat(ctx, id, hb); err != nil {
			b.Fatalf("heartbeat %s: %v", id, err)
		}
		provider := fmt.Sprintf("provider-%05d", r.IntN(n))
		if _, _, err := svc.Reserve(ctx, id, uuid.NewString(), api.ReservationRequest{ProviderClusterID: provider, ChunkCount: 1, ChunkType: api.ChunkStandard}); err != nil {
			b.Fatalf("reserve on %s: %v", provider, err)
		}
	}
	return pki, url, consumers
}

// BenchmarkNodeGroupsHTTP measures GET /api/v1/nodegroups through the
// whole HTTP stack (mTLS on loopback with keep-alive, middleware, the
// domain, the placement index, JSON) at 100 / 1 000 / 10 000 providers and
// 50 consumers (10 per policy), one request at a time, round-robin over the
// consumers. p99-ns is the 99th percentile of the per-request wall time;
// cpu-ns/op is the process's CPU time (client and server) per request.
func BenchmarkNodeGroupsHTTP(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("providers=%d", n), func(b *testing.B) {
			pki, url, consumers := startFederation(b, n)
			clients := make([]*resttest.Client, len(consumers))
			for i, c := range consumers {
				clients[i] = pki.NewClient(b, url, c, api.RoleConsumer, 1)
				mustStatus(b, clients[i].Must(b, "GET", "/api/v1/nodegroups", nil), 200) // handshake
			}
			durations := make([]time.Duration, 0, b.N)
			cpu0 := cpuTime(b)
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				start := time.Now()
				resp, err := clients[i%len(clients)].Do(context.Background(), "GET", "/api/v1/nodegroups", nil)
				durations = append(durations, time.Since(start))
				if err != nil || resp.Status != 200 {
					b.Fatalf("nodegroups: %v %v", err, resp)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64((cpuTime(b)-cpu0).Nanoseconds())/float64(len(durations)), "cpu-ns/op")
			slices.Sort(durations)
			b.ReportMetric(float64(durations[len(durations)/2].Nanoseconds()), "p50-ns")
			b.ReportMetric(float64(durations[len(durations)*99/100].Nanoseconds()), "p99-ns")
		})
	}
}
