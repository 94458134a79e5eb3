// Package choice is the consumer agent's selector for the Choice placement
// policy: the broker lists every provider the consumer may borrow from with
// room, and the selector asks a local language model (Ollama's
// /api/generate or an OpenAI-compatible /v1/chat/completions) to rank them
// against the consumer's intent in plain words. The answer is untrusted
// input: strict JSON, ids only from the broker's list, each still listed
// and with room; the first valid entry wins. Anything invalid, slow or
// unreachable falls back to the broker's Weighted order, recorded as such.
// The model is asked at most once per (candidate set, intent, endpoint);
// answers are cached and every decision is kept in a bounded audit log.
package choice

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// Defaults of a Selector (docs/placement.md, "Choice").
const (
	// DefaultAuditSize is how many decisions the audit log keeps.
	DefaultAuditSize = 64
	// DefaultMaxCandidates is how many providers the model is shown at
	// most: the best by the fallback order; the others cannot be chosen.
	DefaultMaxCandidates = 32
	// cacheSize is how many (candidate set, intent, endpoint) answers are
	// kept, so a set that flaps (a provider filling and freeing) does not
	// ask again.
	cacheSize = 16
	// maxKeptText bounds the prompt and the raw answer kept per decision.
	maxKeptText = 16 << 10
)

// Config configures a Selector.
type Config struct {
	// HTTP sends the model calls (default: a client without a timeout of
	// its own; each call has the endpoint's).
	HTTP   Doer
	Clock  clock.PassiveClock
	Logger *slog.Logger
	// Registerer receives the selector's metrics (nil: none).
	Registerer prometheus.Registerer
	// AuditSize and MaxCandidates: 0 takes the defaults.
	AuditSize, MaxCandidates int
}

// Input is one selection: the consumer's intent and location, the broker's
// Choice view, the RTTs the agent measured (ms by provider, may be nil) and
// the model endpoint; Unusable, when set, says why the endpoint cannot be
// used (its API key Secret is missing, ...): the fallback applies.
type Input struct {
	Intent   string
	Location *Location
	View     api.NodeGroupListResponse
	RTTs     map[string]float64
	Endpoint Endpoint
	Unusable error
}

// Pick is the provider chosen for one chunk type.
type Pick struct {
	Type     api.ChunkType `json:"type"`
	Provider string        `json:"provider"`
	// ByModel is true when the model's ranking chose it, false when the
	// fallback order did.
	ByModel bool `json:"byModel"`
}

// Decision is one entry of the audit log.
type Decision struct {
	At     time.Time `json:"at"`
	Intent string    `json:"intent"`
	// Model names the endpoint (API, model, URL); never the API key.
	Model      string   `json:"model,omitempty"`
	Candidates []string `json:"candidates"`
	// Prompt and RawAnswer are what was sent and received (cut to 16 KiB);
	// empty for a decision taken from a cached answer (Cached).
	Prompt    string `json:"prompt,omitempty"`
	RawAnswer string `json:"rawAnswer,omitempty"`
	Cached    bool   `json:"cached,omitempty"`
	// Ranking is the valid part of the model's ranking, in its order;
	// Rejected the entries that were not used.
	Ranking  []string    `json:"ranking,omitempty"`
	Rejected []Rejection `json:"rejected,omitempty"`
	// Reason is the model's own account of its ranking: what it says, not
	// proof of anything.
	Reason string `json:"reason,omitempty"`
	// Fallback is true when the model's answer was not used at all, and
	// Why says why (no endpoint, unreachable, timeout, invalid answer, no
	// valid entry).
	Fallback bool   `json:"fallback"`
	Why      string `json:"why,omitempty"`
	// Latency is the model call's duration (0 when none was made).
	Latency time.Duration `json:"latency"`
	Picks   []Pick        `json:"picks"`
}

// Chosen returns the pick of chunk type t.
func (d Decision) Chosen(t api.ChunkType) (Pick, bool) {
	for _, p := range d.Picks {
		if p.Type == t {
			return p, true
		}
	}
	return Pick{}, false
}

// answer is a cached outcome of one model call (or of having no model).
type answer struct {
	key      string
	ranking  []string
	rejected []Rejection
	reason   string
	why      string // "" when the ranking is usable
	at       time.Time
}

