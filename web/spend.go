package web

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/web/views"
)

// DefaultHistoryWindow is how far back the charts and the stored history
// reach by default (the broker's --history-window).
const DefaultHistoryWindow = time.Hour

// HistoryStore keeps the dashboard's history across restarts (the broker's
// bbolt store implements it, in a bucket of its own). AppendHistory stores
// one sample and drops those older than keepAfter; LoadHistory replays
// them oldest first.
type HistoryStore interface {
	AppendHistory(ctx context.Context, at time.Time, data []byte, keepAfter time.Time) error
	LoadHistory(ctx context.Context, fn func(at time.Time, data []byte) error) error
}

// historyRecord is one stored sample: every provider's sample and the
// events logged since the previous record. (Records stored before the
// broker kept the spend book also carry the dashboard's old book, "s"; it
// is ignored: the broker's own book is the one.)
type historyRecord struct {
	Providers map[string]storedSample `json:"p"`
	Events    []storedEvent           `json:"e,omitempty"`
}

type storedSample struct {
	Reserved float64  `json:"r"`
	Price    *float64 `json:"pr,omitempty"`
	Carbon   *float64 `json:"c,omitempty"`
}

// persist stores the newest sample of every provider and the events not
// stored yet.
func (h *history) persist(ctx context.Context, st HistoryStore, now time.Time, evs []event) error {
	h.mu.Lock()
	rec := historyRecord{Providers: make(map[string]storedSample, len(h.series))}
	for _, e := range evs {
		rec.Events = append(rec.Events, e.stored())
	}
	for id, ring := range h.series {
		if len(ring) == 0 {
			continue
		}
		s := ring[len(ring)-1]
		ss := storedSample{Reserved: s.reserved}
		if s.hasPrice {
			v := s.price
			ss.Price = &v
		}
		if s.hasCO2 {
			v := s.carbon
			ss.Carbon = &v
		}
		rec.Providers[id] = ss
	}
	h.mu.Unlock()
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return st.AppendHistory(ctx, now, data, now.Add(-h.window))
}

