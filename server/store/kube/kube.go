// Package kube is the broker's store.Store on Kubernetes: the records live
// as custom resources of the broker's CRDs (deploy/crds/broker) in one
// namespace — Reservation, Instruction, Advertisement, Consumer, so that
// `kubectl get reservations` shows them — and the staged peering
// credentials as Secrets (never in a custom resource). etcd behind the API
// server is the replicated, durable engine.
//
// Kubernetes has no multi-object transaction, so an Apply commits by
// updating one object, the journal head Secret, with the whole batch and a
// resourceVersion precondition, then writes the batch to the records; Load
// replays the head's batch over the records (journal.go). Acknowledged
// means in etcd. A second writer is fenced: its head update conflicts, and
// a record written by a later commit is never overwritten by an earlier one
// (records.go).
package kube

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	brokercrds "github.com/federation-autoscaler/federation-autoscaler/deploy/crds/broker"
	"github.com/federation-autoscaler/federation-autoscaler/server/store"
)

// DefaultWorkers is the default of Options.Workers.
const DefaultWorkers = 16

// DefaultRequestTimeout bounds each API request of the store when the
// rest.Config sets no Timeout: a hung API server fails a commit (the
// broker's callers get an error they retry) instead of stopping the
// broker's committer for good.
const DefaultRequestTimeout = 10 * time.Second

// loadAttempts bounds how often Load retries when the head moves while it
// lists the records (another broker is committing).
const loadAttempts = 5

// ErrFenced says another writer has committed to the store since this one
// last loaded it: this broker's in-memory state is behind. Load again (a
// failed Apply makes the broker's domain do that).
var ErrFenced = errors.New("another broker committed to the store since this one loaded it")

// Options configure Open.
type Options struct {
	// Namespace holds the store's objects (required).
	Namespace string
	// Workers bounds the concurrent record writes of one Apply (default
	// DefaultWorkers).
	Workers int
	// PartBytes is the largest journal payload of one Secret, and so the
	// largest record (default DefaultPartBytes).
	PartBytes int
	// Logger receives what the store recovers from (default slog.Default()).
	Logger *slog.Logger

	// crash, when set (tests only), is called after each step of Apply; an
	// error stops Apply there as a crash would.
	crash func(step string) error
}

// Store is a store.Store on a Kubernetes API server.
type Store struct {
	opts     Options
	log      *slog.Logger
	journal  journalStore
	backends map[store.Kind]backend

	mu sync.Mutex
	// head is the journal head this store last read or committed.
	head *head
	// pending is the batch of head whose record writes are not known to
	// be complete: written before the next commit.
	pending []entry
	// stale are part Secrets to delete after the next commit.
	stale []string
	// fenced is set when another writer committed; Apply refuses until Load.
	fenced bool
	// known maps each record to its object as last read or written.
	known map[store.Kind]map[string]stored

	// writer is this instance's random id (AnnotationWriter).
	writer string
	// created are the objects this store created while writing the batch
	// of the head at resourceVersion createdUnder, not yet checked against
	// the head (verifyCreates).
	created      []createdObj
	createdUnder string

	followMu sync.Mutex
	// follow is the warm copy while Follow runs (nil otherwise).
	follow *follower
	// lastLoad says how the last Load read each collection (tests).
	lastLoad LoadStats
}

func kindNames(ks []store.Kind) []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = k.String()
	}
	return out
}

// LoadStats says how a Load read the collections: from the warm copy of
// Follow, or by listing them.
type LoadStats struct {
	Warm, Listed []store.Kind
}

var _ store.Store = (*Store)(nil)

// crdKinds names the custom resource of each collection kept as one.
var crdKinds = map[store.Kind][2]string{
	store.KindReservation:   {"Reservation", "reservations"},
	store.KindInstruction:   {"Instruction", "instructions"},
	store.KindAdvertisement: {"Advertisement", "advertisements"},
	store.KindConsumer:      {"Consumer", "consumers"},
}

