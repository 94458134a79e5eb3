package kubeapi

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// handleWatch streams watch events as newline-delimited JSON, like a real
// apiserver answering a watch with Accept: application/json.
func (s *Server) handleWatch(w http.ResponseWriter, r *http.Request, req request) {
	q := r.URL.Query()
	match, err := selectorFunc(q)
	if err != nil {
		writeStatus(w, err)
		return
	}
	if req.name != "" {
		name, inner := req.name, match
		match = func(o object) bool { return nameOf(o) == name && (inner == nil || inner(o)) }
	}
	var fromRV uint64
	rvParam := q.Get("resourceVersion")
	if rvParam != "" {
		if fromRV, err = strconv.ParseUint(rvParam, 10, 64); err != nil {
			writeStatus(w, apierrors.NewBadRequest("resourceVersion "+strconv.Quote(rvParam)+" is not a number"))
			return
		}
	}
	sendInitial := q.Get("sendInitialEvents") == "true"
	// Unset or "0" means: the current state first, then changes.
	initial := sendInitial || fromRV == 0
	gr := req.res.GVR().GroupResource()
	watcher, replay, currentRV, gone := s.store.watch(gr, req.namespace, match, fromRV, initial)
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
	send := func(typ string, obj any) bool {
		if err := enc.Encode(map[string]any{"type": typ, "object": obj}); err != nil {
			return false
		}
		if flusher != nil {
			flusher.Flush()
		}
		return true
	}
	if gone {
		st := apierrors.NewResourceExpired("too old resource version: " + rvParam).Status()
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
	if sendInitial {
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
	if ts := q.Get("timeoutSeconds"); ts != "" {
		if n, err := strconv.Atoi(ts); err == nil && n > 0 {
			t := time.NewTimer(time.Duration(n) * time.Second)
			defer t.Stop()
			timeout = t.C
		}
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
