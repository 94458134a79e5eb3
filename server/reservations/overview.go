package reservations

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/placement"
	"github.com/federation-autoscaler/federation-autoscaler/server/store"
)

// Overview implements rest.Broker: the dashboard's snapshot. It never
// carries a kubeconfig.
//
// The state lock is held only while the rows are copied; each consumer's
// chosen provider is read from the placement index after it is released
// (one short index read per consumer, reused while the placement epoch
// stands), so a dashboard of thousands of consumers never holds up the
// agents' calls.
func (s *Service) Overview(ctx context.Context) (api.Overview, error) {
	s.mu.Lock()
	now := s.clock.Now()
	ov := api.Overview{GeneratedAt: mt(now)}
	ov.Advertisements, ov.Capacity = s.overviewProvidersLocked()
	ov.Reservations = s.overviewReservationsLocked()
	ov.ProviderInstructions, ov.ReservationInstructions = s.overviewInstructionsLocked()
	var reported []string
	ov.Consumers, reported, ov.Warnings = s.overviewConsumersLocked(now)
	s.mu.Unlock()
	s.chosen.fill(s.idx, ov.Consumers, reported)
	return ov, nil
}

// overviewProvidersLocked lists every provider's snapshot, by id, and sums
// their chunks.
func (s *Service) overviewProvidersLocked() ([]api.AdvertisementSnapshot, api.CapacitySummary) {
	ads := make([]api.AdvertisementSnapshot, 0, len(s.st.providers))
	capy := api.CapacitySummary{
		ByChunkType: map[api.ChunkType]api.ChunkCounts{},
		ChunkSizes: map[api.ChunkType]corev1.ResourceList{
			api.ChunkStandard: s.chunkShape(api.ChunkStandard),
			api.ChunkGPU:      s.chunkShape(api.ChunkGPU),
		},
	}
	for _, id := range sortedKeys(s.st.providers) {
		p := s.st.providers[id]
		capy.ProviderCount++
		if p.available {
			capy.AvailableProviderCount++
		}
		snap := s.snapshot(id, p, true)
		for typ, n := range snap.Chunks {
			cc := capy.ByChunkType[typ]
			// Saturating: a total over providers at the int32 maximum
			// stays at the maximum instead of wrapping.
			cc.TotalChunks = placement.AddChunks(cc.TotalChunks, n.TotalChunks)
			cc.ReservedChunks = placement.AddChunks(cc.ReservedChunks, n.ReservedChunks)
			cc.AvailableChunks = placement.AddChunks(cc.AvailableChunks, n.AvailableChunks)
			capy.ByChunkType[typ] = cc
			capy.TotalChunks = placement.AddChunks(capy.TotalChunks, n.TotalChunks)
			capy.ReservedChunks = placement.AddChunks(capy.ReservedChunks, n.ReservedChunks)
			capy.AvailableChunks = placement.AddChunks(capy.AvailableChunks, n.AvailableChunks)
		}
		ads = append(ads, snap)
	}
	return ads, capy
}

// overviewReservationsLocked lists every reservation with its history,
// oldest first.
func (s *Service) overviewReservationsLocked() []api.OverviewReservation {
	rs := s.sortedReservations()
	out := make([]api.OverviewReservation, 0, len(rs))
	for _, r := range rs {
		row := api.OverviewReservation{ReservationResponse: s.reservationResponse(r), TerminatedAt: mtp(r.TerminatedAt)}
		for _, h := range r.History {
			row.History = append(row.History, api.PhaseTransition{Phase: h.Phase, At: mt(h.At), Message: h.Message})
		}
		out = append(out, row)
	}
	return out
}

// overviewInstructionsLocked lists the instructions in creation order,
// provider-flavoured and reservation-flavoured apart.
func (s *Service) overviewInstructionsLocked() (provider, reservation []api.OverviewInstruction) {
	provider, reservation = []api.OverviewInstruction{}, []api.OverviewInstruction{}
	ins := make([]*store.Instruction, 0, len(s.st.instructions))
	for _, in := range s.st.instructions {
		ins = append(ins, in)
	}
	slices.SortFunc(ins, func(a, b *store.Instruction) int { return cmp.Compare(a.Seq, b.Seq) })
	for _, in := range ins {
		row := overviewInstruction(in, s.expiresAt(in), s.st.delivered[in.ID])
		if in.Flavour == store.FlavourProvider {
			provider = append(provider, row)
		} else {
			reservation = append(reservation, row)
		}
	}
	return provider, reservation
}

