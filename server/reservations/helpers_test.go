package reservations

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/placement"
	"github.com/federation-autoscaler/federation-autoscaler/server/rest"
	"github.com/federation-autoscaler/federation-autoscaler/server/store"
	"github.com/federation-autoscaler/federation-autoscaler/server/store/bolt"
)

var _ rest.Broker = (*Service)(nil)

var t0 = time.Date(2026, 7, 22, 10, 0, 0, 0, time.UTC)

// countingStore wraps a store, counts Apply calls and can fail them.
type countingStore struct {
	store.Store
	applies atomic.Int64
	fail    atomic.Bool
}

func (c *countingStore) Apply(ctx context.Context, b []store.Mutation) error {
	c.applies.Add(1)
	if c.fail.Load() {
		return fmt.Errorf("injected failure")
	}
	return c.Store.Apply(ctx, b)
}

type env struct {
	t   testing.TB
	dir string
	clk *clocktesting.FakeClock
	st  *countingStore
	s   *Service
	cfg Config
	idx *placement.Index
	ctx context.Context
}

func newEnv(t testing.TB, mod ...func(*Config)) *env {
	t.Helper()
	e := &env{t: t, dir: t.TempDir(), clk: clocktesting.NewFakeClock(t0), ctx: context.Background()}
	for _, m := range mod {
		m(&e.cfg)
	}
	e.open()
	t.Cleanup(func() { _ = e.s.Close() })
	return e
}

func (e *env) open() {
	e.t.Helper()
	bs, err := bolt.Open(e.dir, bolt.Options{})
	if err != nil {
		e.t.Fatal(err)
	}
	e.st = &countingStore{Store: bs}
	cfg := e.cfg
	cfg.Store = e.st
	cfg.SpendStore = bs
	cfg.Clock = e.clk
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	e.idx = placement.NewIndex(placement.DefaultChunkConfig(), placement.WithClock(e.clk.Now))
	cfg.Placer = e.idx
	s, err := New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.s = s
}

// restart closes the service and its store and opens a new one on the same
// file.
func (e *env) restart() {
	e.t.Helper()
	if err := e.s.Close(); err != nil {
		e.t.Fatal(err)
	}
	e.open()
}

func rl(cpu, mem string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}
}

// advertise advertises provider p with n standard chunks.
func (e *env) advertise(p string, n int, mod ...func(*api.AdvertisementRequest)) api.AdvertisementResponse {
	e.t.Helper()
	req := api.AdvertisementRequest{ClusterID: p, LiqoClusterID: "liqo-" + p, Resources: rl(fmt.Sprint(2*n), fmt.Sprintf("%dGi", 4*n))}
	for _, m := range mod {
		m(&req)
	}
	resp, err := e.s.Advertise(e.ctx, p, req)
	if err != nil {
		e.t.Fatalf("advertise %s: %v", p, err)
	}
	return resp
}

func (e *env) heartbeat(c string, ids ...string) api.HeartbeatResponse {
	e.t.Helper()
	resp, err := e.s.Heartbeat(e.ctx, c, api.HeartbeatRequest{ClusterID: c, LiqoClusterID: "liqo-" + c, Reservations: ids})
	if err != nil {
		e.t.Fatalf("heartbeat %s: %v", c, err)
	}
	return resp
}

func stdReq(p string) api.ReservationRequest {
	return api.ReservationRequest{ProviderClusterID: p, ChunkCount: 1, ChunkType: api.ChunkStandard}
}

func (e *env) reserve(c, id, p string) api.ReservationResponse {
	e.t.Helper()
	resp, created, err := e.s.Reserve(e.ctx, c, id, stdReq(p))
	if err != nil || !created {
		e.t.Fatalf("reserve %s on %s by %s: created=%v err=%v", id, p, c, created, err)
	}
	return resp
}

