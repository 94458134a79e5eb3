package kubeapi

import (
	"encoding/json"
	"sort"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// object is a stored object as generic JSON.
type object = map[string]any

// event is one change, kept for watch resumption.
type event struct {
	Type string // ADDED, MODIFIED, DELETED
	RV   uint64
	Obj  object // a private deep copy
}

// watcher receives the events of one watch request.
type watcher struct {
	gr        schema.GroupResource
	namespace string
	match     func(object) bool
	ch        chan event
	closed    bool
}

// historySize bounds the per-resource event log used to resume watches;
// older resourceVersions get 410 Gone and the client relists, as with etcd
// compaction.
const historySize = 2048

// watchBuffer bounds a watcher's queue; a watcher that falls this far
// behind is closed (the client re-watches), as a real apiserver does.
const watchBuffer = 512

// store holds every object of a simulated cluster.
type store struct {
	mu      sync.Mutex
	rv      uint64
	objects map[schema.GroupResource]map[string]object // key: namespace/name
	history map[schema.GroupResource][]event
	// trimmed is the resourceVersion of the newest event dropped from
	// history; watches from before it are answered 410 Gone.
	trimmed  map[schema.GroupResource]uint64
	watchers map[*watcher]struct{}
	// down is set by shutDown: no watch is registered after it.
	down bool
	now  func() time.Time
}

func newStore(now func() time.Time) *store {
	return &store{
		objects:  map[schema.GroupResource]map[string]object{},
		history:  map[schema.GroupResource][]event{},
		trimmed:  map[schema.GroupResource]uint64{},
		watchers: map[*watcher]struct{}{},
		now:      now,
	}
}

func key(namespace, name string) string { return namespace + "/" + name }

// deepCopy copies a JSON object through encoding; stored objects are never
// shared with callers.
func deepCopy(o object) object {
	b, err := json.Marshal(o)
	if err != nil {
		panic("kubeapi: stored object is not JSON: " + err.Error())
	}
	var out object
	if err := json.Unmarshal(b, &out); err != nil {
		panic("kubeapi: stored object is not JSON: " + err.Error())
	}
	return out
}

// nextRV must be called with mu held.
func (s *store) nextRV() uint64 {
	s.rv++
	return s.rv
}

// record stores an event and fans it out; mu must be held.
func (s *store) record(gr schema.GroupResource, typ string, rv uint64, obj object) {
	ev := event{Type: typ, RV: rv, Obj: deepCopy(obj)}
	h := append(s.history[gr], ev)
	if len(h) > historySize {
		s.trimmed[gr] = h[len(h)-historySize-1].RV
		h = h[len(h)-historySize:]
	}
	s.history[gr] = h
	for w := range s.watchers {
		if w.gr != gr || !w.wants(ev.Obj) {
			continue
		}
		select {
		case w.ch <- ev:
		default:
			s.closeWatcher(w)
		}
	}
}

func (s *store) closeWatcher(w *watcher) {
	if !w.closed {
		w.closed = true
		close(w.ch)
		delete(s.watchers, w)
	}
}

func (w *watcher) wants(o object) bool {
	if w.namespace != "" && namespaceOf(o) != w.namespace {
		return false
	}
	return w.match == nil || w.match(o)
}

// get returns a copy of one object.
func (s *store) get(gr schema.GroupResource, namespace, name string) (object, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.objects[gr][key(namespace, name)]
	if !ok {
		return nil, false
	}
	return deepCopy(o), true
}

// list returns copies of the matching objects sorted by namespace/name and
// the current resourceVersion.
func (s *store) list(gr schema.GroupResource, namespace string, match func(object) bool) ([]object, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []object
	for _, o := range s.objects[gr] {
		if namespace != "" && namespaceOf(o) != namespace {
			continue
		}
		if match != nil && !match(o) {
			continue
		}
		out = append(out, deepCopy(o))
	}
	sort.Slice(out, func(i, j int) bool {
		return key(namespaceOf(out[i]), nameOf(out[i])) < key(namespaceOf(out[j]), nameOf(out[j]))
	})
	return out, s.rv
}

// watch registers a watcher. With fromRV > 0 it replays the events after
// fromRV (gone=true when they were compacted away); with initial it first
// sends every matching object as ADDED.
func (s *store) watch(gr schema.GroupResource, namespace string, match func(object) bool, fromRV uint64, initial bool) (w *watcher, replay []event, currentRV uint64, gone bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w = &watcher{gr: gr, namespace: namespace, match: match, ch: make(chan event, watchBuffer)}
	if s.down {
		// The server is shutting down: the watch ends before it began.
		w.closed = true
		close(w.ch)
		return w, nil, s.rv, false
	}
	switch {
	case initial:
		keys := make([]string, 0, len(s.objects[gr]))
		for k := range s.objects[gr] {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			o := s.objects[gr][k]
			if w.wants(o) {
				replay = append(replay, event{Type: "ADDED", RV: rvOf(o), Obj: deepCopy(o)})
			}
		}
	case fromRV > 0 && fromRV < s.rv:
		if fromRV < s.trimmed[gr] {
			return nil, nil, s.rv, true
		}
		for _, ev := range s.history[gr] {
			if ev.RV > fromRV && w.wants(ev.Obj) {
				replay = append(replay, event{Type: ev.Type, RV: ev.RV, Obj: deepCopy(ev.Obj)})
			}
		}
	}
	s.watchers[w] = struct{}{}
	return w, replay, s.rv, false
}

// shutDown ends every watch and refuses new ones (watch answers gone).
func (s *store) shutDown() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = true
	for w := range s.watchers {
		s.closeWatcher(w)
	}
}

func (s *store) stopWatch(w *watcher) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeWatcher(w)
}

func rvOf(o object) uint64 {
	md, _ := o["metadata"].(map[string]any)
	v, _ := md["resourceVersion"].(string)
	n, _ := strconv.ParseUint(v, 10, 64)
	return n
}

func metadata(o object) map[string]any {
	md, _ := o["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
		o["metadata"] = md
	}
	return md
}

func nameOf(o object) string {
	v, _ := metadata(o)["name"].(string)
	return v
}

func namespaceOf(o object) string {
	v, _ := metadata(o)["namespace"].(string)
	return v
}
