// Package webfake is an in-memory federation implementing the web package's
// backend interfaces: one broker overview, provider consoles and a consumer
// console with the demo workload switch. Writes change its state and signal
// subscribers, so the dashboard updates as it would against the real
// federation. It serves the web tests and the browser tests.
package webfake

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/placement"
	"github.com/federation-autoscaler/federation-autoscaler/web"
)

// Chunk is the size of a standard chunk in the fake federation.
var Chunk = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi")}

type provider struct {
	id        string
	topo      api.Topology
	cfg       web.SharingConfig
	carbon    float64
	resources corev1.ResourceList
	total     int32
	lastAd    time.Time
}

type reservation struct {
	api.OverviewReservation
	manual   bool
	workload bool
}

// Federation is the fake. Build it with New; its methods are safe for
// concurrent use.
type Federation struct {
	now    func() time.Time
	paused atomic.Bool

	mu        sync.Mutex
	providers []*provider
	consumer  struct {
		id, city, region string
		placement        api.Placement
		chosen           string
		rtts             map[string]float64
		workload         web.Workload
		lastHB           time.Time
	}
	reservations []*reservation
	seq          int
	subs         map[chan struct{}]struct{}
}

// New returns a federation of three providers (milan, paris, turin; paris
// is the cheapest and greenest, milan the closest) and one consumer (rome).
// now is the clock (nil: time.Now).
func New(now func() time.Time) *Federation {
	if now == nil {
		now = time.Now
	}
	f := &Federation{now: now, subs: map[chan struct{}]struct{}{}}
	t := now()
	mk := func(id, city, region string, lat, lon float64, cpu, mem string, carbon float64, renewable bool) *provider {
		return &provider{
			id: id, topo: api.Topology{City: city, Region: region, Latitude: lat, Longitude: lon},
			cfg: web.SharingConfig{
				UnitPrices: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)},
				Renewable:  renewable,
			},
			carbon:    carbon,
			resources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("32Gi")},
			total:     8, lastAd: t,
		}
	}
	f.providers = []*provider{
		mk("milan", "Milan", "eu-south", 45.46, 9.19, "0.030", "0.004", 320, false),
		mk("paris", "Paris", "eu-west", 48.86, 2.35, "0.020", "0.003", 60, true),
		mk("turin", "Turin", "eu-south", 45.07, 7.69, "0.040", "0.005", 250, false),
	}
	f.consumer.id, f.consumer.city, f.consumer.region = "rome", "Rome", "eu-south"
	f.consumer.placement = api.Placement{Type: api.PlacementStandard}
	f.consumer.rtts = map[string]float64{"milan": 9.8, "paris": 23.4, "turin": 11.2}
	f.consumer.lastHB = t
	f.consumer.workload = web.Workload{Replicas: 4, PodCPU: resource.MustParse("1"), PodMemory: resource.MustParse("1Gi")}
	f.chooseLocked()
	return f
}

// ProviderIDs lists the providers.
func (f *Federation) ProviderIDs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	ids := make([]string, 0, len(f.providers))
	for _, p := range f.providers {
		ids = append(ids, p.id)
	}
	return ids
}

// Subscribe implements the coalescing change signal of every backend.
func (f *Federation) Subscribe(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{}, 1)
	f.mu.Lock()
	f.subs[ch] = struct{}{}
	f.mu.Unlock()
	go func() {
		<-ctx.Done()
		f.mu.Lock()
		delete(f.subs, ch)
		f.mu.Unlock()
		close(ch)
	}()
	return ch
}

