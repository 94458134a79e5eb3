package e2e_test

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/adapter/externalgrpc/protos"
	"github.com/federation-autoscaler/federation-autoscaler/deploy/testpoll"
)

// BenchmarkIncreaseSizeRealStack measures IncreaseSize through the real
// consumer agent to the real broker (mTLS, bbolt) on loopback: delta
// reservations, each a local-API POST forwarded to the broker. Between
// iterations (timer stopped) every instance is deleted and the head-room
// awaited. Target: p99 ≤ 100 ms for delta 1–10.
func BenchmarkIncreaseSizeRealStack(b *testing.B) {
	for _, rl := range []struct {
		name string
		def  bool
	}{{"unlimited", false}, {"default-rate-limit", true}} {
		b.Run(rl.name, func(b *testing.B) { benchIncrease(b, rl.def) })
	}
}

func benchIncrease(b *testing.B, defaultRateLimit bool) {
	s := startStackWith(b, defaultRateLimit)
	s.startProviderSized("p1", 40)
	kube, ccl := fakeConsumerCluster(b)
	cl := s.startConsumer(kube, ccl)
	const id = "ng-p1-standard"
	room := func(atLeast int32) {
		b.Helper()
		testpoll.UntilSeen(b, 30*time.Second, fmt.Sprintf("group %s with %d free chunks and no instances", id, atLeast), func() (bool, string) {
			c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			r, err := cl.NodeGroups(c, &protos.NodeGroupsRequest{})
			var t *protos.NodeGroupTargetSizeResponse
			if err == nil {
				t, err = cl.NodeGroupTargetSize(c, &protos.NodeGroupTargetSizeRequest{Id: id})
			}
			if err != nil {
				return false, err.Error()
			}
			for _, g := range r.GetNodeGroups() {
				if g.GetId() == id {
					return t.GetTargetSize() == 0 && g.GetMaxSize() >= atLeast, fmt.Sprintf("target size %d, max size %d", t.GetTargetSize(), g.GetMaxSize())
				}
			}
			return false, "no such group"
		})
	}
	// drain deletes every instance, retrying while the broker rate-limits.
	drain := func() {
		b.Helper()
		testpoll.UntilNil(b, 30*time.Second, "draining "+id+" (rate-limited: retried)", func() error {
			c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			r, err := cl.NodeGroupNodes(c, &protos.NodeGroupNodesRequest{Id: id})
			var nodes []*protos.ExternalGrpcNode
			for _, in := range r.GetInstances() {
				if in.GetStatus().GetInstanceState() != protos.InstanceStatus_instanceDeleting {
					nodes = append(nodes, &protos.ExternalGrpcNode{ProviderID: in.GetId(), Name: in.GetId()})
				}
			}
			if err == nil && len(nodes) > 0 {
				_, err = cl.NodeGroupDeleteNodes(c, &protos.NodeGroupDeleteNodesRequest{Id: id, Nodes: nodes})
			}
			return err
		})
	}
	for _, delta := range []int32{1, 5, 10} {
		b.Run(fmt.Sprintf("delta=%d", delta), func(b *testing.B) {
			room(delta)
			var lat []time.Duration
			failed := 0
			for b.Loop() {
				c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				start := time.Now()
				_, err := cl.NodeGroupIncreaseSize(c, &protos.NodeGroupIncreaseSizeRequest{Id: id, Delta: delta})
				lat = append(lat, time.Since(start))
				cancel()
				if err != nil {
					if !defaultRateLimit {
						b.Fatal(err)
					}
					// With the broker's default per-cluster rate limit a
					// fan-out can be refused (429): count it.
					failed++
					b.Logf("IncreaseSize %d failed: %v", delta, err)
				}
				b.StopTimer()
				drain()
				room(delta)
				b.StartTimer()
			}
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			q := func(p float64) float64 {
				return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Nanoseconds()) / 1e6
			}
			b.ReportMetric(q(0.5), "p50-ms")
			b.ReportMetric(q(0.99), "p99-ms")
			b.ReportMetric(float64(failed), "failed-calls")
		})
	}
}
