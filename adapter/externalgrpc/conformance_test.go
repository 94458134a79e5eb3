package externalgrpc_test

import (
	"context"
	"testing"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/adapter/localapi"
	"github.com/federation-autoscaler/federation-autoscaler/adapter/localapi/localapitest"
	"github.com/federation-autoscaler/federation-autoscaler/mocks/autoscaler"
)

// world is the fake agent plus a peering controller standing in for the
// broker, the provider and Liqo: reservations peer into Running nodes,
// except those told to hang or fail; released ones are unpeered.
type world struct {
	t    *testing.T
	h    *harness
	fake *localapitest.Agent
	ca   *autoscaler.Core
	hang map[string]bool
	// hangNext makes the next new reservations hang.
	hangNext int
	failNext int
	known    map[string]bool
	loops    int
}

func newWorld(t *testing.T, gen autoscaler.Generation, fake *localapitest.Agent) *world {
	h := newHarness(t, fake)
	w := &world{t: t, h: h, fake: fake, hang: map[string]bool{}, known: map[string]bool{}}
	w.ca = &autoscaler.Core{
		Client:               h.cl,
		Now:                  h.clk.Now,
		Generation:           gen,
		MaxNodeProvisionTime: 10 * time.Second,
		Cluster: autoscaler.ClusterFunc(func(context.Context) ([]autoscaler.Node, error) {
			var nodes []autoscaler.Node
			// A control-plane node that is not ours.
			nodes = append(nodes, autoscaler.Node{Name: "control-plane", ProviderID: "kind://docker/consumer/control-plane"})
			for _, vn := range fake.VirtualNodes() {
				if vn.Phase == localapi.PhaseRunning || vn.Phase == localapi.PhaseDeleting && vn.ProviderID != "" {
					nodes = append(nodes, autoscaler.Node{Name: vn.Name, ProviderID: vn.ProviderID})
				}
			}
			return nodes, nil
		}),
	}
	return w
}

// settle plays the rest of the federation between two CA loops.
func (w *world) settle() {
	live := map[string]bool{}
	for _, r := range w.fake.Reservations() {
		live[r.ID] = true
		if w.known[r.ID] {
			continue
		}
		w.known[r.ID] = true
		switch {
		case w.failNext > 0:
			w.failNext--
			w.fake.FailPeering(r.ID, "provider unreachable during peering")
		case w.hangNext > 0:
			w.hangNext--
			w.hang[r.ID] = true
		}
	}
	for _, r := range w.fake.Reservations() {
		if vn, ok := w.fake.VirtualNode(r.ID); ok && vn.Phase != localapi.PhaseCreating {
			continue
		}
		if !w.hang[r.ID] {
			w.fake.Peer(r.ID, localapi.PhaseRunning)
		}
	}
	// Released reservations are unpeered: their virtual nodes go away.
	for _, vn := range w.fake.VirtualNodes() {
		if !live[vn.ReservationID] {
			w.fake.Forget(vn.ReservationID)
		}
	}
}

// loop runs one CA loop (2 s scan interval) and settles the world.
func (w *world) loop(want int) *autoscaler.Loop {
	w.t.Helper()
	w.loops++
	before := w.fake.Calls(localapitest.RouteNodeGroups)
	l, err := w.ca.RunOnce(context.Background(), want)
	if err != nil {
		w.t.Fatalf("loop %d: %v", w.loops, err)
	}
	for id, err := range l.Rejected {
		w.t.Fatalf("loop %d: IncreaseSize %s rejected although the view was steady: %v", w.loops, id, err)
	}
	mutations := len(l.Increased) + len(l.Deleted) + len(l.Decreased)
	if got := w.fake.Calls(localapitest.RouteNodeGroups) - before; got > 1+mutations {
		w.t.Fatalf("loop %d: %d agent round-trips for %d mutations; want at most one per loop plus one per mutation", w.loops, got, mutations)
	}
	w.settle()
	w.h.clk.Step(2 * time.Second)
	return l
}

// until runs loops until cond holds on a loop's view, at most n loops.
func (w *world) until(want, n int, what string, cond func(*autoscaler.Loop) bool) *autoscaler.Loop {
	w.t.Helper()
	for range n {
		if l := w.loop(want); cond(l) {
			return l
		}
	}
	w.t.Fatalf("after %d loops: %s never held", n, what)
	return nil
}

