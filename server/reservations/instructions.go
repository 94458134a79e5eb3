package reservations

import (
	"context"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/store"
)

// Instructions implements rest.Broker: the un-enforced, unexpired
// instructions targeting cn, provider flavour first, then reservation
// flavour, each in issue order. With wait > 0 (capped at MaxWait) it blocks
// until one exists, wait elapses or ctx ends; the waiter is woken the
// instant an instruction for cn is issued or re-armed. Delivery writes
// nothing (bug #22).
func (s *Service) Instructions(ctx context.Context, cn string, role api.Role, wait time.Duration) ([]api.InstructionView, error) {
	if wait > s.cfg.MaxWait {
		wait = s.cfg.MaxWait
	}
	var timer <-chan time.Time
	for {
		s.mu.Lock()
		views := s.viewsLocked(cn, role, s.clock.Now())
		if len(views) > 0 || wait <= 0 {
			s.mu.Unlock()
			return views, nil
		}
		ch, ok := s.st.waitCh[cn]
		if !ok {
			ch = make(chan struct{})
			s.st.waitCh[cn] = ch
		}
		s.mu.Unlock()
		if timer == nil {
			t := s.clock.NewTimer(wait)
			defer t.Stop()
			timer = t.C()
		}
		s.waiters.Add(1)
		select {
		case <-ch:
			s.waiters.Add(-1)
		case <-timer:
			s.waiters.Add(-1)
			return []api.InstructionView{}, nil
		case <-ctx.Done():
			s.waiters.Add(-1)
			return []api.InstructionView{}, nil
		case <-s.stop:
			s.waiters.Add(-1)
			return []api.InstructionView{}, nil
		}
	}
}

// Waiters returns the number of long-poll calls currently blocked.
func (s *Service) Waiters() int64 { return s.waiters.Load() }

// viewsLocked returns the deliverable instructions of cn in role.
func (s *Service) viewsLocked(cn string, role api.Role, now time.Time) []api.InstructionView {
	m := s.st.pending[cn]
	list := make([]*store.Instruction, 0, len(m))
	for _, in := range m {
		if role.Acts(targetRole(in)) {
			list = append(list, in)
		}
	}
	slices.SortFunc(list, func(a, b *store.Instruction) int {
		if a.Flavour != b.Flavour {
			if a.Flavour == store.FlavourProvider {
				return -1
			}
			return 1
		}
		switch {
		case a.Seq < b.Seq:
			return -1
		case a.Seq > b.Seq:
			return 1
		}
		return 0
	})
	out := make([]api.InstructionView, 0, len(list))
	for _, in := range list {
		v, ok := s.view(in, now)
		if ok {
			out = append(out, v)
			s.st.delivered[in.ID] = now
			s.version.Add(1) // the overview shows lastDeliveredAt
		}
	}
	return out
}

// targetRole is the role of an instruction's target: provider-flavour
// instructions go to a provider, reservation-flavour ones to a consumer.
func targetRole(in *store.Instruction) api.Role {
	if in.Flavour == store.FlavourProvider {
		return api.RoleProvider
	}
	return api.RoleConsumer
}

// callerName names a caller in messages: "the consumer \"c1\"", or "cluster
// \"c1\"" for a legacy certificate.
func callerName(cn string, role api.Role) string {
	if role == "" {
		return fmt.Sprintf("cluster %q", cn)
	}
	return fmt.Sprintf("the %s %q", role, cn)
}

// expiresAt is the deadline of a Peer or GenerateKubeconfig instruction:
// the lease deadline of the reservation(s) it serves. Other kinds have
// none (zero).
func (s *Service) expiresAt(in *store.Instruction) time.Time {
	var exp time.Time
	switch in.Kind {
	case api.KindPeer:
		if r := s.st.reservations[in.ReservationID]; r != nil {
			exp = s.leaseDeadline(r)
		}
	case api.KindGenerateKubeconfig:
		for _, id := range in.ReservationIDs {
			if r := s.st.reservations[id]; r != nil {
				exp = later(exp, s.leaseDeadline(r))
			}
		}
	}
	return exp
}

