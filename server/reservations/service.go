// Package reservations is the broker's domain: the capacity ledger, the
// reservation phase machine, the instruction queue with long-poll, the
// consumer registry with reservation leases, provider freshness and garbage
// collection. It implements rest.Broker.
//
// The in-memory state is authoritative and guarded by one mutex. Every
// operation validates, checks and changes that state atomically under the
// mutex (so capacity can never be oversubscribed), queues the resulting
// mutations for the group committer and, after releasing the mutex, waits
// until they are durable before it returns success. Queue order equals
// mutex order, so the disk always holds a prefix of the acknowledged
// history. A failed commit reloads the in-memory state from the store
// (rolling back every change that was not durable) and fails every caller
// that was waiting on it. See docs/broker-internals.md.
package reservations

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/federation-autoscaler/federation-autoscaler/internal/signal"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/placement"
	"github.com/federation-autoscaler/federation-autoscaler/server/spend"
	"github.com/federation-autoscaler/federation-autoscaler/server/store"
)

// Defaults of Config.
const (
	DefaultReservationLease   = 15 * time.Minute
	DefaultProviderStaleAfter = 90 * time.Second
	DefaultEnforcedGC         = 5 * time.Minute
	DefaultTerminalGC         = 15 * time.Minute
	DefaultMaxWait            = 60 * time.Second
	// DefaultDisconnectGrace is the broker command's --disconnect-grace.
	DefaultDisconnectGrace = 5 * time.Minute
	// DefaultProviderCleanupHold covers the consumer agent's liqoctl unpeer
	// (agent/liqo.DefaultUnpeerTimeout, 60 s) with room for its delivery.
	DefaultProviderCleanupHold = 2 * time.Minute
)

// Placer is the placement index the service keeps in step with its ledger
// (*placement.Index implements it).
type Placer interface {
	UpsertProvider(p placement.Provider)
	RemoveProvider(id string)
	UpsertConsumer(c placement.Consumer)
	SetUsage(providerID string, t api.ChunkType, consumerID string, u placement.Usage)
	View(consumerID string, all bool) api.NodeGroupListResponse
	// Explain says why a consumer's view is what it is (override: another
	// policy than the consumer's).
	Explain(consumerID string, override *api.Placement) api.PlacementExplanation
	// Spend is what a consumer's live chunks cost and emit per hour now.
	Spend(consumerID string) api.ConsumerSpend
	// ChunkCost is what n chunks of type t cost per hour on a provider now
	// (false: unpriced).
	ChunkCost(providerID string, t api.ChunkType, n int32) (float64, bool)
	// Epoch changes whenever a decision or explanation may change.
	Epoch() uint64
	// Reevaluate decides, for each group a consumer holds, whether another
	// provider is better by more than the thresholds.
	Reevaluate(consumerID string, rtts map[string]float64, th placement.Thresholds) []api.Reevaluation
	// Standing is what a provider offers one chunk of a type now (cost and
	// carbon per hour): what a migration saves.
	Standing(providerID string, t api.ChunkType) placement.Standing
}

