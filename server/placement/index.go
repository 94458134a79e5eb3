package placement

import (
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/google/btree"
	"gopkg.in/inf.v0"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// chunkTypes lists the chunk types in wire sort order; typeIdx indexes it.
var chunkTypes = [...]api.ChunkType{api.ChunkGPU, api.ChunkStandard}

const numTypes = len(chunkTypes)

func typeIdx(t api.ChunkType) (int, bool) {
	switch t {
	case api.ChunkGPU:
		return 0, true
	case api.ChunkStandard:
		return 1, true
	}
	return 0, false
}

// groupKey names one provider × chunk type.
type groupKey struct {
	provider string
	t        int
}

// provState is the Index's derived state of one provider.
type provState struct {
	p Provider
	// Per chunk type (indexed like chunkTypes).
	total   [numTypes]int32
	cost    [numTypes]*inf.Dec // nil = unpriced
	costF   [numTypes]float64
	costStr [numTypes]string
	// indexed records that the provider is in the type's trees, under
	// stdKey (the Standard key it was inserted with).
	indexed [numTypes]bool
	stdKey  [numTypes]float64
	freeKey [numTypes]float64 // 1 − free fraction, as inserted

	carbon    float64
	hasCarbon bool
	hasCoords bool
	lat, lon  float64
}

// groupUsage is every consumer's usage of one provider × chunk type.
type groupUsage struct {
	live       int32 // Σ Live over consumers
	byConsumer map[string]Usage
}

// typeTrees are the per-chunk-type orderings of the open providers (those
// available with at least one free chunk of the type).
type typeTrees struct {
	std   *btree.BTreeG[rankItem] // Standard key ascending, then id
	price *btree.BTreeG[rankItem] // priced by cost, then unpriced; then id
	eco   *btree.BTreeG[rankItem] // with carbon by weighted carbon, then carbon-less; then id
	free  *btree.BTreeG[rankItem] // 1 − free fraction ascending, then id (Weighted)
}

// rankItem is a key of a ranking tree. class 0 has a metric, class 1 has
// none and sorts after every class-0 item.
type rankItem struct {
	class uint8
	f     float64
	d     *inf.Dec
	id    string
}

func lessFloat(a, b rankItem) bool {
	if a.class != b.class {
		return a.class < b.class
	}
	if a.f != b.f {
		return a.f < b.f
	}
	return a.id < b.id
}

func lessDec(a, b rankItem) bool {
	if a.class != b.class {
		return a.class < b.class
	}
	if a.class == 0 {
		if c := a.d.Cmp(b.d); c != 0 {
			return c < 0
		}
	}
	return a.id < b.id
}

// Option configures an Index.
type Option func(*Index)

// Default power draw of one chunk in watts, used for the carbon of borrowed
// capacity (gCO2eq/h = chunks × kW × grid gCO2eq/kWh): a 2-vCPU / 4 GiB
// chunk at about 3.5 W per vCPU and 0.4 W per GiB with a data-centre
// overhead, and a GPU chunk dominated by its accelerator. Estimates, set
// per federation with WithChunkWatts (the broker's --chunk-watts-standard
// and --chunk-watts-gpu).
const (
	DefaultStandardChunkWatts = 10.0
	DefaultGPUChunkWatts      = 250.0
)

// WithChunkWatts sets the power draw of one chunk per type in watts
// (types left out keep their default; negative or non-finite values are
// ignored).
func WithChunkWatts(w map[api.ChunkType]float64) Option {
	return func(ix *Index) {
		for t, v := range w {
			if ti, ok := typeIdx(t); ok && v >= 0 && !math.IsInf(v, 0) && !math.IsNaN(v) {
				ix.watts[ti] = v
			}
		}
	}
}

// WithClock makes the Index stamp servedAt with now instead of time.Now.
func WithClock(now func() time.Time) Option {
	return func(ix *Index) { ix.now = now }
}

// Index keeps providers, consumers and usage, and answers consumers'
// node-group views. It is safe for concurrent use; View takes a read lock
// only. The caller (the broker's domain) keeps it in step with its ledger.
type Index struct {
	cfg ChunkConfig
	now func() time.Time
	// watts is the power draw of one chunk per type (indexed like
	// chunkTypes).
	watts [numTypes]float64

	mu        sync.RWMutex
	providers map[string]*provState
	consumers map[string]Consumer
	usage     map[groupKey]*groupUsage
	// held maps a consumer to the groups it has usage in, and that usage.
	held  map[string]map[groupKey]Usage
	trees [numTypes]typeTrees
	// coordEpoch changes whenever a provider with coordinates joins,
	// leaves, moves or gains or loses a chunk type.
	coordEpoch uint64
	// epoch changes with every change the decisions read (see Epoch).
	epoch uint64
	// near holds each chunk type's distance index, shared by every
	// consumer (see nearTreeOf; guarded by cacheMu, because View rebuilds
	// it under the read lock).
	cacheMu sync.Mutex
	near    [numTypes]*nearTree
	// seed and draws are the Random policy's: a consumer's draw number per
	// chunk type counts the reservations it started (see randomPick).
	seed  uint64
	draws map[drawKey]uint64
}

// NewIndex returns an empty Index cutting capacity with cfg, which must be
// valid (see ChunkConfig.Validate).
func NewIndex(cfg ChunkConfig, opts ...Option) *Index {
	ix := &Index{
		cfg:       cfg,
		now:       time.Now,
		providers: map[string]*provState{},
		consumers: map[string]Consumer{},
		usage:     map[groupKey]*groupUsage{},
		held:      map[string]map[groupKey]Usage{},
		draws:     map[drawKey]uint64{},
		watts:     [numTypes]float64{DefaultGPUChunkWatts, DefaultStandardChunkWatts},
	}
	for i := range ix.trees {
		ix.trees[i] = typeTrees{
			std:   btree.NewG(16, lessFloat),
			price: btree.NewG(16, lessDec),
			eco:   btree.NewG(16, lessFloat),
			free:  btree.NewG(16, lessFloat),
		}
	}
	for _, o := range opts {
		o(ix)
	}
	return ix
}

// ChunkConfig returns the shapes the Index cuts capacity with; the caller
// must not modify them.
func (ix *Index) ChunkConfig() ChunkConfig { return ix.cfg }

// UpsertProvider records a provider's latest advertisement and
// availability, replacing what was known of it. Usage recorded with
// SetUsage is kept.
func (ix *Index) UpsertProvider(p Provider) {
	// The periodic re-advertisement of what is known changes nothing:
	// answer it before cutting chunks and pricing them.
	ix.mu.RLock()
	old, had := ix.providers[p.ID]
	same := had && sameProvider(old.p, p)
	ix.mu.RUnlock()
	if same {
		return
	}
	ps := &provState{p: p}
	chunks := Chunks(ix.cfg, p.Resources)
	for i, t := range chunkTypes {
		ps.total[i] = chunks[t]
		if cost, ok := CostPerChunk(p.UnitPrices, ix.cfg.Shape(t)); ok {
			ps.cost[i] = cost
			ps.costF[i], _ = strconvDec(cost)
			ps.costStr[i] = CostQuantity(cost).String()
		}
	}
	ps.carbon, ps.hasCarbon = WeightedCarbon(p.CarbonForecast, p.CarbonIntensity)
	if p.Topology.HasCoordinates() {
		ps.hasCoords, ps.lat, ps.lon = true, p.Topology.Latitude, p.Topology.Longitude
	}

	ix.mu.Lock()
	defer ix.mu.Unlock()
	old, had = ix.providers[p.ID]
	if had && sameProvider(old.p, p) {
		return // it became known meanwhile: nothing to re-index
	}
	ix.epoch++
	if had {
		for i := range chunkTypes {
			ix.unindex(old, i)
		}
	}
	ix.coordsChanged(old, ps)
	ix.providers[p.ID] = ps
	for i := range chunkTypes {
		ix.index(ps, i)
	}
}

// RemoveProvider forgets a provider. Its usage is kept (the reservations
// still exist in the ledger) and reappears if it advertises again.
func (ix *Index) RemoveProvider(id string) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if old, ok := ix.providers[id]; ok {
		ix.epoch++
		for i := range chunkTypes {
			ix.unindex(old, i)
		}
		ix.coordsChanged(old, nil)
		delete(ix.providers, id)
	}
}

