package reservations

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// encodedNodeGroups is what GET /api/v1/nodegroups answered before the
// cache: json.Marshal of NodeGroups.
func (e *env) encodedNodeGroups(cn string, all bool) []byte {
	e.t.Helper()
	v, err := e.s.NodeGroups(e.ctx, cn, all)
	if err != nil {
		e.t.Fatal(err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}

func (e *env) nodeGroupsBody(cn string, all bool) []byte {
	e.t.Helper()
	b, err := e.s.NodeGroupsBody(e.ctx, cn, all)
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}

// withoutServedAt drops the servedAt value, which moves with the clock.
func withoutServedAt(t testing.TB, b []byte) string {
	t.Helper()
	ev, ok := splitServedAt(b)
	if !ok {
		t.Fatalf("no servedAt in %s", b)
	}
	return string(ev.prefix) + "…" + string(ev.suffix)
}

// TestNodeGroupsBodyIsNeverStale changes, one at a time, each input of a
// node-group view — advertisement, price, sharing rule, consumer policy,
// reservation and its phase, release, staleness, the return within the
// disconnect grace — with every consumer's encoded view cached before each
// change, and checks that every body served after it is byte for byte
// json.Marshal of the view built anew, and that the views the change
// concerns did change.
func TestNodeGroupsBodyIsNeverStale(t *testing.T) {
	e := newEnv(t, withGrace(5*time.Minute))
	p2 := []func(*api.AdvertisementRequest){priced("0.02", "0.01")}
	p1n, p2n := 4, 4
	policy := map[string]api.PlacementType{"c1": api.PlacementStandard, "c2": api.PlacementPrice}
	beat := func(c string) {
		if _, err := e.s.Heartbeat(e.ctx, c, api.HeartbeatRequest{ClusterID: c, LiqoClusterID: "liqo-" + c,
			Placement: &api.Placement{Type: policy[c]}}); err != nil {
			t.Fatal(err)
		}
	}
	alive := func() { // what keeps everyone fresh while time passes
		e.advertise("p2", p2n, p2...)
		beat("c1")
		beat("c2")
	}
	steps := []struct {
		name string
		do   func()
		// changes lists the consumers whose view (all or not) must change.
		changes []string
	}{
		{"providers advertise", func() {
			e.advertise("p1", p1n, priced("0.01", "0.01"))
			e.advertise("p2", p2n, p2...)
		}, []string{"c1", "c2", "nobody"}},
		{"consumers heartbeat with their policies", func() {
			beat("c1")
			beat("c2")
		}, []string{"c2"}},
		{"an unchanged advertisement", func() { e.advertise("p2", p2n, p2...) }, nil},
		{"an unchanged heartbeat", func() { beat("c2") }, nil},
		{"a reservation", func() { e.reserve("c1", "r1", "p1") }, []string{"c1"}},
		{"its peering", func() {
			if e.phase("r1") == api.PhaseGeneratingKubeconfig {
				e.result("p1", gkName("c1", "p1"), kubeconfig("kubeconfig-of-c1-p1"))
			}
			e.result("c1", peerName("r1"), peered("vn-r1"))
		}, nil},
		{"a price change", func() {
			p2 = []func(*api.AdvertisementRequest){priced("0.03", "0.01")}
			e.advertise("p2", p2n, p2...)
		}, []string{"c1", "c2", "nobody"}},
		{"a policy change", func() {
			policy["c1"] = api.PlacementPrice
			beat("c1")
		}, []string{"c1"}},
		{"a sharing rule", func() {
			e.advertise("p2", p2n, append(p2, func(r *api.AdvertisementRequest) {
				r.Sharing = &api.Sharing{DeniedConsumers: []string{"c2"}}
			})...)
		}, []string{"c2"}},
		{"the sharing rule lifted", func() { e.advertise("p2", p2n, p2...) }, []string{"c2"}},
		{"more capacity", func() {
			p1n = 6
			e.advertise("p1", p1n, priced("0.01", "0.01"))
		}, []string{"c1", "c2"}},
		{"p1 goes stale", func() {
			e.clk.Step(DefaultProviderStaleAfter)
			alive()
			e.s.sweep(e.ctx)
		}, []string{"c1", "c2"}},
		{"time passes in the grace", func() {
			e.clk.Step(time.Minute)
			alive()
			e.s.sweep(e.ctx)
		}, nil},
		{"p1 back within the grace", func() {
			e.advertise("p1", p1n, priced("0.01", "0.01"))
			e.s.sweep(e.ctx)
		}, []string{"c1", "c2"}},
		{"the release", func() {
			if _, err := e.s.Release(e.ctx, "c1", "r1", 0); err != nil {
				t.Fatal(err)
			}
		}, nil},
		{"the unpeer", func() {
			for _, in := range e.instructions("c1") {
				e.result("c1", in.ID, ok())
			}
		}, []string{"c1"}},
	}
	consumers := []string{"c1", "c2", "nobody"}
	last := map[string]string{}
	for _, st := range steps {
		// Cache every view at the current state first.
		for _, cn := range consumers {
			for _, all := range []bool{false, true} {
				e.nodeGroupsBody(cn, all)
			}
		}
		st.do()
		for _, cn := range consumers {
			for _, all := range []bool{false, true} {
				got, want := e.nodeGroupsBody(cn, all), e.encodedNodeGroups(cn, all)
				if !bytes.Equal(got, want) {
					t.Fatalf("after %s, %s all=%v:\nserved %s\nfresh  %s", st.name, cn, all, got, want)
				}
			}
			view := withoutServedAt(t, e.nodeGroupsBody(cn, false)) + withoutServedAt(t, e.nodeGroupsBody(cn, true))
			changed := view != last[cn]
			last[cn] = view
			want := false
			for _, c := range st.changes {
				want = want || c == cn
			}
			if want && !changed {
				t.Fatalf("after %s, the view of %s did not change: %s", st.name, cn, view)
			}
		}
	}
}

// TestNodeGroupsBodyServedAtMoves checks that a cached body carries the
// time it is served at, not the time it was encoded at.
func TestNodeGroupsBodyServedAtMoves(t *testing.T) {
	e := newEnv(t)
	e.advertise("p1", 4)
	e.beat("c1", nil)
	first := e.nodeGroupsBody("c1", false)
	e.clk.Step(3 * time.Second)
	again := e.nodeGroupsBody("c1", false)
	if bytes.Equal(first, again) {
		t.Fatalf("the same body 3 s later: %s", again)
	}
	var v api.NodeGroupListResponse
	if err := json.Unmarshal(again, &v); err != nil {
		t.Fatal(err)
	}
	if !v.ServedAt.Time.Equal(e.clk.Now().Truncate(time.Second)) {
		t.Fatalf("servedAt %v, want %v", v.ServedAt, e.clk.Now())
	}
	if want := e.encodedNodeGroups("c1", false); !bytes.Equal(again, want) {
		t.Fatalf("served %s\nfresh  %s", again, want)
	}
}

// TestNodeGroupsBodyConcurrent serves views while advertisements change
// them (run with -race): every body served after a change has returned
// shows it.
func TestNodeGroupsBodyConcurrent(t *testing.T) {
	e := newEnv(t)
	e.beat("c1", nil)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := e.s.NodeGroupsBody(e.ctx, "c1", false); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	for n := 1; n <= 50; n++ {
		e.advertise("p1", n)
		var v api.NodeGroupListResponse
		if err := json.Unmarshal(e.nodeGroupsBody("c1", false), &v); err != nil {
			t.Fatal(err)
		}
		if len(v.NodeGroups) != 1 || v.NodeGroups[0].MaxSize != int32(n) {
			t.Fatalf("after advertising %d chunks the view shows %+v", n, v.NodeGroups)
		}
	}
	close(stop)
	wg.Wait()
}

// TestViewCacheBudget checks the byte budget: entries of earlier
// generations make room, current ones are never dropped, and a view that
// does not fit is not kept.
func TestViewCacheBudget(t *testing.T) {
	entry := func(gen uint64, n int) encodedView {
		return encodedView{gen: gen, prefix: bytes.Repeat([]byte("x"), n)}
	}
	size := entry(0, 100).size()
	var c viewCache
	for i := range 3 {
		c.put(viewCacheKey{cn: fmt.Sprint("c", i)}, entry(1, 100), 3*size)
	}
	if len(c.entries) != 3 || c.bytes != 3*size {
		t.Fatalf("%d entries, %d bytes; want 3, %d", len(c.entries), c.bytes, 3*size)
	}
	c.put(viewCacheKey{cn: "c3"}, entry(1, 100), 3*size)
	if _, ok := c.get(viewCacheKey{cn: "c3"}, 1); ok {
		t.Fatal("an entry beyond the budget was kept")
	}
	c.put(viewCacheKey{cn: "c3"}, entry(2, 100), 3*size)
	if _, ok := c.get(viewCacheKey{cn: "c3"}, 2); !ok || len(c.entries) != 1 || c.bytes != size {
		t.Fatalf("the new generation's entry: kept %v, %d entries, %d bytes; want it alone", ok, len(c.entries), c.bytes)
	}
	c.put(viewCacheKey{cn: "c3"}, entry(1, 100), 3*size)
	if _, ok := c.get(viewCacheKey{cn: "c3"}, 2); !ok {
		t.Fatal("an older view replaced a newer one")
	}
}