// view renders in for delivery; ok is false when it must not be delivered
// now (expired, a Peer whose credential is gone, or a provider Cleanup held
// for the consumer's teardown).
func (s *Service) view(in *store.Instruction, now time.Time) (api.InstructionView, bool) {
	v := api.InstructionView{
		ID: in.ID, Kind: in.Kind, ReservationID: in.ReservationID,
		ChunkCount: in.ChunkCount, LastChunk: in.LastChunk,
		IssuedAt: mt(in.IssuedAt),
	}
	exp := s.expiresAt(in)
	if in.Kind == api.KindPeer || in.Kind == api.KindGenerateKubeconfig {
		if exp.IsZero() || !now.Before(exp) {
			return v, false
		}
		v.ExpiresAt = mt(exp)
	}
	if in.Flavour == store.FlavourProvider {
		if s.heldForConsumer(in, now) {
			return v, false
		}
		v.ConsumerClusterID = in.ConsumerID
		v.ConsumerLiqoClusterID = in.ConsumerLiqoID
		if in.Kind == api.KindGenerateKubeconfig {
			v.ReservationIDs = slices.Clone(in.ReservationIDs)
		}
		return v, true
	}
	v.ProviderClusterID = in.ProviderID
	v.ProviderLiqoClusterID = in.ProviderLiqoID
	v.ChunkType = in.ChunkType
	v.NodeGroupID = in.NodeGroupID
	if in.Kind == api.KindPeer || in.Kind == api.KindUnpeer {
		v.ResourceSliceResources = in.Resources
		v.Namespaces = slices.Clone(in.Namespaces)
	}
	if in.Kind == api.KindPeer {
		c, ok := s.st.credentials[store.PairKey(in.ConsumerID, in.ProviderID)]
		if !ok {
			return v, false
		}
		v.Kubeconfig = c.Kubeconfig
	}
	return v, true
}

// heldForConsumer reports whether provider instruction in is a Cleanup that
// waits for the consumer's teardown of the same pair: a Cleanup or Unpeer
// for the consumer, of a reservation on the same provider, still pending
// and issued less than ProviderCleanupHold ago. The consumer's liqoctl
// unpeer reads the provider through the peering credential that the
// provider's Cleanup revokes; the release path already orders the two (the
// provider Cleanup follows the Unpeer's result), the failure and expiry
// paths issue both at once.
func (s *Service) heldForConsumer(in *store.Instruction, now time.Time) bool {
	if in.Kind != api.KindCleanup {
		return false
	}
	for _, c := range s.st.pending[in.ConsumerID] {
		if c.Flavour == store.FlavourReservation && c.ProviderID == in.ProviderID &&
			(c.Kind == api.KindCleanup || c.Kind == api.KindUnpeer) && now.Before(c.IssuedAt.Add(s.cfg.ProviderCleanupHold)) {
			return true
		}
	}
	return false
}

// PostResult implements rest.Broker. Transitions happen synchronously: a
// GenerateKubeconfig success moves every reservation of the pair that waits
// for it to Peering at once. A result for an enforced instruction is an
// idempotent replay (no side effects).
func (s *Service) PostResult(ctx context.Context, cn string, role api.Role, id string, req api.InstructionResultRequest) error {
	if id == "" {
		return invalid("instruction id is empty")
	}
	if err := req.Validate(); err != nil {
		return err
	}
	s.mu.Lock()
	in, ok := s.st.instructions[id]
	if !ok {
		s.mu.Unlock()
		return api.Errorf(api.CodeNotFound, "instruction %q not found", id)
	}
	if want := targetRole(in); in.TargetID != cn || !role.Acts(want) {
		s.mu.Unlock()
		return api.Errorf(api.CodeForbidden, "instruction %q is for the %s %q, not for %s", id, want, in.TargetID, callerName(cn, role))
	}
	if in.Enforced {
		s.mu.Unlock()
		return nil
	}
	succeeded := req.Status == api.ResultSucceeded
	if succeeded && in.Kind == api.KindGenerateKubeconfig && (req.Payload == nil || req.Payload.Kubeconfig == "") {
		s.mu.Unlock()
		return invalid("payload.kubeconfig is required for a successful %s result", api.KindGenerateKubeconfig)
	}
	if err := checkReconcileResult(in, req); err != nil {
		s.mu.Unlock()
		return err
	}
	t := s.newTxn()
	msg := api.ResultSucceeded
	if !succeeded {
		msg = "Failed: " + req.Error.Message
	}
	in.Enforced = true
	in.Attempts++
	in.Message = msg
	in.LastUpdate = t.now
	s.st.removePending(in)
	t.putIns(in)
	if in.Flavour == store.FlavourReservation && (in.Kind == api.KindCleanup || in.Kind == api.KindUnpeer) {
		t.wake[in.ProviderID] = struct{}{} // a provider Cleanup held for this teardown may go now
	}
	s.applyResult(t, in, req)
	if r := s.st.reservations[in.ReservationID]; in.Kind == api.KindPeer && r != nil && r.MigratedFrom != "" {
		s.kickSweep() // a move's target peered or failed: the next sweep moves on
	}
	err := s.enqueue(t)
	s.mu.Unlock()
	return await(err)
}