// coordsChanged bumps coordEpoch when a provider's state going from before
// to after (either may be nil) changes the distance index (near.go).
func (ix *Index) coordsChanged(before, after *provState) {
	oldC := before != nil && before.hasCoords
	newC := after != nil && after.hasCoords
	switch {
	case oldC != newC:
		ix.coordEpoch++
	case oldC && (before.lat != after.lat || before.lon != after.lon):
		ix.coordEpoch++
	case oldC:
		for t := range chunkTypes {
			if (before.total[t] > 0) != (after.total[t] > 0) {
				ix.coordEpoch++
				return
			}
		}
	}
}

// UpsertConsumer records a consumer's latest heartbeat (policy, weights,
// location), replacing what was known of it.
func (ix *Index) UpsertConsumer(c Consumer) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if old, ok := ix.consumers[c.ID]; ok && sameConsumer(old, c) {
		return
	}
	ix.epoch++
	ix.consumers[c.ID] = c
}

// RemoveConsumer forgets a consumer's heartbeat state (not its usage).
func (ix *Index) RemoveConsumer(id string) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if _, ok := ix.consumers[id]; ok {
		ix.epoch++
	}
	delete(ix.consumers, id)
	for ti := range chunkTypes {
		delete(ix.draws, drawKey{id, ti})
	}
}

