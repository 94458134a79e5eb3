package reservations

import (
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

func TestReserveEvaluationOrder(t *testing.T) {
	tests := []struct {
		name  string
		setup func(e *env)
		cn    string
		id    string
		req   api.ReservationRequest
		code  string
	}{
		{name: "chunkCount 0", req: api.ReservationRequest{ProviderClusterID: "p1", ChunkType: api.ChunkStandard}, code: api.CodeInvalidRequest},
		{name: "chunkCount 2", req: api.ReservationRequest{ProviderClusterID: "p1", ChunkCount: 2, ChunkType: api.ChunkStandard}, code: api.CodeInvalidRequest},
		{name: "bad chunk type", req: api.ReservationRequest{ProviderClusterID: "p1", ChunkCount: 1, ChunkType: "Standard"}, code: api.CodeInvalidRequest},
		{name: "missing provider", req: api.ReservationRequest{ChunkCount: 1, ChunkType: api.ChunkStandard}, code: api.CodeInvalidRequest},
		{name: "bad node group", req: api.ReservationRequest{ProviderClusterID: "p1", NodeGroupID: "ng-p1-gpu", ChunkCount: 1, ChunkType: api.ChunkStandard}, code: api.CodeInvalidRequest},
		{name: "bad id", id: "Not_DNS", req: stdReq("p1"), code: api.CodeInvalidRequest},
		{name: "bad id wins over missing heartbeat", cn: "nobody", id: "UPPER", req: stdReq("p1"), code: api.CodeInvalidRequest},
		{name: "no heartbeat", cn: "nobody", req: stdReq("p1"), code: api.CodePreconditionFailed},
		{name: "unknown provider", req: stdReq("p9"), code: api.CodeNotFound},
		{name: "chunk type not offered", req: api.ReservationRequest{ProviderClusterID: "p1", ChunkCount: 1, ChunkType: api.ChunkGPU}, code: api.CodeNotFound},
		{name: "stale provider", setup: func(e *env) {
			e.clk.Step(DefaultProviderStaleAfter)
			e.heartbeat("c1")
			e.s.sweep(e.ctx)
		}, req: stdReq("p1"), code: api.CodeServiceUnavailable},
		{name: "sharing denies", setup: func(e *env) {
			e.advertise("p1", 2, func(r *api.AdvertisementRequest) { r.Sharing = &api.Sharing{DeniedConsumers: []string{"c1"}} })
		}, req: stdReq("p1"), code: api.CodeForbidden},
		{name: "quota", setup: func(e *env) {
			e.advertise("p1", 2, func(r *api.AdvertisementRequest) { r.Sharing = &api.Sharing{MaxChunksPerConsumer: 1} })
			e.reserve("c1", "first", "p1")
		}, req: stdReq("p1"), code: api.CodeInsufficientCapacity},
		{name: "capacity", setup: func(e *env) {
			e.reserve("c1", "a", "p1")
			e.reserve("c1", "b", "p1")
		}, req: stdReq("p1"), code: api.CodeInsufficientCapacity},
		{name: "created", req: api.ReservationRequest{ProviderClusterID: "p1", NodeGroupID: "ng-p1-standard", ChunkCount: 1, ChunkType: api.ChunkStandard}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.advertise("p1", 2)
			e.heartbeat("c1")
			if tc.setup != nil {
				tc.setup(e)
			}
			cn, id := tc.cn, tc.id
			if cn == "" {
				cn = "c1"
			}
			if id == "" {
				id = "res-new"
			}
			resp, created, err := e.s.Reserve(e.ctx, cn, id, tc.req)
			if tc.code != "" {
				wantCode(t, err, tc.code)
				return
			}
			if err != nil || !created {
				t.Fatalf("created=%v err=%v", created, err)
			}
			if resp.ReservationID != id || resp.ConsumerLiqoClusterID != "liqo-c1" || resp.ProviderLiqoClusterID != "liqo-p1" || resp.NodeGroupID != "ng-p1-standard" {
				t.Fatalf("unexpected response %+v", resp)
			}
			if !resp.ExpiresAt.Time.Equal(t0.Add(DefaultReservationLease)) {
				t.Fatalf("expiresAt = %v, want the lease deadline", resp.ExpiresAt)
			}
		})
	}
}