// Config configures a Service. Store and Placer are required; zero
// durations take the defaults above.
type Config struct {
	// Store persists the state; Close closes it.
	Store store.Store
	// Clock drives every deadline (default: the real clock).
	Clock clock.Clock
	// Logger receives structured logs (default: slog.Default()).
	Logger *slog.Logger
	// ChunkConfig is the chunk shape per type (default:
	// placement.DefaultChunkConfig()).
	ChunkConfig placement.ChunkConfig
	// ReservationLease: a reservation whose consumer has not sent a
	// heartbeat for this long expires.
	ReservationLease time.Duration
	// ProviderStaleAfter: a provider without an advertisement for this long
	// becomes unavailable.
	ProviderStaleAfter time.Duration
	// EnforcedGC: enforced instructions are forgotten this long after their
	// last update.
	EnforcedGC time.Duration
	// TerminalGC: terminal reservations are forgotten this long after they
	// became terminal.
	TerminalGC time.Duration
	// MaxWait caps the long-poll wait of Instructions.
	MaxWait time.Duration
	// DisconnectGrace: once a provider is stale (ProviderStaleAfter), its
	// live reservations are kept this much longer before they fail, unless
	// their consumer sets its own grace or reports the virtual node
	// NotReady. Unlike the durations above, 0 means no grace (fail at
	// once); the broker command defaults it to DefaultDisconnectGrace.
	DisconnectGrace time.Duration
	// Thresholds are the re-evaluation thresholds that a consumer's own
	// override (default: placement.DefaultThresholds()).
	Thresholds *placement.Thresholds
	// ReevaluateInterval: every consumer's held capacity is re-evaluated
	// at least this often (and at the next sweep after a relevant change).
	ReevaluateInterval time.Duration
	// ProviderCleanupHold: a provider Cleanup (which revokes the peering
	// credential) is not delivered while the consumer's Cleanup or Unpeer
	// of the same pair is pending and was issued less than this long ago,
	// so the consumer tears down with the credential still valid; a
	// consumer that has not answered by then unpeers with liqoctl force
	// unpeer once the credential is gone.
	ProviderCleanupHold time.Duration
	// MigrationBudget: at most this many moves of a consumer start in any
	// MigrationWindow — the migrations of its manual reservations and its
	// agent's consolidations of autoscaled capacity together, one budget (a
	// consumer's own lifecycle.migrations, or its deprecated aliases
	// maxMovesPerWindow / moveWindowSeconds, overrides both). Like
	// DisconnectGrace, 0 means none (no move of either kind); the broker
	// command defaults it to DefaultMigrationBudget.
	MigrationBudget int
	// MigrationWindow is the disruption budget's window.
	MigrationWindow time.Duration
	// MigrationTimeout: a move whose target's virtual node is not Ready
	// this long after it started fails; the target is released and the
	// moved reservation kept.
	MigrationTimeout time.Duration
	// Placer is the placement index (typically placement.NewIndex(ChunkConfig)).
	Placer Placer
	// SpendStore, when set, keeps the spend book (what each consumer spent
	// today and this month, which its budget reads) across restarts.
	SpendStore SpendStore
	// SpendSampleEvery: the spend book integrates every consumer's spend
	// per hour this often (default DefaultSpendSampleEvery).
	SpendSampleEvery time.Duration
}

