package reservations

import (
	"slices"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/placement"
	"github.com/federation-autoscaler/federation-autoscaler/server/spend"
	"github.com/federation-autoscaler/federation-autoscaler/server/store"
)

// provider is a provider's advertisement plus derived state.
type provider struct {
	rec    store.Advertisement
	chunks map[api.ChunkType]int32
	// cost is the dashboard's cost per hour of one chunk (costOK: every
	// resource of the chunk is priced), worked out with chunks when the
	// advertisement changes, not at every overview read.
	cost   float64
	costOK bool
	// freshSince is the start of the current freshness window: the last
	// advertisement, or the broker's start if that is later (a restart
	// does not fail every provider's reservations at once).
	freshSince time.Time
	// available is false once the provider is stale: no reservation, not
	// growable.
	available bool
	// staleHandled is set once the reservations of the stale provider were
	// failed; the next advertisement clears it.
	staleHandled bool
	// storedSeen is the LastSeen of the record last handed to the store
	// (see seenWriteEvery).
	storedSeen time.Time
	// graceUntil is when the last disconnect grace of the stale provider's
	// live reservations ends (zero: none in grace), as of the last sweep.
	graceUntil time.Time
}

// consumer is a registry entry plus derived state.
type consumer struct {
	rec    store.Consumer
	policy api.PlacementType
	// warning is set when the heartbeated policy is unknown.
	warning string
	// leaseBase is the start of the current lease window of every live
	// reservation of the consumer: its last heartbeat, or the broker's
	// start if that is later.
	leaseBase time.Time
	// storedSeen is the LastSeen of the record last handed to the store
	// (see seenWriteEvery).
	storedSeen time.Time
	// grace is the consumer's own disconnect grace (nil: the broker's).
	grace *time.Duration
	// notReady holds the reservations whose virtual node the consumer
	// reports NotReady.
	notReady map[string]struct{}
	// ready holds the move targets whose virtual node the consumer's
	// latest heartbeat shows Ready (in memory: the next heartbeat after a
	// restart tells again).
	ready map[string]struct{}
	// budget is the consumer's spend budget (nil: none).
	budget *spend.Budget
}

type ptKey struct {
	provider string
	typ      api.ChunkType
}

type usageKey struct {
	provider string
	typ      api.ChunkType
	consumer string
}

// state is the authoritative in-memory state (guarded by Service.mu).
type state struct {
	providers    map[string]*provider
	consumers    map[string]*consumer
	reservations map[string]*store.Reservation
	instructions map[string]*store.Instruction
	credentials  map[string]*store.Credential // by store.PairKey
	// pending indexes un-enforced instructions by target.
	pending map[string]map[string]*store.Instruction
	// byPair indexes reservations by store.PairKey.
	byPair map[string]map[string]*store.Reservation
	// reserved is the ledger: live reservations per provider × type.
	reserved map[ptKey]int32
	usage    map[usageKey]placement.Usage
	seq      uint64
	// waitCh is closed (and removed) to wake the long-poll waiters of a CN.
	waitCh map[string]chan struct{}
	// delivered is when each instruction was last delivered; kept in memory
	// only, so polling never writes (bug #22).
	delivered map[string]time.Time
}

func newState() *state {
	return &state{
		providers:    map[string]*provider{},
		consumers:    map[string]*consumer{},
		reservations: map[string]*store.Reservation{},
		instructions: map[string]*store.Instruction{},
		credentials:  map[string]*store.Credential{},
		pending:      map[string]map[string]*store.Instruction{},
		byPair:       map[string]map[string]*store.Reservation{},
		reserved:     map[ptKey]int32{},
		usage:        map[usageKey]placement.Usage{},
		waitCh:       map[string]chan struct{}{},
		delivered:    map[string]time.Time{},
	}
}