func TestCapacityDetails(t *testing.T) {
	e := newEnv(t)
	e.advertise("p1", 1)
	e.heartbeat("c1")
	e.reserve("c1", "a", "p1")
	_, _, err := e.s.Reserve(e.ctx, "c1", "b", stdReq("p1"))
	wantCode(t, err, api.CodeInsufficientCapacity)
	d := err.(*api.Error).Details
	if d["available"] != int32(0) || d["requested"] != int32(1) {
		t.Fatalf("details = %v", d)
	}
}

// Bug #2: the replay lookup runs before every capacity/availability check.
func TestReplay(t *testing.T) {
	e := newEnv(t)
	e.advertise("p1", 1)
	e.heartbeat("c1")
	req := api.ReservationRequest{ProviderClusterID: "p1", ChunkCount: 1, ChunkType: api.ChunkStandard, Namespaces: []string{"a", "b"}}
	first, created, err := e.s.Reserve(e.ctx, "c1", "r1", req)
	if err != nil || !created {
		t.Fatal(created, err)
	}
	// The chunk is gone and the provider goes stale: a replay still answers 200.
	e.clk.Step(DefaultProviderStaleAfter)
	e.heartbeat("c1")
	e.s.sweep(e.ctx)
	replay := req
	replay.Namespaces = []string{"b", "a", "b"}
	got, created, err := e.s.Reserve(e.ctx, "c1", "r1", replay)
	if err != nil || created {
		t.Fatalf("replay: created=%v err=%v", created, err)
	}
	if got.ReservationID != first.ReservationID {
		t.Fatalf("replay returned %+v", got)
	}
	for name, tc := range map[string]struct {
		cn  string
		req api.ReservationRequest
	}{
		"other namespaces": {"c1", api.ReservationRequest{ProviderClusterID: "p1", ChunkCount: 1, ChunkType: api.ChunkStandard}},
		"other provider":   {"c1", stdReq("p2")},
		"other type":       {"c1", api.ReservationRequest{ProviderClusterID: "p1", ChunkCount: 1, ChunkType: api.ChunkGPU, Namespaces: []string{"a", "b"}}},
		"other consumer":   {"c2", req},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := e.s.Reserve(e.ctx, tc.cn, "r1", tc.req)
			wantCode(t, err, api.CodeConflict)
		})
	}
}

// Bug #1: 1000 concurrent attempts on 10 free chunks create exactly 10.
func TestReserveRace(t *testing.T) {
	e := newEnv(t)
	e.advertise("p1", 10)
	for i := range 10 {
		e.heartbeat(consumerName(i))
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[string]int{}
	for i := range 1000 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, created, err := e.s.Reserve(e.ctx, consumerName(i%10), "race-"+itoa(i), stdReq("p1"))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil && created:
				codes["created"]++
			default:
				codes[api.CodeOf(err)]++
			}
		}()
	}
	wg.Wait()
	if codes["created"] != 10 || codes[api.CodeInsufficientCapacity] != 990 {
		t.Fatalf("outcomes = %v, want 10 created and 990 InsufficientCapacity", codes)
	}
	if got := e.reserved("p1"); got != 10 {
		t.Fatalf("reserved = %d, want 10", got)
	}
	snap, err := e.s.Advertisement(e.ctx, "p1")
	if err != nil || snap.ReservedChunks != 10 || snap.AvailableChunks != 0 {
		t.Fatalf("snapshot = %+v, %v", snap, err)
	}
	e.restart()
	if got := e.reserved("p1"); got != 10 {
		t.Fatalf("reserved after restart = %d, want 10", got)
	}
	live := 0
	for i := range 10 {
		for _, ng := range e.idx.View(consumerName(i), true).NodeGroups {
			live += int(ng.CurrentReserved)
		}
	}
	if live != 10 {
		t.Fatalf("placement index holds %d live chunks after restart, want 10", live)
	}
}

