package reservations

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/placement"
	"github.com/federation-autoscaler/federation-autoscaler/server/store"
)

// Advertise implements rest.Broker: it upserts the provider, recomputes its
// chunks, restores it if it was stale and piggybacks its instructions.
func (s *Service) Advertise(ctx context.Context, cn string, req api.AdvertisementRequest) (api.AdvertisementResponse, error) {
	req, err := checkAdvertisement(cn, req)
	if err != nil {
		return api.AdvertisementResponse{}, err
	}
	s.mu.Lock()
	t := s.newTxn()
	p := s.upsertProviderLocked(t, cn, req)
	resp := api.AdvertisementResponse{
		Accepted:     true,
		NextReportIn: "30s",
		ChunkCounts:  map[api.ChunkType]int32{},
		Instructions: s.viewsLocked(cn, api.RoleProvider, t.now),
	}
	for typ, n := range p.chunks {
		resp.ChunkCounts[typ] = n
	}
	resp.ChunkCount, resp.ChunkResources = p.chunks[api.ChunkStandard], s.chunkShape(api.ChunkStandard)
	if resp.ChunkCount == 0 && p.chunks[api.ChunkGPU] > 0 {
		resp.ChunkCount, resp.ChunkResources = p.chunks[api.ChunkGPU], s.chunkShape(api.ChunkGPU)
	}
	if len(resp.Instructions) == 0 {
		resp.Instructions = nil
	}
	if err := s.commitReport(t); err != nil {
		return api.AdvertisementResponse{}, err
	}
	return resp, nil
}

// checkAdvertisement validates provider cn's advertisement req and returns
// what the broker keeps of it.
func checkAdvertisement(cn string, req api.AdvertisementRequest) (api.AdvertisementRequest, error) {
	if err := req.Validate(); err != nil {
		return req, err
	}
	if req.ClusterID != cn {
		return req, api.Errorf(api.CodeForbidden, "clusterId %q does not match the caller %q", req.ClusterID, cn)
	}
	// Accepted and discarded, as in the reference.
	req.LiqoLabels, req.LiqoTaints = nil, nil
	return req, nil
}

// upsertProviderLocked records the validated advertisement req of provider
// cn in t: the provider's chunks, freshness and placement entry (an
// advertisement POST, or the advertisement a provider's Reconcile result
// carries). Called with s.mu held.
func (s *Service) upsertProviderLocked(t *txn, cn string, req api.AdvertisementRequest) *provider {
	p, ok := s.st.providers[cn]
	if !ok {
		p = &provider{}
		s.st.providers[cn] = p
	}
	wasAvailable := ok && p.available
	changed := !ok || !reflect.DeepEqual(p.rec.Request, req)
	inGrace := !p.graceUntil.IsZero()
	if changed || !wasAvailable {
		s.markReevaluate() // prices, carbon, capacity or sharing changed
	}
	p.rec = store.Advertisement{Request: req, LastSeen: t.now}
	if changed {
		s.setChunks(p, req)
	}
	p.freshSince = t.now
	p.available = true
	p.staleHandled = false
	p.graceUntil = time.Time{}
	if ok && !wasAvailable {
		s.log.Info("Provider is advertising again; available", "provider", cn, "withinDisconnectGrace", inGrace)
	}
	s.idx.UpsertProvider(s.placementProvider(cn, p))
	p.storedSeen = s.persistReport(t, store.PutAdvertisement(p.rec), changed || !wasAvailable, p.storedSeen)
	return p
}