// buildState rebuilds the state from a snapshot and pushes it into the
// placement index. Reserved chunks are recomputed from live reservations.
func (s *Service) buildState(snap store.Snapshot, now time.Time) *state {
	st := newState()
	for _, a := range snap.Advertisements {
		// A provider that was stale before the restart stays unavailable
		// until it advertises; its reservations get a full window.
		p := &provider{rec: a, freshSince: later(a.LastSeen, now), available: now.Before(a.LastSeen.Add(s.cfg.ProviderStaleAfter)), storedSeen: a.LastSeen}
		s.setChunks(p, a.Request)
		st.providers[a.Request.ClusterID] = p
	}
	for _, c := range snap.Consumers {
		cs := &consumer{rec: c, leaseBase: later(c.LastSeen, now), storedSeen: c.LastSeen}
		s.applyPolicy(cs)
		applyLifecycle(cs)
		s.noteBudgeted(c.Heartbeat.ClusterID, cs)
		st.consumers[c.Heartbeat.ClusterID] = cs
	}
	for i := range snap.Credentials {
		c := snap.Credentials[i]
		st.credentials[c.Key()] = &c
	}
	for i := range snap.Reservations {
		r := snap.Reservations[i]
		st.reservations[r.ID] = &r
		st.indexPair(&r)
		if !r.Phase.Terminal() {
			st.addUsage(&r, r.Phase, 1)
		}
	}
	for i := range snap.Instructions {
		in := snap.Instructions[i]
		st.instructions[in.ID] = &in
		if !in.Enforced {
			st.addPending(&in)
		}
		if in.Seq > st.seq {
			st.seq = in.Seq
		}
	}
	for id, p := range st.providers {
		s.idx.UpsertProvider(s.placementProvider(id, p))
	}
	for _, c := range st.consumers {
		s.idx.UpsertConsumer(placementConsumer(c))
	}
	for k, u := range st.usage {
		s.idx.SetUsage(k.provider, k.typ, k.consumer, u)
	}
	return st
}