// SetUsage sets consumer consumerID's usage of provider × chunk type t to
// u (absolute counts, not deltas); a zero Usage removes it. It costs
// O(log providers). Unknown chunk types are ignored.
func (ix *Index) SetUsage(providerID string, t api.ChunkType, consumerID string, u Usage) {
	ti, ok := typeIdx(t)
	if !ok {
		return
	}
	u.Live, u.InFlight = max(u.Live, 0), max(u.InFlight, 0)
	k := groupKey{providerID, ti}

	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.usageOf(k, consumerID) == u {
		return
	}
	ix.epoch++
	ps := ix.providers[providerID]
	if ps != nil {
		ix.unindex(ps, ti)
	}
	g := ix.usage[k]
	if g == nil {
		g = &groupUsage{byConsumer: map[string]Usage{}}
		ix.usage[k] = g
	}
	before := g.byConsumer[consumerID]
	if u.Live > before.Live {
		ix.draws[drawKey{consumerID, ti}]++ // a reservation started: a new Random draw
	}
	g.live -= before.Live
	if u == (Usage{}) {
		delete(g.byConsumer, consumerID)
		if h := ix.held[consumerID]; h != nil {
			delete(h, k)
			if len(h) == 0 {
				delete(ix.held, consumerID)
			}
		}
	} else {
		g.byConsumer[consumerID] = u
		g.live += u.Live
		h := ix.held[consumerID]
		if h == nil {
			h = map[groupKey]Usage{}
			ix.held[consumerID] = h
		}
		h[k] = u
	}
	if len(g.byConsumer) == 0 {
		delete(ix.usage, k)
	}
	if ps != nil {
		ix.index(ps, ti)
	}
}

// liveOf returns everyone's live chunks on a group.
func (ix *Index) liveOf(k groupKey) int32 {
	if g := ix.usage[k]; g != nil {
		return g.live
	}
	return 0
}

// usageOf returns one consumer's usage of a group.
func (ix *Index) usageOf(k groupKey, consumerID string) Usage {
	if g := ix.usage[k]; g != nil {
		return g.byConsumer[consumerID]
	}
	return Usage{}
}

// free returns the chunks of a group nobody holds.
func (ix *Index) free(ps *provState, ti int) int32 {
	return max(ps.total[ti]-ix.liveOf(groupKey{ps.p.ID, ti}), 0)
}

// freeFraction is free ÷ total (0 when total is 0).
func (ix *Index) freeFraction(ps *provState, ti int) float64 {
	if ps.total[ti] == 0 {
		return 0
	}
	return float64(ix.free(ps, ti)) / float64(ps.total[ti])
}

// standardKey is the Standard metric, lower is better:
// 1 − (0.8 × free fraction + 0.2 × renewable).
func (ix *Index) standardKey(ps *provState, ti int) float64 {
	r := 0.0
	if ps.p.Renewable {
		r = 1
	}
	return 1 - (0.8*ix.freeFraction(ps, ti) + 0.2*r)
}

// open reports whether a group belongs in the ranking trees: an available
// provider with at least one free chunk of the type.
func (ix *Index) open(ps *provState, ti int) bool {
	return ps.p.Available && ps.total[ti] > 0 && ix.free(ps, ti) > 0
}

func (ix *Index) priceItem(ps *provState, ti int) rankItem {
	if ps.cost[ti] == nil {
		return rankItem{class: 1, id: ps.p.ID}
	}
	return rankItem{d: ps.cost[ti], f: ps.costF[ti], id: ps.p.ID}
}

func ecoItem(ps *provState) rankItem {
	if !ps.hasCarbon {
		return rankItem{class: 1, id: ps.p.ID}
	}
	return rankItem{f: ps.carbon, id: ps.p.ID}
}

// index inserts a group into its type's trees if it is open.
func (ix *Index) index(ps *provState, ti int) {
	if !ix.open(ps, ti) {
		return
	}
	tr := &ix.trees[ti]
	ps.stdKey[ti] = ix.standardKey(ps, ti)
	ps.indexed[ti] = true
	tr.std.ReplaceOrInsert(rankItem{f: ps.stdKey[ti], id: ps.p.ID})
	ps.freeKey[ti] = 1 - ix.freeFraction(ps, ti)
	tr.free.ReplaceOrInsert(rankItem{f: ps.freeKey[ti], id: ps.p.ID})
	tr.price.ReplaceOrInsert(ix.priceItem(ps, ti))
	tr.eco.ReplaceOrInsert(ecoItem(ps))
}

// unindex removes a group from its type's trees, using the keys it was
// inserted with.
func (ix *Index) unindex(ps *provState, ti int) {
	if !ps.indexed[ti] {
		return
	}
	tr := &ix.trees[ti]
	tr.std.Delete(rankItem{f: ps.stdKey[ti], id: ps.p.ID})
	tr.free.Delete(rankItem{f: ps.freeKey[ti], id: ps.p.ID})
	tr.price.Delete(ix.priceItem(ps, ti))
	tr.eco.Delete(ecoItem(ps))
	ps.indexed[ti] = false
}

// strconvDec converts an exact decimal to the nearest float64, saturating at
// ±math.MaxFloat64: a cost beyond float64's range (only possible for data
// stored before the ingest limits) ranks last among the priced instead of
// becoming ±Inf, which JSON cannot carry. ok is false when it saturated.
func strconvDec(d *inf.Dec) (float64, bool) {
	f, err := strconv.ParseFloat(d.String(), 64)
	switch {
	case math.IsInf(f, 1):
		return math.MaxFloat64, false
	case math.IsInf(f, -1):
		return -math.MaxFloat64, false
	}
	return f, err == nil
}
