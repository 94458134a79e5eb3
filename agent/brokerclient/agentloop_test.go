package brokerclient

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/utils/clock"

	"github.com/federation-autoscaler/federation-autoscaler/agent/health"
	"github.com/federation-autoscaler/federation-autoscaler/deploy/testpoll"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// TestAgentLoopWiring: an agent's loop shows a running handler on the
// tracker, counts its run in the metrics and calls Changed once the
// tracker no longer lists it; without a tracker, metrics or Changed it
// runs all the same.
func TestAgentLoopWiring(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		tracked, metered, cbk bool
	}{
		{"tracker, metrics and Changed", true, true, true},
		{"nothing but the handlers", false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var w AgentLoop
			if tc.tracked {
				w.Tracker = health.NewTracker(clock.RealClock{}, time.Minute)
			}
			if tc.metered {
				w.Metrics = health.NewMetrics(prometheus.NewRegistry())
			}
			var mu sync.Mutex
			var changed [][]string // running handlers the tracker listed at each Changed
			if tc.cbk {
				w.Changed = func() {
					mu.Lock()
					defer mu.Unlock()
					changed = append(changed, w.Tracker.Report().RunningHandlers)
				}
			}
			running := make(chan struct{})
			release := make(chan struct{})
			w.Source = newFakeSource(instr("peer-a", "a", api.KindPeer))
			w.Handlers = map[api.InstructionKind]Handler{
				api.KindPeer: func(ctx context.Context, _ api.InstructionView) (*api.InstructionPayload, error) {
					close(running)
					select {
					case <-release:
						return &api.InstructionPayload{Kind: api.PayloadPeer}, nil
					case <-ctx.Done():
						return nil, ctx.Err()
					}
				},
			}
			l, err := NewAgentLoop(LoopConfig{PollInterval: 5 * time.Millisecond, BusyInterval: 5 * time.Millisecond}, w)
			if err != nil {
				t.Fatal(err)
			}
			runLoop(t, l)
			<-running
			if tc.tracked {
				if got := w.Tracker.Report().RunningHandlers; !slices.Equal(got, []string{"peer-a"}) {
					t.Errorf("running handlers while peer-a runs: %v, want [peer-a]", got)
				}
			}
			close(release)
			src := w.Source.(*fakeSource)
			testpoll.Until(t, 10*time.Second, "peer-a's result", func() bool { return len(src.result("peer-a")) == 1 })
			if tc.metered {
				if got := testutil.ToFloat64(w.Metrics.Instructions.WithLabelValues(string(api.KindPeer), api.ResultSucceeded)); got != 1 {
					t.Errorf("instructions counted: %v, want 1", got)
				}
			}
			if tc.cbk {
				mu.Lock()
				defer mu.Unlock()
				if len(changed) != 1 || len(changed[0]) != 0 {
					t.Errorf("Changed saw running handlers %v, want one call after peer-a ended ([[]])", changed)
				}
			}
		})
	}
}
