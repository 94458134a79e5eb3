package brokerclient

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/federation-autoscaler/federation-autoscaler/deploy/testpoll"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// fakeSource serves a fixed instruction list until results arrive, like a
// broker: an instruction stays listed until a result marks it enforced.
type fakeSource struct {
	mu        sync.Mutex
	pending   map[string]api.InstructionView
	results   map[string][]api.InstructionResultRequest
	failPosts int // the next failPosts result posts fail with a 503
	polls     int
}

func newFakeSource(ins ...api.InstructionView) *fakeSource {
	s := &fakeSource{pending: map[string]api.InstructionView{}, results: map[string][]api.InstructionResultRequest{}}
	for _, in := range ins {
		s.pending[in.ID] = in
	}
	return s
}

func (s *fakeSource) Instructions(ctx context.Context, _ time.Duration) ([]api.InstructionView, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.polls++
	out := make([]api.InstructionView, 0, len(s.pending))
	for _, in := range s.pending {
		out = append(out, in)
	}
	return out, false, nil
}

func (s *fakeSource) PostResult(_ context.Context, id string, req api.InstructionResultRequest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failPosts > 0 {
		s.failPosts--
		return &Error{Status: 503, Code: api.CodeServiceUnavailable, Message: "down"}
	}
	s.results[id] = append(s.results[id], req)
	delete(s.pending, id)
	return nil
}

func (s *fakeSource) result(id string) []api.InstructionResultRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]api.InstructionResultRequest(nil), s.results[id]...)
}

func instr(id, res string, kind api.InstructionKind) api.InstructionView {
	return api.InstructionView{ID: id, ReservationID: res, Kind: kind, IssuedAt: metav1.NewTime(time.Unix(1000, 0))}
}