// Open returns the store in opts.Namespace of the API server cfg points at.
// It does not contact the server: Load does.
func Open(cfg *rest.Config, opts Options) (*Store, error) {
	if opts.Namespace == "" {
		return nil, errors.New("kubernetes store: no namespace; set --namespace")
	}
	if opts.Workers <= 0 {
		opts.Workers = DefaultWorkers
	}
	if opts.PartBytes <= 0 {
		opts.PartBytes = DefaultPartBytes
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	cfg = rest.CopyConfig(cfg)
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultRequestTimeout
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes store: building the client: %w", err)
	}
	crCfg := rest.CopyConfig(cfg)
	crCfg.GroupVersion = &schema.GroupVersion{Group: brokercrds.Group, Version: brokercrds.Version}
	crCfg.APIPath = "/apis"
	crCfg.ContentType = "application/json"
	crCfg.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	rc, err := rest.RESTClientFor(crCfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes store: building the client of %s: %w", brokercrds.Group, err)
	}
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes store: building the watch client of %s: %w", brokercrds.Group, err)
	}
	s := &Store{
		writer:   randomID(),
		opts:     opts,
		log:      opts.Logger,
		journal:  journalStore{cs: cs, namespace: opts.Namespace},
		backends: map[store.Kind]backend{store.KindCredential: &secretBackend{cs: cs, namespace: opts.Namespace}},
	}
	for k, n := range crdKinds {
		s.backends[k] = &crBackend{rc: rc, dc: dc, namespace: opts.Namespace, kind: k, crdKind: n[0], resource: n[1]}
	}
	return s, nil
}

// Close implements store.Store. The store holds no connection of its own;
// records it created that are not yet checked against the journal head are
// checked now (verifyCreates).
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.created) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), DefaultRequestTimeout)
	defer cancel()
	if err := s.verifyCreates(ctx); err != nil && !errors.Is(err, errSuperseded) {
		return fmt.Errorf("kubernetes store: closing: %w", err)
	}
	return nil
}

// Load implements store.Store: the records with the head's batch replayed
// over them, read between two reads of the same head (no commit in
// between, so the records are at most that batch away from it).
func (s *Store) Load(ctx context.Context) (store.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	start := time.Now()
	if err := s.verifyCreates(ctx); err != nil && !errors.Is(err, errSuperseded) {
		s.log.Warn("Kubernetes store: could not check the records this broker created against the journal head", "err", err)
	}
	for range loadAttempts {
		h, err := s.journal.readHead(ctx)
		if err != nil {
			return store.Snapshot{}, fmt.Errorf("load: %w", err)
		}
		entries, err := s.journal.entries(ctx, h.Journal)
		if err != nil {
			return store.Snapshot{}, fmt.Errorf("load: %w", err)
		}
		known, stats, err := s.readRecords(ctx, h.ResourceVersion)
		if err != nil {
			return store.Snapshot{}, fmt.Errorf("load: %w", err)
		}
		again, err := s.journal.readHead(ctx)
		if err != nil {
			return store.Snapshot{}, fmt.Errorf("load: %w", err)
		}
		if again.ResourceVersion != h.ResourceVersion {
			continue
		}
		snap, err := snapshot(known, entries)
		if err != nil {
			return store.Snapshot{}, fmt.Errorf("load: %w", err)
		}
		stale, err := s.journal.staleParts(ctx, h.Journal)
		if err != nil {
			return store.Snapshot{}, fmt.Errorf("load: %w", err)
		}
		s.head, s.pending, s.stale, s.known, s.fenced = &h, entries, stale, known, false
		s.lastLoad = stats
		s.log.Info("Kubernetes store: state loaded", "seq", h.Journal.Seq, "warm", kindNames(stats.Warm), "listed", kindNames(stats.Listed), "took", time.Since(start))
		return snap, nil
	}
	return store.Snapshot{}, fmt.Errorf("load: %w: the journal head moved during %d reads in a row; is another broker writing to namespace %s?", ErrFenced, loadAttempts, s.opts.Namespace)
}

// readRecords reads every record object: from the warm copy (Follow) each
// collection whose watch has seen resourceVersion headRV, by a list the
// others.
func (s *Store) readRecords(ctx context.Context, headRV string) (map[store.Kind]map[string]stored, LoadStats, error) {
	var stats LoadStats
	known, warm, err := s.warm(headRV)
	if err != nil {
		return nil, stats, err
	}
	stats.Warm = warm
	for _, k := range store.Kinds() {
		if m, ok := known[k]; ok {
			if err := s.checkNames(k, m); err != nil {
				return nil, stats, err
			}
			continue
		}
		objs, err := s.backends[k].list(ctx)
		if err != nil {
			return nil, stats, listError(k, s.opts.Namespace, err)
		}
		m := make(map[string]stored, len(objs))
		for _, o := range objs {
			m[o.Key] = o
		}
		if err := s.checkNames(k, m); err != nil {
			return nil, stats, err
		}
		known[k] = m
		stats.Listed = append(stats.Listed, k)
	}
	return known, stats, nil
}

