package reservations

import (
	"context"
	"slices"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/store"
)

// ReconcileQuiet is how long after a cluster answered a Reconcile it gets
// no new one from ReconcileAll: leadership that flaps between replicas
// (each new leader calls ReconcileAll) never sends a second round to
// clusters that have just reported their state.
const ReconcileQuiet = time.Minute

// The Reconcile instructions' names: one per cluster and role. Cluster ids
// are DNS-1123 labels and cannot contain ".".
func reconcileName(consumer string) string  { return "reconcile." + consumer }
func preconcileName(provider string) string { return "preconcile." + provider }

// ReconcileAll issues a Reconcile instruction to every active cluster: each
// provider that is available or lends live chunks, each consumer that holds
// a live reservation or heartbeated within the reservation lease. A new
// leader calls it once it has rebuilt the ledger from the store, so the
// agents' answers (a provider's current advertisement, a consumer's
// virtual nodes) bring back what the old leader never stored. It is
// idempotent: a cluster whose Reconcile is still pending, or was answered
// less than ReconcileQuiet ago, gets none. It returns how many it issued,
// once they are durable.
func (s *Service) ReconcileAll(_ context.Context) (int, error) {
	s.mu.Lock()
	t := s.newTxn()
	lending := map[string]bool{}
	holding := map[string]bool{}
	for k, u := range s.st.usage {
		if u.Live > 0 {
			lending[k.provider], holding[k.consumer] = true, true
		}
	}
	n := 0
	for _, id := range sortedKeys(s.st.providers) {
		if s.st.providers[id].available || lending[id] {
			n += s.issueReconcile(t, &store.Instruction{ID: preconcileName(id), Kind: api.KindReconcile, Flavour: store.FlavourProvider, TargetID: id, ProviderID: id})
		}
	}
	for _, id := range sortedKeys(s.st.consumers) {
		c := s.st.consumers[id]
		if holding[id] || t.now.Before(c.rec.LastSeen.Add(s.cfg.ReservationLease)) {
			n += s.issueReconcile(t, &store.Instruction{ID: reconcileName(id), Kind: api.KindReconcile, Flavour: store.FlavourReservation,
				TargetID: id, ConsumerID: id, ConsumerLiqoID: c.rec.Heartbeat.LiqoClusterID})
		}
	}
	req := s.enqueue(t)
	s.mu.Unlock()
	if err := await(req); err != nil {
		return 0, err
	}
	return n, nil
}

// issueReconcile issues in unless the same Reconcile is pending or was
// answered less than ReconcileQuiet ago; it returns 1 when it issued.
func (s *Service) issueReconcile(t *txn, in *store.Instruction) int {
	if old := s.st.instructions[in.ID]; old != nil && (!old.Enforced || t.now.Before(old.LastUpdate.Add(ReconcileQuiet))) {
		return 0
	}
	s.issue(t, in)
	return 1
}

// checkReconcileResult refuses a successful Reconcile result whose
// advertisement is not one the provider could have posted.
func checkReconcileResult(in *store.Instruction, req api.InstructionResultRequest) error {
	if in.Kind != api.KindReconcile || req.Status != api.ResultSucceeded || req.Payload == nil || req.Payload.Advertisement == nil {
		return nil
	}
	if in.Flavour != store.FlavourProvider {
		return invalid("payload.advertisement: a consumer's Reconcile result reports virtualNodeStates, not an advertisement")
	}
	_, err := checkAdvertisement(in.TargetID, *req.Payload.Advertisement)
	return err
}

// applyReconcileResult brings the ledger in line with what the agent
// reported: a provider's advertisement is applied as if it had been
// posted; a consumer's running virtual nodes complete the Peer of a
// reservation still Peering (the Peer result the old leader never stored)
// and add virtual node names a Peered reservation lacks. A Peered
// reservation the consumer reports no virtual node for is logged, never
// failed: the report may predate a Peer handled since.
func (s *Service) applyReconcileResult(t *txn, in *store.Instruction, req api.InstructionResultRequest) {
	if req.Status != api.ResultSucceeded || req.Payload == nil {
		return
	}
	if in.Flavour == store.FlavourProvider {
		if ad := req.Payload.Advertisement; ad != nil {
			if ad, err := checkAdvertisement(in.TargetID, *ad); err == nil { // checked by PostResult
				s.upsertProviderLocked(t, in.TargetID, ad)
			}
		}
		return
	}
	reported := map[string]bool{}
	for _, v := range req.Payload.VirtualNodeStates {
		r := s.st.reservations[v.ReservationID]
		if r == nil || r.ConsumerID != in.TargetID || r.Phase.Terminal() || v.VirtualNodeName == "" {
			continue
		}
		reported[r.ID] = true
		switch {
		case r.Phase == api.PhasePeering && v.Phase == api.VirtualNodeRunning:
			s.retire(t, peerName(r.ID), "enforced by the consumer's Reconcile: its virtual node "+v.VirtualNodeName+" runs")
			s.applyPeerResult(t, r, api.InstructionResultRequest{Status: api.ResultSucceeded,
				Payload: &api.InstructionPayload{Kind: api.PayloadPeer, VirtualNodeNames: []string{v.VirtualNodeName}}})
			s.log.Info("Reconcile: the consumer runs the virtual node of a reservation the ledger held as Peering; now Peered",
				"consumer", in.TargetID, "reservation", r.ID, "virtualNode", v.VirtualNodeName)
		case (r.Phase == api.PhasePeered || r.Phase == api.PhaseUnpeering) && !slices.Contains(r.VirtualNodeNames, v.VirtualNodeName):
			r.VirtualNodeNames = append(slices.Clone(r.VirtualNodeNames), v.VirtualNodeName)
			t.putRes(r)
		}
	}
	for _, r := range s.st.reservations {
		if r.ConsumerID == in.TargetID && r.Phase == api.PhasePeered && !reported[r.ID] {
			s.log.Warn("Reconcile: the consumer reports no virtual node for a Peered reservation; it releases it or the lease expires it",
				"consumer", in.TargetID, "reservation", r.ID)
		}
	}
}
