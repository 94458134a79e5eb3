package experiment

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/agent/probe"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// iteration is one demand of a phase: when it arrived, which providers had
// room then (free standard chunks) and what was placed.
type iteration struct {
	k    int
	tau  time.Duration
	free map[string]int32
	sels []Selection
}

// seenSet tracks the reservations of a phase and the iteration each
// belongs to (the one whose demand was current when it appeared).
type seenSet struct {
	mu    sync.Mutex
	ids   map[string]bool
	iters []*iteration
}

func newSeen() *seenSet { return &seenSet{ids: map[string]bool{}} }

func (s *seenSet) begin(it *iteration) {
	s.mu.Lock()
	s.iters = append(s.iters, it)
	s.mu.Unlock()
}

// add records a new reservation (false when it was known, or arrived
// before the phase's first demand: the previous phase's leftovers).
func (s *seenSet) add(id string, sel Selection) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ids[id] {
		return false
	}
	s.ids[id] = true
	if len(s.iters) == 0 {
		return false
	}
	it := s.iters[len(s.iters)-1]
	sel.Iteration = it.k
	it.sels = append(it.sels, sel)
	return true
}

// iterations runs a phase's iterations at their fixed relative instants
// (Offset + k × Period after the phase started) and then waits for the
// phase's end.
func (r *runner) iterations(ctx context.Context, p Phase, start time.Time, seen *seenSet) error {
	n, period := r.cfg.Iterations(), r.cfg.Period()
	for k := range n {
		at := start.Add(r.cfg.Offset.Duration + time.Duration(k)*period)
		if err := r.wait(ctx, at); err != nil {
			return err
		}
		// Demand first, at its instant; the room is the sampler's latest
		// snapshot (at most SampleEvery old, before this demand).
		it := &iteration{k: k, tau: r.cond.Tau(time.Now()), free: freeChunks(r.latest())}
		if r.cfg.Mode == ModeReserve {
			seen.begin(it)
			if err := r.setDemand(r.cfg.Demand); err != nil {
				return err
			}
		}
		r.opts.Progress(fmt.Sprintf("  %s: iteration %d/%d at τ=%s, %d providers with room", p.Name, k+1, n, it.tau.Round(time.Second), len(it.free)))
		if r.cfg.Mode == ModeObserve {
			if err := r.observeViews(ctx, p, it); err != nil {
				return err
			}
			r.settle(it)
			continue
		}
		if err := r.wait(ctx, at.Add(r.cfg.Hold.Duration)); err != nil {
			return err
		}
		if err := r.setDemand(0); err != nil {
			return err
		}
	}
	if err := r.wait(ctx, start.Add(r.cfg.PhaseLength.Duration)); err != nil {
		return err
	}
	seen.mu.Lock()
	defer seen.mu.Unlock()
	for _, it := range seen.iters {
		r.settle(it)
	}
	return nil
}

// freeChunks is every available provider's free standard chunks (those
// with room only).
func freeChunks(ov *api.Overview) map[string]int32 {
	out := map[string]int32{}
	if ov == nil {
		return out
	}
	for _, a := range ov.Advertisements {
		free := a.Chunks[api.ChunkStandard].AvailableChunks
		if a.Available && free > 0 {
			out[a.ClusterID] = free
		}
	}
	return out
}

