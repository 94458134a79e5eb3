// Package localapitest provides an in-memory consumer agent that serves the
// local API routes (reference §7.1) over real HTTP, for tests of the
// adapter. It behaves like the agent in front of a broker: reservations are
// checked against the node-group view (provider, chunk type, head-room,
// idempotency by X-Reservation-Id), releases credit the view, and virtual
// nodes appear when the test "peers" a reservation.
package localapitest

import (
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/federation-autoscaler/federation-autoscaler/adapter/localapi"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// Reservation is the fake's record of one reservation.
type Reservation struct {
	ID       string
	Request  api.ReservationRequest
	Released bool
}

// Fault is a one-shot error answer.
type Fault struct {
	Status  int
	Code    string
	Message string
}

// Agent is the fake consumer agent. Configure it through its methods; all
// are safe for concurrent use with the HTTP handlers.
type Agent struct {
	// AutoPeer, when set, creates the virtual node of every new reservation
	// at once in this phase (like an agent that projects reservations
	// before they peer).
	AutoPeer localapi.Phase
	// Now stamps lastTransitionTime; defaults to a fixed instant.
	Now func() time.Time

	mu           sync.Mutex
	groups       []api.NodeGroupView
	roles        map[string]api.ConsolidationRole
	reservations map[string]*Reservation
	vns          map[string]*localapi.VirtualNode
	faults       map[string][]Fault // key: route name
	calls        map[string]int
	// block, when non-nil, holds POST /local/reservations until closed.
	block chan struct{}
}

// Route names for Fail and Calls.
const (
	RouteNodeGroups   = "nodegroups"
	RouteReserve      = "reserve"
	RouteRelease      = "release"
	RouteVirtualNodes = "virtual-nodes"
)

// New returns a fake agent that serves groups.
func New(groups ...api.NodeGroupView) *Agent {
	return &Agent{
		groups:       groups,
		reservations: map[string]*Reservation{},
		vns:          map[string]*localapi.VirtualNode{},
		faults:       map[string][]Fault{},
		calls:        map[string]int{},
	}
}

// Start serves the fake on an ephemeral loopback port; the server is closed
// when the test ends. It returns the base URL.
func (a *Agent) Start(t interface {
	Cleanup(func())
}) string {
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)
	return srv.URL
}

// Handler returns the local API routes.
func (a *Agent) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+localapi.PathNodeGroups, a.nodeGroups)
	mux.HandleFunc("POST "+localapi.PathReservations, a.reserve)
	mux.HandleFunc("DELETE "+localapi.PathReservations+"/{id}", a.release)
	mux.HandleFunc("GET "+localapi.PathVirtualNodes, a.virtualNodes)
	return mux
}

// SetGroups replaces the node-group view.
func (a *Agent) SetGroups(groups ...api.NodeGroupView) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.groups = groups
}

// SetConsolidation replaces the consolidation roles served with the view.
func (a *Agent) SetConsolidation(roles map[string]api.ConsolidationRole) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.roles = maps.Clone(roles)
}

// RemoveProvider drops every group of provider from the view (a provider
// lost), keeping its reservations and virtual nodes.
func (a *Agent) RemoveProvider(provider string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	kept := a.groups[:0]
	for _, g := range a.groups {
		if g.ProviderClusterID != provider {
			kept = append(kept, g)
		}
	}
	a.groups = kept
}

// Fail queues a one-shot error for the next call of route.
func (a *Agent) Fail(route string, f Fault) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.faults[route] = append(a.faults[route], f)
}

// Block makes every POST /local/reservations wait until the returned
// function is called.
func (a *Agent) Block() (release func()) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ch := make(chan struct{})
	a.block = ch
	var once sync.Once
	return func() {
		once.Do(func() {
			a.mu.Lock()
			a.block = nil
			a.mu.Unlock()
			close(ch)
		})
	}
}

// Calls returns how many times route was called.
func (a *Agent) Calls(route string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.calls[route]
}

