package reservations

import (
	"context"
	"slices"
	"time"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/placement"
	"github.com/federation-autoscaler/federation-autoscaler/server/store"
)

func invalid(format string, args ...any) *api.Error {
	return api.Errorf(api.CodeInvalidRequest, format, args...)
}

// sameSet reports whether a and b hold the same strings, ignoring order and
// duplicates.
func sameSet(a, b []string) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(slices.Compact(x), slices.Compact(y))
}

// Reserve implements rest.Broker. The evaluation order is: body and id
// validation, replay lookup, heartbeat (412), provider and chunk type (404),
// freshness (503), sharing (403), quota and capacity (409), budget (409
// BudgetExceeded), create (201).
func (s *Service) Reserve(ctx context.Context, cn, id string, req api.ReservationRequest) (api.ReservationResponse, bool, error) {
	if err := req.Validate(); err != nil {
		return api.ReservationResponse{}, false, err
	}
	id, err := api.ReservationIDOr(id, uuid.NewString)
	if err != nil {
		return api.ReservationResponse{}, false, err
	}

	s.mu.Lock()
	if r, ok := s.st.reservations[id]; ok {
		same := r.ConsumerID == cn && r.ProviderID == req.ProviderClusterID && r.ChunkType == req.ChunkType &&
			r.ChunkCount == req.ChunkCount && sameSet(r.Namespaces, req.Namespaces)
		resp := s.reservationResponse(r)
		s.mu.Unlock()
		if !same {
			return api.ReservationResponse{}, false, api.Errorf(api.CodeConflict, "reservation %q already exists with a different spec", id)
		}
		return resp, false, nil
	}
	c, p, err := s.admitLocked(cn, req, s.clock.Now())
	if err != nil {
		s.mu.Unlock()
		return api.ReservationResponse{}, false, err
	}
	t := s.newTxn()
	r := s.createLocked(t, id, cn, c, p, req)
	s.admittedLocked(cn)
	resp := s.reservationResponse(r)
	req2 := s.enqueue(t)
	s.mu.Unlock()
	if err := await(req2); err != nil {
		return api.ReservationResponse{}, false, err
	}
	return resp, true, nil
}

// admitLocked decides whether consumer cn may reserve req now, in Reserve's
// order: heartbeat (412), provider and chunk type (404), freshness (503),
// sharing (403), quota and capacity (409), budget (409 BudgetExceeded).
func (s *Service) admitLocked(cn string, req api.ReservationRequest, now time.Time) (*consumer, *provider, error) {
	st := s.st
	c, ok := st.consumers[cn]
	if !ok {
		return nil, nil, api.Errorf(api.CodePreconditionFailed, "consumer %q has never sent a heartbeat: send POST /api/v1/heartbeat first", cn)
	}
	p, ok := st.providers[req.ProviderClusterID]
	if !ok {
		return nil, nil, api.Errorf(api.CodeNotFound, "no advertisement for cluster %q", req.ProviderClusterID)
	}
	total := p.chunks[req.ChunkType]
	if total <= 0 && len(p.chunks) > 0 {
		// The provider is a pool of another chunk type. (A provider with no
		// whole chunk at all right now answers 409 below: that is a
		// capacity shortage, not a wrong node group.)
		return nil, nil, api.Errorf(api.CodeNotFound, "provider %q offers no %s chunks", req.ProviderClusterID, req.ChunkType)
	}
	if !p.available {
		return nil, nil, api.Errorf(api.CodeServiceUnavailable, "provider %q is not available: no advertisement for %s", req.ProviderClusterID, s.cfg.ProviderStaleAfter)
	}
	sharing := p.rec.Request.Sharing
	if !placement.MayBorrow(sharing, cn) {
		return nil, nil, api.Errorf(api.CodeForbidden, "provider %q does not share its capacity with consumer %q", req.ProviderClusterID, cn)
	}
	if q := placement.Quota(sharing); q > 0 {
		if live := st.usage[usageKey{req.ProviderClusterID, req.ChunkType, cn}].Live; live+req.ChunkCount > q {
			return nil, nil, api.Errorf(api.CodeInsufficientCapacity,
				"consumer %q already holds %d of the %d %s chunks provider %q allows per consumer", cn, live, q, req.ChunkType, req.ProviderClusterID).
				WithDetails(map[string]any{"available": max(q-live, 0), "requested": req.ChunkCount, "quota": q})
		}
	}
	reserved := st.reserved[ptKey{req.ProviderClusterID, req.ChunkType}]
	if avail := total - reserved; avail < req.ChunkCount {
		return nil, nil, api.Errorf(api.CodeInsufficientCapacity,
			"provider %q has %d free %s chunks, %d requested", req.ProviderClusterID, max(avail, 0), req.ChunkType, req.ChunkCount).
			WithDetails(map[string]any{"available": max(avail, 0), "requested": req.ChunkCount})
	}
	if err := s.admitBudgetLocked(cn, c, req, now); err != nil {
		return nil, nil, err
	}
	return c, p, nil
}

