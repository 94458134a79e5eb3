package brokerclient

import (
	"log/slog"
	"time"

	"k8s.io/utils/clock"

	"github.com/federation-autoscaler/federation-autoscaler/agent/health"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// AgentLoop is how an agent wires its instruction loop: the same for the
// provider and the consumer but for the handlers and what changes after
// one ran.
type AgentLoop struct {
	Source   InstructionSource
	Handlers map[api.InstructionKind]Handler
	Clock    clock.WithTicker
	Logger   *slog.Logger
	// Tracker follows the running handlers and, unless the tuning has a
	// PollStreak, the failed polls; Metrics counts and times the handler
	// runs. Either may be nil.
	Tracker *health.Tracker
	Metrics *health.Metrics
	// Changed, when set, runs after every handler, once Tracker and
	// Metrics have seen it end (what the agent shows changed).
	Changed func()
}

// NewAgentLoop is NewLoop for an agent: tuning (the agent's LoopConfig:
// intervals, retention, a PollStreak) wired as w says.
func NewAgentLoop(tuning LoopConfig, w AgentLoop) (*Loop, error) {
	cfg := tuning
	if cfg.PollStreak == nil {
		cfg.PollStreak = w.Tracker.NewStreak("Fetching instructions", w.Logger, w.Clock, false)
	}
	cfg.Source = w.Source
	cfg.Handlers = w.Handlers
	cfg.Clock = w.Clock
	cfg.Logger = w.Logger
	cfg.Hooks = w.hooks()
	return NewLoop(cfg)
}

// hooks report every handler run to the tracker and the metrics, then
// call Changed.
func (w AgentLoop) hooks() LoopHooks {
	return LoopHooks{
		HandlerStarted: func(id string, _ api.InstructionKind) {
			if w.Tracker != nil {
				w.Tracker.HandlerStarted(id)
			}
		},
		HandlerFinished: func(id string, kind api.InstructionKind, status string, d time.Duration) {
			if w.Tracker != nil {
				w.Tracker.HandlerFinished(id)
			}
			if w.Metrics != nil {
				w.Metrics.Instructions.WithLabelValues(string(kind), status).Inc()
				w.Metrics.InstructionDuration.WithLabelValues(string(kind)).Observe(d.Seconds())
			}
			if w.Changed != nil {
				w.Changed()
			}
		},
	}
}
