package reservations

import (
	"cmp"
	"context"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/placement"
	"github.com/federation-autoscaler/federation-autoscaler/server/store"
)

// Overview implements rest.Broker: the dashboard's snapshot. It never
// carries a kubeconfig.
func (s *Service) Overview(ctx context.Context) (api.Overview, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	ov := api.Overview{GeneratedAt: mt(now)}
	ov.Advertisements, ov.Capacity = s.overviewProvidersLocked()
	ov.Reservations = s.overviewReservationsLocked()
	ov.ProviderInstructions, ov.ReservationInstructions = s.overviewInstructionsLocked()
	ov.Consumers, ov.Warnings = s.overviewConsumersLocked(now)
	return ov, nil
}

// overviewProvidersLocked lists every provider's snapshot, by id, and sums
// their chunks.
func (s *Service) overviewProvidersLocked() ([]api.AdvertisementSnapshot, api.CapacitySummary) {
	ads := []api.AdvertisementSnapshot{}
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
	out := []api.OverviewReservation{}
	for _, r := range s.sortedReservations() {
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

// overviewConsumersLocked lists the consumers, by id, and the warnings
// about their policies.
func (s *Service) overviewConsumersLocked(now time.Time) ([]api.OverviewConsumer, []string) {
	out := []api.OverviewConsumer{}
	var warnings []string
	for _, id := range sortedKeys(s.st.consumers) {
		c := s.st.consumers[id]
		hb := c.rec.Heartbeat
		row := api.OverviewConsumer{
			ClusterID: id, LiqoClusterID: hb.LiqoClusterID, Region: hb.Region, City: hb.City,
			ChosenProvider: s.chosenProvider(id, hb.ChosenProvider), LastSeen: mt(c.rec.LastSeen), AppliedPlacement: c.policy,
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
		if rtt, ok := hb.MeasuredLatencies[row.ChosenProvider]; ok && row.ChosenProvider != "" {
			row.MeasuredRTT = &rtt
		}
		out = append(out, row)
		if c.warning != "" {
			warnings = append(warnings, c.warning)
		}
	}
	return out, warnings
}

// chosenProvider is the provider consumer id grows on now under its
// policy: the growable group of its placement view (the view its node
// groups come from, so the dashboard and the Cluster Autoscaler see one
// decision), the standard chunk type first. Under a Latency shortlist the
// consumer re-masks the shortlist by measured RTT, so its own pick
// (reported, from its heartbeat) counts when it is on the shortlist; so
// does the consumer's pick under Choice, where every provider with room is
// growable and the consumer agent chooses. A pick that is not growable now
// (a stale choice) is ignored. "" when no group is growable.
func (s *Service) chosenProvider(id, reported string) string {
	v := s.idx.View(id, false)
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