// overviewConsumersLocked lists the consumers, by id, with the provider
// each heartbeat reported choosing (reported, one per row; the rows'
// ChosenProvider is left to chosenCache.fill), and the warnings about
// their policies.
func (s *Service) overviewConsumersLocked(now time.Time) (out []api.OverviewConsumer, reported, warnings []string) {
	out = make([]api.OverviewConsumer, 0, len(s.st.consumers))
	reported = make([]string, 0, len(s.st.consumers))
	for _, id := range sortedKeys(s.st.consumers) {
		c := s.st.consumers[id]
		hb := c.rec.Heartbeat
		row := api.OverviewConsumer{
			ClusterID: id, LiqoClusterID: hb.LiqoClusterID, Region: hb.Region, City: hb.City,
			LastSeen: mt(c.rec.LastSeen), AppliedPlacement: c.policy,
			MeasuredLatencies: hb.MeasuredLatencies, Latitude: hb.Latitude, Longitude: hb.Longitude,
		}
		if hb.Placement != nil {
			row.Placement = hb.Placement.Type
			row.Weights = hb.Placement.Weights
		}
		spend := s.consumerSpendLocked(id, now)
		row.Spend = &spend
		row.Budget = s.budgetStatusLocked(id, c, now)
		row.Reevaluations = slices.Clone(s.decisions[id])
		row.Migrations, row.Savings = s.migrationsLocked(id), savingsLocked(c)
		row.MoveBudget = s.moveBudgetStatusLocked(c, now)
		out = append(out, row)
		reported = append(reported, hb.ChosenProvider)
		if c.warning != "" {
			warnings = append(warnings, c.warning)
		}
	}
	return out, reported, warnings
}

// chosenCache keeps each consumer's chosen provider with the placement
// epoch and the reported pick it was worked out from: the periodic
// heartbeats and advertisements of an unchanged federation leave the epoch
// alone, so an overview read costs no placement view per consumer then.
type chosenCache struct {
	mu sync.Mutex
	m  map[string]chosenEntry
}

type chosenEntry struct {
	epoch            uint64
	reported, chosen string
}

// fill sets each row's ChosenProvider (and MeasuredRTT, the consumer's
// measured RTT to it) from the cache or, when the epoch moved, from a
// fresh view. reported[i] is row i's heartbeat pick. Consumers no longer
// listed leave the cache.
func (c *chosenCache) fill(idx Placer, rows []api.OverviewConsumer, reported []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	// The epoch is read before the views: a change meanwhile moves it
	// again, and the next read works the pick out anew.
	epoch := idx.Epoch()
	next := make(map[string]chosenEntry, len(rows))
	for i := range rows {
		row := &rows[i]
		e, ok := c.m[row.ClusterID]
		if !ok || e.epoch != epoch || e.reported != reported[i] {
			e = chosenEntry{epoch: epoch, reported: reported[i], chosen: chosenProvider(idx.View(row.ClusterID, false), reported[i])}
		}
		next[row.ClusterID] = e
		row.ChosenProvider = e.chosen
		if rtt, ok := row.MeasuredLatencies[e.chosen]; ok && e.chosen != "" {
			row.MeasuredRTT = &rtt
		}
	}
	c.m = next
}

// chosenProvider is the provider a consumer grows on now under its
// policy: the growable group of its placement view v (the view its node
// groups come from, so the dashboard and the Cluster Autoscaler see one
// decision), the standard chunk type first. Under a Latency shortlist the
// consumer re-masks the shortlist by measured RTT, so its own pick
// (reported, from its heartbeat) counts when it is on the shortlist; so
// does the consumer's pick under Choice, where every provider with room is
// growable and the consumer agent chooses. A pick that is not growable now
// (a stale choice) is ignored. "" when no group is growable.
func chosenProvider(v api.NodeGroupListResponse, reported string) string {
	first, firstStd := "", ""
	for _, g := range v.NodeGroups {
		if g.MaxSize <= g.CurrentReserved {
			continue
		}
		if (v.LatencyShortlist || v.AppliedPlacement == api.PlacementChoice) && g.ProviderClusterID == reported {
			return reported
		}
		if first == "" {
			first = g.ProviderClusterID
		}
		if firstStd == "" && g.Type == api.ChunkStandard {
			firstStd = g.ProviderClusterID
		}
	}
	if firstStd != "" {
		return firstStd
	}
	return first
}