// Selector chooses providers under the Choice policy. It is safe for
// concurrent use; concurrent selections wait for one model call.
type Selector struct {
	cfg Config
	log *slog.Logger

	callMu sync.Mutex // one model call at a time

	mu      sync.Mutex
	cache   []answer // most recent last, at most cacheSize
	audit   []Decision
	last    *Decision
	lastSig string

	calls     *prometheus.CounterVec
	latency   prometheus.Histogram
	decisions *prometheus.CounterVec
	rejected  *prometheus.CounterVec
}

// New builds a Selector and registers its metrics.
func New(cfg Config) (*Selector, error) {
	if cfg.HTTP == nil {
		cfg.HTTP = &http.Client{}
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.AuditSize <= 0 {
		cfg.AuditSize = DefaultAuditSize
	}
	if cfg.MaxCandidates <= 0 {
		cfg.MaxCandidates = DefaultMaxCandidates
	}
	s := &Selector{
		cfg: cfg,
		log: cfg.Logger,
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fa_agent_choice_model_calls_total",
			Help: "Model calls of the Choice selector by result (ok, invalid, timeout, error).",
		}, []string{"result"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "fa_agent_choice_model_call_seconds",
			Help:    "Duration of the Choice selector's model calls.",
			Buckets: []float64{.05, .1, .25, .5, 1, 2, 5, 10, 20, 30, 60, 120},
		}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fa_agent_choice_decisions_total",
			Help: "Choice decisions recorded, by source (model, fallback).",
		}, []string{"source"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fa_agent_choice_rejected_entries_total",
			Help: "Entries of model rankings that were not used, by reason (unknown, duplicate).",
		}, []string{"reason"}),
	}
	if cfg.Registerer != nil {
		for _, c := range []prometheus.Collector{s.calls, s.latency, s.decisions, s.rejected} {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("registering the Choice selector's metrics: %w", err)
			}
		}
	}
	return s, nil
}

// Select decides, for every chunk type of a Choice view, which provider
// the consumer grows on. The model is called only when no answer is cached
// for (candidate set, intent, endpoint); the picks are then made from the
// cached ranking against the view's current room, so a provider that
// filled up is passed over without asking again.
func (s *Selector) Select(ctx context.Context, in Input) Decision {
	cands := candidates(in.View, in.Location, in.RTTs)
	cands = s.shortlist(cands)
	ids := make([]string, len(cands))
	listed := make(map[string]bool, len(cands))
	for i, c := range cands {
		ids[i] = c.ID
		listed[c.ID] = true
	}
	key := cacheKey(in.Intent, in.Endpoint, in.Unusable, ids)
	ans, fresh, prompt, raw, took := s.answerFor(ctx, key, in, cands, listed)

	d := Decision{
		At: s.cfg.Clock.Now(), Intent: in.Intent, Model: describe(in.Endpoint), Candidates: ids,
		Ranking: ans.ranking, Rejected: ans.rejected, Reason: ans.reason,
		Fallback: ans.why != "", Why: ans.why, Cached: !fresh, Latency: took,
	}
	if fresh {
		d.Prompt, d.RawAnswer = cut(prompt), cut(raw)
	}
	d.Picks = picks(cands, ans.ranking)
	s.record(d, fresh)
	return d
}