// notifyLocked signals every subscriber; f.mu is held.
func (f *Federation) notifyLocked() {
	for ch := range f.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (f *Federation) provider(id string) *provider {
	for _, p := range f.providers {
		if p.id == id {
			return p
		}
	}
	return nil
}

func costPerChunk(p *provider) float64 {
	total := 0.0
	for name, q := range Chunk {
		price, ok := p.cfg.UnitPrices[name]
		if !ok {
			return 0
		}
		units := q.AsApproximateFloat64()
		if name == corev1.ResourceMemory {
			units /= 1 << 30
		}
		total += price.AsApproximateFloat64() * units
	}
	return math.Round(total*1e6) / 1e6
}

func (f *Federation) reservedLocked(id string) int32 {
	var n int32
	for _, r := range f.reservations {
		if r.ProviderClusterID == id && !r.Status.Terminal() {
			n += r.ChunkCount
		}
	}
	return n
}

// chooseLocked picks the consumer's provider under its policy.
func (f *Federation) chooseLocked() {
	best, bestV := "", math.Inf(1)
	for _, p := range f.providers {
		var v float64
		switch f.consumer.placement.Type {
		case api.PlacementPrice:
			v = costPerChunk(p)
		case api.PlacementEco:
			v = p.carbon
		case api.PlacementLatency:
			v = f.consumer.rtts[p.id]
		default:
			v = float64(-(p.total - f.reservedLocked(p.id))) // most free capacity
		}
		if v < bestV {
			best, bestV = p.id, v
		}
	}
	f.consumer.chosen = best
}

// Overview implements web.OverviewSource.
func (f *Federation) Overview(ctx context.Context) (api.Overview, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	ov := api.Overview{GeneratedAt: metav1.NewTime(now), Capacity: api.CapacitySummary{
		ByChunkType: map[api.ChunkType]api.ChunkCounts{}, ChunkSizes: map[api.ChunkType]corev1.ResourceList{api.ChunkStandard: Chunk},
	}}
	for _, p := range f.providers {
		reserved := f.reservedLocked(p.id)
		carbon := p.carbon
		topo := p.topo
		sharing := p.cfg.Sharing
		ad := api.AdvertisementSnapshot{
			ClusterID: p.id, LiqoClusterID: "liqo-" + p.id, Resources: p.resources, Topology: &topo,
			UnitPrices: p.cfg.UnitPrices, CarbonIntensity: &carbon, CarbonWeighted: &carbon, Renewable: p.cfg.Renewable,
			ChunkCount: p.total, ReservedChunks: reserved, AvailableChunks: p.total - reserved,
			LastSeen: metav1.NewTime(p.lastAd), Available: true, CostPerChunk: costPerChunk(p), Sharing: &sharing,
			Chunks: map[api.ChunkType]api.ChunkCounts{api.ChunkStandard: {TotalChunks: p.total, ReservedChunks: reserved, AvailableChunks: p.total - reserved}},
		}
		ov.Advertisements = append(ov.Advertisements, ad)
		ov.Capacity.TotalChunks += p.total
		ov.Capacity.ReservedChunks += reserved
		ov.Capacity.AvailableChunks += p.total - reserved
		ov.Capacity.ProviderCount++
		ov.Capacity.AvailableProviderCount++
	}
	ov.Capacity.ByChunkType[api.ChunkStandard] = api.ChunkCounts{
		TotalChunks: ov.Capacity.TotalChunks, ReservedChunks: ov.Capacity.ReservedChunks, AvailableChunks: ov.Capacity.AvailableChunks,
	}
	c := f.consumer
	rtt := c.rtts[c.chosen]
	ov.Consumers = []api.OverviewConsumer{{
		ClusterID: c.id, LiqoClusterID: "liqo-" + c.id, Placement: c.placement.Type, AppliedPlacement: c.placement.Type,
		Weights: c.placement.Weights, Region: c.region, City: c.city, ChosenProvider: c.chosen, MeasuredRTT: &rtt,
		LastSeen: metav1.NewTime(c.lastHB), MeasuredLatencies: c.rtts, Spend: f.spendLocked(),
	}}
	for _, r := range f.reservations {
		ov.Reservations = append(ov.Reservations, r.OverviewReservation)
		if in, ok := instructionFor(r); ok {
			ov.ReservationInstructions = append(ov.ReservationInstructions, in)
		}
	}
	return ov, nil
}

// spendLocked is what the consumer's live chunks cost and emit per hour at
// the fake's prices (a standard chunk draws the broker's default power);
// the fake keeps no spend book, so nothing was spent today or this month.
func (f *Federation) spendLocked() *api.ConsumerSpend {
	sp := &api.ConsumerSpend{}
	for _, r := range f.reservations {
		p := f.provider(r.ProviderClusterID)
		if r.Status.Terminal() || p == nil {
			continue
		}
		if sp.Chunks == nil {
			sp.Chunks = map[api.ChunkType]int32{}
		}
		n := float64(r.ChunkCount)
		sp.Chunks[api.ChunkStandard] += r.ChunkCount
		sp.CostPerHour += n * costPerChunk(p)
		sp.CarbonPerHour += n * placement.DefaultStandardChunkWatts / 1000 * p.carbon
	}
	return sp
}

// instructionFor returns the instruction a live, not yet peered reservation
// waits on.
func instructionFor(r *reservation) (api.OverviewInstruction, bool) {
	var kind api.InstructionKind
	target := r.ProviderClusterID
	switch r.Status {
	case api.PhasePending, api.PhaseGeneratingKubeconfig:
		kind = api.KindGenerateKubeconfig
	case api.PhaseKubeconfigReady, api.PhasePeering:
		kind, target = api.KindPeer, r.ConsumerClusterID
	case api.PhaseUnpeering:
		kind, target = api.KindUnpeer, r.ConsumerClusterID
	default:
		return api.OverviewInstruction{}, false
	}
	issued := r.History[len(r.History)-1].At
	return api.OverviewInstruction{
		ID: "ins-" + r.ReservationID + "-" + string(kind), Kind: kind, ReservationID: r.ReservationID,
		TargetClusterID: target, ChunkCount: r.ChunkCount, Attempts: 1, IssuedAt: &issued,
		ConsumerClusterID: r.ConsumerClusterID, ProviderClusterID: r.ProviderClusterID,
	}, true
}

// reserveLocked creates a reservation in phase Pending.
func (f *Federation) reserveLocked(providerID string, chunks int32, manual, workload bool) (*reservation, error) {
	p := f.provider(providerID)
	if p == nil {
		return nil, fmt.Errorf("provider %q is unknown to the broker", providerID)
	}
	if free := p.total - f.reservedLocked(p.id); free < chunks {
		return nil, fmt.Errorf("provider %s has %d free chunks, %d asked", p.id, free, chunks)
	}
	f.seq++
	now := metav1.NewTime(f.now())
	r := &reservation{manual: manual, workload: workload}
	r.ReservationID = api.ReservationIDPrefix + strconv.Itoa(1000+f.seq)
	r.Status = api.PhasePending
	r.ProviderClusterID, r.ConsumerClusterID = p.id, f.consumer.id
	r.ChunkCount, r.ChunkType, r.Resources = chunks, api.ChunkStandard, Chunk
	r.CreatedAt, r.ExpiresAt = now, metav1.NewTime(now.Add(time.Hour))
	r.NodeGroupID = api.NodeGroupID(p.id, api.ChunkStandard)
	r.History = []api.PhaseTransition{{Phase: api.PhasePending, At: now}}
	f.reservations = append(f.reservations, r)
	return r, nil
}

var nextPhase = map[api.Phase]api.Phase{
	api.PhasePending:              api.PhaseGeneratingKubeconfig,
	api.PhaseGeneratingKubeconfig: api.PhaseKubeconfigReady,
	api.PhaseKubeconfigReady:      api.PhasePeering,
	api.PhasePeering:              api.PhasePeered,
	api.PhaseUnpeering:            api.PhaseReleased,
}

// Step advances every reservation in progress by one phase and reports
// whether anything changed. Run calls it periodically; tests may call it
// directly.
func (f *Federation) Step() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	changed := false
	now := metav1.NewTime(f.now())
	for _, r := range f.reservations {
		next, ok := nextPhase[r.Status]
		if !ok {
			continue
		}
		r.Status = next
		r.History = append(r.History, api.PhaseTransition{Phase: next, At: now})
		switch next {
		case api.PhasePeered:
			r.ActivatedAt = &now
			for i := int32(0); i < r.ChunkCount; i++ {
				r.VirtualNodeNames = append(r.VirtualNodeNames, fmt.Sprintf("vk-%s-%s-%d", r.ProviderClusterID, r.ReservationID, i))
			}
		case api.PhaseReleased:
			r.TerminatedAt = &now
		}
		changed = true
	}
	if changed {
		f.consumer.lastHB = now.Time
		f.notifyLocked()
	}
	return changed
}