func (w *world) perProvider() map[string]int {
	out := map[string]int{}
	for _, r := range w.fake.Reservations() {
		out[r.Request.ProviderClusterID]++
	}
	return out
}

func steady(n int) func(*autoscaler.Loop) bool {
	return func(l *autoscaler.Loop) bool { return l.Steady(n) }
}

func TestConformanceFakeAgent(t *testing.T) {
	for _, gen := range []struct {
		name string
		g    autoscaler.Generation
	}{{"CA 1.32", autoscaler.CA132}, {"CA 1.35", autoscaler.CA135}} {
		t.Run(gen.name, func(t *testing.T) {
			fake := localapitest.New(stdGroup("p1", 3, 0), stdGroup("p2", 6, 0))
			w := newWorld(t, gen.g, fake)

			// 1. Scale from zero to 5 across two providers.
			w.until(5, 10, "5 registered nodes", steady(5))
			if pp := w.perProvider(); pp["p1"] != 3 || pp["p2"] != 2 {
				t.Fatalf("reservations per provider = %v, want p1:3 p2:2", pp)
			}
			if w.ca.Calls["NodeGroupTemplateNodeInfo"] == 0 {
				t.Fatal("scale-from-zero never used a template")
			}

			// 2. An instance that never registers is deleted through its
			// fake node after the provision time, then replaced.
			w.hangNext = 1
			w.until(6, 12, "the unregistered instance deleted", func(l *autoscaler.Loop) bool { return len(l.Deleted["ng-p2-standard"]) == 1 })
			if got := len(w.fake.Reservations()); got != 5 {
				t.Fatalf("%d live reservations after deleting the unregistered one, want 5", got)
			}
			w.until(6, 10, "6 registered nodes", steady(6))

			// 3. A failed peering is reported with errorInfo and deleted.
			w.failNext = 1
			w.until(7, 6, "the failed instance deleted", func(l *autoscaler.Loop) bool { return len(l.Deleted["ng-p2-standard"]) == 1 })
			w.until(7, 10, "7 registered nodes", steady(7))

			// 4. A stale instance view: the target is fixed with a negative
			// DecreaseTargetSize that only drops the unregistered one.
			w.ca.SkipUnregisteredRemoval = true
			w.hangNext = 1
			w.until(8, 12, "DecreaseTargetSize", func(l *autoscaler.Loop) bool { return l.Decreased["ng-p2-standard"] == -1 })
			w.ca.SkipUnregisteredRemoval = false
			w.until(7, 6, "7 registered nodes again", steady(7))

			// 5. Scale down to zero.
			w.until(0, 10, "zero nodes", steady(0))
			if n := len(w.fake.Reservations()); n != 0 {
				t.Fatalf("%d reservations left after scale-down to zero", n)
			}
		})
	}
}

func TestConformanceProviderLost(t *testing.T) {
	fake := localapitest.New(stdGroup("p1", 3, 0), stdGroup("p2", 3, 0))
	w := newWorld(t, autoscaler.CA135, fake)
	w.until(4, 10, "4 registered nodes", steady(4))
	if pp := w.perProvider(); pp["p1"] != 3 || pp["p2"] != 1 {
		t.Fatalf("per provider = %v", pp)
	}
	// p2 disappears from the view and its virtual node fails.
	fake.RemoveProvider("p2")
	for _, vn := range fake.VirtualNodes() {
		if vn.ProviderClusterID == "p2" {
			fake.FailPeering(vn.ReservationID, "provider p2 lost")
		}
	}
	w.h.expire()
	w.until(4, 6, "the lost provider's node deleted", func(l *autoscaler.Loop) bool { return len(l.Deleted["ng-p2-standard"]) == 1 })
	// Nothing can grow (p1 full, p2 gone) until a new provider appears.
	l := w.loop(4)
	if len(l.Increased) != 0 {
		t.Fatalf("grew with no room: %v", l.Increased)
	}
	if _, ok := l.Groups["ng-p2-standard"]; ok {
		t.Fatal("the lost provider's group is still listed after its nodes are gone")
	}
	fake.SetGroups(stdGroup("p1", 3, 3), stdGroup("p3", 2, 0))
	w.until(4, 10, "4 registered nodes after the new provider joined", steady(4))
	if pp := w.perProvider(); pp["p1"] != 3 || pp["p3"] != 1 || pp["p2"] != 0 {
		t.Fatalf("per provider = %v", pp)
	}
}