// restore replays the stored history (oldest first) into the rings and
// returns the stored events, oldest record first. A record that does not decode is skipped and counted in the error.
func (h *history) restore(ctx context.Context, st HistoryStore, now time.Time) ([]event, error) {
	bad := 0
	var evs []event
	err := st.LoadHistory(ctx, func(at time.Time, data []byte) error {
		var rec historyRecord
		if err := json.Unmarshal(data, &rec); err != nil {
			bad++
			return nil
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		h.gen++
		if at.After(h.at) {
			h.at = at
		}
		for id, ss := range rec.Providers {
			s := sample{at: at, reserved: ss.Reserved}
			if ss.Price != nil {
				s.price, s.hasPrice = *ss.Price, true
			}
			if ss.Carbon != nil {
				s.carbon, s.hasCO2 = *ss.Carbon, true
			}
			h.series[id] = h.trim(now, append(h.series[id], s))
		}
		for _, se := range rec.Events {
			evs = append(evs, se.event())
		}
		return nil
	})
	if err != nil {
		return evs, fmt.Errorf("load the dashboard history: %w", err)
	}
	if bad > 0 {
		return evs, fmt.Errorf("load the dashboard history: %d stored samples did not decode and were skipped", bad)
	}
	return evs, nil
}

// consumerTotals is one consumer's (or the federation's) totals.
type consumerTotals struct {
	chunks                int32
	rate, today, month    float64
	unpriced              int32
	carbon                float64
	noCarbon              int32
	dearCost, stdCost     float64
	dearCarbon, stdCarbon float64
	dearOK, stdOK         bool // every borrowed chunk has that alternative priced
	dear, std             []string
}

// alternativesOf sums an explanation's alternatives over chunk types.
func (t *consumerTotals) alternativesOf(ex api.PlacementExplanation) {
	t.dearOK, t.stdOK = true, true
	for _, te := range ex.ChunkTypes {
		if te.Held == 0 {
			continue
		}
		add := func(a *api.Alternative, cost, carbon *float64, ok *bool, names *[]string) {
			if a == nil || a.CostPerHour == nil {
				*ok = false
			} else {
				*cost += *a.CostPerHour
			}
			if a != nil {
				if a.CarbonPerHour != nil {
					*carbon += *a.CarbonPerHour
				}
				*names = append(*names, a.ProviderClusterID)
			}
		}
		add(te.MostExpensive, &t.dearCost, &t.dearCarbon, &t.dearOK, &t.dear)
		add(te.StandardChoice, &t.stdCost, &t.stdCarbon, &t.stdOK, &t.std)
	}
}

// totalsOf is one consumer's totals: its spend (nil: none known) and,
// when explained (ex not nil), what the alternatives would cost and emit.
func totalsOf(s *api.ConsumerSpend, ex *api.PlacementExplanation) consumerTotals {
	t := consumerTotals{}
	if s != nil {
		t.today, t.month = s.SpentToday, s.SpentThisMonth
		for _, n := range s.Chunks {
			t.chunks += n
		}
		t.rate, t.unpriced, t.carbon, t.noCarbon = s.CostPerHour, s.UnpricedChunks, s.CarbonPerHour, s.NoCarbonChunks
	}
	if ex != nil {
		t.alternativesOf(*ex)
	}
	return t
}

// consoleTotals is the consumer console's totals: the dashboard's row of
// the consumer, from the spend and the alternatives of its own explanation
// (nil when the broker sent no spend: an older broker).
func consoleTotals(id string, ex api.PlacementExplanation, cur string) *views.TotalsRow {
	if ex.Spend == nil {
		return nil
	}
	r := totalsRow(id, totalsOf(ex.Spend, &ex), true, cur)
	return &r
}

// buildTotals is the totals table: one row per consumer and the
// federation's sum. Savings are shown only where both sides are fully
// priced.
func buildTotals(cs []api.OverviewConsumer, exs []api.PlacementExplanation, cur string) []views.TotalsRow {
	// Pointers into exs: an explanation is large, and this runs at every
	// publication of the live dashboard.
	byID := make(map[string]*api.PlacementExplanation, len(exs))
	for i := range exs {
		byID[exs[i].ConsumerClusterID] = &exs[i]
	}
	fed := consumerTotals{dearOK: true, stdOK: true}
	rows := make([]views.TotalsRow, 0, len(cs)+1)
	for _, c := range cs {
		exp, explained := byID[c.ClusterID]
		t := totalsOf(c.Spend, exp)
		rows = append(rows, totalsRow(c.ClusterID, t, explained, cur))
		fed.chunks += t.chunks
		fed.rate += t.rate
		fed.today += t.today
		fed.month += t.month
		fed.unpriced += t.unpriced
		fed.carbon += t.carbon
		fed.noCarbon += t.noCarbon
		fed.dearCost += t.dearCost
		fed.stdCost += t.stdCost
		fed.dearCarbon += t.dearCarbon
		fed.stdCarbon += t.stdCarbon
		fed.dearOK = fed.dearOK && (t.chunks == 0 || (explained && t.dearOK))
		fed.stdOK = fed.stdOK && (t.chunks == 0 || (explained && t.stdOK))
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Consumer < rows[j].Consumer })
	f := totalsRow("federation", fed, len(exs) > 0, cur)
	f.Federation, f.DearOn, f.StdOn = true, "", ""
	return append(rows, f)
}

func totalsRow(id string, t consumerTotals, explained bool, cur string) views.TotalsRow {
	r := views.TotalsRow{
		Consumer: id, Chunks: strconv.FormatInt(int64(t.chunks), 10), Rate: perHour(cur, t.rate), Today: money(t.today) + " " + cur,
		Month: money(t.month) + " " + cur, Carbon: gramsPerHour(t.carbon),
		Dear: dash, DearCarbon: dash, DearSaving: dash, Std: dash, StdCarbon: dash, StdSaving: dash,
	}
	if t.unpriced > 0 {
		r.Rate += fmt.Sprintf(" + %d unpriced", t.unpriced)
	}
	if t.noCarbon > 0 {
		r.Carbon += fmt.Sprintf(" + %d without carbon data", t.noCarbon)
	}
	if !explained || t.chunks == 0 {
		return r
	}
	r.DearOn, r.StdOn = strings.Join(uniq(t.dear), ", "), strings.Join(uniq(t.std), ", ")
	r.DearCarbon, r.StdCarbon = gramsPerHour(t.dearCarbon), gramsPerHour(t.stdCarbon)
	if t.dearOK {
		r.Dear = perHour(cur, t.dearCost)
		if t.unpriced == 0 {
			r.DearSaving = perHour(cur, t.dearCost-t.rate)
		}
	}
	if t.stdOK {
		r.Std = perHour(cur, t.stdCost)
		if t.unpriced == 0 {
			r.StdSaving = perHour(cur, t.stdCost-t.rate)
		}
	} else if len(t.std) > 0 {
		r.Std = "unpriced"
	}
	return r
}

func uniq(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, v := range s {
		if v != "" && !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}