// Advertisement implements rest.Broker.
func (s *Service) Advertisement(ctx context.Context, id string) (api.AdvertisementSnapshot, error) {
	if id == "" {
		return api.AdvertisementSnapshot{}, invalid("cluster id is empty")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.st.providers[id]
	if !ok {
		return api.AdvertisementSnapshot{}, api.Errorf(api.CodeNotFound, "no advertisement for cluster %q", id)
	}
	snap := s.snapshot(id, p, false)
	snap.Loans = s.loansLocked(id, p)
	return snap, nil
}

// loansLocked lists the live reservations provider id serves, oldest first,
// with their cost per hour at the provider's current prices. It looks the
// reservations up per consumer (O(consumers + loans)), not over every
// reservation of the federation.
func (s *Service) loansLocked(id string, p *provider) []api.ProviderLoan {
	cost := map[api.ChunkType]*float64{}
	chunkCost := func(typ api.ChunkType) *float64 {
		c, seen := cost[typ]
		if !seen {
			if f, ok := s.chunkCost(p.rec.Request.UnitPrices, typ); ok {
				c = &f
			}
			cost[typ] = c
		}
		return c
	}
	var loans []api.ProviderLoan
	for cid := range s.st.consumers {
		for _, r := range s.st.byPair[store.PairKey(cid, id)] {
			if r.Phase.Terminal() {
				continue
			}
			l := api.ProviderLoan{
				ReservationID: r.ID, ConsumerClusterID: r.ConsumerID, ChunkType: r.ChunkType, ChunkCount: r.ChunkCount,
				Status: r.Phase, CreatedAt: mt(r.CreatedAt), ActivatedAt: mtp(r.ActivatedAt),
			}
			if c := chunkCost(r.ChunkType); c != nil {
				v := *c * float64(r.ChunkCount)
				l.CostPerHour = &v
			}
			loans = append(loans, l)
		}
	}
	slices.SortFunc(loans, func(a, b api.ProviderLoan) int {
		if c := a.CreatedAt.Compare(b.CreatedAt.Time); c != 0 {
			return c
		}
		return strings.Compare(a.ReservationID, b.ReservationID)
	})
	return loans
}

func (s *Service) snapshot(id string, p *provider, dashboard bool) api.AdvertisementSnapshot {
	r := p.rec.Request
	var total, reserved int32
	for typ, n := range p.chunks {
		total = placement.AddChunks(total, n)
		reserved = placement.AddChunks(reserved, s.st.reserved[ptKey{id, typ}])
	}
	avail := int32(0)
	if p.available {
		avail = max(total-reserved, 0)
	}
	snap := api.AdvertisementSnapshot{
		ClusterID: id, LiqoClusterID: r.LiqoClusterID, Resources: r.Resources, Topology: r.Topology,
		UnitPrices: r.UnitPrices, CarbonIntensity: r.CarbonIntensity, CarbonForecast: r.CarbonForecast,
		CapacityScalePercent: r.CapacityScalePercent, CapacityFixed: r.CapacityFixed, Renewable: r.Renewable,
		ProbeEndpoint: r.ProbeEndpoint, ChunkCount: total, ReservedChunks: reserved, AvailableChunks: avail,
		LastSeen: mt(p.rec.LastSeen), Available: p.available, Sharing: cloneSharing(r.Sharing),
	}
	if !p.available {
		at := mt(p.rec.LastSeen.Add(s.cfg.ProviderStaleAfter))
		snap.DisconnectedAt = &at
	}
	if !p.graceUntil.IsZero() {
		snap.GraceUntil = mtp(&p.graceUntil)
	}
	if len(p.chunks) > 0 {
		snap.Chunks = make(map[api.ChunkType]api.ChunkCounts, len(p.chunks))
		for typ, n := range p.chunks {
			res := s.st.reserved[ptKey{id, typ}]
			cc := api.ChunkCounts{TotalChunks: n, ReservedChunks: res}
			if p.available {
				cc.AvailableChunks = max(n-res, 0)
			}
			snap.Chunks[typ] = cc
		}
	}
	s.decorateSnapshot(&snap, p, dashboard)
	return snap
}

// cloneSharing copies a stored rule set so that no reader of a snapshot
// shares its slices with the broker's state.
func cloneSharing(in *api.Sharing) *api.Sharing {
	if in == nil {
		return nil
	}
	out := *in
	out.AllowedConsumers = slices.Clone(in.AllowedConsumers)
	out.DeniedConsumers = slices.Clone(in.DeniedConsumers)
	return &out
}
