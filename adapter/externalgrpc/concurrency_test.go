package externalgrpc_test

import (
	"sync"
	"testing"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/adapter/externalgrpc/protos"
	"github.com/federation-autoscaler/federation-autoscaler/adapter/localapi"
	"github.com/federation-autoscaler/federation-autoscaler/adapter/localapi/localapitest"
)

// TestConcurrentReadsAndMutations runs CA-like readers against concurrent
// scale-ups and scale-downs (run it with -race) and checks that the target
// size ends equal to the live reservations.
func TestConcurrentReadsAndMutations(t *testing.T) {
	fake := localapitest.New(stdGroup("p1", 1000, 0))
	fake.AutoPeer = localapi.PhaseRunning
	h := newHarness(t, fake)
	var wg sync.WaitGroup
	errc := make(chan error, 100)
	stop := make(chan struct{})
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := h.cl.NodeGroups(ctx(t), &protos.NodeGroupsRequest{}); err != nil {
					errc <- err
					return
				}
				if _, err := h.cl.NodeGroupNodes(ctx(t), &protos.NodeGroupNodesRequest{Id: g1}); err != nil {
					errc <- err
					return
				}
				h.clk.Step(500 * time.Millisecond) // readers keep expiring the cache
			}
		}()
	}
	var mw sync.WaitGroup
	for range 2 {
		mw.Add(1)
		go func() {
			defer mw.Done()
			for range 8 {
				if _, err := h.cl.NodeGroupIncreaseSize(ctx(t), &protos.NodeGroupIncreaseSizeRequest{Id: g1, Delta: 3}); err != nil {
					errc <- err
					return
				}
				r, err := h.cl.NodeGroupNodes(ctx(t), &protos.NodeGroupNodesRequest{Id: g1})
				if err != nil {
					errc <- err
					return
				}
				var running []*protos.ExternalGrpcNode
				for _, in := range r.GetInstances() {
					if in.GetStatus().GetInstanceState() == protos.InstanceStatus_instanceRunning && len(running) < 2 {
						running = append(running, &protos.ExternalGrpcNode{ProviderID: in.GetId()})
					}
				}
				if len(running) == 0 {
					continue
				}
				if _, err := h.cl.NodeGroupDeleteNodes(ctx(t), &protos.NodeGroupDeleteNodesRequest{Id: g1, Nodes: running}); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	mw.Wait()
	close(stop)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	h.expire()
	if got, want := h.target(t, g1), int32(len(fake.Reservations())); got != want {
		t.Fatalf("target %d, live reservations %d", got, want)
	}
}