// applyResult advances the phase machine for a result of in.
func (s *Service) applyResult(t *txn, in *store.Instruction, req api.InstructionResultRequest) {
	succeeded := req.Status == api.ResultSucceeded
	switch in.Kind {
	case api.KindGenerateKubeconfig:
		s.applyKubeconfigResult(t, in, req)
	case api.KindPeer:
		r := s.st.reservations[in.ReservationID]
		if r == nil || r.Phase.Terminal() {
			return
		}
		s.applyPeerResult(t, r, req)
	case api.KindUnpeer:
		r := s.st.reservations[in.ReservationID]
		if r == nil || r.Phase != api.PhaseUnpeering {
			return
		}
		if succeeded {
			s.setPhase(t, r, api.PhaseReleased, "chunk released")
			return
		}
		s.setPhase(t, r, api.PhaseFailed, "unpeering failed: "+req.Error.Message)
	default:
		// Cleanup and Reconcile: a failure is logged, never fails a
		// reservation (bug #6); a Reconcile's report is applied.
		if !succeeded {
			s.log.Warn("Instruction failed", "instruction", in.ID, "kind", in.Kind, "target", in.TargetID, "error", req.Error.Message)
		}
		if in.Kind == api.KindReconcile {
			s.applyReconcileResult(t, in, req)
		}
	}
}

// applyKubeconfigResult stages the peering-user kubeconfig and starts the
// peering of every reservation of the pair waiting for it, or fails them.
func (s *Service) applyKubeconfigResult(t *txn, in *store.Instruction, req api.InstructionResultRequest) {
	waiting := s.waitingForGK(in)
	if req.Status != api.ResultSucceeded {
		for _, r := range waiting {
			s.setPhase(t, r, api.PhaseFailed, "generating the peering-user kubeconfig failed: "+req.Error.Message)
		}
		return
	}
	c := &store.Credential{ConsumerID: in.ConsumerID, ProviderID: in.ProviderID, Kubeconfig: req.Payload.Kubeconfig, CreatedAt: t.now}
	s.st.credentials[c.Key()] = c
	t.other = append(t.other, store.PutCredential(*c))
	for _, r := range waiting {
		s.setPhase(t, r, api.PhaseKubeconfigReady, "peering-user kubeconfig staged")
		s.startPeering(t, r)
	}
}

// applyPeerResult records the virtual nodes of a successful Peer and marks
// live reservation r Peered, or Failed when the Peer failed. An Unpeering
// reservation keeps its pending Unpeer either way.
func (s *Service) applyPeerResult(t *txn, r *store.Reservation, req api.InstructionResultRequest) {
	if req.Status != api.ResultSucceeded {
		if r.Phase == api.PhaseUnpeering {
			return // the pending Unpeer cleans up
		}
		s.setPhase(t, r, api.PhaseFailed, "peering failed: "+req.Error.Message)
		return
	}
	if req.Payload != nil && len(req.Payload.VirtualNodeNames) > 0 {
		names := slices.Clone(r.VirtualNodeNames)
		for _, n := range req.Payload.VirtualNodeNames {
			if n != "" && !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
		r.VirtualNodeNames = names
		t.putRes(r)
	}
	// A late success never resurrects a released reservation
	// (bug #7): an Unpeering reservation keeps its Unpeer.
	if r.Phase == api.PhaseUnpeering {
		return
	}
	at := t.now
	r.ActivatedAt = &at
	s.setPhase(t, r, api.PhasePeered, "peering completed")
}

// waitingForGK returns the reservations of in's pair that wait for a
// kubeconfig (every one of them, not only those named in the instruction:
// they all share the credential).
func (s *Service) waitingForGK(in *store.Instruction) []*store.Reservation {
	var out []*store.Reservation
	for _, r := range s.st.byPair[store.PairKey(in.ConsumerID, in.ProviderID)] {
		if r.Phase == api.PhaseGeneratingKubeconfig {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b *store.Reservation) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out
}

func overviewInstruction(in *store.Instruction, exp time.Time, delivered time.Time) api.OverviewInstruction {
	o := api.OverviewInstruction{
		ID: in.ID, Kind: in.Kind, ReservationID: in.ReservationID, TargetClusterID: in.TargetID,
		ChunkCount: in.ChunkCount, LastChunk: in.LastChunk, Enforced: in.Enforced, Attempts: in.Attempts,
		IssuedAt: mtp(&in.IssuedAt), LastUpdateTime: mtp(&in.LastUpdate), Message: in.Message,
		ConsumerClusterID: in.ConsumerID, ConsumerLiqoClusterID: in.ConsumerLiqoID, ProviderClusterID: in.ProviderID,
	}
	if !exp.IsZero() {
		v := metav1.NewTime(exp.UTC())
		o.ExpiresAt = &v
	}
	if !delivered.IsZero() {
		v := metav1.NewTime(delivered.UTC())
		o.LastDeliveredAt = &v
	}
	return o
}
