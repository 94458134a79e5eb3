package brokerclient

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/federation-autoscaler/federation-autoscaler/agent/health"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// Handler executes one instruction and returns the payload of a Succeeded
// result. Handlers must be idempotent: an instruction may be delivered again
// after an agent restart. An error becomes a Failed result with code
// InternalError unless it carries an *api.Error, whose code is used.
type Handler func(ctx context.Context, in api.InstructionView) (*api.InstructionPayload, error)

// InstructionSource is what the loop needs from the broker (Client
// implements it).
type InstructionSource interface {
	Instructions(ctx context.Context, wait time.Duration) ([]api.InstructionView, bool, error)
	PostResult(ctx context.Context, id string, req api.InstructionResultRequest) error
}

// LoopHooks are optional observers of the loop (health and metrics).
type LoopHooks struct {
	// HandlerStarted and HandlerFinished bracket every handler run.
	HandlerStarted  func(id string, kind api.InstructionKind)
	HandlerFinished func(id string, kind api.InstructionKind, status string, d time.Duration)
	// PollFailed is called when fetching instructions failed.
	PollFailed func(err error)
}

// LoopConfig configures a Loop.
type LoopConfig struct {
	Source   InstructionSource
	Handlers map[api.InstructionKind]Handler
	// PollInterval is the pause between plain polls and after a failed poll
	// (default 5 s, reference §9.2).
	PollInterval time.Duration
	// LongPollWait is how long a long poll may be held (default 30 s).
	LongPollWait time.Duration
	// BusyInterval is the pause after a poll that brought nothing new: the
	// broker answers a long poll at once while any instruction is still
	// un-enforced, so this bounds the poll rate while handlers run
	// (default 1 s).
	BusyInterval time.Duration
	// ResultRetention is how long an outcome is remembered after it was
	// posted, so a redelivered instruction gets the same result again instead
	// of a second run (default 10 min, twice the broker's 5 min GC of
	// enforced instructions).
	ResultRetention time.Duration
	// ResultRetryInterval is the pause between attempts to post a result
	// that could not be delivered (default 2 s).
	ResultRetryInterval time.Duration
	Clock               clock.WithTicker
	Logger              *slog.Logger
	Hooks               LoopHooks
	// PollStreak follows failed polls (default: a streak of its own that
	// only logs).
	PollStreak *health.Streak
}

// Loop fetches instructions and runs them: concurrently across
// reservations, in arrival order within one reservation, never the same
// delivery twice at once, with one result posted for each.
type Loop struct {
	cfg LoopConfig

	mu      sync.Mutex
	entries map[string]*entry   // by delivery key
	queues  map[string][]*entry // by reservation
	active  map[string]bool     // reservation has a worker
	wake    chan struct{}       // a result is waiting to be posted
	// progress is signalled when a result was posted: the next poll can
	// bring new work.
	progress chan struct{}
	wg       sync.WaitGroup // the retrier, workers and posters
}

type entryState int

const (
	stateQueued entryState = iota
	stateRunning
	stateDone
)

type entry struct {
	key    string
	in     api.InstructionView
	state  entryState
	result api.InstructionResultRequest
	posted bool
	inPost bool
	doneAt time.Time
	// postFailures counts failed posts of the result.
	postFailures int
}