// answerFor returns the cached answer for key, or asks the model (one
// call at a time; a concurrent selection for the same key waits and uses
// the answer). fresh is true when this call made the decision.
func (s *Selector) answerFor(ctx context.Context, key string, in Input, cands []Candidate, listed map[string]bool) (ans answer, fresh bool, prompt, raw string, took time.Duration) {
	if a, ok := s.cached(key); ok {
		return a, false, "", "", 0
	}
	s.callMu.Lock()
	defer s.callMu.Unlock()
	if a, ok := s.cached(key); ok {
		return a, false, "", "", 0
	}
	ans = answer{key: key, at: s.cfg.Clock.Now()}
	switch {
	case !slices.ContainsFunc(cands, hasRoom):
		ans.why = "no provider has room for this cluster"
	case in.Unusable != nil:
		ans.why = "the model endpoint is unusable: " + in.Unusable.Error()
	case !in.Endpoint.Configured():
		ans.why = "no model endpoint is configured"
	default:
		if err := in.Endpoint.Validate(); err != nil {
			ans.why = "the model endpoint is unusable: " + err.Error()
			break
		}
		prompt = BuildPrompt(in.Intent, in.Location, cands)
		start := s.cfg.Clock.Now()
		text, err := ask(ctx, s.cfg.HTTP, in.Endpoint, prompt)
		took = s.cfg.Clock.Since(start)
		s.latency.Observe(took.Seconds())
		raw = text
		ans.why = s.interpret(&ans, text, err, listed)
	}
	if ctx.Err() != nil && ans.why != "" {
		// The caller gave up (not the model's fault): decide by the
		// fallback now, but do not cache it, so the next selection asks.
		return ans, true, prompt, raw, took
	}
	s.mu.Lock()
	s.cache = append(s.cache, ans)
	if len(s.cache) > cacheSize {
		s.cache = slices.Delete(s.cache, 0, len(s.cache)-cacheSize)
	}
	s.mu.Unlock()
	return ans, true, prompt, raw, took
}

// interpret validates the model's text into ans and returns why it is not
// usable ("" when it is), counting the call's result.
func (s *Selector) interpret(ans *answer, text string, err error, listed map[string]bool) string {
	if err != nil {
		switch {
		case errors.Is(err, errTimeout):
			s.calls.WithLabelValues("timeout").Inc()
		case errors.Is(err, ErrInvalidAnswer):
			s.calls.WithLabelValues("invalid").Inc()
		default:
			s.calls.WithLabelValues("error").Inc()
		}
		return err.Error()
	}
	a, err := ParseAnswer(text)
	if err != nil {
		s.calls.WithLabelValues("invalid").Inc()
		return err.Error()
	}
	ans.reason = a.Reason
	ans.ranking, ans.rejected = Validate(a.Ranking, listed)
	for _, r := range ans.rejected {
		label := "unknown"
		if r.Reason == RejectDuplicate {
			label = "duplicate"
		}
		s.rejected.WithLabelValues(label).Inc()
	}
	if len(ans.ranking) == 0 {
		s.calls.WithLabelValues("invalid").Inc()
		return "no entry of the model's ranking names a listed provider"
	}
	s.calls.WithLabelValues("ok").Inc()
	return ""
}

func (s *Selector) cached(key string) (answer, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.cache) - 1; i >= 0; i-- {
		if s.cache[i].key == key {
			return s.cache[i], true
		}
	}
	return answer{}, false
}

// shortlist keeps at most MaxCandidates providers, the best by the
// fallback order (each provider's best score over its chunk types), then
// sorts them by id.
func (s *Selector) shortlist(cands []Candidate) []Candidate {
	if len(cands) <= s.cfg.MaxCandidates {
		return cands
	}
	best := func(c Candidate) (float64, bool) {
		v, ok := 0.0, false
		for _, o := range c.Chunks {
			if o.hasScore && (!ok || o.score < v) {
				v, ok = o.score, true
			}
		}
		return v, ok
	}
	slices.SortStableFunc(cands, func(a, b Candidate) int {
		va, oka := best(a)
		vb, okb := best(b)
		switch {
		case oka != okb:
			if oka {
				return -1
			}
			return 1
		case va != vb:
			return cmp.Compare(va, vb)
		}
		return cmp.Compare(a.ID, b.ID)
	})
	cands = cands[:s.cfg.MaxCandidates]
	slices.SortFunc(cands, func(a, b Candidate) int { return cmp.Compare(a.ID, b.ID) })
	return cands
}

func hasRoom(c Candidate) bool {
	for _, o := range c.Chunks {
		if o.FreeChunks > 0 {
			return true
		}
	}
	return false
}

// picks chooses per chunk type: the first entry of the valid ranking with
// room for the type; else the fallback order (the broker's Weighted score,
// lowest first, providers without a score last, ties by id).
func picks(cands []Candidate, ranking []string) []Pick {
	byID := make(map[string]Candidate, len(cands))
	types := map[api.ChunkType]bool{}
	for _, c := range cands {
		byID[c.ID] = c
		for t, o := range c.Chunks {
			if o.FreeChunks > 0 {
				types[t] = true
			}
		}
	}
	var out []Pick
	for _, t := range slices.Sorted(maps.Keys(types)) {
		if p, ok := modelPick(byID, ranking, t); ok {
			out = append(out, p)
			continue
		}
		if p, ok := fallbackPick(cands, t); ok {
			out = append(out, p)
		}
	}
	return out
}