// checkNames refuses an object whose name is not the one its key maps to.
func (s *Store) checkNames(k store.Kind, m map[string]stored) error {
	b := s.backends[k]
	for _, o := range m {
		if want := b.name(o.Key); want != o.Name {
			return fmt.Errorf("%s object %s/%s names key %q, whose object is %s: it was not written by this store; delete it", k, s.opts.Namespace, o.Name, o.Key, want)
		}
	}
	return nil
}

func listError(k store.Kind, ns string, err error) error {
	if _, isCR := crdKinds[k]; isCR && apierrors.IsNotFound(err) {
		return fmt.Errorf("listing %s in namespace %s: %w; the broker's CRDs are not installed: kubectl apply -f deploy/crds/broker", k, ns, err)
	}
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("listing %s in namespace %s: %w; grant the broker the Role in deploy/manifests/central-ha", k, ns, err)
	}
	return fmt.Errorf("listing %s in namespace %s: %w", k, ns, err)
}

// snapshot decodes the listed records, replays entries over them and
// returns them sorted by key.
func snapshot(known map[store.Kind]map[string]stored, entries []entry) (store.Snapshot, error) {
	recs := make(map[store.Kind]map[string]store.Mutation, len(known))
	for k, objs := range known {
		recs[k] = make(map[string]store.Mutation, len(objs))
		for key, o := range objs {
			m, err := store.UnmarshalRecord(k, o.Body)
			if err != nil {
				return store.Snapshot{}, fmt.Errorf("%s object %s: %w", k, o.Name, err)
			}
			if m.Key != key {
				return store.Snapshot{}, fmt.Errorf("%s object %s is annotated with key %q but holds the record of %q", k, o.Name, key, m.Key)
			}
			recs[k][key] = m
		}
	}
	for _, e := range entries {
		m, err := decodeEntry(e)
		if err != nil {
			return store.Snapshot{}, fmt.Errorf("the journal head: %w", err)
		}
		if m.Delete {
			delete(recs[m.Kind], m.Key)
		} else {
			recs[m.Kind][m.Key] = m
		}
	}
	var snap store.Snapshot
	for _, k := range store.Kinds() {
		keys := make([]string, 0, len(recs[k]))
		for key := range recs[k] {
			keys = append(keys, key)
		}
		slices.SortFunc(keys, strings.Compare)
		for _, key := range keys {
			snap.Add(recs[k][key])
		}
	}
	return snap, nil
}

// Apply implements store.Store: commit the batch to the journal head, then
// write it to the records. It returns nil once the head holds the batch;
// record writes that fail after that are completed before the next commit
// (or by the next Load's replay).
func (s *Store) Apply(ctx context.Context, batch []store.Mutation) error {
	if len(batch) == 0 {
		return nil
	}
	entries, err := encodeBatch(batch, s.opts.PartBytes)
	if err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	if err := s.ready(ctx); err != nil {
		return fmt.Errorf("apply %d mutations: %w", len(batch), err)
	}
	prev := *s.head
	next := journal{Seq: prev.Journal.Seq + 1, Batch: randomID(), Entries: entries}
	if err := s.commit(ctx, prev, &next); err != nil {
		return fmt.Errorf("apply %d mutations: %w", len(batch), err)
	}
	if err := s.step("committed"); err != nil {
		return err
	}
	s.pending = entries
	if err := s.writeRecords(ctx, next.Seq, entries); err != nil {
		if errors.As(err, new(stopped)) {
			return err
		}
		// Committed: the head holds the batch, so it is acknowledged;
		// the records are completed before the next commit.
		s.log.Warn("Kubernetes store: a committed batch is not yet written to every record; retrying before the next commit", "seq", next.Seq, "err", err)
		return nil
	}
	s.pending = nil
	s.deleteStale(ctx)
	return nil
}

