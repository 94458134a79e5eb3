package rest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/rest"
)

// heavyHeartbeat is the JSON body of a heartbeat of consumer id listing n
// distinct reservation ids the broker does not know (the worst case: every
// id is looked up and answered as unknown), encoded once so the benchmark's
// client spends no CPU on it per call.
func heavyHeartbeat(tb testing.TB, id string, n int) []byte {
	req := api.HeartbeatRequest{ClusterID: id, LiqoClusterID: "liqo-" + id, Reservations: make([]string, n)}
	for i := range req.Reservations {
		req.Reservations[i] = fmt.Sprintf("res-%s-%08d", id, i)
	}
	b, err := json.Marshal(req)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// BenchmarkHeartbeat10000HTTP measures one heartbeat listing 10 000
// reservation ids (the cap) over mTLS: decode, validation, the domain,
// the fsync and the 10 000-id answer (target < 10 ms).
func BenchmarkHeartbeat10000HTTP(b *testing.B) {
	br := startBroker(b)
	cons := br.client(b, "cons-h", api.RoleConsumer)
	req := heavyHeartbeat(b, "cons-h", api.MaxHeartbeatReservations)
	cons.Must(b, "GET", "/healthz", nil)
	b.ResetTimer()
	for range b.N {
		r := cons.Must(b, "POST", "/api/v1/heartbeat", req)
		mustStatus(b, r, 200)
	}
}

// BenchmarkReserveBesideHeavyHeartbeat measures another tenant's
// reservation creates (POST /api/v1/reservations over mTLS, each fsynced
// before its 201) one at a time, alone and while a consumer sends
// heartbeats listing 10 000 ids at the default rate limit
// (rest.DefaultRateLimitRPS per second, back to back if a heartbeat takes
// longer). Reports the creates' p50-ms and p99-ms and how many heavy
// heartbeats ran during the timed part.
func BenchmarkReserveBesideHeavyHeartbeat(b *testing.B) {
	for _, heavy := range []bool{false, true} {
		name := "alone"
		if heavy {
			name = "heartbeater"
		}
		b.Run(name, func(b *testing.B) {
			br := startBroker(b)
			prov := br.client(b, "prov-a", api.RoleProvider)
			mustStatus(b, prov.Must(b, "POST", "/api/v1/advertisements", advertisement("prov-a", 1_000_000)), 200)
			tenant := br.client(b, "cons-t", api.RoleConsumer)
			mustStatus(b, tenant.Must(b, "POST", "/api/v1/heartbeat", heartbeat("cons-t")), 200)
			ctx, cancel := context.WithCancel(context.Background())
			beats := make(chan int, 1)
			if heavy {
				hb := br.client(b, "cons-h", api.RoleConsumer)
				req := heavyHeartbeat(b, "cons-h", api.MaxHeartbeatReservations)
				mustStatus(b, hb.Must(b, "POST", "/api/v1/heartbeat", req), 200)
				go func() {
					n := 0
					defer func() { beats <- n }()
					tick := time.NewTicker(time.Second / rest.DefaultRateLimitRPS)
					defer tick.Stop()
					for {
						select {
						case <-ctx.Done():
							return
						case <-tick.C:
						}
						r, err := hb.Do(ctx, "POST", "/api/v1/heartbeat", req)
						if ctx.Err() != nil {
							return
						}
						if err != nil || r.Status != 200 {
							b.Errorf("heavy heartbeat: %v %v", err, r)
							return
						}
						n++
					}
				}()
			} else {
				close(beats)
			}
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				start := time.Now()
				r := tenant.Must(b, "POST", "/api/v1/reservations", reservation("prov-a"), api.HeaderReservationID, fmt.Sprintf("t-%08d", i))
				lat = append(lat, time.Since(start))
				mustStatus(b, r, 201)
			}
			b.StopTimer()
			cancel()
			b.ReportMetric(float64(<-beats), "heavy-beats")
			slices.Sort(lat)
			b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
			b.ReportMetric(ms(lat[(len(lat)*99)/100]), "p99-ms")
		})
	}
}