// Reservations returns the live (not released) reservations, sorted by id.
func (a *Agent) Reservations() []Reservation {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []Reservation
	for _, r := range a.reservations {
		if !r.Released {
			out = append(out, *r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// ProviderID is the providerID the fake gives the node of reservation id.
func ProviderID(provider, id string) string { return api.ProviderID(provider, id) }

// Peer creates (or moves) the virtual node of reservation id into phase.
// Running gives it a real node name and its providerID; Creating keeps
// the VirtualNodeState name. It reports whether the reservation exists.
func (a *Agent) Peer(id string, phase localapi.Phase) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	r, ok := a.reservations[id]
	if !ok {
		return false
	}
	a.setVNLocked(r, phase, "")
	return true
}

// FailPeering moves the virtual node of reservation id to Failed.
func (a *Agent) FailPeering(id, message string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	r, ok := a.reservations[id]
	if !ok {
		return false
	}
	a.setVNLocked(r, localapi.PhaseFailed, message)
	return true
}

// Forget removes the virtual node of reservation id (an unpeer finished).
func (a *Agent) Forget(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.vns, id)
}

// AddVirtualNode plants a virtual node directly (e.g. a manual
// ResourceRequest's, or one from before a restart).
func (a *Agent) AddVirtualNode(vn localapi.VirtualNode) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.vns[vn.ReservationID] = &vn
}

// VirtualNode returns the virtual node of reservation id.
func (a *Agent) VirtualNode(id string) (localapi.VirtualNode, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	vn, ok := a.vns[id]
	if !ok {
		return localapi.VirtualNode{}, false
	}
	return *vn, true
}

func (a *Agent) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
}

func (a *Agent) setVNLocked(r *Reservation, phase localapi.Phase, msg string) {
	vn, ok := a.vns[r.ID]
	if !ok {
		g := a.groupLocked(r.Request.ProviderClusterID, r.Request.ChunkType)
		vn = &localapi.VirtualNode{
			Name:              "vns-" + r.ID,
			ReservationID:     r.ID,
			NodeGroupID:       api.NodeGroupID(r.Request.ProviderClusterID, r.Request.ChunkType),
			ProviderClusterID: r.Request.ProviderClusterID,
		}
		if g != nil {
			vn.ProviderLiqoClusterID = g.ProviderLiqoClusterID
			vn.Allocatable = g.ChunkResources.DeepCopy()
		}
		a.vns[r.ID] = vn
	}
	vn.Phase = phase
	vn.Message = msg
	t := metav1.NewTime(a.now())
	vn.LastTransitionTime = &t
	if phase == localapi.PhaseRunning {
		vn.Name = "rs-" + r.ID
		vn.VirtualNodeName = "rs-" + r.ID
		vn.ProviderID = ProviderID(r.Request.ProviderClusterID, r.ID)
	}
}

func (a *Agent) groupLocked(provider string, t api.ChunkType) *api.NodeGroupView {
	for i := range a.groups {
		if a.groups[i].ProviderClusterID == provider && a.groups[i].Type == t {
			return &a.groups[i]
		}
	}
	return nil
}

// enter counts a call and pops its fault, if any.
func (a *Agent) enter(w http.ResponseWriter, route string) bool {
	a.mu.Lock()
	a.calls[route]++
	var f *Fault
	if q := a.faults[route]; len(q) > 0 {
		f = &q[0]
		a.faults[route] = q[1:]
	}
	a.mu.Unlock()
	if f != nil {
		writeErr(w, f.Status, f.Code, f.Message)
		return false
	}
	return true
}

func (a *Agent) nodeGroups(w http.ResponseWriter, _ *http.Request) {
	if !a.enter(w, RouteNodeGroups) {
		return
	}
	a.mu.Lock()
	resp := api.NodeGroupListResponse{
		NodeGroups:    append([]api.NodeGroupView{}, a.groups...),
		ServedAt:      metav1.NewTime(a.now()),
		Consolidation: maps.Clone(a.roles),
	}
	a.mu.Unlock()
	writeJSON(w, http.StatusOK, resp)
}

func (a *Agent) virtualNodes(w http.ResponseWriter, _ *http.Request) {
	if !a.enter(w, RouteVirtualNodes) {
		return
	}
	a.mu.Lock()
	list := localapi.VirtualNodeList{VirtualNodes: []localapi.VirtualNode{}}
	for _, vn := range a.vns {
		list.VirtualNodes = append(list.VirtualNodes, *vn)
	}
	a.mu.Unlock()
	sort.Slice(list.VirtualNodes, func(i, j int) bool {
		return list.VirtualNodes[i].ReservationID < list.VirtualNodes[j].ReservationID
	})
	writeJSON(w, http.StatusOK, list)
}

