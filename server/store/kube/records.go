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
	if err := s.verifyCreates(ctx); err != nil {
		return err
	}
	s.createdUnder = s.head.ResourceVersion
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
	if verr := s.verifyCreates(ctx); err == nil {
		err = verr
	}
	if errors.Is(err, errSuperseded) {
		s.fenced = true
	}
	return err
}

// createdObj is an object a recordWriter created.
type createdObj struct {
	kind store.Kind
	obj  stored
}

// verifyCreates closes the one gap the resourceVersion preconditions leave:
// a create has none. A broker that committed, stalled past its Lease (e.g.
// SIGSTOP, a partition) and resumed writing that commit's records would
// create a record that the new leader — which completed the commit's
// records itself before committing anything — has deleted since. So after
// creating records the writer reads the head: unchanged since the commit it
// wrote, every create preceded any other broker's next commit and stands;
// moved on, another broker has taken over, and every object created here
// that nobody has rewritten since (any rewrite by another broker changes
// AnnotationWriter, so its resourceVersion) is a re-creation and is deleted
// again, with its resourceVersion as the precondition. The store is then
// fenced (errSuperseded). What cannot be checked now (the head unreadable)
// is checked before the next record write, Load or Close.
func (s *Store) verifyCreates(ctx context.Context) error {
	if len(s.created) == 0 {
		return nil
	}
	h, err := s.journal.readHead(ctx)
	if err != nil {
		return fmt.Errorf("checking the journal head after creating %d records: %w", len(s.created), err)
	}
	if h.ResourceVersion == s.createdUnder {
		s.created = nil
		return nil
	}
	var keep []createdObj
	undone := 0
	for _, c := range s.created {
		err := s.backends[c.kind].remove(ctx, c.obj.Name, c.obj.ResourceVersion)
		switch {
		case err == nil:
			undone++
		case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
			// Deleted or rewritten by the new leader: its, not ours.
		default:
			keep = append(keep, c)
		}
	}
	s.created = keep
	s.fenced = true
	s.log.Warn("Kubernetes store: another broker committed while this one wrote its last commit's records; removed the records it re-created",
		"removed", undone, "seq", h.Journal.Seq, "retrying", len(keep))
	return fmt.Errorf("%w (the head is at commit %d; %d records this broker re-created were removed)", errSuperseded, h.Journal.Seq, undone)
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

func (w *recordWriter) created(k store.Kind, o stored) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.s.created = append(w.s.created, createdObj{kind: k, obj: o})
}

func (w *recordWriter) put(ctx context.Context, k store.Kind, e entry) error {
	b := w.s.backends[k]
	cur, exists := w.lookup(k, e.Key)
	want := stored{Name: b.name(e.Key), Key: e.Key, Commit: w.seq, Writer: w.s.writer, Body: e.Record}
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
			if !exists {
				w.created(k, want)
			}
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
