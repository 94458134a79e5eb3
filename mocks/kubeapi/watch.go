package kubeapi

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// watchParams are a watch request's query: what to match, from which
// resourceVersion, whether to send the current state first, when to end.
type watchParams struct {
	match       func(object) bool
	rvParam     string
	fromRV      uint64
	sendInitial bool
	timeout     time.Duration
}

// parseWatch reads a watch's query; a named watch matches that object only.
func parseWatch(r *http.Request, req request) (watchParams, error) {
	q := r.URL.Query()
	match, err := selectorFunc(q)
	if err != nil {
		return watchParams{}, err
	}
	if req.name != "" {
		name, inner := req.name, match
		match = func(o object) bool { return nameOf(o) == name && (inner == nil || inner(o)) }
	}
	p := watchParams{match: match, rvParam: q.Get("resourceVersion"), sendInitial: q.Get("sendInitialEvents") == "true"}
	if p.rvParam != "" {
		if p.fromRV, err = strconv.ParseUint(p.rvParam, 10, 64); err != nil {
			return watchParams{}, apierrors.NewBadRequest("resourceVersion " + strconv.Quote(p.rvParam) + " is not a number")
		}
	}
	if n, err := strconv.Atoi(q.Get("timeoutSeconds")); err == nil && n > 0 {
		p.timeout = time.Duration(n) * time.Second
	}
	return p, nil
}

// handleWatch streams watch events as newline-delimited JSON, like a real
// apiserver answering a watch with Accept: application/json.
func (s *Server) handleWatch(w http.ResponseWriter, r *http.Request, req request) {
	p, err := parseWatch(r, req)
	if err != nil {
		writeStatus(w, err)
		return
	}
	// Unset or "0" means: the current state first, then changes.
	initial := p.sendInitial || p.fromRV == 0
	gr := req.res.GVR().GroupResource()
	watcher, replay, currentRV, gone := s.store.watch(gr, req.namespace, p.match, p.fromRV, initial)
	send := openStream(w)
	if gone {
		st := apierrors.NewResourceExpired("too old resource version: " + p.rvParam).Status()
		st.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
		send("ERROR", st)
		return
	}
	defer s.store.stopWatch(watcher)
	for _, ev := range replay {
		if !send(ev.Type, s.present(req.res, ev.Obj)) {
			return
		}
	}
	if p.sendInitial {
		bookmark := map[string]any{
			"apiVersion": req.res.APIVersion(), "kind": req.res.Kind,
			"metadata": map[string]any{
				"resourceVersion": strconv.FormatUint(currentRV, 10),
				"annotations":     map[string]any{metav1.InitialEventsAnnotationKey: "true"},
			},
		}
		if !send("BOOKMARK", bookmark) {
			return
		}
	}
	var timeout <-chan time.Time
	if p.timeout > 0 {
		t := time.NewTimer(p.timeout)
		defer t.Stop()
		timeout = t.C
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case <-timeout:
			return
		case ev, ok := <-watcher.ch:
			if !ok {
				return
			}
			// Every watcher receives the same event object: present a copy.
			if !send(ev.Type, s.present(req.res, deepCopy(ev.Obj))) {
				return
			}
		}
	}
}

// openStream starts a watch answer and returns the function sending one
// event (false once the client is gone).
func openStream(w http.ResponseWriter) func(typ string, obj any) bool {
	flusher, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Transfer-Encoding", "chunked")
	w.WriteHeader(http.StatusOK)
	if flusher != nil {
		// Like a real apiserver: the client sees the watch open at once,
		// before the first event.
		flusher.Flush()
	}
	enc := json.NewEncoder(w)
	return func(typ string, obj any) bool {
		if err := enc.Encode(map[string]any{"type": typ, "object": obj}); err != nil {
			return false
		}
		if flusher != nil {
			flusher.Flush()
		}
		return true
	}
}