// advertise refreshes every provider's last advertisement, as the periodic
// re-advertisement of a real agent does (no change signal: ages only).
func (f *Federation) advertise() {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	for _, p := range f.providers {
		p.lastAd = now
	}
	f.consumer.lastHB = now
}

// Pause stops (true) or resumes (false) the phase progression of Run, so a
// test can look at reservations and instructions in flight.
func (f *Federation) Pause(p bool) { f.paused.Store(p) }

// Run steps reservations every period until ctx is done.
func (f *Federation) Run(ctx context.Context, period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if !f.paused.Load() {
				f.Step()
			}
			f.advertise()
		}
	}
}

func (f *Federation) releaseLocked(r *reservation) {
	if r.Status.Terminal() || r.Status == api.PhaseUnpeering {
		return
	}
	now := metav1.NewTime(f.now())
	r.Status = api.PhaseUnpeering
	r.History = append(r.History, api.PhaseTransition{Phase: api.PhaseUnpeering, At: now})
}

// Provider returns the backend of the provider console of id.
func (f *Federation) Provider(id string) web.ProviderBackend { return &providerBackend{f: f, id: id} }

// Consumer returns the consumer console's backend (with the workload switch).
func (f *Federation) Consumer() interface {
	web.ConsumerBackend
	web.WorkloadBackend
} {
	return &consumerBackend{f: f}
}

