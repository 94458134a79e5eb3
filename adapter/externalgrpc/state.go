package externalgrpc

import (
	"context"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/federation-autoscaler/federation-autoscaler/adapter/localapi"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// The adapter manages the reservations whose id starts with
// api.ReservationIDPrefix (it creates them for the Cluster Autoscaler).
// Virtual nodes of other reservations (the consoles' manual-…) are not
// managed by CA: NodeGroupForNode answers "not ours" for them and they never
// count in a target size. An instance's id is its virtual node's
// api.ProviderID, also for reservations whose node does not exist yet.

// instanceState is what CA is told about one instance.
type instanceState int

const (
	stateCreating instanceState = iota
	stateRunning
	stateDeleting
	stateFailed
)

// instance is one reservation of the consumer in a node group.
type instance struct {
	reservationID string
	providerID    string
	names         []string
	group         *group
	state         instanceState
	// peered is false while the reservation has no VirtualNodeState yet.
	peered bool
	// pendingSeq is pendingReservation.seq for unpeered instances.
	pendingSeq  uint64
	message     string
	since       time.Time
	allocatable corev1.ResourceList
}

// group is one node group (provider × chunk type) as CA sees it.
type group struct {
	id       string
	provider string
	liqoID   string
	typ      api.ChunkType
	// view is the agent's row for the group; nil when the group only exists
	// because the consumer still holds reservations there (the provider left
	// the view): such a group can shrink but never grow.
	view *api.NodeGroupView
	// gone marks a group that was listed recently but no longer exists; it
	// is not listed but still answers by id, as an empty group.
	gone      bool
	instances []*instance
	target    int32
	max       int32

	templateOnce sync.Once
	template     []byte
	templateErr  error
}

// state is one derived snapshot of the agent's view plus the adapter's
// own bookkeeping; it is immutable once built.
type state struct {
	fetchedAt       time.Time
	groups          []*group
	byID            map[string]*group
	byProviderID    map[string]*instance
	byName          map[string]*instance
	byReservationID map[string]*instance
	// consolidation is the agent's consolidation role per group id.
	consolidation map[string]api.ConsolidationRole
}

// goneGroupTTL is how long a group that vanished keeps answering by id.
const goneGroupTTL = 2 * time.Minute

// knownGroup remembers a group that was listed.
type knownGroup struct {
	provider, liqoID string
	typ              api.ChunkType
	lastSeen         time.Time
}

// pendingReservation is a reservation the adapter created whose
// VirtualNodeState has not appeared yet.
type pendingReservation struct {
	// seq is the mutation counter once the reservation was recorded: a
	// fetch started at seq ≥ this one sees it in the broker's view.
	seq       uint64
	groupID   string
	provider  string
	liqoID    string
	typ       api.ChunkType
	createdAt time.Time
}

// releasedTombstoneTTL is how long a released reservation is remembered
// after its virtual node is gone.
const releasedTombstoneTTL = 10 * time.Minute

// releasedReservation is a reservation the adapter released (or gave up on);
// it is reported as Deleting until its virtual node is gone.
type releasedReservation struct {
	seq      uint64
	groupID  string
	provider string
	typ      api.ChunkType
	at       time.Time
}

// rawSnapshot is what one agent round-trip returns.
type rawSnapshot struct {
	view  *api.NodeGroupListResponse
	nodes []localapi.VirtualNode
	err   error
}

// fetchCall is one in-flight agent round-trip shared by concurrent readers.
type fetchCall struct {
	done chan struct{}
	st   *state
	err  error
}

// read returns the current state: the cached one when it is younger than
// the TTL and no mutation happened since, otherwise one fresh agent
// round-trip shared by all concurrent callers.
func (s *Server) read(ctx context.Context) (*state, error) {
	s.mu.Lock()
	if st := s.cached; st != nil && s.clock.Since(st.fetchedAt) < s.ttl {
		s.mu.Unlock()
		return st, nil
	}
	call := s.inflight
	if call == nil {
		call = &fetchCall{done: make(chan struct{})}
		s.inflight = call
		seq := s.seq
		s.bgWG.Add(1)
		// The fetch is owned by the server, not by the first caller: a CA
		// call that gives up must not fail the others waiting on it.
		go s.fetch(call, seq)
	}
	s.mu.Unlock()
	select {
	case <-call.done:
		return call.st, call.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (s *Server) fetch(call *fetchCall, seq uint64) {
	defer s.bgWG.Done()
	ctx, cancel := context.WithTimeout(s.bgCtx, s.fetchTimeout)
	defer cancel()
	startedAt := s.clock.Now()
	var raw rawSnapshot
	var nodesErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		raw.nodes, nodesErr = s.agent.VirtualNodes(ctx)
	}()
	raw.view, raw.err = s.agent.NodeGroups(ctx)
	wg.Wait()
	if raw.err == nil {
		raw.err = nodesErr
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if raw.err == nil {
		call.st = s.deriveLocked(&raw, seq, startedAt)
		// Cache only answers that no mutation overtook.
		if seq == s.seq {
			s.cached = call.st
		}
	} else {
		call.err = raw.err
	}
	s.inflight = nil
	close(call.done)
}

// invalidateLocked drops the cache after a mutation.
func (s *Server) invalidateLocked() {
	s.seq++
	s.cached = nil
}

// deriveLocked builds the CA-facing state from one agent snapshot and the
// adapter's bookkeeping, and forgets bookkeeping the snapshot made
// redundant. seq is the mutation counter when the fetch started.
func (s *Server) deriveLocked(raw *rawSnapshot, seq uint64, fetchedAt time.Time) *state {
	st := newState(fetchedAt, raw.view)
	seen := s.addVirtualNodesLocked(st, raw.nodes)
	s.addPendingLocked(st)
	s.addReleasedLocked(st, seen, seq)
	s.keepGoneGroupsLocked(st)
	st.sizeGroups(seq)
	return st
}

// newState is a state holding the groups of the agent's view.
func newState(fetchedAt time.Time, view *api.NodeGroupListResponse) *state {
	st := &state{
		fetchedAt:       fetchedAt,
		byID:            map[string]*group{},
		byProviderID:    map[string]*instance{},
		byName:          map[string]*instance{},
		byReservationID: map[string]*instance{},
		consolidation:   view.Consolidation,
	}
	for i := range view.NodeGroups {
		v := &view.NodeGroups[i]
		if v.ID == "" {
			continue
		}
		st.byID[v.ID] = &group{id: v.ID, provider: v.ProviderClusterID, liqoID: v.ProviderLiqoClusterID, typ: v.Type, view: v}
	}
	return st
}

// groupFor finds or synthesizes the group of a reservation: by id, or by
// provider and chunk type when the id is empty. It is nil when neither
// names a provider.
func (st *state) groupFor(id, provider, liqoID string, t api.ChunkType) *group {
	if id == "" && provider != "" && t != "" {
		id = api.NodeGroupID(provider, t)
	}
	if id == "" {
		return nil
	}
	if g, ok := st.byID[id]; ok {
		return g
	}
	if p, pt, ok := api.ParseNodeGroupID(id); ok {
		if provider == "" {
			provider = p
		}
		if t == "" {
			t = pt
		}
	}
	if provider == "" {
		return nil
	}
	g := &group{id: id, provider: provider, liqoID: liqoID, typ: t}
	st.byID[id] = g
	return g
}

// add puts in into its group and the indexes.
func (st *state) add(in *instance) {
	in.group.instances = append(in.group.instances, in)
	st.byReservationID[in.reservationID] = in
	st.byProviderID[in.providerID] = in
	for _, n := range in.names {
		if n != "" {
			st.byName[n] = in
		}
	}
}

// addVirtualNodesLocked adds the adapter's reservations that have a
// VirtualNodeState (they are no longer pending) and returns their ids.
func (s *Server) addVirtualNodesLocked(st *state, nodes []localapi.VirtualNode) map[string]bool {
	seen := make(map[string]bool, len(nodes))
	for i := range nodes {
		vn := &nodes[i]
		if !strings.HasPrefix(vn.ReservationID, api.ReservationIDPrefix) {
			continue
		}
		seen[vn.ReservationID] = true
		delete(s.pending, vn.ReservationID) // it has a VirtualNodeState now
		g := st.groupFor(vn.NodeGroupID, vn.ProviderClusterID, vn.ProviderLiqoClusterID, "")
		if g == nil {
			s.log.Warn("Virtual node without a node group, not reported to the Cluster Autoscaler",
				"reservation", vn.ReservationID, "name", vn.Name)
			continue
		}
		if g.liqoID == "" {
			g.liqoID = vn.ProviderLiqoClusterID
		}
		in := virtualNodeInstance(vn, g)
		if _, ok := s.released[vn.ReservationID]; ok {
			in.state = stateDeleting
		}
		st.add(in)
	}
	return seen
}

// virtualNodeInstance is the instance of virtual node vn in group g.
func virtualNodeInstance(vn *localapi.VirtualNode, g *group) *instance {
	in := &instance{
		reservationID: vn.ReservationID,
		providerID:    vn.ProviderID,
		names:         []string{vn.Name, vn.VirtualNodeName},
		group:         g,
		peered:        true,
		message:       vn.Message,
		allocatable:   vn.Allocatable,
		state:         phaseState(vn.Phase),
	}
	if in.providerID == "" {
		in.providerID = api.ProviderID(g.provider, vn.ReservationID)
	}
	if vn.LastTransitionTime != nil {
		in.since = vn.LastTransitionTime.Time
	}
	return in
}

// phaseState is the instance state of a virtual node's phase.
func phaseState(p localapi.Phase) instanceState {
	switch p {
	case localapi.PhaseRunning:
		return stateRunning
	case localapi.PhaseDeleting:
		return stateDeleting
	case localapi.PhaseFailed:
		return stateFailed
	default:
		return stateCreating
	}
}

// addPendingLocked adds the reservations the adapter created that have no
// VirtualNodeState yet, as Creating.
func (s *Server) addPendingLocked(st *state) {
	for id, p := range s.pending {
		g := st.groupFor(p.groupID, p.provider, p.liqoID, p.typ)
		st.add(&instance{
			reservationID: id,
			providerID:    api.ProviderID(g.provider, id),
			group:         g,
			state:         stateCreating,
			since:         p.createdAt,
			pendingSeq:    p.seq,
		})
	}
}

// addReleasedLocked adds the reservations released after the fetch started
// (seq) whose virtual node is not listed, as Deleting, and forgets old
// tombstones.
func (s *Server) addReleasedLocked(st *state, seen map[string]bool, seq uint64) {
	for id, r := range s.released {
		if seen[id] {
			continue
		}
		if _, ok := s.pending[id]; ok {
			continue
		}
		if r.seq <= seq {
			// Released before this fetch started and its virtual node is
			// gone: nothing left to report. The tombstone stays a while so
			// that a virtual node that shows up late (a Peer racing the
			// release) is still reported as Deleting, never as capacity.
			if s.clock.Since(r.at) >= releasedTombstoneTTL {
				delete(s.released, id)
			}
			continue
		}
		g := st.groupFor(r.groupID, r.provider, "", r.typ)
		st.add(&instance{
			reservationID: id,
			providerID:    api.ProviderID(g.provider, id),
			group:         g,
			state:         stateDeleting,
			since:         r.at,
		})
	}
}

// keepGoneGroupsLocked remembers the listed groups; groups listed recently
// but gone now keep answering by id (empty, not growable) for goneGroupTTL:
// CA caches NodeGroups for its whole loop and a NotFound on a group it just
// listed would abort that loop.
func (s *Server) keepGoneGroupsLocked(st *state) {
	now := s.clock.Now()
	for id, g := range st.byID {
		s.known[id] = knownGroup{provider: g.provider, liqoID: g.liqoID, typ: g.typ, lastSeen: now}
	}
	for id, k := range s.known {
		if _, ok := st.byID[id]; ok {
			continue
		}
		if now.Sub(k.lastSeen) >= goneGroupTTL {
			delete(s.known, id)
			continue
		}
		st.byID[id] = &group{id: id, provider: k.provider, liqoID: k.liqoID, typ: k.typ, gone: true}
	}
}

// sizeGroups computes every group's target and max size and lists the
// groups that are not gone, by id.
func (st *state) sizeGroups(seq uint64) {
	for _, g := range st.byID {
		markDeadPending(g, seq)
		sort.Slice(g.instances, func(i, j int) bool { return g.instances[i].providerID < g.instances[j].providerID })
		for _, in := range g.instances {
			if in.state != stateDeleting {
				g.target++
			}
		}
		g.max = g.target
		if g.view != nil {
			// Head-room as the broker computes it, whatever it counts in
			// currentReserved (the reference: every consumer; ours: this one).
			if h := g.view.MaxSize - g.view.CurrentReserved; h > 0 {
				g.max += h
			}
		}
		if !g.gone {
			st.groups = append(st.groups, g)
		}
	}
	sort.Slice(st.groups, func(i, j int) bool { return st.groups[i].id < st.groups[j].id })
}

// resolve finds the instance a CA node stands for: by providerID first
// (this includes the fake nodes CA builds for unregistered instances, whose
// name and providerID are the instance id), then by name.
func (st *state) resolve(providerID, name string) *instance {
	if providerID != "" {
		if in, ok := st.byProviderID[providerID]; ok {
			return in
		}
		if _, res, ok := api.ParseProviderID(providerID); ok {
			if in, ok := st.byReservationID[res]; ok {
				return in
			}
		}
	}
	if name != "" {
		if in, ok := st.byName[name]; ok {
			return in
		}
		if in, ok := st.byProviderID[name]; ok {
			return in
		}
	}
	return nil
}

// markDeadPending reports as failed the unpeered reservations the broker no
// longer counts. A reservation whose peering fails before the agent created
// its VirtualNodeState (e.g. the provider's credential was refused) never
// shows up in the virtual-node list; without this CA would wait
// --max-node-provision-time for it. The broker's currentReserved counts
// this consumer's (our broker) or everyone's (reference) live reservations
// in the group, so it is never below ours unless some of ours ended; only
// reservations recorded before the fetch started (seq) are weighed, so a
// view older than the reservation cannot condemn it. The oldest are marked.
func markDeadPending(g *group, seq uint64) {
	if g.view == nil {
		return
	}
	var candidates []*instance
	live := int32(0)
	for _, in := range g.instances {
		switch {
		case !in.peered && in.state == stateCreating && in.pendingSeq <= seq:
			candidates = append(candidates, in)
			live++
		case in.peered && (in.state == stateCreating || in.state == stateRunning):
			live++
		}
	}
	excess := live - g.view.CurrentReserved
	if excess <= 0 || len(candidates) == 0 {
		return
	}
	sort.Slice(candidates, func(i, j int) bool { return candidates[i].since.Before(candidates[j].since) })
	for _, in := range candidates[:min(int(excess), len(candidates))] {
		in.state = stateFailed
		in.message = "reservation " + in.reservationID + " is no longer live at the broker: it ended before its virtual node was created"
	}
}
