package consumer

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sort"
	"time"

	"github.com/google/uuid"

	"github.com/federation-autoscaler/federation-autoscaler/adapter/localapi"
	fav1alpha1 "github.com/federation-autoscaler/federation-autoscaler/agent/apis/v1alpha1"
	"github.com/federation-autoscaler/federation-autoscaler/agent/brokerclient"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// maxLocalBody bounds a local API request body (a ReservationRequest is a
// few hundred bytes).
const maxLocalBody = 1 << 20

// LocalAPI returns the handler of the local API the Cluster Autoscaler
// adapter calls (reference §7.1). It is meant for loopback and has no
// authentication of its own: whoever can reach the address is trusted, and
// localGuard refuses what web pages in a browser on the host could send.
//
// Statuses are passed through from the broker: 201 for a new reservation,
// 200 for a replay, 202 for a release (the reference rewrote them, bug
// #28), and every broker error keeps its status, code, message and request
// id. A broker that cannot be reached gives 502 UpstreamError.
func (a *Agent) LocalAPI() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, api.HealthResponse{Status: "ok"})
	})
	mux.HandleFunc("GET "+localapi.PathNodeGroups, a.getNodeGroups)
	mux.HandleFunc("POST "+localapi.PathReservations, a.postReservation)
	mux.HandleFunc("DELETE "+localapi.PathReservations+"/{id}", a.deleteReservation)
	mux.HandleFunc("GET "+localapi.PathVirtualNodes, a.getVirtualNodes)
	return localGuard(a.cfg.LocalAPIHosts, mux)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, msg, reqID string) {
	writeJSON(w, status, api.ErrorResponse{Code: code, Message: msg, RequestID: reqID})
}

// writeAPIError answers e with its status (api.Status) and details.
func writeAPIError(w http.ResponseWriter, e *api.Error) {
	writeJSON(w, api.Status(e.Code), api.ErrorResponse{Code: e.Code, Message: e.Message, Details: e.Details})
}

// writeBrokerError passes a broker error through unchanged.
func writeBrokerError(w http.ResponseWriter, err error) {
	var be *brokerclient.Error
	if errors.As(err, &be) {
		writeJSON(w, be.Status, api.ErrorResponse{Code: be.Code, Message: be.Message, Details: be.Details, RequestID: be.RequestID})
		return
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		writeError(w, http.StatusGatewayTimeout, api.CodeTimeout, err.Error(), "")
		return
	}
	writeError(w, http.StatusBadGateway, api.CodeUpstreamError, err.Error(), "")
}

func (a *Agent) getNodeGroups(w http.ResponseWriter, r *http.Request) {
	view, err := a.NodeGroups(r.Context())
	if err != nil {
		writeBrokerError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, view)
}

// NodeGroups is the node-group view the local API serves: the broker's,
// masked by the consumer's policy, re-masked by measured RTTs under the
// Latency policy and by the Choice selector under Choice. The consumer
// console reads it in process.
func (a *Agent) NodeGroups(ctx context.Context) (api.NodeGroupListResponse, error) {
	view, err := a.cfg.Broker.NodeGroups(ctx)
	if err != nil {
		return view, err
	}
	if b := view.Budget; b != nil && b.State == api.BudgetReached && b.LastRefusal != "" && b.LastRefusalAt != nil {
		// The broker stopped offering a group for the budget: the
		// Cluster Autoscaler asks no more and sees no error.
		a.setRefusal(b.LastRefusal, b.LastRefusalAt.Time)
	}
	switch {
	case view.AppliedPlacement == api.PlacementChoice:
		a.choose(ctx, &view)
	case view.LatencyShortlist && a.cfg.Prober != nil:
		a.remask(ctx, &view)
	}
	view.Consolidation = a.consol.Roles()
	return view, nil
}

func (a *Agent) postReservation(w http.ResponseWriter, r *http.Request) {
	id, req, derr := decodeLocalReservation(r.Body, r.Header.Get(api.HeaderReservationID), uuid.NewString)
	if derr != nil {
		writeAPIError(w, derr)
		return
	}
	resp, status, err := a.Reserve(r.Context(), id, req)
	if err != nil {
		writeBrokerError(w, err)
		return
	}
	w.Header().Set(api.HeaderReservationID, id)
	writeJSON(w, status, resp)
}

// Reserve reserves at the broker under id, as POST /local/reservations
// does (req is validated by the caller: api.ReservationRequest.Validate):
// after a 412 (the broker restarted and does not know the consumer) it
// heartbeats and retries once. The status is the broker's (201 new, 200
// replay); an error is the broker's (*brokerclient.Error) or the transport's.
func (a *Agent) Reserve(ctx context.Context, id string, req api.ReservationRequest) (api.ReservationResponse, int, error) {
	// Recorded before the call: the Peer can start before the answer is back.
	_, replay := a.reserved.LoadOrStore(id, a.cfg.Clock.Now())
	resp, status, err := a.cfg.Broker.Reserve(ctx, id, req)
	if brokerclient.StatusOf(err) == http.StatusPreconditionFailed {
		// The broker does not know us (it restarted): heartbeat, retry once.
		a.BeatNow()
		if herr := a.heartbeatOnce(ctx); herr == nil {
			resp, status, err = a.cfg.Broker.Reserve(ctx, id, req)
		}
	}
	if err != nil {
		if !replay {
			a.reserved.Delete(id)
		}
		a.noteRefusal(err)
		return resp, status, err
	}
	a.held.Store(id, struct{}{})
	a.changes.Notify()
	return resp, status, nil
}