// watchReservations records every reservation of the phase as a
// selection, when it first appears in the broker's overview.
func (r *runner) watchReservations(ctx context.Context, p Phase, seen *seenSet) {
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	for {
		if ov, err := r.overview(ctx); err == nil {
			tau := r.cond.Tau(time.Now())
			for _, res := range ov.Reservations {
				if res.Status.Terminal() {
					continue
				}
				ci, ok := r.consIdx[res.ConsumerClusterID]
				pi, pok := r.provIdx[res.ProviderClusterID]
				if !ok || !pok {
					continue
				}
				sel := Selection{Phase: p.Name, Tau: tau, Consumer: res.ConsumerClusterID, Provider: res.ProviderClusterID, ReservationID: res.ReservationID, Value: r.cond.Value(tau, ci, pi)}
				if seen.add(res.ReservationID, sel) {
					r.rec.addReservation(Reservation{Phase: p.Name, ID: res.ReservationID, Consumer: res.ConsumerClusterID, Provider: res.ProviderClusterID, Status: string(res.Status), FirstSeen: tau})
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// observeViews records, for every consumer, the provider its node-group
// view (the consumer agent's local API: the broker's decision, re-masked
// by measured RTTs under Latency) would grow a standard chunk on.
func (r *runner) observeViews(ctx context.Context, p Phase, it *iteration) error {
	for ci, cl := range r.local {
		view, err := cl.NodeGroups(ctx)
		if err != nil {
			return fmt.Errorf("node groups of %s: %w", r.consumers[ci].ID, err)
		}
		tau := r.cond.Tau(time.Now())
		for _, g := range view.NodeGroups {
			pi, ok := r.provIdx[g.ProviderClusterID]
			if g.Type != api.ChunkStandard || g.MaxSize <= g.CurrentReserved || !ok {
				continue
			}
			it.sels = append(it.sels, Selection{Phase: p.Name, Iteration: it.k, Tau: tau, Consumer: r.consumers[ci].ID, Provider: g.ProviderClusterID, Value: r.cond.Value(tau, ci, pi)})
			break // the first growable group, as CA's expander would pick among equals
		}
	}
	return nil
}

// settle fills the achievable best and worst of an iteration's selections
// (at each selection's own instant, the conditions its value is read at)
// and records them. Carbon is the same for every consumer, so the
// selections of an iteration that fall in one refresh interval compete
// for the providers' room: their best is the n greenest free chunks then,
// the worst the n dirtiest (n = those selections). Latency is per
// consumer: the best is the lowest round trip from that consumer to a
// provider with room, the worst the highest (room contention ignored; the
// configurations keep plenty).
func (r *runner) settle(it *iteration) {
	if r.cfg.Metric == MetricCarbon && r.cfg.Mode == ModeReserve {
		groups := map[int64][]int{}
		for i, s := range it.sels {
			k := refreshIndex(s.Tau, r.cfg.Carbon.RefreshInterval.Duration)
			groups[k] = append(groups[k], i)
		}
		for _, idx := range groups {
			r.settleCarbon(it, idx)
		}
	} else {
		for i := range it.sels {
			s := &it.sels[i]
			ci := r.consIdx[s.Consumer]
			s.Best, s.Worst = s.Value, s.Value
			for id := range it.free {
				v := r.cond.Value(s.Tau, ci, r.provIdx[id])
				s.Best, s.Worst = min(s.Best, v), max(s.Worst, v)
			}
		}
	}
	for _, s := range it.sels {
		r.rec.addSelection(s)
	}
}

// settleCarbon fills best and worst for the selections idx of an
// iteration, all in one refresh interval: the greenest and dirtiest free
// chunks at that time, the i-th best selection against the i-th greenest.
func (r *runner) settleCarbon(it *iteration, idx []int) {
	tau := it.sels[idx[0]].Tau
	var slots []float64
	for id, n := range it.free {
		v := r.cond.CarbonAt(tau, r.provIdx[id])
		for range n {
			slots = append(slots, v)
		}
	}
	if len(slots) == 0 {
		for _, i := range idx {
			it.sels[i].Best, it.sels[i].Worst = it.sels[i].Value, it.sels[i].Value
		}
		return
	}
	slices.Sort(slots)
	slices.SortFunc(idx, func(a, b int) int { return cmpFloat(it.sels[a].Value, it.sels[b].Value) })
	for rank, i := range idx {
		j := min(rank, len(slots)-1)
		it.sels[i].Best, it.sels[i].Worst = slots[j], slots[max(len(slots)-len(idx)+rank, j)]
	}
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// sample takes a federation snapshot and the phase's observations every
// SampleEvery (at the same relative instants in every phase): the
// broker's carbon of every provider, or a probe of every provider from one
// consumer (in turn) for latency. A sample's index is the slot of the
// instant it was taken at (⌊τ ÷ SampleEvery⌋): a sampler starved of CPU
// skips slots rather than comparing one phase's late instant with
// another's timely one.
func (r *runner) sample(ctx context.Context, p Phase, start time.Time) {
	every := r.cfg.SampleEvery.Duration
	for j := 0; ; j++ {
		if r.wait(ctx, start.Add(time.Duration(j)*every)) != nil {
			return
		}
		j = max(j, int(r.cond.Tau(time.Now())/every))
		var obs []Observation
		if r.cfg.Metric == MetricLatency {
			obs = r.probeAll(ctx, p, j)
		}
		ov, err := r.overview(ctx)
		if err != nil {
			continue
		}
		r.last.Store(ov)
		tau := r.cond.Tau(time.Now())
		var snaps []Snapshot
		for _, a := range ov.Advertisements {
			pi, ok := r.provIdx[a.ClusterID]
			if !ok {
				continue
			}
			cc := a.Chunks[api.ChunkStandard]
			snaps = append(snaps, Snapshot{Phase: p.Name, Sample: j, Tau: tau, Provider: a.ClusterID, Available: a.Available, Free: cc.AvailableChunks, Reserved: cc.ReservedChunks, Carbon: a.CarbonIntensity})
			if r.cfg.Metric == MetricCarbon && a.CarbonIntensity != nil {
				obs = append(obs, Observation{Phase: p.Name, Sample: j, Tau: tau, Provider: a.ClusterID, Observed: *a.CarbonIntensity, Truth: r.cond.CarbonAt(tau, pi)})
			}
		}
		r.rec.addSnapshots(snaps)
		r.rec.addObservations(obs)
	}
}

// probeAll probes every provider's echo as consumer j mod C does (the
// same network, estimator and concurrency bound, without the cache),
// first thing in sample slot j.
func (r *runner) probeAll(ctx context.Context, p Phase, j int) []Observation {
	ci := j % len(r.consumers)
	byEP := map[string]int{}
	if m := r.endpoints.Load(); m != nil {
		byEP = *m
	}
	eps := slices.Collect(maps.Keys(byEP))
	tau := r.cond.Tau(time.Now())
	rtts := probe.NewProber(probe.ProberConfig{TTL: time.Nanosecond, Network: r.network(ci)}).Measure(ctx, eps)
	var out []Observation
	for ep, rtt := range rtts {
		pi := byEP[ep]
		out = append(out, Observation{Phase: p.Name, Sample: j, Tau: tau, Consumer: r.consumers[ci].ID, Provider: r.providers[pi].ID, Observed: rtt, Truth: r.cond.LatencyAt(tau, ci, pi)})
	}
	return out
}

// latest is the sampler's latest overview (nil before the first).
func (r *runner) latest() *api.Overview { return r.last.Load() }