func consumerName(i int) string { return "c" + itoa(i) }

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

// Bug #29: concurrent DELETEs never fail.
func TestConcurrentRelease(t *testing.T) {
	e := newEnv(t)
	e.advertise("p1", 2)
	e.heartbeat("c1")
	e.peer("c1", "r1", "p1")
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := e.s.Release(e.ctx, "c1", "r1", 0)
			if err == nil && resp.Status != api.PhaseUnpeering {
				err = api.Errorf("bad", "status %s", resp.Status)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestReleaseErrors(t *testing.T) {
	e := newEnv(t)
	e.advertise("p1", 2)
	e.heartbeat("c1")
	e.reserve("c1", "r1", "p1")
	_, err := e.s.Release(e.ctx, "c1", "nope", 0)
	wantCode(t, err, api.CodeNotFound)
	_, err = e.s.Release(e.ctx, "p1", "r1", 0)
	wantCode(t, err, api.CodeForbidden)
	_, err = e.s.Release(e.ctx, "c1", "r1", 3)
	wantCode(t, err, api.CodeNotImplemented)
	_, err = e.s.Release(e.ctx, "c1", "r1", -1)
	wantCode(t, err, api.CodeInvalidRequest)
	if _, err := e.s.Reservation(e.ctx, "p1", api.RoleProvider, "r1"); err != nil {
		t.Fatalf("provider may read: %v", err)
	}
	_, err = e.s.Reservation(e.ctx, "c2", api.RoleConsumer, "r1")
	wantCode(t, err, api.CodeForbidden)
	_, err = e.s.Reservation(e.ctx, "c1", api.RoleConsumer, "nope")
	wantCode(t, err, api.CodeNotFound)
}

func TestZeroChunkProvider(t *testing.T) {
	e := newEnv(t)
	e.advertise("p1", 0, func(r *api.AdvertisementRequest) { r.Resources = rl("1", "1Gi") })
	e.heartbeat("c1")
	_, _, err := e.s.Reserve(e.ctx, "c1", "r1", stdReq("p1"))
	wantCode(t, err, api.CodeInsufficientCapacity)
}

func TestGPUChunks(t *testing.T) {
	e := newEnv(t)
	res := rl("10", "20Gi")
	res["nvidia.com/gpu"] = resource.MustParse("2")
	resp := e.advertise("g1", 0, func(r *api.AdvertisementRequest) { r.Resources = res })
	if resp.ChunkCounts[api.ChunkGPU] != 2 || resp.ChunkCounts[api.ChunkStandard] != 1 || resp.ChunkCount != 1 {
		t.Fatalf("advertise response %+v", resp)
	}
	e.heartbeat("c1")
	gpu := api.ReservationRequest{ProviderClusterID: "g1", ChunkCount: 1, ChunkType: api.ChunkGPU}
	for _, id := range []string{"a", "b"} {
		if _, _, err := e.s.Reserve(e.ctx, "c1", id, gpu); err != nil {
			t.Fatal(err)
		}
	}
	_, _, err := e.s.Reserve(e.ctx, "c1", "c", gpu)
	wantCode(t, err, api.CodeInsufficientCapacity)
	e.reserve("c1", "s", "g1") // the standard leftover is independent
	e.result("g1", "gk.c1.g1", kubeconfig("K"))
	v := e.mustFind("c1", "peer-a")
	if q := v.ResourceSliceResources["nvidia.com/gpu"]; q.String() != "1" || v.NodeGroupID != "ng-g1-gpu" {
		t.Fatalf("gpu peer = %+v", v)
	}
}