func (e *env) phase(id string) api.Phase {
	e.t.Helper()
	e.s.mu.Lock()
	defer e.s.mu.Unlock()
	r, ok := e.s.st.reservations[id]
	if !ok {
		return ""
	}
	return r.Phase
}

// role is the role cn plays in the service: provider once it advertised,
// else consumer.
func (e *env) role(cn string) api.Role {
	e.s.mu.Lock()
	defer e.s.mu.Unlock()
	if _, ok := e.s.st.providers[cn]; ok {
		return api.RoleProvider
	}
	return api.RoleConsumer
}

func (e *env) instructions(cn string) []api.InstructionView {
	e.t.Helper()
	v, err := e.s.Instructions(e.ctx, cn, e.role(cn), 0)
	if err != nil {
		e.t.Fatal(err)
	}
	return v
}

func (e *env) find(cn, id string) (api.InstructionView, bool) {
	for _, v := range e.instructions(cn) {
		if v.ID == id {
			return v, true
		}
	}
	return api.InstructionView{}, false
}

func (e *env) mustFind(cn, id string) api.InstructionView {
	e.t.Helper()
	v, ok := e.find(cn, id)
	if !ok {
		e.t.Fatalf("instruction %s not delivered to %s; have %v", id, cn, ids(e.instructions(cn)))
	}
	return v
}

func ids(vs []api.InstructionView) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.ID
	}
	return out
}

func ok() api.InstructionResultRequest {
	return api.InstructionResultRequest{Status: api.ResultSucceeded}
}

func failed(msg string) api.InstructionResultRequest {
	return api.InstructionResultRequest{Status: api.ResultFailed, Error: &api.ErrorEnvelope{Code: "InternalError", Message: msg}}
}

func kubeconfig(k string) api.InstructionResultRequest {
	return api.InstructionResultRequest{Status: api.ResultSucceeded, Payload: &api.InstructionPayload{Kind: api.PayloadKubeconfig, Kubeconfig: k}}
}

func peered(names ...string) api.InstructionResultRequest {
	return api.InstructionResultRequest{Status: api.ResultSucceeded, Payload: &api.InstructionPayload{Kind: api.PayloadPeer, VirtualNodeNames: names}}
}

func (e *env) result(cn, id string, req api.InstructionResultRequest) {
	e.t.Helper()
	if err := e.s.PostResult(e.ctx, cn, e.role(cn), id, req); err != nil {
		e.t.Fatalf("result %s by %s: %v", id, cn, err)
	}
}

// peer drives reservation id of consumer c on provider p to Peered.
func (e *env) peer(c, id, p string) {
	e.t.Helper()
	e.reserve(c, id, p)
	if e.phase(id) == api.PhaseGeneratingKubeconfig {
		e.result(p, gkName(c, p), kubeconfig("kubeconfig-of-"+c+"-"+p))
	}
	e.result(c, peerName(id), peered("vn-"+id))
	if got := e.phase(id); got != api.PhasePeered {
		e.t.Fatalf("phase of %s = %s, want Peered", id, got)
	}
}

func (e *env) reserved(p string) int32 {
	e.s.mu.Lock()
	defer e.s.mu.Unlock()
	return e.s.st.reserved[ptKey{p, api.ChunkStandard}]
}

func wantCode(t testing.TB, err error, code string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %s", code)
	}
	if got := api.CodeOf(err); got != code {
		t.Fatalf("got %s (%v), want %s", got, err, code)
	}
}

func overviewJSON(t testing.TB, s *Service) string {
	t.Helper()
	ov, err := s.Overview(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ov.GeneratedAt = ov.GeneratedAt.Rfc3339Copy()
	for i := range ov.ProviderInstructions {
		ov.ProviderInstructions[i].LastDeliveredAt = nil // in memory only
	}
	for i := range ov.ReservationInstructions {
		ov.ReservationInstructions[i].LastDeliveredAt = nil
	}
	b, err := json.Marshal(ov)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var _ = strings.Contains