func (c *Config) validate() error {
	if c.Store == nil {
		return errors.New("reservations: Config.Store is required")
	}
	if c.Placer == nil {
		return errors.New("reservations: Config.Placer is required (placement.NewIndex)")
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if len(c.ChunkConfig.Standard) == 0 && len(c.ChunkConfig.GPU) == 0 {
		c.ChunkConfig = placement.DefaultChunkConfig()
	}
	if c.Thresholds == nil {
		th := placement.DefaultThresholds()
		c.Thresholds = &th
	}
	if c.MigrationBudget < 0 {
		return fmt.Errorf("reservations: Config.MigrationBudget is negative (%d); use 0 (no migration) or a positive count", c.MigrationBudget)
	}
	if c.DisconnectGrace < 0 {
		return fmt.Errorf("reservations: Config.DisconnectGrace is negative (%s); use 0 (no grace) or a positive duration", c.DisconnectGrace)
	}
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"ReservationLease", &c.ReservationLease, DefaultReservationLease},
		{"ProviderStaleAfter", &c.ProviderStaleAfter, DefaultProviderStaleAfter},
		{"EnforcedGC", &c.EnforcedGC, DefaultEnforcedGC},
		{"TerminalGC", &c.TerminalGC, DefaultTerminalGC},
		{"MaxWait", &c.MaxWait, DefaultMaxWait},
		{"ReevaluateInterval", &c.ReevaluateInterval, DefaultReevaluateInterval},
		{"ProviderCleanupHold", &c.ProviderCleanupHold, DefaultProviderCleanupHold},
		{"MigrationWindow", &c.MigrationWindow, DefaultMigrationWindow},
		{"MigrationTimeout", &c.MigrationTimeout, DefaultMigrationTimeout},
		{"SpendSampleEvery", &c.SpendSampleEvery, DefaultSpendSampleEvery},
	} {
		if *d.v < 0 {
			return fmt.Errorf("reservations: Config.%s is negative (%s); use a positive duration or 0 for the default %s", d.name, *d.v, d.def)
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	return nil
}

// Service is the broker's domain. Build it with New, start Run in a
// goroutine, stop it with Close.
type Service struct {
	cfg   Config
	clock clock.Clock
	log   *slog.Logger
	idx   Placer

	mu sync.Mutex
	st *state
	// queue holds commits waiting for the committer (guarded by mu);
	// awaited counts those somebody waits for (the others are refreshed
	// last-seen times, see enqueueSeen).
	queue   []*commitReq
	awaited int
	closing bool

	commitKick chan struct{}
	// sweepKick asks Run for a sweep before its next deadline.
	sweepKick chan struct{}
	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once

	waiters atomic.Int64

	// changes signals the subscribers (Subscribe) after every change.
	changes signal.Signal
	// version moves after every change the overview shows (see Version).
	version atomic.Uint64

	// explained caches every consumer's explanation at one Placer epoch.
	explained explanationCache
	// views caches the encoded node-group views (NodeGroupsBody).
	views viewCache
	// chosen caches each consumer's chosen provider for the overview.
	chosen chosenCache
	// Re-evaluation (guarded by mu): the last decisions per consumer, when
	// the next periodic run is due, whether a relevant change asks for one
	// sooner, and the decision changes counted per policy and outcome.
	decisions    map[string][]api.Reevaluation
	reevalAt     time.Time
	reevalDirty  bool
	reevalCounts map[reevalKey]uint64
	// Migration (guarded by mu): the moves decided but not started, by
	// reservation id (in memory: recomputed from the decisions after a
	// restart), and the moves counted per outcome.
	kept       map[string]keptMove
	moveCounts map[string]uint64
	// noHolds hands out moves without holding their slots (tests only:
	// shows what the holds prevent).
	noHolds bool
	// Spend and budgets (guarded by mu): the spend book, when it samples
	// next, each consumer's last refusal for its budget.
	book     spend.Book
	spendAt  time.Time
	refusals map[string]*budgetRefusal
	// budgeted holds the ids of the consumers with a budget (id → true),
	// so a view of one without takes no state lock.
	budgeted sync.Map
}

type commitReq struct {
	muts []store.Mutation
	wake []string
	done chan error // nil: nobody waits (enqueueSeen)
}

// New loads the state from cfg.Store, rebuilds the ledger (reserved chunks
// are recomputed from live reservations) and the placement index, and
// starts the group committer.
func New(cfg Config) (*Service, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Service{
		cfg:          cfg,
		clock:        cfg.Clock,
		log:          cfg.Logger,
		idx:          cfg.Placer,
		commitKick:   make(chan struct{}, 1),
		sweepKick:    make(chan struct{}, 1),
		decisions:    map[string][]api.Reevaluation{},
		reevalCounts: map[reevalKey]uint64{},
		kept:         map[string]keptMove{},
		moveCounts:   map[string]uint64{},
		refusals:     map[string]*budgetRefusal{},
		stop:         make(chan struct{}),
		done:         make(chan struct{}),
	}
	snap, err := cfg.Store.Load(context.Background())
	if err != nil {
		return nil, fmt.Errorf("reservations: loading state: %w", err)
	}
	s.mu.Lock()
	s.st = s.buildState(snap, s.clock.Now())
	s.loadSpendBook()
	s.mu.Unlock()
	go s.committer()
	return s, nil
}

// Close ends Run and every waiting long-poll, stops the committer after it
// has flushed the queued commits, and closes Config.Store. Operations after
// Close fail with an internal error.
func (s *Service) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.mu.Lock()
		// The last-seen times the periodic reports did not write yet
		// (mustStore) go with the last commit: a clean restart shows
		// exactly what was shown before it.
		var final *commitReq
		if muts := s.unstoredSeenLocked(); len(muts) > 0 {
			t := s.newTxn()
			t.other = muts
			final = s.enqueue(t)
		}
		// The spend up to now goes with it: a restart within
		// spend.DefaultMaxGap counts the time the broker was down at the
		// rates it had.
		book := s.sampleSpendLocked(s.clock.Now(), &wake{}, true)
		s.closing = true
		s.mu.Unlock()
		s.storeSpendBook(book)
		if err := await(final); err != nil {
			s.log.Warn("Last-seen times not stored at close; they are at most a third of the provider stale-after old", "err", err)
		}
		close(s.stop)
		<-s.done
		err = s.cfg.Store.Close()
	})
	return err
}

