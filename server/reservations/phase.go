package reservations

import (
	"slices"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/store"
)

// Instruction names. Cluster ids are DNS-1123 labels and cannot contain
// ".", so the shared provider-side names cannot collide (bug #15); the
// reservation-side names carry a fixed prefix per kind.
func gkName(consumer, provider string) string       { return "gk." + consumer + "." + provider }
func pcleanupName(consumer, provider string) string { return "pcleanup." + consumer + "." + provider }
func peerName(res string) string                    { return "peer-" + res }
func unpeerName(res string) string                  { return "unpeer-" + res }
func cleanupName(res string) string                 { return "cleanup-" + res }

// setPhase moves r to phase to, recording the transition, keeping the
// ledger in step and running the terminal handling exactly once.
func (s *Service) setPhase(t *txn, r *store.Reservation, to api.Phase, msg string) {
	from := r.Phase
	if from.Terminal() {
		return
	}
	if from != to {
		s.st.addUsage(r, from, -1)
		k := s.st.addUsage(r, to, 1)
		t.touched[k] = struct{}{}
		r.Phase = to
	}
	r.Message = msg
	r.History = append(r.History, store.Transition{Phase: to, At: t.now, Message: msg})
	t.putRes(r)
	if to.Terminal() {
		at := t.now
		r.TerminatedAt = &at
		s.onTerminal(t, r)
	}
}

// advance runs the synchronous part of the phase machine from Pending:
// reuse a staged credential, or ask the provider for one.
func (s *Service) advance(t *txn, r *store.Reservation) {
	if r.Phase != api.PhasePending {
		return
	}
	if _, ok := s.st.credentials[store.PairKey(r.ConsumerID, r.ProviderID)]; ok {
		s.setPhase(t, r, api.PhaseKubeconfigReady, "reusing the staged peering-user kubeconfig")
		s.startPeering(t, r)
		return
	}
	s.setPhase(t, r, api.PhaseGeneratingKubeconfig, "waiting for the provider to generate a peering-user kubeconfig")
	s.ensureGK(t, r)
}

// ensureGK creates, extends or re-arms the shared GenerateKubeconfig of r's
// pair so that it serves r.
func (s *Service) ensureGK(t *txn, r *store.Reservation) {
	id := gkName(r.ConsumerID, r.ProviderID)
	in := s.st.instructions[id]
	switch {
	case in == nil:
		in = &store.Instruction{
			ID: id, Kind: api.KindGenerateKubeconfig, Flavour: store.FlavourProvider,
			TargetID: r.ProviderID, ChunkCount: r.ChunkCount,
			ConsumerID: r.ConsumerID, ProviderID: r.ProviderID,
		}
		s.st.instructions[id] = in
		s.arm(t, in, r, "issued")
	case in.Enforced:
		s.arm(t, in, r, "re-armed for a new (consumer, provider) cycle")
	default:
		// Un-enforced copy: it now serves r as well (fix #16).
		if !slices.Contains(in.ReservationIDs, r.ID) {
			in.ReservationIDs = append(in.ReservationIDs, r.ID)
		}
		in.ConsumerLiqoID = r.ConsumerLiqoID
		t.putIns(in)
	}
}

func (s *Service) arm(t *txn, in *store.Instruction, r *store.Reservation, msg string) {
	s.st.seq++
	in.Seq = s.st.seq
	delete(s.st.delivered, in.ID)
	in.ReservationID = r.ID
	in.ReservationIDs = []string{r.ID}
	in.ConsumerLiqoID = r.ConsumerLiqoID
	in.Enforced = false
	in.Attempts = 0
	in.Message = msg
	in.IssuedAt = t.now
	in.LastUpdate = t.now
	s.st.addPending(in)
	t.putIns(in)
	t.wake[in.TargetID] = struct{}{}
}

// issue stores a new (or replaces an existing) instruction and wakes its
// target.
func (s *Service) issue(t *txn, in *store.Instruction) {
	if old := s.st.instructions[in.ID]; old != nil {
		s.st.removePending(old)
	}
	s.st.seq++
	in.Seq = s.st.seq
	delete(s.st.delivered, in.ID)
	in.IssuedAt = t.now
	in.LastUpdate = t.now
	in.Message = "issued"
	s.st.instructions[in.ID] = in
	s.st.addPending(in)
	t.putIns(in)
	t.wake[in.TargetID] = struct{}{}
}

// retire marks an un-enforced instruction as enforced without a result (it
// is no longer needed); it is then garbage collected like any other.
func (s *Service) retire(t *txn, id, msg string) {
	in := s.st.instructions[id]
	if in == nil || in.Enforced {
		return
	}
	in.Enforced = true
	in.Message = msg
	in.LastUpdate = t.now
	s.st.removePending(in)
	t.putIns(in)
}