// NewLoop validates cfg and returns a Loop.
func NewLoop(cfg LoopConfig) (*Loop, error) {
	if cfg.Source == nil {
		return nil, errors.New("instruction loop: no instruction source")
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 5 * time.Second
	}
	if cfg.LongPollWait <= 0 {
		cfg.LongPollWait = 30 * time.Second
	}
	if cfg.BusyInterval <= 0 {
		cfg.BusyInterval = time.Second
	}
	if cfg.ResultRetention <= 0 {
		cfg.ResultRetention = 10 * time.Minute
	}
	if cfg.ResultRetryInterval <= 0 {
		cfg.ResultRetryInterval = 2 * time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.PollStreak == nil {
		cfg.PollStreak = health.NewStreak("Fetching instructions", cfg.Logger, cfg.Clock)
	}
	return &Loop{
		cfg:      cfg,
		entries:  map[string]*entry{},
		queues:   map[string][]*entry{},
		active:   map[string]bool{},
		wake:     make(chan struct{}, 1),
		progress: make(chan struct{}, 1),
	}, nil
}

// deliveryKey identifies one delivery of an instruction. A shared provider
// instruction (gk-<c>-<p>) is re-armed under the same id for a new cycle with
// a new issuedAt and reservation; that is a new delivery to run.
func deliveryKey(in api.InstructionView) string {
	return in.ID + "|" + in.ReservationID + "|" + in.IssuedAt.UTC().Format(time.RFC3339Nano)
}

// Run polls the broker until ctx ends, then waits for running handlers (which
// see ctx cancelled) to return.
func (l *Loop) Run(ctx context.Context) error {
	defer l.wg.Wait()
	retry := l.cfg.Clock.NewTicker(l.cfg.ResultRetryInterval)
	defer retry.Stop()
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case <-retry.C():
				l.flush(ctx)
			case <-l.wake:
				l.flush(ctx)
			}
		}
	}()
	for ctx.Err() == nil {
		l.gc()
		ins, long, err := l.cfg.Source.Instructions(ctx, l.cfg.LongPollWait)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			// A warning once the polls keep failing; each retry is debug.
			l.cfg.PollStreak.Failed(ctx, err)
			if l.cfg.Hooks.PollFailed != nil {
				l.cfg.Hooks.PollFailed(err)
			}
			l.pause(ctx, l.cfg.PollInterval)
			continue
		}
		l.cfg.PollStreak.Succeeded(ctx)
		fresh := l.Submit(ctx, ins)
		switch {
		case !long && !l.longPollNow():
			l.pause(ctx, l.cfg.PollInterval)
		case fresh == 0 && len(ins) > 0:
			// Everything listed is already running or waiting for its
			// result to be taken; the broker would answer again at once.
			// Wait for a result to be posted (then the list shrinks) or
			// the busy interval.
			l.pauseUntilProgress(ctx, l.cfg.BusyInterval)
		}
	}
	return nil
}

// longPollNow reports whether the source now supports long polls (the
// plain poll that just ended may have revealed it).
func (l *Loop) longPollNow() bool {
	lp, ok := l.cfg.Source.(interface{ LongPollSupported() bool })
	return ok && lp.LongPollSupported()
}

func (l *Loop) pause(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-l.cfg.Clock.After(d):
	}
}

func (l *Loop) pauseUntilProgress(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-l.progress:
	case <-l.cfg.Clock.After(d):
	}
}

// Submit hands instructions to the loop (the poll, or a provider's
// advertisement answer). It returns how many were new. Deliveries already
// queued or running are skipped; finished ones get their result posted again.
func (l *Loop) Submit(ctx context.Context, ins []api.InstructionView) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ctx.Err() != nil {
		return 0
	}
	fresh := 0
	for _, in := range ins {
		key := deliveryKey(in)
		if e, ok := l.entries[key]; ok {
			if e.state == stateDone && e.posted {
				// The broker delivered it again: it did not record our
				// result (restart, lost answer). Post the same outcome.
				e.posted = false
				l.kick()
			}
			continue
		}
		fresh++
		e := &entry{key: key, in: in}
		l.entries[key] = e
		q := in.ReservationID
		if q == "" {
			q = in.ID
		}
		l.queues[q] = append(l.queues[q], e)
		if !l.active[q] {
			l.active[q] = true
			l.wg.Add(1)
			go l.worker(ctx, q)
		}
	}
	return fresh
}

func (l *Loop) kick() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// worker drains the queue of one reservation.
func (l *Loop) worker(ctx context.Context, q string) {
	defer l.wg.Done()
	for {
		l.mu.Lock()
		if len(l.queues[q]) == 0 || ctx.Err() != nil {
			delete(l.queues, q)
			delete(l.active, q)
			l.mu.Unlock()
			return
		}
		e := l.queues[q][0]
		l.queues[q] = l.queues[q][1:]
		e.state = stateRunning
		l.mu.Unlock()

		res, ok := l.run(ctx, e.in)
		l.mu.Lock()
		if !ok {
			// Interrupted by shutdown: forget it; the broker delivers it again.
			delete(l.entries, e.key)
			l.mu.Unlock()
			continue
		}
		e.state, e.result, e.doneAt = stateDone, res, l.cfg.Clock.Now()
		e.inPost = true
		l.mu.Unlock()
		l.post(ctx, e)
	}
}

