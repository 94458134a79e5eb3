// Package health serves an agent's /healthz, /readyz and /metrics and keeps
// the facts readiness is decided from: when the broker last answered, which
// instruction handlers are running, which optional inputs (geo, carbon,
// sharing configuration, …) are missing, and which operations keep failing
// (Streak).
package health

import (
	"encoding/json"
	"log/slog"
	"maps"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/utils/clock"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// DefaultHandlerGrace is how long a running handler keeps the agent ready
// while the broker is unreachable (reference §9.2: 15 min).
const DefaultHandlerGrace = 15 * time.Minute

// Tracker records what readiness is computed from. It is safe for
// concurrent use.
type Tracker struct {
	clock     clock.PassiveClock
	staleness time.Duration
	grace     time.Duration

	mu          sync.Mutex
	started     time.Time
	lastContact time.Time
	running     map[string]time.Time
	inputs      map[string]string
	streaks     []trackedStreak
}

type trackedStreak struct {
	s     *Streak
	gates bool
}

// NewStreak returns a streak (NewStreak) tracked on t (Track); t may be nil,
// then the streak only logs.
func (t *Tracker) NewStreak(name string, log *slog.Logger, clk clock.PassiveClock, gatesReadiness bool) *Streak {
	s := NewStreak(name, log, clk)
	if t != nil {
		t.Track(s, gatesReadiness)
	}
	return s
}

// Track lists s in the report while it is failing (Report.Failing). When
// gatesReadiness is set, a failing s also makes the agent not ready: used
// for the agent's own cluster (an agent that cannot read or write its
// Kubernetes objects cannot do its job), not for the broker, whose
// reachability is judged by the contact window and the handler grace.
func (t *Tracker) Track(s *Streak, gatesReadiness bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.streaks = append(t.streaks, trackedStreak{s: s, gates: gatesReadiness})
}

// NewTracker returns a Tracker. staleness is how long after the last broker
// answer the agent stays ready (consumer 30 s, provider 90 s in the
// reference).
func NewTracker(clk clock.PassiveClock, staleness time.Duration) *Tracker {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Tracker{clock: clk, staleness: staleness, grace: DefaultHandlerGrace, started: clk.Now(),
		running: map[string]time.Time{}, inputs: map[string]string{}}
}

// BrokerReached records that the broker answered (any status).
func (t *Tracker) BrokerReached() {
	t.mu.Lock()
	t.lastContact = t.clock.Now()
	t.mu.Unlock()
}

// HandlerStarted records a running instruction handler.
func (t *Tracker) HandlerStarted(id string) {
	t.mu.Lock()
	t.running[id] = t.clock.Now()
	t.mu.Unlock()
}

// HandlerFinished records the end of a handler.
func (t *Tracker) HandlerFinished(id string) {
	t.mu.Lock()
	delete(t.running, id)
	t.mu.Unlock()
}

// SetInput records the state of an optional input: err nil means available.
// Missing optional inputs never make the agent unready; they are listed.
func (t *Tracker) SetInput(name string, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err == nil {
		t.inputs[name] = "ok"
		return
	}
	t.inputs[name] = err.Error()
}

// Report is the body of /readyz.
type Report struct {
	Ready             bool              `json:"ready"`
	Reason            string            `json:"reason,omitempty"`
	LastBrokerContact *time.Time        `json:"lastBrokerContact,omitempty"`
	RunningHandlers   []string          `json:"runningHandlers,omitempty"`
	Inputs            map[string]string `json:"inputs,omitempty"`
	// Failing lists the operations failing repeatedly (see Streak).
	Failing []string `json:"failing,omitempty"`
}

// Report computes readiness now: ready while the broker answered within the
// staleness window, or while a handler started less than the grace period
// ago is still running (it is legitimately busy, e.g. a long peering), and
// no streak that gates readiness is failing.
func (t *Tracker) Report() Report {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.clock.Now()
	r := Report{Inputs: maps.Clone(t.inputs)}
	if !t.lastContact.IsZero() {
		lc := t.lastContact
		r.LastBrokerContact = &lc
	}
	for id, at := range t.running {
		r.RunningHandlers = append(r.RunningHandlers, id)
		if now.Sub(at) < t.grace {
			r.Ready = true
			r.Reason = "instruction handler running"
		}
	}
	sort.Strings(r.RunningHandlers)
	switch {
	case !t.lastContact.IsZero() && now.Sub(t.lastContact) <= t.staleness:
		r.Ready, r.Reason = true, ""
	case r.Ready:
	case t.lastContact.IsZero():
		r.Reason = "the broker has not answered yet"
	default:
		r.Reason = "the broker has not answered for " + now.Sub(t.lastContact).Round(time.Second).String()
	}
	for _, ts := range t.streaks {
		failing, why := ts.s.Failing()
		if !failing {
			continue
		}
		r.Failing = append(r.Failing, why)
		if ts.gates && r.Ready {
			r.Ready, r.Reason = false, why
		}
	}
	return r
}

// Handler serves /healthz (always 200 while the process serves), /readyz
// (200 or 503 with the Report) and /metrics from reg.
func Handler(t *Tracker, reg prometheus.Gatherer) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, api.HealthResponse{Status: "ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		r := t.Report()
		status := http.StatusOK
		if !r.Ready {
			status = http.StatusServiceUnavailable
		}
		writeJSON(w, status, r)
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	return mux
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// Metrics are the agent's Prometheus metrics.
type Metrics struct {
	BrokerCalls         *prometheus.HistogramVec
	Instructions        *prometheus.CounterVec
	InstructionDuration *prometheus.HistogramVec
	// Reports counts advertisements (provider) or heartbeats (consumer) by
	// outcome.
	Reports *prometheus.CounterVec
}

// NewMetrics registers the agent metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		BrokerCalls: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "fa_agent_broker_call_seconds", Help: "Broker API calls by route and final HTTP status (0 = unreachable), retries included.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"route", "status"}),
		Instructions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fa_agent_instructions_total", Help: "Instructions handled by kind and result status.",
		}, []string{"kind", "status"}),
		InstructionDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "fa_agent_instruction_seconds", Help: "Instruction handler duration by kind.",
			Buckets: []float64{.01, .05, .1, .5, 1, 5, 10, 30, 60, 300, 600},
		}, []string{"kind"}),
		Reports: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fa_agent_reports_total", Help: "Advertisements or heartbeats sent, by outcome (ok, error).",
		}, []string{"outcome"}),
	}
	reg.MustRegister(m.BrokerCalls, m.Instructions, m.InstructionDuration, m.Reports)
	return m
}
