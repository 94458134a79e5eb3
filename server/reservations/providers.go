package reservations

import (
	"context"
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
	if err := req.Validate(); err != nil {
		return api.AdvertisementResponse{}, err
	}
	if req.ClusterID != cn {
		return api.AdvertisementResponse{}, api.Errorf(api.CodeForbidden, "clusterId %q does not match the caller %q", req.ClusterID, cn)
	}
	// Accepted and discarded, as in the reference.
	req.LiqoLabels, req.LiqoTaints = nil, nil

	s.mu.Lock()
	t := s.newTxn()
	p, ok := s.st.providers[cn]
	if !ok {
		p = &provider{}
		s.st.providers[cn] = p
	}
	wasAvailable := ok && p.available
	p.rec = store.Advertisement{Request: req, LastSeen: t.now}
	p.chunks = placement.Chunks(s.cfg.ChunkConfig, req.Resources)
	p.freshSince = t.now
	p.available = true
	p.staleHandled = false
	if ok && !wasAvailable {
		s.log.Info("Provider is advertising again; available", "provider", cn)
	}
	s.idx.UpsertProvider(s.placementProvider(cn, p))
	t.other = append(t.other, store.PutAdvertisement(p.rec))
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
	req2 := s.enqueue(t)
	s.mu.Unlock()
	if err := await(req2); err != nil {
		return api.AdvertisementResponse{}, err
	}
	return resp, nil
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

// Heartbeat implements rest.Broker: it replaces the consumer's registry
// entry and renews the lease of all its live reservations.
func (s *Service) Heartbeat(ctx context.Context, cn string, req api.HeartbeatRequest) (api.HeartbeatResponse, error) {
	if err := req.Validate(); err != nil {
		return api.HeartbeatResponse{}, err
	}
	if req.ClusterID != cn {
		return api.HeartbeatResponse{}, api.Errorf(api.CodeForbidden, "clusterId %q does not match the caller %q", req.ClusterID, cn)
	}
	// Per-id work that needs no state happens before the lock.
	listed := distinct(req.Reservations)
	req.Reservations = nil

	s.mu.Lock()
	t := s.newTxn()
	c := &consumer{rec: store.Consumer{Heartbeat: req, LastSeen: t.now}, leaseBase: t.now}
	s.applyPolicy(c)
	if c.warning != "" {
		if old := s.st.consumers[cn]; old == nil || old.warning != c.warning {
			s.log.Warn("Unknown placement policy; using Standard", "consumer", cn, "placement", req.Placement.Type)
		}
	}
	s.st.consumers[cn] = c
	s.idx.UpsertConsumer(placementConsumer(c))
	t.other = append(t.other, store.PutConsumer(c.rec))
	// One map lookup per distinct id: O(n) under the lock (~0.6 ms for
	// 10 000 ids). Splitting it into batches under separate holds makes
	// other tenants wait longer, not shorter: sync.Mutex lets the
	// re-locking heartbeat barge ahead of a woken waiter.
	var unknown []string
	for _, id := range listed {
		if r := s.st.reservations[id]; r == nil || r.ConsumerID != cn || r.Phase.Terminal() {
			unknown = append(unknown, id)
		}
	}
	req2 := s.enqueue(t)
	s.mu.Unlock()
	if err := await(req2); err != nil {
		return api.HeartbeatResponse{}, err
	}
	return api.HeartbeatResponse{AckAt: mt(t.now), UnknownReservations: unknown}, nil
}

// distinct returns ids without repeats, in the order of their first
// occurrence, in O(len(ids)). A strictly increasing list (what the consumer
// agent sends) is returned as it is, without allocating.
func distinct(ids []string) []string {
	increasing := true
	for i := 1; i < len(ids) && increasing; i++ {
		increasing = ids[i-1] < ids[i]
	}
	if increasing {
		return ids
	}
	seen := make(map[string]struct{}, len(ids))
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if _, dup := seen[id]; !dup {
			seen[id] = struct{}{}
			out = append(out, id)
		}
	}
	return out
}

// NodeGroups implements rest.Broker through the placement index.
func (s *Service) NodeGroups(ctx context.Context, cn string, all bool) (api.NodeGroupListResponse, error) {
	v := s.idx.View(cn, all)
	if v.NodeGroups == nil {
		v.NodeGroups = []api.NodeGroupView{}
	}
	return v, nil
}

