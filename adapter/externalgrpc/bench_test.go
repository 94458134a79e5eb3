package externalgrpc_test

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/federation-autoscaler/federation-autoscaler/adapter/externalgrpc/protos"
	"github.com/federation-autoscaler/federation-autoscaler/adapter/localapi"
	"github.com/federation-autoscaler/federation-autoscaler/adapter/localapi/localapitest"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// latencies records per-call durations and reports the p99.
type latencies []time.Duration

func (l latencies) report(b *testing.B) {
	if len(l) == 0 {
		return
	}
	sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
	p := func(q float64) float64 {
		return float64(l[min(len(l)-1, int(q*float64(len(l))))].Nanoseconds()) / 1e6
	}
	b.ReportMetric(p(0.50), "p50-ms")
	b.ReportMetric(p(0.99), "p99-ms")
}

// BenchmarkReadRPCWarmCache measures each read RPC over loopback gRPC with
// the node-group cache warm (the fake clock never moves), for a view of 10
// groups and 40 instances. Target: p99 ≤ 2 ms.
func BenchmarkReadRPCWarmCache(b *testing.B) {
	var groups []api.NodeGroupView
	for i := range 10 {
		groups = append(groups, stdGroup(fmt.Sprintf("p%02d", i), 100, 0))
	}
	fake := localapitest.New(groups...)
	fake.AutoPeer = localapi.PhaseRunning
	h := newHarness(b, fake)
	for i := range 4 {
		if err := h.increase(b, groups[i].ID, 10); err != nil {
			b.Fatal(err)
		}
	}
	id := groups[0].ID
	inst := h.instances(b, id)
	node := &protos.ExternalGrpcNode{ProviderID: inst[5].GetId(), Name: "n"}
	defaults := &protos.NodeGroupAutoscalingOptions{
		ScaleDownUtilizationThreshold: 0.5,
		ScaleDownUnneededDuration:     durationpb.New(10 * time.Minute),
		ScaleDownUnreadyDuration:      durationpb.New(20 * time.Minute),
		MaxNodeProvisionDuration:      durationpb.New(15 * time.Minute),
	}
	rpcs := []struct {
		name string
		call func() error
	}{
		{"Refresh", func() error { _, err := h.cl.Refresh(ctx(b), &protos.RefreshRequest{}); return err }},
		{"NodeGroups", func() error { _, err := h.cl.NodeGroups(ctx(b), &protos.NodeGroupsRequest{}); return err }},
		{"NodeGroupForNode", func() error {
			_, err := h.cl.NodeGroupForNode(ctx(b), &protos.NodeGroupForNodeRequest{Node: node})
			return err
		}},
		{"NodeGroupTargetSize", func() error {
			_, err := h.cl.NodeGroupTargetSize(ctx(b), &protos.NodeGroupTargetSizeRequest{Id: id})
			return err
		}},
		{"NodeGroupNodes", func() error {
			_, err := h.cl.NodeGroupNodes(ctx(b), &protos.NodeGroupNodesRequest{Id: id})
			return err
		}},
		{"NodeGroupTemplateNodeInfo", func() error {
			_, err := h.cl.NodeGroupTemplateNodeInfo(ctx(b), &protos.NodeGroupTemplateNodeInfoRequest{Id: id})
			return err
		}},
		{"NodeGroupGetOptions", func() error {
			_, err := h.cl.NodeGroupGetOptions(ctx(b), &protos.NodeGroupAutoscalingOptionsRequest{Id: id, Defaults: defaults})
			return err
		}},
		{"GetAvailableGPUTypes", func() error {
			_, err := h.cl.GetAvailableGPUTypes(ctx(b), &protos.GetAvailableGPUTypesRequest{})
			return err
		}},
	}
	for _, r := range rpcs {
		b.Run(r.name, func(b *testing.B) {
			if err := r.call(); err != nil { // warm the cache
				b.Fatal(err)
			}
			fetches := fake.Calls(localapitest.RouteNodeGroups)
			lat := make(latencies, 0, b.N)
			b.ResetTimer()
			for b.Loop() {
				start := time.Now()
				if err := r.call(); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			if got := fake.Calls(localapitest.RouteNodeGroups); got != fetches {
				b.Fatalf("the cache was not warm: %d agent fetches", got-fetches)
			}
			lat.report(b)
		})
	}
}

// BenchmarkIncreaseSize measures IncreaseSize with delta 1–10 against the
// local API on loopback (HTTP fake agent); every reservation is one POST.
// Target: p99 ≤ 100 ms.
func BenchmarkIncreaseSize(b *testing.B) {
	for _, delta := range []int32{1, 5, 10} {
		b.Run(fmt.Sprintf("delta=%d", delta), func(b *testing.B) {
			fake := localapitest.New(stdGroup("p1", 1<<30, 0))
			h := newHarness(b, fake)
			lat := make(latencies, 0, b.N)
			for b.Loop() {
				start := time.Now()
				if err := h.increase(b, g1, delta); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
				// Undo it so the state does not grow with b.N.
				b.StopTimer()
				if _, err := h.cl.NodeGroupDecreaseTargetSize(ctx(b), &protos.NodeGroupDecreaseTargetSizeRequest{Id: g1, Delta: -delta}); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			lat.report(b)
		})
	}
}

// BenchmarkReadHandlerInProcess calls the read handlers directly (no gRPC,
// no loopback), warm cache: the adapter's own share of a read's latency.
func BenchmarkReadHandlerInProcess(b *testing.B) {
	var groups []api.NodeGroupView
	for i := range 10 {
		groups = append(groups, stdGroup(fmt.Sprintf("p%02d", i), 100, 0))
	}
	fake := localapitest.New(groups...)
	fake.AutoPeer = localapi.PhaseRunning
	h := newHarness(b, fake)
	for i := range 4 {
		if err := h.increase(b, groups[i].ID, 10); err != nil {
			b.Fatal(err)
		}
	}
	id := groups[0].ID
	inst := h.instances(b, id)
	node := &protos.ExternalGrpcNode{ProviderID: inst[5].GetId(), Name: "n"}
	c := ctx(b)
	rpcs := map[string]func() error{
		"NodeGroups": func() error { _, err := h.srv.NodeGroups(c, &protos.NodeGroupsRequest{}); return err },
		"NodeGroupForNode": func() error {
			_, err := h.srv.NodeGroupForNode(c, &protos.NodeGroupForNodeRequest{Node: node})
			return err
		},
		"NodeGroupNodes": func() error { _, err := h.srv.NodeGroupNodes(c, &protos.NodeGroupNodesRequest{Id: id}); return err },
		"NodeGroupTemplateNodeInfo": func() error {
			_, err := h.srv.NodeGroupTemplateNodeInfo(c, &protos.NodeGroupTemplateNodeInfoRequest{Id: id})
			return err
		},
	}
	for _, name := range []string{"NodeGroups", "NodeGroupForNode", "NodeGroupNodes", "NodeGroupTemplateNodeInfo"} {
		call := rpcs[name]
		b.Run(name, func(b *testing.B) {
			if err := call(); err != nil {
				b.Fatal(err)
			}
			lat := make(latencies, 0, b.N)
			for b.Loop() {
				start := time.Now()
				if err := call(); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
			}
			lat.report(b)
		})
	}
}