func modelPick(byID map[string]Candidate, ranking []string, t api.ChunkType) (Pick, bool) {
	for _, id := range ranking {
		if o, ok := byID[id].Chunks[t]; ok && o.FreeChunks > 0 {
			return Pick{Type: t, Provider: id, ByModel: true}, true
		}
	}
	return Pick{}, false
}

func fallbackPick(cands []Candidate, t api.ChunkType) (Pick, bool) {
	var best *Candidate
	better := func(a, b Offer, aID, bID string) bool {
		switch {
		case a.hasScore != b.hasScore:
			return a.hasScore
		case a.score != b.score:
			return a.score < b.score
		}
		return aID < bID
	}
	for i := range cands {
		o, ok := cands[i].Chunks[t]
		if !ok || o.FreeChunks == 0 {
			continue
		}
		if best == nil || better(o, best.Chunks[t], cands[i].ID, best.ID) {
			best = &cands[i]
		}
	}
	if best == nil {
		return Pick{}, false
	}
	return Pick{Type: t, Provider: best.ID}, true
}

// Mask makes only the picked group of each chunk type growable: every
// other group with room gets maxSize = currentReserved. It never raises a
// maxSize, so nothing outside the broker's view, and nothing the broker
// masked, can become growable.
func Mask(view *api.NodeGroupListResponse, d Decision) {
	for i := range view.NodeGroups {
		g := &view.NodeGroups[i]
		if p, ok := d.Chosen(g.Type); ok && p.Provider == g.ProviderClusterID {
			continue
		}
		g.MaxSize = min(g.MaxSize, g.CurrentReserved)
	}
}

// record appends d to the audit log when it decided afresh or its picks
// differ from the last decision's.
func (s *Selector) record(d Decision, fresh bool) {
	sig := fmt.Sprint(d.Picks, d.Fallback)
	s.mu.Lock()
	defer s.mu.Unlock()
	if !fresh && sig == s.lastSig {
		return
	}
	s.lastSig = sig
	if len(s.audit) == s.cfg.AuditSize {
		s.audit = slices.Delete(s.audit, 0, 1)
	}
	s.audit = append(s.audit, d)
	s.last = &s.audit[len(s.audit)-1]
	source := "model"
	if d.Fallback {
		source = "fallback"
		s.log.Info("Choice: using the fallback order", "why", d.Why, "picks", d.Picks)
	} else {
		s.log.Info("Choice: the model's ranking chose", "picks", d.Picks, "cached", d.Cached)
	}
	s.decisions.WithLabelValues(source).Inc()
}

// Decisions returns the audit log, newest first.
func (s *Selector) Decisions() []Decision {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Decision, len(s.audit))
	for i, d := range s.audit {
		out[len(s.audit)-1-i] = d
	}
	return out
}

// Current returns the latest decision (false before the first).
func (s *Selector) Current() (Decision, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last == nil {
		return Decision{}, false
	}
	return *s.last, true
}

// cacheKey identifies (candidate set, intent, endpoint). The API key is
// part of it (a new key may work where the old one did not) but only
// hashed.
func cacheKey(intent string, e Endpoint, unusable error, ids []string) string {
	h := sha256.New()
	why := ""
	if unusable != nil {
		why = unusable.Error()
	}
	for _, s := range append([]string{intent, string(e.API), e.URL, e.Model, e.Timeout.String(), e.APIKey, why}, ids...) {
		fmt.Fprintf(h, "%d:%s;", len(s), s)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// describe names an endpoint for the audit log (never the API key).
func describe(e Endpoint) string {
	if !e.Configured() {
		return ""
	}
	return fmt.Sprintf("%s %s at %s", e.API, e.Model, e.URL)
}

func cut(s string) string {
	if len(s) <= maxKeptText {
		return s
	}
	return strings.ToValidUTF8(s[:maxKeptText], "") + "…"
}