type providerBackend struct {
	f  *Federation
	id string
}

var errUnknownProvider = errors.New("unknown provider")

func (b *providerBackend) Subscribe(ctx context.Context) <-chan struct{} { return b.f.Subscribe(ctx) }

func (b *providerBackend) Status(ctx context.Context) (web.ProviderStatus, error) {
	b.f.mu.Lock()
	defer b.f.mu.Unlock()
	p := b.f.provider(b.id)
	if p == nil {
		return web.ProviderStatus{}, errUnknownProvider
	}
	reserved := b.f.reservedLocked(p.id)
	carbon := p.carbon
	topo := p.topo
	if p.cfg.Location != nil {
		topo = *p.cfg.Location
	}
	st := web.ProviderStatus{
		ClusterID: p.id, Topology: &topo, LocationSet: p.cfg.Location != nil, CarbonIntensity: &carbon, CarbonWeighted: &carbon, Resources: p.resources,
		Chunks:         map[api.ChunkType]api.ChunkCounts{api.ChunkStandard: {TotalChunks: p.total, ReservedChunks: reserved, AvailableChunks: p.total - reserved}},
		LastAdvertised: p.lastAd,
	}
	for _, r := range b.f.reservations {
		if r.ProviderClusterID == p.id && !r.Status.Terminal() {
			// Priced as the fake's overview prices the provider's chunks.
			cost := float64(r.ChunkCount) * costPerChunk(p)
			st.Loans = append(st.Loans, web.Loan{
				ReservationID: r.ReservationID, ConsumerClusterID: r.ConsumerClusterID, ChunkType: r.ChunkType,
				ChunkCount: r.ChunkCount, Phase: r.Status, Since: r.CreatedAt.Time, CostPerHour: &cost,
			})
		}
	}
	return st, nil
}

func (b *providerBackend) SharingConfig(ctx context.Context) (web.SharingConfig, error) {
	b.f.mu.Lock()
	defer b.f.mu.Unlock()
	p := b.f.provider(b.id)
	if p == nil {
		return web.SharingConfig{}, errUnknownProvider
	}
	return p.cfg, nil
}

func (b *providerBackend) ApplySharing(ctx context.Context, cfg web.SharingConfig) error {
	b.f.mu.Lock()
	defer b.f.mu.Unlock()
	p := b.f.provider(b.id)
	if p == nil {
		return errUnknownProvider
	}
	p.cfg = cfg
	p.lastAd = b.f.now()
	b.f.chooseLocked()
	b.f.notifyLocked()
	return nil
}

type consumerBackend struct{ f *Federation }

func (b *consumerBackend) Subscribe(ctx context.Context) <-chan struct{} { return b.f.Subscribe(ctx) }

