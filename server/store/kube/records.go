package kube

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/federation-autoscaler/federation-autoscaler/server/store"
)

// writeAttempts bounds the retries of one record write that keeps
// conflicting (each conflict re-reads the object).
const writeAttempts = 10

// errSuperseded: a record was already written by a later commit than the
// one being written, so another writer has taken over.
var errSuperseded = errors.New("a later commit already wrote the record")

// recordWriter writes one commit's entries to the record objects. Every
// object carries the sequence number of the commit that wrote it
// (AnnotationCommit); a write is an update with the resourceVersion as the
// precondition, and on a conflict the object is re-read and written again
// only if no later commit wrote it. So two writers completing the same
// commit (a new leader replaying the head of one that died mid-write) are
// harmless, and a writer that lost the head can never overwrite what a
// later commit wrote: it stops with errSuperseded.
type recordWriter struct {
	s   *Store
	seq uint64
	mu  sync.Mutex // guards s.known
}

// writeRecords writes entries of commit seq, at most Options.Workers at a
// time. errSuperseded fences the store.
func (s *Store) writeRecords(ctx context.Context, seq uint64, entries []entry) error {
	w := &recordWriter{s: s, seq: seq}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.opts.Workers)
	for i, e := range entries {
		g.Go(func() error {
			k, err := store.ParseKind(e.Kind)
			if err != nil {
				return fmt.Errorf("journal entry %d: %w", i, err)
			}
			if e.Delete {
				err = w.remove(gctx, k, e)
			} else {
				err = w.put(gctx, k, e)
			}
			if err != nil {
				return fmt.Errorf("writing %s %q of commit %d: %w", k, e.Key, seq, err)
			}
			return s.step("record " + strconv.Itoa(i))
		})
	}
	err := g.Wait()
	if errors.Is(err, errSuperseded) {
		s.fenced = true
	}
	return err
}

func (w *recordWriter) lookup(k store.Kind, key string) (stored, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	o, ok := w.s.known[k][key]
	return o, ok
}

func (w *recordWriter) remember(k store.Kind, o stored, gone bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := w.s.known[k]
	if m == nil {
		m = make(map[string]stored)
		w.s.known[k] = m
	}
	if gone {
		delete(m, o.Key)
	} else {
		m[o.Key] = o
	}
}

func (w *recordWriter) put(ctx context.Context, k store.Kind, e entry) error {
	b := w.s.backends[k]
	cur, exists := w.lookup(k, e.Key)
	want := stored{Name: b.name(e.Key), Key: e.Key, Commit: w.seq, Body: e.Record}
	for range writeAttempts {
		var rv string
		var err error
		if exists {
			want.ResourceVersion = cur.ResourceVersion
			rv, err = b.update(ctx, want)
		} else {
			rv, err = b.create(ctx, want)
		}
		if err == nil {
			want.ResourceVersion = rv
			w.remember(k, want, false)
			return nil
		}
		if exists && apierrors.IsNotFound(err) {
			// Deleted under us: by a later commit (then stop) or by hand.
			if err := w.checkHead(ctx); err != nil {
				return err
			}
		} else if !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
			return err
		}
		if cur, exists, err = w.reread(ctx, b, e.Key); err != nil {
			return err
		}
	}
	return fmt.Errorf("still conflicting after %d attempts", writeAttempts)
}

func (w *recordWriter) remove(ctx context.Context, k store.Kind, e entry) error {
	b := w.s.backends[k]
	cur, exists := w.lookup(k, e.Key)
	var err error
	if !exists {
		if cur, exists, err = w.reread(ctx, b, e.Key); err != nil || !exists {
			return err
		}
	}
	for range writeAttempts {
		err := b.remove(ctx, cur.Name, cur.ResourceVersion)
		if err == nil || apierrors.IsNotFound(err) {
			w.remember(k, stored{Key: e.Key}, true)
			return nil
		}
		if !apierrors.IsConflict(err) {
			return err
		}
		if cur, exists, err = w.reread(ctx, b, e.Key); err != nil || !exists {
			return err
		}
	}
	return fmt.Errorf("still conflicting after %d attempts", writeAttempts)
}

// reread gets the record's object after a conflict: it fails with
// errSuperseded when a later commit wrote it.
func (w *recordWriter) reread(ctx context.Context, b backend, key string) (stored, bool, error) {
	live, err := b.get(ctx, b.name(key))
	if apierrors.IsNotFound(err) {
		return stored{}, false, nil
	}
	if err != nil {
		return stored{}, false, err
	}
	if live.Key != key {
		return stored{}, false, fmt.Errorf("object %s holds key %q, not %q: two keys map to one object name; rename one", live.Name, live.Key, key)
	}
	if live.Commit > w.seq {
		return stored{}, false, fmt.Errorf("%w (commit %d, this is %d)", errSuperseded, live.Commit, w.seq)
	}
	return live, true, nil
}

// checkHead fails with errSuperseded when the head has moved past the
// commit being written.
func (w *recordWriter) checkHead(ctx context.Context) error {
	h, err := w.s.journal.readHead(ctx)
	if err != nil {
		return err
	}
	if h.Journal.Seq > w.seq {
		return fmt.Errorf("%w (the head is at commit %d, this is %d)", errSuperseded, h.Journal.Seq, w.seq)
	}
	return nil
}
