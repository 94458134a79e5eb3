package web

import (
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/web/views"
)

// MaxEvents bounds the dashboard's events log: the newest this many
// finished instructions and ended reservations are kept (in memory, and
// stored with the history samples when the dashboard has a HistoryStore) and
// shown; older ones are dropped.
const MaxEvents = 100

// event is one thing that finished: a reservation that ended (Released,
// Failed, Expired), an instruction its agent carried out (enforced), a
// new re-evaluation decision for a consumer's held chunks, a move of a
// manual reservation that started, ended or was kept, or a consumer's
// budget nearly used, reached, or refusing a scale-up.
type event struct {
	key      string // "reservation/<id>", "instruction/<id>" or "reevaluation/<consumer>/<group>/<decision>/<target>/<at>"
	at       time.Time
	kind     string
	class    string
	consumer string
	provider string
	subject  string
	text     string
	// firstSeen keeps the time of the first record of the key (a state
	// seen by many samples is one event, at its start).
	firstSeen bool
}

// eventLog keeps the newest MaxEvents events, so they outlive the broker
// forgetting its terminal reservations (15 min) and enforced instructions
// (5 min). It is fed from the overview by the sampler and by every render.
// The events not yet written to the history store are marked unsaved; the
// sampler takes them with each stored sample, so the log survives a broker
// restart for as long as the history window keeps their sample.
type eventLog struct {
	mu      sync.Mutex
	max     int
	events  map[string]event
	unsaved map[string]bool
}

func newEventLog(limit int) *eventLog {
	return &eventLog{max: limit, events: map[string]event{}, unsaved: map[string]bool{}}
}

// storedEvent is an event as the history store keeps it.
type storedEvent struct {
	Key      string    `json:"k"`
	At       time.Time `json:"t"`
	Kind     string    `json:"kd"`
	Class    string    `json:"cl,omitempty"`
	Consumer string    `json:"c,omitempty"`
	Provider string    `json:"p,omitempty"`
	Subject  string    `json:"s,omitempty"`
	Text     string    `json:"x,omitempty"`
}

func (e event) stored() storedEvent {
	return storedEvent{Key: e.key, At: e.at, Kind: e.kind, Class: e.class, Consumer: e.consumer, Provider: e.provider, Subject: e.subject, Text: e.text}
}

func (s storedEvent) event() event {
	return event{key: s.Key, at: s.At, kind: s.Kind, class: s.Class, consumer: s.Consumer, provider: s.Provider, subject: s.Subject, text: s.Text}
}

func (e event) same(o event) bool {
	return e.key == o.key && e.at.Equal(o.at) && e.kind == o.kind && e.class == o.class &&
		e.consumer == o.consumer && e.provider == o.provider && e.subject == o.subject && e.text == o.text
}

// overviewEvents returns the finished things of an overview.
func overviewEvents(ov api.Overview) []event {
	var out []event
	for _, r := range ov.Reservations {
		if !r.Status.Terminal() {
			continue
		}
		at := r.CreatedAt.Time
		if r.TerminatedAt != nil {
			at = r.TerminatedAt.Time
		} else if n := len(r.History); n > 0 {
			at = r.History[n-1].At.Time
		}
		text := chunksLabel(r.ChunkCount, r.ChunkType)
		if r.Message != "" {
			text += ": " + r.Message
		}
		out = append(out, event{
			key: "reservation/" + r.ReservationID, at: at, kind: "reservation " + string(r.Status), class: phaseClass(r.Status),
			consumer: r.ConsumerClusterID, provider: r.ProviderClusterID, subject: r.ReservationID, text: text,
		})
	}
	for _, l := range [][]api.OverviewInstruction{ov.ProviderInstructions, ov.ReservationInstructions} {
		for _, in := range l {
			if !in.Enforced {
				continue
			}
			at := time.Time{}
			switch {
			case in.LastUpdateTime != nil:
				at = in.LastUpdateTime.Time
			case in.IssuedAt != nil:
				at = in.IssuedAt.Time
			}
			consumer, provider := in.ConsumerClusterID, in.ProviderClusterID
			if in.Kind == api.KindGenerateKubeconfig && provider == "" {
				provider = in.TargetClusterID
			}
			text := fmt.Sprintf("on %s after %d attempt(s)", in.TargetClusterID, in.Attempts)
			if in.Message != "" {
				text += ": " + in.Message
			}
			out = append(out, event{
				key: "instruction/" + in.ID, at: at, kind: string(in.Kind) + " done", class: "ok",
				consumer: consumer, provider: provider, subject: in.ReservationID, text: text,
			})
		}
	}
	out = append(out, budgetEvents(ov.GeneratedAt.Time, ov.Consumers)...)
	out = append(out, reevaluationEvents(ov.Consumers)...)
	return append(out, migrationEvents(ov.Consumers)...)
}

