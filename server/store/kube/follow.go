package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/federation-autoscaler/federation-autoscaler/server/store"
)

// The warm copy of a standby (Follow): one reflector (list, then watch) per
// collection keeps the collection's objects in memory. A watch delivers a
// collection's changes in resourceVersion order, so once a reflector has
// seen the journal head's resourceVersion (an event or a bookmark at or
// after it), its copy holds every record write that precedes that commit;
// what the head's own batch left half written, Load replays as always.
// Load reads such collections from the copy and lists only the others.

// follower is the warm copy while Follow runs.
type follower struct {
	kinds map[store.Kind]*followed
}

type followed struct {
	refl  *cache.Reflector
	items cache.Store
}

var _ store.Follower = (*Store)(nil)

// Follow implements store.Follower: until ctx ends it keeps a warm copy of
// every collection, which the next Load uses for each collection whose
// watch has caught up with the journal head. It returns ctx's error.
func (s *Store) Follow(ctx context.Context) error {
	f := &follower{kinds: make(map[store.Kind]*followed, len(s.backends))}
	for k, b := range s.backends {
		items := cache.NewStore(cache.MetaNamespaceKeyFunc)
		f.kinds[k] = &followed{items: items, refl: cache.NewReflectorWithOptions(b.listWatch(), b.object(), items,
			cache.ReflectorOptions{Name: "federation-autoscaler store " + k.String()})}
	}
	s.followMu.Lock()
	s.follow = f
	s.followMu.Unlock()
	defer func() {
		s.followMu.Lock()
		s.follow = nil
		s.followMu.Unlock()
	}()
	var wg sync.WaitGroup
	for _, fk := range f.kinds {
		wg.Go(func() { fk.refl.RunWithContext(ctx) })
	}
	wg.Wait()
	return ctx.Err()
}

// warm returns, for each collection whose copy has seen resourceVersion rv,
// its records; ok is false for the others.
func (s *Store) warm(rv string) (map[store.Kind]map[string]stored, []store.Kind, error) {
	s.followMu.Lock()
	f := s.follow
	s.followMu.Unlock()
	out := map[store.Kind]map[string]stored{}
	if f == nil {
		return out, nil, nil
	}
	var used []store.Kind
	for _, k := range store.Kinds() {
		fk := f.kinds[k]
		seen := fk.refl.LastSyncResourceVersion()
		if seen == "" {
			continue // not listed yet
		}
		if c, err := resourceversion.CompareResourceVersion(seen, rv); err != nil || c < 0 {
			continue
		}
		b := s.backends[k]
		m := make(map[string]stored, len(fk.items.ListKeys()))
		for _, obj := range fk.items.List() {
			o, err := b.decodeObject(obj)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %w", k, err)
			}
			m[o.Key] = o
		}
		out[k] = m
		used = append(used, k)
	}
	return out, used, nil
}

func (b *crBackend) object() runtime.Object { return &unstructured.Unstructured{} }

// lister is what a collection's client offers to list and watch it.
type lister[L runtime.Object] interface {
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// selected lists and watches the objects of c that match the label
// selector sel.
func selected[L runtime.Object](c lister[L], sel string) cache.ListerWatcher {
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.LabelSelector = sel
			return c.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.LabelSelector = sel
			return c.Watch(ctx, opts)
		},
	}
}

func (b *crBackend) listWatch() cache.ListerWatcher {
	return selected(b.dc.Resource(b.gvr()).Namespace(b.namespace), LabelManagedBy+"="+ManagedBy)
}

func (b *crBackend) decodeObject(obj any) (stored, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return stored{}, fmt.Errorf("the watch of %s delivered a %T", b.resource, obj)
	}
	spec, err := json.Marshal(u.Object["spec"])
	if err != nil {
		return stored{}, fmt.Errorf("%s %s: %w", b.crdKind, u.GetName(), err)
	}
	return fromMeta(metav1.ObjectMeta{Name: u.GetName(), ResourceVersion: u.GetResourceVersion(), Annotations: u.GetAnnotations()}, spec)
}

func (b *secretBackend) object() runtime.Object { return &corev1.Secret{} }

func (b *secretBackend) listWatch() cache.ListerWatcher {
	return selected(b.cs.CoreV1().Secrets(b.namespace), LabelRecord+"="+store.KindCredential.String())
}

func (b *secretBackend) decodeObject(obj any) (stored, error) {
	s, ok := obj.(*corev1.Secret)
	if !ok {
		return stored{}, fmt.Errorf("the watch of credential Secrets delivered a %T", obj)
	}
	return b.decode(s)
}