// run executes the handler of in; ok is false when ctx ended meanwhile.
func (l *Loop) run(ctx context.Context, in api.InstructionView) (res api.InstructionResultRequest, ok bool) {
	log := l.cfg.Logger.With("instruction", in.ID, "kind", in.Kind, "reservation", in.ReservationID)
	start := l.cfg.Clock.Now()
	if l.cfg.Hooks.HandlerStarted != nil {
		l.cfg.Hooks.HandlerStarted(in.ID, in.Kind)
	}
	defer func() {
		if l.cfg.Hooks.HandlerFinished != nil {
			l.cfg.Hooks.HandlerFinished(in.ID, in.Kind, res.Status, l.cfg.Clock.Since(start))
		}
	}()
	h, found := l.cfg.Handlers[in.Kind]
	if !found {
		log.Warn("No handler for instruction kind")
		return failed(api.CodeInvalidRequest, fmt.Sprintf("this agent has no handler for instruction kind %q", in.Kind)), true
	}
	payload, err := safeCall(ctx, h, in)
	if err != nil && ctx.Err() != nil {
		return res, false
	}
	if err != nil {
		log.Warn("Instruction failed", "err", err)
		code := api.CodeInternalError
		var ae *api.Error
		if errors.As(err, &ae) {
			code = ae.Code
		}
		return failed(code, err.Error()), true
	}
	log.Info("Instruction succeeded", "duration", l.cfg.Clock.Since(start))
	return api.InstructionResultRequest{Status: api.ResultSucceeded, Payload: payload}, true
}

func failed(code, msg string) api.InstructionResultRequest {
	if msg == "" {
		msg = "failed"
	}
	return api.InstructionResultRequest{Status: api.ResultFailed, Error: &api.ErrorEnvelope{Code: code, Message: msg}}
}

// safeCall runs h, turning a panic into an error.
func safeCall(ctx context.Context, h Handler, in api.InstructionView) (p *api.InstructionPayload, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("handler panicked: %v\n%s", r, debug.Stack())
		}
	}()
	return h(ctx, in)
}

// post delivers e's result once (the client retries transient failures);
// on failure the result stays pending for flush.
func (l *Loop) post(ctx context.Context, e *entry) {
	err := l.cfg.Source.PostResult(ctx, e.in.ID, e.result)
	l.mu.Lock()
	defer l.mu.Unlock()
	e.inPost = false
	switch status := StatusOf(err); {
	case err == nil:
		select {
		case l.progress <- struct{}{}:
		default:
		}
		if e.postFailures > 0 {
			l.cfg.Logger.Info("Posted a delayed instruction result", "instruction", e.in.ID, "attempts", e.postFailures+1)
		}
		e.posted = true
	case status == http.StatusNotFound || status == http.StatusForbidden || status == http.StatusBadRequest:
		// The broker will never take it (GC'd, not ours, or refused):
		// keep the outcome for redeliveries but stop retrying.
		l.cfg.Logger.Warn("Broker refused instruction result; dropping it", "instruction", e.in.ID, "err", err)
		e.posted = true
	default:
		if ctx.Err() == nil {
			// Warn once per result; the retries every few seconds during a
			// broker outage go to debug.
			lvl := slog.LevelDebug
			if e.postFailures == 0 {
				lvl = slog.LevelWarn
			}
			l.cfg.Logger.Log(ctx, lvl, "Posting instruction result failed; will retry", "instruction", e.in.ID, "err", err)
		}
		e.postFailures++
	}
}

// flush retries every result not yet posted.
func (l *Loop) flush(ctx context.Context) {
	l.mu.Lock()
	var todo []*entry
	for _, e := range l.entries {
		if e.state == stateDone && !e.posted && !e.inPost {
			e.inPost = true
			todo = append(todo, e)
		}
	}
	l.mu.Unlock()
	for _, e := range todo {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			l.post(ctx, e)
		}()
	}
}

// gc forgets posted outcomes older than the retention.
func (l *Loop) gc() {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.cfg.Clock.Now()
	for k, e := range l.entries {
		if e.state == stateDone && e.posted && now.Sub(e.doneAt) > l.cfg.ResultRetention {
			delete(l.entries, k)
		}
	}
}

// Pending returns how many results are waiting to be posted and how many
// handlers are queued or running.
func (l *Loop) Pending() (results, handlers int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.entries {
		switch {
		case e.state == stateDone && !e.posted:
			results++
		case e.state != stateDone:
			handlers++
		}
	}
	return results, handlers
}