// reservationInstruction builds a consumer-side instruction for r.
func reservationInstruction(r *store.Reservation, id string, kind api.InstructionKind) *store.Instruction {
	return &store.Instruction{
		ID: id, Kind: kind, Flavour: store.FlavourReservation,
		TargetID: r.ConsumerID, ReservationID: r.ID,
		ConsumerID: r.ConsumerID, ConsumerLiqoID: r.ConsumerLiqoID,
		ProviderID: r.ProviderID, ProviderLiqoID: r.ProviderLiqoID,
		ChunkCount: r.ChunkCount, ChunkType: r.ChunkType,
		NodeGroupID: api.NodeGroupID(r.ProviderID, r.ChunkType),
		Resources:   r.Resources, Namespaces: r.Namespaces,
	}
}

// startPeering moves a KubeconfigReady reservation to Peering and issues
// its Peer instruction.
func (s *Service) startPeering(t *txn, r *store.Reservation) {
	if r.Phase != api.PhaseKubeconfigReady {
		return
	}
	r.PeeringStarted = true
	s.setPhase(t, r, api.PhasePeering, "peering instruction issued to the consumer")
	s.issue(t, reservationInstruction(r, peerName(r.ID), api.KindPeer))
}

// lastChunk reports whether r is the last reservation of its pair that
// still needs the peering: no other reservation of the pair is live and not
// Unpeering.
func (s *Service) lastChunk(r *store.Reservation) bool {
	for id, o := range s.st.byPair[store.PairKey(r.ConsumerID, r.ProviderID)] {
		if id != r.ID && !o.Phase.Terminal() && o.Phase != api.PhaseUnpeering {
			return false
		}
	}
	return true
}

// pairLive reports whether r's pair has another live reservation.
func (s *Service) pairLive(r *store.Reservation) bool {
	for id, o := range s.st.byPair[store.PairKey(r.ConsumerID, r.ProviderID)] {
		if id != r.ID && !o.Phase.Terminal() {
			return true
		}
	}
	return false
}

// release handles a consumer's release of r (not terminal, not Unpeering).
// A reservation that never started peering is Released at once: there is
// nothing to unpeer.
func (s *Service) release(t *txn, r *store.Reservation) {
	s.releaseAs(t, r, "release requested by consumer")
}

// releaseAs is release with msg as the reason of the move to Unpeering.
func (s *Service) releaseAs(t *txn, r *store.Reservation, msg string) {
	if !r.PeeringStarted {
		s.setPhase(t, r, api.PhaseReleased, "released by the consumer before peering started")
		return
	}
	s.retire(t, peerName(r.ID), "superseded: the consumer released the reservation")
	s.setPhase(t, r, api.PhaseUnpeering, msg)
	in := reservationInstruction(r, unpeerName(r.ID), api.KindUnpeer)
	in.LastChunk = s.lastChunk(r)
	s.issue(t, in)
}

// onTerminal credits the chunk back (done by setPhase through the ledger),
// retires the reservation's pending work and cleans up the pair. It runs
// exactly once per reservation: setPhase never leaves a terminal phase.
func (s *Service) onTerminal(t *txn, r *store.Reservation) {
	s.retire(t, peerName(r.ID), "superseded: reservation is "+string(r.Phase))
	// Drop r from the shared GenerateKubeconfig; retire it when it serves
	// nobody any more.
	gk := s.st.instructions[gkName(r.ConsumerID, r.ProviderID)]
	if gk != nil && !gk.Enforced && slices.Contains(gk.ReservationIDs, r.ID) {
		ids := make([]string, 0, len(gk.ReservationIDs))
		for _, id := range gk.ReservationIDs {
			if id != r.ID {
				ids = append(ids, id)
			}
		}
		gk.ReservationIDs = ids
		t.putIns(gk)
		waiting := false
		for _, id := range ids {
			if o := s.st.reservations[id]; o != nil && o.Phase == api.PhaseGeneratingKubeconfig {
				waiting = true
			}
		}
		if !waiting {
			s.retire(t, gk.ID, "superseded: no reservation waits for this kubeconfig")
		}
	}
	if r.Phase != api.PhaseReleased && r.PeeringStarted {
		s.retire(t, unpeerName(r.ID), "superseded by cleanup: reservation is "+string(r.Phase))
		in := reservationInstruction(r, cleanupName(r.ID), api.KindCleanup)
		in.LastChunk = s.lastChunk(r)
		s.issue(t, in)
	}
	if s.pairLive(r) {
		return
	}
	key := store.PairKey(r.ConsumerID, r.ProviderID)
	_, hasCred := s.st.credentials[key]
	_, hasGK := s.st.instructions[gkName(r.ConsumerID, r.ProviderID)]
	if hasCred {
		delete(s.st.credentials, key)
		t.other = append(t.other, store.Delete(store.KindCredential, key))
	}
	if hasCred || hasGK {
		s.issue(t, &store.Instruction{
			ID: pcleanupName(r.ConsumerID, r.ProviderID), Kind: api.KindCleanup, Flavour: store.FlavourProvider,
			TargetID: r.ProviderID, ReservationID: r.ID, ChunkCount: r.ChunkCount,
			ConsumerID: r.ConsumerID, ConsumerLiqoID: r.ConsumerLiqoID, ProviderID: r.ProviderID,
		})
	}
}