// sweep expires reservations whose lease ran out, marks stale providers
// unavailable (failing their reservations) and garbage-collects enforced
// instructions and terminal reservations. It returns when it must run
// again.
func (s *Service) sweep(ctx context.Context) time.Time {
	s.mu.Lock()
	t := s.newTxn()
	now := t.now
	// Any deadline created after this sweep lies at least the shortest
	// configured duration ahead, so sleeping until then misses nothing.
	next := now.Add(min(s.cfg.ReservationLease, s.cfg.ProviderStaleAfter, s.cfg.EnforcedGC, s.cfg.TerminalGC))
	changed := false
	soon := func(d time.Time) {
		if d.Before(next) {
			next = d
		}
	}
	// Provider freshness first: a stale provider's reservations fail.
	for _, id := range sortedKeys(s.st.providers) {
		p := s.st.providers[id]
		if p.staleHandled {
			continue
		}
		if deadline := p.rec.LastSeen.Add(s.cfg.ProviderStaleAfter); p.available && !now.Before(deadline) {
			p.available = false
			changed = true
			s.log.Warn("Provider stopped advertising; unavailable", "provider", id, "lastSeen", p.rec.LastSeen)
			s.idx.UpsertProvider(s.placementProvider(id, p))
		} else if p.available {
			soon(deadline)
		}
		deadline := p.freshSince.Add(s.cfg.ProviderStaleAfter)
		if now.Before(deadline) {
			soon(deadline)
			continue
		}
		p.staleHandled = true
		for _, r := range s.sortedReservations() {
			if r.ProviderID == id && !r.Phase.Terminal() && r.Phase != api.PhaseUnpeering {
				s.setPhase(t, r, api.PhaseFailed, "provider "+id+" stopped advertising")
			}
		}
	}
	for _, r := range s.sortedReservations() {
		if r.Phase.Terminal() {
			gc := r.TerminatedAt.Add(s.cfg.TerminalGC)
			if now.Before(gc) {
				soon(gc)
				continue
			}
			delete(s.st.reservations, r.ID)
			s.st.unindexPair(r)
			t.delRes(r.ID)
			continue
		}
		deadline := s.leaseDeadline(r)
		if now.Before(deadline) {
			soon(deadline)
			continue
		}
		s.setPhase(t, r, api.PhaseExpired, "lease expired: no heartbeat from consumer "+r.ConsumerID+" for "+s.cfg.ReservationLease.String())
	}
	for _, id := range sortedKeys(s.st.instructions) {
		in := s.st.instructions[id]
		if !in.Enforced {
			continue
		}
		gc := in.LastUpdate.Add(s.cfg.EnforcedGC)
		if now.Before(gc) {
			soon(gc)
			continue
		}
		delete(s.st.instructions, id)
		delete(s.st.delivered, id)
		t.delIns(id)
	}
	req := s.enqueue(t)
	s.mu.Unlock()
	if err := await(req); err != nil {
		s.log.Error("Persisting the sweep failed; it will run again", "err", err)
		return now.Add(time.Second)
	}
	if changed && req == nil {
		s.notify() // an availability change that needed no write
	}
	return next
}

func (s *Service) sortedReservations() []*store.Reservation {
	out := make([]*store.Reservation, 0, len(s.st.reservations))
	for _, r := range s.st.reservations {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b *store.Reservation) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		if a.ID < b.ID {
			return -1
		}
		return 1
	})
	return out
}

// Explanation implements rest.Broker: why consumer cn grows where it does,
// as cn may read it. It is computed on request (the consumer console asks
// while someone watches it), never on the agents' periodic paths.
func (s *Service) Explanation(_ context.Context, cn string) (api.PlacementExplanation, error) {
	return s.idx.Explain(cn, nil).ForConsumer(), nil
}

// Explanations returns every known consumer's explanation, sorted by
// consumer id, with the providers that do not share with each listed (the
// operator's view, for the dashboard listener).
func (s *Service) Explanations(_ context.Context) ([]api.PlacementExplanation, error) {
	s.mu.Lock()
	ids := sortedKeys(s.st.consumers)
	s.mu.Unlock()
	out := make([]api.PlacementExplanation, 0, len(ids))
	for _, id := range ids {
		out = append(out, s.idx.Explain(id, nil))
	}
	return out, nil
}
