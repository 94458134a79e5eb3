package consumer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"

	"github.com/federation-autoscaler/federation-autoscaler/agent/brokerclient"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// Resync compares the local VirtualNodeStates with the broker's
// reservations: a VirtualNodeState whose reservation the broker does not
// know (404) or holds in a terminal phase is an orphan and is removed with
// its slice, node and Secret. Missing chunks are reported (logged and
// counted in fa_agent_missing_virtual_nodes_total): a reservation made
// through this agent's local API since it started that the broker holds as
// Peered but that has no local VirtualNodeState, and a live reservation
// whose local chunk is Failed (that VirtualNodeState stays visible to the
// adapter). It runs at start and after every heartbeat that follows a
// failed one (the broker may have restarted).
func (a *Agent) Resync(ctx context.Context) error {
	list, err := a.listVNS(ctx)
	if err != nil {
		return err
	}
	var errs []error
	removed := 0
	local := map[string]bool{}
	for _, v := range list {
		local[v.Spec.ReservationID] = true
	}
	// Missing: reservations made here that the broker has peered but that
	// have no local VirtualNodeState (deleted by hand, lost).
	for id := range a.held.Range {
		res := id.(string)
		if local[res] {
			continue
		}
		r, err := a.cfg.Broker.Reservation(ctx, res)
		switch {
		case brokerclient.StatusOf(err) == http.StatusNotFound || err == nil && r.Status.Terminal():
			a.held.Delete(res)
		case err != nil:
			errs = append(errs, fmt.Errorf("reading reservation %s: %w", res, err))
		case r.Status == api.PhasePeered:
			a.log.Warn("The broker holds a peered reservation of this consumer with no local virtual node; release it or wait for the broker's cleanup", "reservation", res)
			a.missing.Add(1)
		}
	}
	for _, v := range list {
		res := v.Spec.ReservationID
		r, err := a.cfg.Broker.Reservation(ctx, res)
		orphan := false
		switch {
		case brokerclient.StatusOf(err) == http.StatusNotFound:
			orphan = true
		case err != nil:
			errs = append(errs, fmt.Errorf("reading reservation %s: %w", res, err))
			continue
		case r.Status.Terminal():
			orphan = true
		}
		if orphan {
			a.log.Info("Removing a virtual node the broker no longer holds", "reservation", res, "brokerPhase", r.Status)
			if err := a.removeLocal(ctx, res, v.Spec.ProviderLiqoClusterID, false); err != nil {
				errs = append(errs, err)
			} else {
				removed++
			}
			continue
		}
		if v.Status.Phase == "Failed" && r.Status == api.PhasePeered {
			a.missing.Add(1)
			a.log.Warn("The broker holds a peered reservation whose local virtual node failed", "reservation", res, "message", v.Status.Message)
		}
	}
	if removed > 0 {
		a.BeatNow()
	}
	return errors.Join(errs...)
}

// handleReconcile reports the local VirtualNodeStates (the broker's new
// leader sends a Reconcile after a takeover, so that its ledger equals
// what this consumer runs), and asks for a resync and a heartbeat at once:
// the agent's whole state goes to the new leader.
func (a *Agent) handleReconcile(ctx context.Context, _ api.InstructionView) (*api.InstructionPayload, error) {
	list, err := a.listVNS(ctx)
	if err != nil {
		return nil, err
	}
	reports := make([]api.VirtualNodeStateReport, 0, len(list))
	for _, v := range list {
		reports = append(reports, api.VirtualNodeStateReport{
			ReservationID: v.Spec.ReservationID, ChunkIndex: v.Spec.ChunkIndex, NodeGroupID: v.Spec.NodeGroupID,
			VirtualNodeName: v.Status.VirtualNodeName, ResourceSliceName: v.Spec.ResourceSliceName,
			Phase: string(v.Status.Phase), LastTransitionTime: v.Status.LastTransitionTime,
		})
	}
	a.RequestResync()
	a.BeatNow()
	return &api.InstructionPayload{Kind: api.PayloadReconcile, VirtualNodeStates: reports}, nil
}

// RequestResync asks Run to resync at its next turn.
func (a *Agent) RequestResync() {
	select {
	case a.resync <- struct{}{}:
	default:
	}
}

// remask applies the consumer-side latency re-mask (reference §6.5): probe
// every growable candidate with a probe endpoint, keep the lowest RTT, and
// mask every other growable view (maxSize = currentReserved). With no
// candidate or no answer the broker's view is left as is.
func (a *Agent) remask(ctx context.Context, view *api.NodeGroupListResponse) {
	best := ""
	bestRTT := math.Inf(1)
	rtts, measuredChanged := a.measure(ctx, view)
	for p, rtt := range rtts {
		if rtt < bestRTT || rtt == bestRTT && p < best {
			best, bestRTT = p, rtt
		}
	}
	if best == "" {
		return
	}
	a.mu.Lock()
	changed := a.chosen != best || measuredChanged
	a.chosen = best
	a.mu.Unlock()
	if changed {
		a.BeatNow()
	}
	for i := range view.NodeGroups {
		g := &view.NodeGroups[i]
		if g.ProviderClusterID != best && g.MaxSize > g.CurrentReserved {
			g.MaxSize = g.CurrentReserved
		}
	}
}

// measure probes the probe endpoints of the view's groups with room and
// returns the RTTs in ms by provider (nil when nothing was measured),
// which the heartbeats then report, and whether the set of measured
// providers changed.
func (a *Agent) measure(ctx context.Context, view *api.NodeGroupListResponse) (map[string]float64, bool) {
	byEndpoint := map[string]string{}
	var eps []string
	for _, g := range view.NodeGroups {
		if g.MaxSize > g.CurrentReserved && g.ProbeEndpoint != "" {
			if _, ok := byEndpoint[g.ProbeEndpoint]; !ok {
				byEndpoint[g.ProbeEndpoint] = g.ProviderClusterID
				eps = append(eps, g.ProbeEndpoint)
			}
		}
	}
	if len(eps) == 0 {
		return nil, false
	}
	rtts := a.cfg.Prober.Measure(ctx, eps)
	if len(rtts) == 0 {
		return nil, false
	}
	byProvider := map[string]float64{}
	for ep, rtt := range rtts {
		byProvider[byEndpoint[ep]] = rtt
	}
	a.mu.Lock()
	changed := len(a.rtts) != len(byProvider)
	a.rtts = byProvider
	a.mu.Unlock()
	return byProvider, changed
}