// replaceState swaps in a state rebuilt from snap (rollback after a failed
// commit). Called with s.mu held.
func (s *Service) replaceState(snap store.Snapshot) {
	old := s.st
	for id := range old.providers {
		s.idx.RemoveProvider(id)
	}
	for k := range old.usage {
		s.idx.SetUsage(k.provider, k.typ, k.consumer, placement.Usage{})
	}
	st := s.buildState(snap, s.clock.Now())
	st.waitCh = old.waitCh
	s.st = st
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func (st *state) indexPair(r *store.Reservation) {
	k := store.PairKey(r.ConsumerID, r.ProviderID)
	m := st.byPair[k]
	if m == nil {
		m = map[string]*store.Reservation{}
		st.byPair[k] = m
	}
	m[r.ID] = r
}

func (st *state) unindexPair(r *store.Reservation) {
	k := store.PairKey(r.ConsumerID, r.ProviderID)
	if m := st.byPair[k]; m != nil {
		delete(m, r.ID)
		if len(m) == 0 {
			delete(st.byPair, k)
		}
	}
}

func (st *state) addPending(in *store.Instruction) {
	m := st.pending[in.TargetID]
	if m == nil {
		m = map[string]*store.Instruction{}
		st.pending[in.TargetID] = m
	}
	m[in.ID] = in
}

func (st *state) removePending(in *store.Instruction) {
	if m := st.pending[in.TargetID]; m != nil {
		delete(m, in.ID)
		if len(m) == 0 {
			delete(st.pending, in.TargetID)
		}
	}
}

// inFlight reports whether a reservation in phase p is still peering.
func inFlight(p api.Phase) bool {
	switch p {
	case "", api.PhasePending, api.PhaseGeneratingKubeconfig, api.PhaseKubeconfigReady, api.PhasePeering:
		return true
	}
	return false
}

// addUsage adds sign × r's contribution in phase p to the ledger.
func (st *state) addUsage(r *store.Reservation, p api.Phase, sign int32) usageKey {
	k := usageKey{r.ProviderID, r.ChunkType, r.ConsumerID}
	if p.Terminal() {
		return k
	}
	u := st.usage[k]
	u.Live += sign * r.ChunkCount
	if inFlight(p) {
		u.InFlight += sign * r.ChunkCount
	}
	if u.Live == 0 && u.InFlight == 0 {
		delete(st.usage, k)
	} else {
		st.usage[k] = u
	}
	pk := ptKey{r.ProviderID, r.ChunkType}
	st.reserved[pk] += sign * r.ChunkCount
	if st.reserved[pk] == 0 {
		delete(st.reserved, pk)
	}
	return k
}

// txn collects the changes of one operation.
type txn struct {
	now     time.Time
	res     map[string]*store.Reservation // nil value = delete
	ins     map[string]*store.Instruction // nil value = delete
	other   []store.Mutation
	wake    map[string]struct{}
	touched map[usageKey]struct{}
}

func (s *Service) newTxn() *txn {
	return &txn{
		now:     s.clock.Now(),
		res:     map[string]*store.Reservation{},
		ins:     map[string]*store.Instruction{},
		wake:    map[string]struct{}{},
		touched: map[usageKey]struct{}{},
	}
}

func (t *txn) putRes(r *store.Reservation) { t.res[r.ID] = r }
func (t *txn) delRes(id string)            { t.res[id] = nil }
func (t *txn) putIns(in *store.Instruction) {
	t.ins[in.ID] = in
}
func (t *txn) delIns(id string) { t.ins[id] = nil }

// mutations snapshots the dirty records into store mutations (copies, so
// later in-memory changes do not leak into this commit).
func (t *txn) mutations() []store.Mutation {
	out := make([]store.Mutation, 0, len(t.res)+len(t.ins)+len(t.other))
	for _, id := range sortedKeys(t.res) {
		if r := t.res[id]; r != nil {
			out = append(out, store.PutReservation(*r))
		} else {
			out = append(out, store.Delete(store.KindReservation, id))
		}
	}
	for _, id := range sortedKeys(t.ins) {
		if in := t.ins[id]; in != nil {
			out = append(out, store.PutInstruction(*in))
		} else {
			out = append(out, store.Delete(store.KindInstruction, id))
		}
	}
	return append(out, t.other...)
}

func (t *txn) wakeList() []string {
	out := make([]string, 0, len(t.wake))
	for cn := range t.wake {
		out = append(out, cn)
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// flushUsage pushes the usage of every touched key into the index.
func (s *Service) flushUsage(t *txn) {
	if len(t.touched) > 0 {
		// Room changed: re-evaluated at the next sweep, without waking
		// the sweeper for every reservation.
		s.reevalDirty = true
	}
	for k := range t.touched {
		s.idx.SetUsage(k.provider, k.typ, k.consumer, s.st.usage[k])
	}
}

// wakeLocked wakes every long-poll waiter of the given CNs.
func (s *Service) wakeLocked(cns []string) {
	for _, cn := range cns {
		if ch, ok := s.st.waitCh[cn]; ok {
			close(ch)
			delete(s.st.waitCh, cn)
		}
	}
}

func (s *Service) placementProvider(id string, p *provider) placement.Provider {
	r := p.rec.Request
	return placement.Provider{
		ID:              id,
		LiqoID:          r.LiqoClusterID,
		Resources:       r.Resources,
		Topology:        r.Topology,
		UnitPrices:      r.UnitPrices,
		CarbonIntensity: r.CarbonIntensity,
		CarbonForecast:  r.CarbonForecast,
		Renewable:       r.Renewable,
		ProbeEndpoint:   r.ProbeEndpoint,
		Sharing:         r.Sharing,
		Available:       p.available,
	}
}

func placementConsumer(c *consumer) placement.Consumer {
	pl := api.Placement{Type: c.policy}
	if c.rec.Heartbeat.Placement != nil {
		pl.Weights = c.rec.Heartbeat.Placement.Weights
		pl.LatencyCandidates = c.rec.Heartbeat.Placement.LatencyCandidates
	}
	return placement.Consumer{
		ID:        c.rec.Heartbeat.ClusterID,
		Placement: pl,
		Latitude:  c.rec.Heartbeat.Latitude,
		Longitude: c.rec.Heartbeat.Longitude,
	}
}

// applyLifecycle derives the consumer's disconnect grace, NotReady set and
// budget from its heartbeat.
func applyLifecycle(c *consumer) {
	c.grace, c.notReady = nil, nil
	c.budget = spend.BudgetOf(c.rec.Heartbeat.Budget)
	if l := c.rec.Heartbeat.Lifecycle; l != nil && l.DisconnectGraceSeconds != nil {
		g := time.Duration(*l.DisconnectGraceSeconds) * time.Second
		c.grace = &g
	}
	if ids := c.rec.Heartbeat.NotReadyReservations; len(ids) > 0 {
		c.notReady = make(map[string]struct{}, len(ids))
		for _, id := range ids {
			c.notReady[id] = struct{}{}
		}
	}
}

// applyPolicy normalises the consumer's heartbeated policy.
func (s *Service) applyPolicy(c *consumer) {
	var raw api.PlacementType
	if c.rec.Heartbeat.Placement != nil {
		raw = c.rec.Heartbeat.Placement.Type
	}
	pol, ok := placement.NormalizePolicy(raw)
	c.policy = pol
	c.warning = ""
	if !ok {
		c.warning = "consumer " + c.rec.Heartbeat.ClusterID + " sent unknown placement policy " + string(raw) + "; using Standard"
	}
}