// createLocked records the admitted reservation id as Pending in t and
// starts its peering.
func (s *Service) createLocked(t *txn, id, cn string, c *consumer, p *provider, req api.ReservationRequest) *store.Reservation {
	st := s.st
	r := &store.Reservation{
		ID: id, ConsumerID: cn, ConsumerLiqoID: c.rec.Heartbeat.LiqoClusterID,
		ProviderID: req.ProviderClusterID, ProviderLiqoID: p.rec.Request.LiqoClusterID,
		ChunkType: req.ChunkType, ChunkCount: req.ChunkCount, Resources: s.chunkShape(req.ChunkType),
		Namespaces: slices.Clone(req.Namespaces), CreatedAt: t.now,
	}
	st.reservations[id] = r
	st.indexPair(r)
	k := st.addUsage(r, api.PhasePending, 1)
	t.touched[k] = struct{}{}
	r.Phase = api.PhasePending
	r.Message = "reservation created"
	r.History = []store.Transition{{Phase: api.PhasePending, At: t.now, Message: r.Message}}
	t.putRes(r)
	s.advance(t, r)
	return r
}

func (s *Service) chunkShape(t api.ChunkType) corev1.ResourceList {
	if t == api.ChunkGPU {
		return s.cfg.ChunkConfig.GPU.DeepCopy()
	}
	return s.cfg.ChunkConfig.Standard.DeepCopy()
}

// leaseDeadline is when r expires unless its consumer heartbeats.
func (s *Service) leaseDeadline(r *store.Reservation) time.Time {
	base := r.CreatedAt
	if c := s.st.consumers[r.ConsumerID]; c != nil {
		base = later(c.leaseBase, base)
	}
	return base.Add(s.cfg.ReservationLease)
}

func mt(t time.Time) metav1.Time { return metav1.NewTime(t.UTC()) }

func mtp(t *time.Time) *metav1.Time {
	if t == nil {
		return nil
	}
	v := mt(*t)
	return &v
}

func (s *Service) reservationResponse(r *store.Reservation) api.ReservationResponse {
	exp := s.leaseDeadline(r)
	if r.TerminatedAt != nil {
		exp = *r.TerminatedAt
	}
	return api.ReservationResponse{
		GraceUntil:            mtp(s.graceUntilLocked(r, s.clock.Now())),
		ReservationID:         r.ID,
		Status:                r.Phase,
		ProviderClusterID:     r.ProviderID,
		ProviderLiqoClusterID: r.ProviderLiqoID,
		ConsumerClusterID:     r.ConsumerID,
		ConsumerLiqoClusterID: r.ConsumerLiqoID,
		ChunkCount:            r.ChunkCount,
		ChunkType:             r.ChunkType,
		Resources:             r.Resources,
		VirtualNodeNames:      slices.Clone(r.VirtualNodeNames),
		CreatedAt:             mt(r.CreatedAt),
		ActivatedAt:           mtp(r.ActivatedAt),
		ExpiresAt:             mt(exp),
		Message:               r.Message,
		NodeGroupID:           api.NodeGroupID(r.ProviderID, r.ChunkType),
		MigratedFrom:          r.MigratedFrom,
	}
}

// Reservation implements rest.Broker: the reservation's consumer (in the
// consumer role) and its provider (in the provider role) may read it.
func (s *Service) Reservation(ctx context.Context, cn string, role api.Role, id string) (api.ReservationResponse, error) {
	if id == "" {
		return api.ReservationResponse{}, invalid("reservation id is empty")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.st.reservations[id]
	if !ok {
		return api.ReservationResponse{}, api.Errorf(api.CodeNotFound, "reservation %q not found", id)
	}
	consumer := cn == r.ConsumerID && role.Acts(api.RoleConsumer)
	provider := cn == r.ProviderID && role.Acts(api.RoleProvider)
	if !consumer && !provider {
		return api.ReservationResponse{}, api.Errorf(api.CodeForbidden, "%s is neither the consumer nor the provider of reservation %q", callerName(cn, role), id)
	}
	return s.reservationResponse(r), nil
}

// Release implements rest.Broker. A reservation that never started
// peering goes straight to Released (no Unpeer); one that did moves to
// Unpeering and gets an Unpeer instruction. Releasing an Unpeering or
// terminal reservation changes nothing. Concurrent calls serialise on the
// service mutex, so they never conflict (bug #29).
func (s *Service) Release(ctx context.Context, cn, id string, chunks int) (api.ReleaseResponse, error) {
	if id == "" {
		return api.ReleaseResponse{}, invalid("reservation id is empty")
	}
	if chunks < 0 {
		return api.ReleaseResponse{}, invalid("chunks must be >= 0, got %d", chunks)
	}
	s.mu.Lock()
	r, ok := s.st.reservations[id]
	if !ok {
		s.mu.Unlock()
		return api.ReleaseResponse{}, api.Errorf(api.CodeNotFound, "reservation %q not found", id)
	}
	if cn != r.ConsumerID {
		s.mu.Unlock()
		return api.ReleaseResponse{}, api.Errorf(api.CodeForbidden, "only consumer %q may release reservation %q", r.ConsumerID, id)
	}
	if chunks != 0 && int32(chunks) != r.ChunkCount {
		s.mu.Unlock()
		return api.ReleaseResponse{}, api.Errorf(api.CodeNotImplemented, "partial release is not implemented: release all %d chunks", r.ChunkCount)
	}
	if r.Phase.Terminal() || r.Phase == api.PhaseUnpeering {
		resp := api.ReleaseResponse{ReservationID: id, Status: r.Phase}
		s.mu.Unlock()
		return resp, nil
	}
	t := s.newTxn()
	s.release(t, r)
	resp := api.ReleaseResponse{ReservationID: id, Status: r.Phase}
	req := s.enqueue(t)
	s.mu.Unlock()
	if err := await(req); err != nil {
		return api.ReleaseResponse{}, err
	}
	return resp, nil
}