func (b *consumerBackend) Status(ctx context.Context) (web.ConsumerStatus, error) {
	f := b.f
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.consumer
	st := web.ConsumerStatus{
		ClusterID: c.id, City: c.city, Region: c.region, Placement: c.placement, AppliedPlacement: c.placement.Type,
		ChosenProvider: c.chosen, RTTs: c.rtts, LastHeartbeat: c.lastHB,
	}
	for _, p := range f.providers {
		cost := costPerChunk(p)
		var metric float64
		switch c.placement.Type {
		case api.PlacementPrice:
			metric = cost
		case api.PlacementEco:
			metric = p.carbon
		case api.PlacementLatency:
			metric = c.rtts[p.id]
		}
		st.NodeGroups = append(st.NodeGroups, api.NodeGroupView{
			ID: api.NodeGroupID(p.id, api.ChunkStandard), ProviderClusterID: p.id, Type: api.ChunkStandard,
			MaxSize: p.total, CurrentReserved: f.reservedLocked(p.id), ChunkResources: Chunk,
			Cost: strconv.FormatFloat(cost, 'f', 4, 64), PlacementMetric: &metric, HasMetric: c.placement.Type != api.PlacementStandard,
		})
	}
	for _, r := range f.reservations {
		st.Reservations = append(st.Reservations, web.ConsumerReservation{
			ID: r.ReservationID, ProviderClusterID: r.ProviderClusterID, ChunkType: r.ChunkType, ChunkCount: r.ChunkCount,
			Phase: r.Status, Manual: r.manual, CreatedAt: r.CreatedAt.Time,
		})
		if r.Status.Terminal() {
			continue
		}
		for i := int32(0); i < r.ChunkCount; i++ {
			n := web.VirtualNode{
				Name: fmt.Sprintf("vk-%s-%s-%d", r.ProviderClusterID, r.ReservationID, i), ReservationID: r.ReservationID,
				ProviderClusterID: r.ProviderClusterID, State: "Pending", Since: r.CreatedAt.Time,
			}
			switch r.Status {
			case api.PhasePeered:
				n.State, n.Since = "Ready", r.ActivatedAt.Time
			case api.PhaseUnpeering:
				n.State = "Terminating"
			}
			st.VirtualNodes = append(st.VirtualNodes, n)
		}
	}
	sort.Slice(st.NodeGroups, func(i, j int) bool { return st.NodeGroups[i].ID < st.NodeGroups[j].ID })
	return st, nil
}

func (b *consumerBackend) SetPolicy(ctx context.Context, p api.Placement) error {
	f := b.f
	f.mu.Lock()
	defer f.mu.Unlock()
	f.consumer.placement = p
	f.consumer.lastHB = f.now()
	f.chooseLocked()
	f.notifyLocked()
	return nil
}

func (b *consumerBackend) CreateReservation(ctx context.Context, spec web.ReservationSpec) (string, error) {
	f := b.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if spec.ChunkType != api.ChunkStandard {
		return "", fmt.Errorf("no provider offers %s chunks", spec.ChunkType)
	}
	r, err := f.reserveLocked(spec.ProviderClusterID, spec.ChunkCount, true, false)
	if err != nil {
		return "", err
	}
	f.notifyLocked()
	return r.ReservationID, nil
}

func (b *consumerBackend) ReleaseReservation(ctx context.Context, id string) error {
	f := b.f
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.reservations {
		if r.ReservationID == id {
			f.releaseLocked(r)
			f.notifyLocked()
			return nil
		}
	}
	return web.Classify(web.ErrNotFound, fmt.Errorf("reservation %s does not exist", id))
}

func (b *consumerBackend) Workload(ctx context.Context) (web.Workload, error) {
	f := b.f
	f.mu.Lock()
	defer f.mu.Unlock()
	w := f.consumer.workload
	w.Running, w.Pending = 0, 0
	if w.Enabled {
		capacity := int32(0)
		for _, r := range f.reservations {
			if r.workload && r.Status == api.PhasePeered {
				capacity += r.ChunkCount * podsPerChunk(w)
			}
		}
		w.Running = min(capacity, w.Replicas)
		w.Pending = w.Replicas - w.Running
	}
	return w, nil
}

func podsPerChunk(w web.Workload) int32 {
	cpu := Chunk[corev1.ResourceCPU]
	byCPU := cpu.MilliValue() / max(w.PodCPU.MilliValue(), 1)
	mem := Chunk[corev1.ResourceMemory]
	byMem := mem.Value() / max(w.PodMemory.Value(), 1)
	return int32(max(min(byCPU, byMem), 0))
}

// SetWorkload switches the simulated workload: on, it reserves enough chunks
// on the chosen provider (as the Cluster Autoscaler would); off, it releases
// them.
func (b *consumerBackend) SetWorkload(ctx context.Context, w web.Workload) error {
	f := b.f
	f.mu.Lock()
	defer f.mu.Unlock()
	f.consumer.workload = w
	for _, r := range f.reservations {
		if r.workload {
			f.releaseLocked(r)
		}
	}
	if w.Enabled && w.Replicas > 0 {
		per := podsPerChunk(w)
		if per == 0 {
			f.notifyLocked()
			return fmt.Errorf("a pod of %s CPU / %s memory does not fit in a chunk", w.PodCPU.String(), w.PodMemory.String())
		}
		chunks := (w.Replicas + per - 1) / per
		f.chooseLocked()
		if _, err := f.reserveLocked(f.consumer.chosen, chunks, false, true); err != nil {
			f.notifyLocked()
			return err
		}
	}
	f.notifyLocked()
	return nil
}