func (a *Agent) reserve(w http.ResponseWriter, r *http.Request) {
	if !a.enter(w, RouteReserve) {
		return
	}
	a.mu.Lock()
	block := a.block
	a.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-r.Context().Done():
			return
		}
	}
	var req api.ReservationRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeErr(w, http.StatusBadRequest, api.CodeInvalidRequest, "decode body: "+err.Error())
		return
	}
	id := r.Header.Get(api.HeaderReservationID)
	switch {
	case id == "" || strings.ToLower(id) != id:
		writeErr(w, http.StatusBadRequest, api.CodeInvalidRequest, "X-Reservation-Id must be a DNS-1123 subdomain")
		return
	case req.ChunkCount != 1:
		writeErr(w, http.StatusBadRequest, api.CodeInvalidRequest, "chunkCount must be exactly 1")
		return
	case req.NodeGroupID != "" && req.NodeGroupID != api.NodeGroupID(req.ProviderClusterID, req.ChunkType):
		writeErr(w, http.StatusBadRequest, api.CodeInvalidRequest, "nodeGroupId does not match provider and chunk type")
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if old, ok := a.reservations[id]; ok {
		if old.Request.ProviderClusterID != req.ProviderClusterID || old.Request.ChunkType != req.ChunkType {
			writeErr(w, http.StatusConflict, api.CodeConflict, "reservation "+id+" exists with a different spec")
			return
		}
		w.Header().Set(api.HeaderReservationID, id)
		writeJSON(w, http.StatusOK, a.respLocked(old))
		return
	}
	g := a.groupLocked(req.ProviderClusterID, req.ChunkType)
	if g == nil {
		writeErr(w, http.StatusNotFound, api.CodeNotFound, "no "+string(req.ChunkType)+" advertisement "+req.ProviderClusterID)
		return
	}
	if g.MaxSize-g.CurrentReserved < 1 {
		writeErr(w, http.StatusConflict, api.CodeInsufficientCapacity, "no free chunk on "+req.ProviderClusterID)
		return
	}
	g.CurrentReserved++
	res := &Reservation{ID: id, Request: req}
	a.reservations[id] = res
	if a.AutoPeer != "" {
		a.setVNLocked(res, a.AutoPeer, "")
	}
	w.Header().Set(api.HeaderReservationID, id)
	writeJSON(w, http.StatusCreated, a.respLocked(res))
}

func (a *Agent) respLocked(r *Reservation) api.ReservationResponse {
	return api.ReservationResponse{
		ReservationID:     r.ID,
		Status:            api.PhasePending,
		ProviderClusterID: r.Request.ProviderClusterID,
		ChunkCount:        1,
		ChunkType:         r.Request.ChunkType,
		CreatedAt:         metav1.NewTime(a.now()),
		ExpiresAt:         metav1.NewTime(a.now().Add(24 * time.Hour)),
		NodeGroupID:       api.NodeGroupID(r.Request.ProviderClusterID, r.Request.ChunkType),
	}
}

func (a *Agent) release(w http.ResponseWriter, r *http.Request) {
	if !a.enter(w, RouteRelease) {
		return
	}
	id := r.PathValue("id")
	a.mu.Lock()
	defer a.mu.Unlock()
	res, ok := a.reservations[id]
	if !ok {
		writeErr(w, http.StatusNotFound, api.CodeNotFound, "reservation "+id+" not found")
		return
	}
	if !res.Released {
		res.Released = true
		if g := a.groupLocked(res.Request.ProviderClusterID, res.Request.ChunkType); g != nil && g.CurrentReserved > 0 {
			g.CurrentReserved--
		}
		if vn, ok := a.vns[id]; ok {
			vn.Phase = localapi.PhaseDeleting
		}
	}
	writeJSON(w, http.StatusAccepted, api.ReleaseResponse{ReservationID: id, Status: api.PhaseUnpeering})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeErr(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, api.ErrorResponse{Code: code, Message: msg})
}

// VirtualNodes returns every virtual node, sorted by reservation id.
func (a *Agent) VirtualNodes() []localapi.VirtualNode {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]localapi.VirtualNode, 0, len(a.vns))
	for _, vn := range a.vns {
		out = append(out, *vn)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ReservationID < out[j].ReservationID })
	return out
}

// Abort ends reservation id at the "broker" without any virtual node (its
// peering failed before the agent created one): it stops counting in the
// group's currentReserved.
func (a *Agent) Abort(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	r, ok := a.reservations[id]
	if !ok || r.Released {
		return false
	}
	r.Released = true
	if g := a.groupLocked(r.Request.ProviderClusterID, r.Request.ChunkType); g != nil && g.CurrentReserved > 0 {
		g.CurrentReserved--
	}
	return true
}