// ready makes the store able to commit: the head read, the last batch's
// record writes complete.
func (s *Store) ready(ctx context.Context) error {
	if s.fenced {
		return ErrFenced
	}
	if s.head == nil {
		h, err := s.journal.readHead(ctx)
		if err != nil {
			return err
		}
		entries, err := s.journal.entries(ctx, h.Journal)
		if err != nil {
			return err
		}
		s.head, s.pending = &h, entries
		s.known = make(map[store.Kind]map[string]stored)
	}
	if len(s.pending) == 0 {
		return nil
	}
	if err := s.writeRecords(ctx, s.head.Journal.Seq, s.pending); err != nil {
		return fmt.Errorf("completing the records of commit %d first: %w", s.head.Journal.Seq, err)
	}
	s.pending = nil
	return nil
}

// commit writes next (its parts first when it is large) as the head that
// follows prev.
func (s *Store) commit(ctx context.Context, prev head, next *journal) error {
	if size := entriesSize(next.Entries); size > s.opts.PartBytes {
		if err := s.journal.writeParts(ctx, next, s.opts.PartBytes); err != nil {
			return err
		}
		for i := range next.Parts {
			s.stale = append(s.stale, partName(*next, i)) // until committed
		}
		if err := s.step("parts"); err != nil {
			return err
		}
	}
	rv, err := s.journal.commit(ctx, prev.ResourceVersion, *next)
	if err != nil {
		if rv, err = s.commitFailed(ctx, prev, *next, err); err != nil {
			return err
		}
	}
	s.head = &head{ResourceVersion: rv, Journal: *next}
	// The parts of the previous head are stale now; this head's are not.
	s.stale = slices.DeleteFunc(s.stale, func(n string) bool { return strings.HasPrefix(n, HeadName+"."+next.partOf()+".") })
	for i := range prev.Journal.Parts {
		s.stale = append(s.stale, partName(prev.Journal, i))
	}
	return nil
}

// commitFailed tells a refused commit from one whose answer was lost: it
// returns the head's resourceVersion when the commit landed after all.
func (s *Store) commitFailed(ctx context.Context, prev head, next journal, err error) (string, error) {
	if apierrors.IsConflict(err) {
		s.fenced = true
		return "", fmt.Errorf("%w (the journal head changed: %w)", ErrFenced, err)
	}
	if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err) || apierrors.IsNotFound(err) {
		return "", fmt.Errorf("committing to the journal head: %w", err)
	}
	// Timeout or a lost connection: the update may have landed.
	h, rerr := s.journal.readHead(ctx)
	if rerr != nil {
		s.head = nil // re-read before the next commit
		return "", fmt.Errorf("committing to the journal head: %w (and reading it back to see whether it landed: %w)", err, rerr)
	}
	if h.Journal.Seq == next.Seq && h.Journal.Batch == next.Batch {
		return h.ResourceVersion, nil
	}
	if h.ResourceVersion != prev.ResourceVersion {
		s.fenced = true
		return "", fmt.Errorf("%w (the journal head changed: %w)", ErrFenced, err)
	}
	return "", fmt.Errorf("committing to the journal head: %w", err)
}

func entriesSize(es []entry) int {
	n := 0
	for _, e := range es {
		n += len(e.Record) + len(e.Key) + 64
	}
	return n
}

// deleteStale deletes the part Secrets no head refers to (best effort:
// what stays is deleted after a later commit).
func (s *Store) deleteStale(ctx context.Context) {
	keep := s.stale[:0]
	for _, name := range s.stale {
		err := s.journal.secrets().Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			s.log.Warn("Kubernetes store: deleting a stale journal part failed; retrying after the next commit", "secret", name, "err", err)
			keep = append(keep, name)
		}
	}
	s.stale = keep
}

// stopped is an error of Options.crash: Apply returns it at once.
type stopped struct{ err error }

func (e stopped) Error() string { return "stopped by the test seam: " + e.err.Error() }
func (e stopped) Unwrap() error { return e.err }

func (s *Store) step(name string) error {
	if s.opts.crash == nil {
		return nil
	}
	if err := s.opts.crash(name); err != nil {
		return stopped{err}
	}
	return nil
}

func randomID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}