// unstoredSeenLocked returns the writes of every advertisement and consumer
// record whose last-seen time is newer in memory than in the store.
func (s *Service) unstoredSeenLocked() []store.Mutation {
	var muts []store.Mutation
	for _, id := range sortedKeys(s.st.providers) {
		if p := s.st.providers[id]; !p.rec.LastSeen.Equal(p.storedSeen) {
			muts = append(muts, store.PutAdvertisement(p.rec))
			p.storedSeen = p.rec.LastSeen
		}
	}
	for _, id := range sortedKeys(s.st.consumers) {
		if c := s.st.consumers[id]; !c.rec.LastSeen.Equal(c.storedSeen) {
			muts = append(muts, store.PutConsumer(c.rec))
			c.storedSeen = c.rec.LastSeen
		}
	}
	return muts
}

// errClosed answers operations after Close.
var errClosed = errors.New("reservations: service is closed")

// enqueue queues t's mutations; it must be called with s.mu held. It
// returns nil when t changed nothing durable (its wake-ups happen at once).
func (s *Service) enqueue(t *txn) *commitReq {
	s.flushUsage(t)
	muts := t.mutations()
	wake := t.wakeList()
	if len(muts) == 0 {
		s.wakeLocked(wake)
		return nil
	}
	req := &commitReq{muts: muts, wake: wake, done: make(chan error, 1)}
	if s.closing {
		req.done <- errClosed
		return req
	}
	s.queue = append(s.queue, req)
	s.awaited++
	s.kickCommitter()
	return req
}

// commitReport ends the transaction of a report (an advertisement or a
// heartbeat): it queues t, releases s.mu (held by the caller) and waits for
// the write. A report with nothing to write still notifies: the overview's
// last-seen time moved.
func (s *Service) commitReport(t *txn) error {
	req := s.enqueue(t)
	s.mu.Unlock()
	if err := await(req); err != nil {
		return err
	}
	if req == nil {
		s.notify()
	}
	return nil
}

// SeenFlushDelay bounds how long a refreshed last-seen time (the write of
// an unchanged advertisement or heartbeat, see mustStore) waits for the
// committer: it goes with the next awaited commit, or this long after the
// first waiting one, so the periodic reports of many agents share one
// transaction and one fsync instead of one each.
const SeenFlushDelay = time.Second

// enqueueSeen queues m, the write of an unchanged report whose stored
// last-seen time is due for a refresh, without waiting for it: the report
// changed nothing else, and a crash before the flush only leaves the stored
// time SeenFlushDelay older. It must be called with s.mu held.
func (s *Service) enqueueSeen(m store.Mutation) {
	if s.closing {
		return // Close writes every unstored last-seen time itself
	}
	first := len(s.queue) == 0
	s.queue = append(s.queue, &commitReq{muts: []store.Mutation{m}})
	if first {
		s.kickCommitter() // to start the flush delay
	}
}

func (s *Service) kickCommitter() {
	select {
	case s.commitKick <- struct{}{}:
	default:
	}
}

// await waits until req is durable. It waits even if ctx ends: the change
// is already visible in memory and must not be acknowledged as failed while
// it may still commit.
func await(req *commitReq) error {
	if req == nil {
		return nil
	}
	if err := <-req.done; err != nil {
		return fmt.Errorf("persisting state: %w", err)
	}
	return nil
}

// committer writes queued commits in queue order, as many per store
// transaction as have accumulated (group commit).
func (s *Service) committer() {
	defer close(s.done)
	var flush clock.Timer // the flush delay of refreshed last-seen times
	defer func() {
		if flush != nil {
			flush.Stop()
		}
	}()
	for {
		s.mu.Lock()
		batch := s.queue
		due := s.awaited > 0
		if due {
			s.queue, s.awaited = nil, 0
		}
		s.mu.Unlock()
		if due {
			if flush != nil {
				flush.Stop()
				flush = nil
			}
			s.commitBatch(batch)
			continue
		}
		var flushC <-chan time.Time
		if len(batch) > 0 {
			if flush == nil {
				flush = s.clock.NewTimer(SeenFlushDelay)
			}
			flushC = flush.C()
		}
		select {
		case <-s.commitKick:
		case <-flushC:
			flush = nil
			s.commitBatch(s.takeQueue())
		case <-s.stop:
			if rest := s.takeQueue(); len(rest) > 0 {
				s.commitBatch(rest)
				continue
			}
			return
		}
	}
}