// reevaluationEvents are the consumers' current re-evaluation decisions,
// one event per decision reached (a decision kept over many runs is one
// event).
func reevaluationEvents(cs []api.OverviewConsumer) []event {
	var out []event
	for _, c := range cs {
		for _, d := range c.Reevaluations {
			class := "ok"
			if d.Decision == api.DecisionMove {
				class = "warn"
			}
			out = append(out, event{
				key: "reevaluation/" + c.ClusterID + "/" + d.NodeGroupID + "/" + d.Decision + "/" + d.Target + "/" + d.DecidedAt.UTC().Format(time.RFC3339Nano),
				at:  d.DecidedAt.Time, kind: "re-evaluation " + d.Decision, class: class,
				consumer: c.ClusterID, provider: d.ProviderClusterID, subject: d.NodeGroupID,
				text: chunksLabel(d.Chunks, d.ChunkType) + ": " + d.Reason,
			})
		}
	}
	return out
}

// record merges the overview's events into the log and drops the oldest
// beyond max.
func (l *eventLog) record(ov api.Overview) {
	evs := overviewEvents(ov)
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range evs {
		if old, ok := l.events[e.key]; ok {
			if e.firstSeen {
				e.at = old.at
			}
			if old.same(e) {
				continue
			}
		}
		l.events[e.key] = e
		l.unsaved[e.key] = true
	}
	l.trimLocked()
}

// trimLocked drops the oldest events beyond max.
func (l *eventLog) trimLocked() {
	if len(l.events) <= l.max {
		return
	}
	all := l.sortedLocked()
	for _, e := range all[l.max:] {
		delete(l.events, e.key)
		delete(l.unsaved, e.key)
	}
}

// takeUnsaved returns the events not yet stored and marks them stored.
func (l *eventLog) takeUnsaved() []event {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]event, 0, len(l.unsaved))
	for k := range l.unsaved {
		out = append(out, l.events[k])
	}
	clear(l.unsaved)
	return out
}

// requeue marks events whose store write failed as unsaved again (those
// still in the log).
func (l *eventLog) requeue(evs []event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range evs {
		if _, ok := l.events[e.key]; ok {
			l.unsaved[e.key] = true
		}
	}
}

// restore puts stored events (oldest record first) back into the log.
func (l *eventLog) restore(evs []event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range evs {
		l.events[e.key] = e
	}
	l.trimLocked()
}

// snapshot returns the events newest first.
func (l *eventLog) snapshot() []event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sortedLocked()
}

func (l *eventLog) sortedLocked() []event {
	out := make([]event, 0, len(l.events))
	for _, e := range l.events {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].at.Equal(out[j].at) {
			return out[i].at.After(out[j].at)
		}
		return out[i].key < out[j].key
	})
	return out
}

// eventRows renders events, and the consumers and providers they name
// (the filters' suggestions).
func eventRows(evs []event) (rows []views.EventRow, consumers, providers []string) {
	seenC, seenP := map[string]bool{}, map[string]bool{}
	for _, e := range evs {
		rows = append(rows, views.EventRow{
			At: clockTime(e.at), Kind: e.kind, Class: e.class, Consumer: e.consumer, Provider: e.provider, Subject: e.subject, Text: e.text,
		})
		if e.consumer != "" && !seenC[e.consumer] {
			seenC[e.consumer] = true
			consumers = append(consumers, e.consumer)
		}
		if e.provider != "" && !seenP[e.provider] {
			seenP[e.provider] = true
			providers = append(providers, e.provider)
		}
	}
	sort.Strings(consumers)
	sort.Strings(providers)
	return rows, consumers, providers
}