func startLoop(t *testing.T, src InstructionSource, h map[api.InstructionKind]Handler) *Loop {
	t.Helper()
	l, err := NewLoop(LoopConfig{Source: src, Handlers: h, PollInterval: 5 * time.Millisecond, BusyInterval: 5 * time.Millisecond, ResultRetryInterval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return runLoop(t, l)
}

// runLoop runs l until the test ends.
func runLoop(t *testing.T, l *Loop) *Loop {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = l.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return l
}

func TestSlowInstructionDoesNotBlockOthers(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	runs := map[string]int{}
	src := newFakeSource(instr("peer-a", "a", api.KindPeer), instr("peer-b", "b", api.KindPeer))
	h := map[api.InstructionKind]Handler{
		api.KindPeer: func(ctx context.Context, in api.InstructionView) (*api.InstructionPayload, error) {
			mu.Lock()
			runs[in.ID]++
			mu.Unlock()
			if in.ReservationID == "a" {
				select {
				case <-release:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			return &api.InstructionPayload{Kind: api.PayloadPeer, VirtualNodeNames: []string{"vn-" + in.ReservationID}}, nil
		},
	}
	startLoop(t, src, h)
	testpoll.Until(t, 10*time.Second, "peer-b result", func() bool { return len(src.result("peer-b")) == 1 })
	if got := src.result("peer-a"); len(got) != 0 {
		t.Fatalf("peer-a finished early: %+v", got)
	}
	// peer-a is redelivered on every poll while it runs; it must run once.
	testpoll.Until(t, 10*time.Second, "several polls", func() bool { src.mu.Lock(); defer src.mu.Unlock(); return src.polls > 5 })
	close(release)
	testpoll.Until(t, 10*time.Second, "peer-a result", func() bool { return len(src.result("peer-a")) == 1 })
	mu.Lock()
	defer mu.Unlock()
	if runs["peer-a"] != 1 || runs["peer-b"] != 1 {
		t.Errorf("runs = %v, want each once", runs)
	}
	if r := src.result("peer-a")[0]; r.Status != api.ResultSucceeded || r.Payload.VirtualNodeNames[0] != "vn-a" {
		t.Errorf("peer-a result = %+v", r)
	}
}

func TestFailedAndUnknownInstructionsGetFailedResults(t *testing.T) {
	src := newFakeSource(instr("peer-x", "x", api.KindPeer), instr("rec-1", "y", api.KindReconcile), instr("peer-z", "z", api.KindPeer))
	h := map[api.InstructionKind]Handler{
		api.KindPeer: func(ctx context.Context, in api.InstructionView) (*api.InstructionPayload, error) {
			if in.ID == "peer-z" {
				panic("boom")
			}
			return nil, errors.New("liqoctl peer: exit status 1")
		},
	}
	startLoop(t, src, h)
	testpoll.Until(t, 10*time.Second, "three results", func() bool {
		return len(src.result("peer-x")) == 1 && len(src.result("rec-1")) == 1 && len(src.result("peer-z")) == 1
	})
	tests := []struct{ id, code string }{
		{"peer-x", api.CodeInternalError}, {"rec-1", api.CodeInvalidRequest}, {"peer-z", api.CodeInternalError},
	}
	for _, tc := range tests {
		r := src.result(tc.id)[0]
		if r.Status != api.ResultFailed || r.Error == nil || r.Error.Code != tc.code || r.Error.Message == "" {
			t.Errorf("%s: result %+v, want Failed/%s", tc.id, r, tc.code)
		}
	}
}

func TestFailedResultPostIsRetriedWithoutRerunning(t *testing.T) {
	src := newFakeSource(instr("gk-c-p", "r1", api.KindGenerateKubeconfig))
	src.failPosts = 6 // more than one poll's worth
	var mu sync.Mutex
	runs := 0
	h := map[api.InstructionKind]Handler{
		api.KindGenerateKubeconfig: func(ctx context.Context, in api.InstructionView) (*api.InstructionPayload, error) {
			mu.Lock()
			runs++
			mu.Unlock()
			return &api.InstructionPayload{Kind: api.PayloadKubeconfig, Kubeconfig: "kc"}, nil
		},
	}
	l := startLoop(t, src, h)
	testpoll.Until(t, 10*time.Second, "result posted", func() bool { return len(src.result("gk-c-p")) == 1 })
	mu.Lock()
	defer mu.Unlock()
	if runs != 1 {
		t.Errorf("handler ran %d times, want 1", runs)
	}
	if res, _ := l.Pending(); res != 0 {
		t.Errorf("pending results = %d", res)
	}
}

func TestRearmedSharedInstructionRunsAgain(t *testing.T) {
	src := newFakeSource()
	var mu sync.Mutex
	runs := map[string]int{}
	h := map[api.InstructionKind]Handler{
		api.KindGenerateKubeconfig: func(ctx context.Context, in api.InstructionView) (*api.InstructionPayload, error) {
			mu.Lock()
			runs[in.ReservationID]++
			mu.Unlock()
			return &api.InstructionPayload{Kind: api.PayloadKubeconfig, Kubeconfig: "kc"}, nil
		},
	}
	l := startLoop(t, src, h)
	first := instr("gk-c-p", "r1", api.KindGenerateKubeconfig)
	l.Submit(context.Background(), []api.InstructionView{first})
	testpoll.Until(t, 10*time.Second, "first result", func() bool { return len(src.result("gk-c-p")) == 1 })
	l.Submit(context.Background(), []api.InstructionView{first}) // redelivery: re-post, no re-run
	testpoll.Until(t, 10*time.Second, "re-posted result", func() bool { return len(src.result("gk-c-p")) == 2 })
	second := instr("gk-c-p", "r2", api.KindGenerateKubeconfig)
	second.IssuedAt = metav1.NewTime(time.Unix(2000, 0))
	l.Submit(context.Background(), []api.InstructionView{second})
	testpoll.Until(t, 10*time.Second, "re-armed result", func() bool { return len(src.result("gk-c-p")) == 3 })
	mu.Lock()
	defer mu.Unlock()
	if runs["r1"] != 1 || runs["r2"] != 1 {
		t.Errorf("runs = %v", runs)
	}
}

// longSource is fakeSource announcing long polls: like the broker, it
// answers at once while anything is pending and otherwise waits.
type longSource struct {
	*fakeSource
	wake chan struct{}
}

func (s *longSource) Instructions(ctx context.Context, wait time.Duration) ([]api.InstructionView, bool, error) {
	ins, _, _ := s.fakeSource.Instructions(ctx, wait)
	if len(ins) > 0 {
		return ins, true, nil
	}
	select {
	case <-ctx.Done():
		return nil, true, ctx.Err()
	case <-s.wake:
		ins, _, _ = s.fakeSource.Instructions(ctx, wait)
		return ins, true, nil
	}
}

func (s *longSource) add(in api.InstructionView) {
	s.mu.Lock()
	s.pending[in.ID] = in
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// TestBusyPauseEndsWhenAResultIsPosted: while a handler runs the broker
// keeps answering with it; the loop pauses, but a posted result ends the
// pause, so the next instruction is not held for the busy interval (here an
// hour: the test would time out).
func TestBusyPauseEndsWhenAResultIsPosted(t *testing.T) {
	src := &longSource{fakeSource: newFakeSource(), wake: make(chan struct{}, 1)}
	release := make(chan struct{})
	h := map[api.InstructionKind]Handler{
		api.KindPeer: func(ctx context.Context, in api.InstructionView) (*api.InstructionPayload, error) {
			if in.ID == "peer-1" {
				<-release
			}
			return &api.InstructionPayload{Kind: api.PayloadPeer}, nil
		},
	}
	l, err := NewLoop(LoopConfig{Source: src, Handlers: h, BusyInterval: time.Hour, PollInterval: time.Hour, ResultRetryInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = l.Run(ctx) }()
	defer func() { cancel(); <-done }()
	src.add(instr("peer-1", "r1", api.KindPeer))
	testpoll.Until(t, 10*time.Second, "peer-1 running and re-listed", func() bool { src.mu.Lock(); defer src.mu.Unlock(); return src.polls >= 2 })
	close(release)
	testpoll.Until(t, 10*time.Second, "peer-1 result", func() bool { return len(src.result("peer-1")) == 1 })
	src.add(instr("peer-2", "r2", api.KindPeer))
	testpoll.Until(t, 10*time.Second, "peer-2 result without waiting for the busy interval", func() bool { return len(src.result("peer-2")) == 1 })
}