// takeQueue empties the commit queue.
func (s *Service) takeQueue() []*commitReq {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queue
	s.queue, s.awaited = nil, 0
	return q
}

func (s *Service) commitBatch(batch []*commitReq) {
	n := 0
	for _, r := range batch {
		n += len(r.muts)
	}
	all := make([]store.Mutation, 0, n)
	for _, r := range batch {
		all = append(all, r.muts...)
	}
	muts := lastWrites(all)
	err := s.cfg.Store.Apply(context.Background(), muts)
	if err != nil {
		s.log.Error("Persisting state failed; rolling the in-memory state back to the store", "err", err, "commits", len(batch))
		s.mu.Lock()
		pending := s.queue
		s.queue, s.awaited = nil, 0
		snap, lerr := s.cfg.Store.Load(context.Background())
		if lerr != nil {
			s.log.Error("Reloading state after a failed commit failed; keeping the in-memory state", "err", lerr)
		} else {
			s.replaceState(snap)
		}
		s.mu.Unlock()
		for _, r := range append(batch, pending...) {
			if r.done != nil {
				r.done <- err
			}
		}
		s.notify()
		return
	}
	var wake []string
	for _, r := range batch {
		wake = append(wake, r.wake...)
	}
	if len(wake) > 0 {
		s.mu.Lock()
		s.wakeLocked(wake)
		s.mu.Unlock()
	}
	for _, r := range batch {
		if r.done != nil {
			r.done <- nil
		}
	}
	s.notify()
}

// Subscribe returns a channel that receives a value (coalesced, buffer 1)
// after every change of the state, until ctx ends; then it is closed.
func (s *Service) Subscribe(ctx context.Context) <-chan struct{} {
	return s.changes.Subscribe(ctx)
}

// Version moves (it only grows) after every change of the state the
// overview shows: with every change signal (Subscribe), and when an
// instruction is delivered (which signals nothing: delivery is not a
// commit). A reader that takes Version before Overview can reuse that
// overview for as long as Version has not moved.
func (s *Service) Version() uint64 { return s.version.Load() }

func (s *Service) notify() {
	s.version.Add(1)
	s.changes.Notify()
}

// minSweepInterval is the shortest pause between two sweeps.
const minSweepInterval = time.Second

// Run drives the time-based work: reservation leases, provider freshness
// and garbage collection. It sleeps until the next deadline and returns
// nil when ctx ends.
func (s *Service) Run(ctx context.Context) error {
	for {
		next := s.sweep(ctx)
		last := s.clock.Now()
		// Deadlines may be served up to minSweepInterval late; that bounds
		// the sweeps (each O(state)) when many deadlines fall close together.
		if !s.sleep(ctx, max(next.Sub(last), minSweepInterval), true) {
			return nil
		}
		// A kick (a deadline moved earlier) still waits out the interval.
		if !s.sleep(ctx, last.Add(minSweepInterval).Sub(s.clock.Now()), false) {
			return nil
		}
	}
}

// sleep waits d (nothing when d <= 0), or until a sweep kick when kickable.
// It reports false when ctx ended or the service is closing.
func (s *Service) sleep(ctx context.Context, d time.Duration, kickable bool) bool {
	if d <= 0 {
		return true
	}
	var kick chan struct{}
	if kickable {
		kick = s.sweepKick
	}
	t := s.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-s.stop:
		return false
	case <-t.C():
	case <-kick:
	}
	return true
}

// kickSweep asks Run for a sweep now (coalesced).
func (s *Service) kickSweep() {
	select {
	case s.sweepKick <- struct{}{}:
	default:
	}
}

// lastWrites drops every mutation that a later mutation of the same record
// in the same batch overrides: the batch is one atomic transaction, so only
// the last write of a record is observable (a shared instruction touched by
// many commits of a batch is encoded once).
func lastWrites(muts []store.Mutation) []store.Mutation {
	type key struct {
		kind store.Kind
		key  string
	}
	seen := make(map[key]struct{}, len(muts))
	out := make([]store.Mutation, 0, len(muts))
	for i := len(muts) - 1; i >= 0; i-- {
		k := key{muts[i].Kind, muts[i].Key}
		if _, dup := seen[k]; dup {
			continue
		}
		seen[k] = struct{}{}
		out = append(out, muts[i])
	}
	slices.Reverse(out)
	return out
}