// noteRefusal logs a reservation the broker refused for the consumer's
// budget and keeps its reason for the console (LastBudgetRefusal): the
// Cluster Autoscaler only sees a failed scale-up.
func (a *Agent) noteRefusal(err error) {
	var be *brokerclient.Error
	if errors.As(err, &be) && be.Code == api.CodeBudgetExceeded {
		a.setRefusal(be.Message, a.cfg.Clock.Now())
	}
}

// setRefusal keeps a budget refusal's reason and logs a new one.
func (a *Agent) setRefusal(msg string, at time.Time) {
	a.mu.Lock()
	changed := a.refusal != msg
	if changed || at.After(a.refusalAt) {
		a.refusal, a.refusalAt = msg, at
	}
	a.mu.Unlock()
	if changed {
		a.log.Warn("Scale-up refused by the broker: the consumer's budget", "reason", msg)
		a.changes.Notify()
	}
}

// LastBudgetRefusal is the broker's last refusal of a reservation for the
// consumer's budget since the agent started, and when ("" when none).
func (a *Agent) LastBudgetRefusal() (string, time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.refusal, a.refusalAt
}

// decodeLocalReservation decodes and validates POST /local/reservations
// with the broker's rules (api.ReservationRequest.Validate), so nothing the
// broker would refuse is sent: the body (lenient like the reference: unknown
// fields are dropped; at most maxLocalBody bytes) and the X-Reservation-Id
// header (res-<newID()> when empty). Every error is 400 InvalidRequest.
func decodeLocalReservation(body io.Reader, header string, newID func() string) (string, api.ReservationRequest, *api.Error) {
	var req api.ReservationRequest
	if err := json.NewDecoder(io.LimitReader(body, maxLocalBody)).Decode(&req); err != nil {
		return "", req, api.Errorf(api.CodeInvalidRequest, "decode body: %v", err)
	}
	if err := req.Validate(); err != nil {
		return "", req, asInvalid(err)
	}
	id, err := api.ReservationIDOr(header, newID)
	if err != nil {
		return "", req, asInvalid(err)
	}
	return id, req, nil
}

// asInvalid is err as an *api.Error (400 InvalidRequest unless it is one).
func asInvalid(err error) *api.Error {
	var e *api.Error
	if !errors.As(err, &e) {
		e = api.Errorf(api.CodeInvalidRequest, "%v", err)
	}
	return e
}

// heartbeatOnce sends one heartbeat now (the local API's 412 recovery).
func (a *Agent) heartbeatOnce(ctx context.Context) error {
	req, err := a.heartbeatRequest(ctx)
	if err != nil {
		return err
	}
	_, err = a.sendHeartbeat(ctx, req) // with the old-broker fallback of every heartbeat
	return err
}

func (a *Agent) deleteReservation(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if fe := api.CheckReservationID("reservation id", id); fe != nil {
		writeAPIError(w, fe.APIError())
		return
	}
	resp, status, err := a.Release(r.Context(), id)
	if err != nil {
		writeBrokerError(w, err)
		return
	}
	writeJSON(w, status, resp)
}

// Release releases reservation id at the broker, as DELETE
// /local/reservations/{id} does (id is checked by the caller:
// api.CheckReservationID).
func (a *Agent) Release(ctx context.Context, id string) (api.ReleaseResponse, int, error) {
	resp, status, err := a.cfg.Broker.Release(ctx, id)
	if err != nil {
		return resp, status, err
	}
	a.reserved.Delete(id)
	a.held.Delete(id)
	a.changes.Notify()
	return resp, status, nil
}

func (a *Agent) getVirtualNodes(w http.ResponseWriter, r *http.Request) {
	vns, err := a.VirtualNodes(r.Context())
	if err != nil {
		writeError(w, http.StatusInternalServerError, api.CodeInternalError, err.Error(), "")
		return
	}
	writeJSON(w, http.StatusOK, localapi.VirtualNodeList{VirtualNodes: vns})
}

// VirtualNodes is the list GET /local/virtual-nodes serves, sorted by
// reservation id (never nil).
func (a *Agent) VirtualNodes(ctx context.Context) ([]localapi.VirtualNode, error) {
	list, err := a.listVNS(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]localapi.VirtualNode, 0, len(list))
	for _, v := range list {
		out = append(out, VirtualNodeView(v))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ReservationID < out[j].ReservationID })
	return out, nil
}

// Subscribe signals (coalesced) after every change of the agent's state
// its console shows: a reservation made or released, a virtual node's
// state written, an instruction handled, a heartbeat whose content or
// answer changed (policy, location, RTTs, the broker's view), until ctx
// ends. The consumer console pushes on it instead of polling.
func (a *Agent) Subscribe(ctx context.Context) <-chan struct{} { return a.changes.Subscribe(ctx) }

// VirtualNodeView projects a VirtualNodeState for the adapter.
func VirtualNodeView(v fav1alpha1.VirtualNodeState) localapi.VirtualNode {
	name := v.Status.VirtualNodeName
	if name == "" {
		name = v.Name
	}
	return localapi.VirtualNode{
		Name: name, VirtualNodeName: v.Status.VirtualNodeName, ProviderID: v.Status.ProviderID,
		ReservationID: v.Spec.ReservationID, NodeGroupID: v.Spec.NodeGroupID,
		ProviderClusterID: v.Spec.ProviderClusterID, ProviderLiqoClusterID: v.Spec.ProviderLiqoClusterID,
		Phase: localapi.Phase(v.Status.Phase), Allocatable: v.Status.Allocatable,
		LastTransitionTime: v.Status.LastTransitionTime, Message: v.Status.Message,
	}
}
