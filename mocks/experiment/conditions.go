package experiment

import (
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/server/placement"
)

// Site is a cluster of the experiment and where it is.
type Site struct {
	ID       string
	Region   string
	Lat, Lon float64
}

// Conditions are the seeded generators: the carbon intensity of every
// provider and the round trip of every (consumer, provider) pair, as a
// function of the time since the phase started (τ). The value at τ depends
// only on the seed and on the refresh index ⌊τ / refresh interval⌋, so every
// phase replays the same sequence at the same relative instants: the
// generators restart with the phase (Restart). Safe for concurrent use.
type Conditions struct {
	cfg       *Config
	providers []Site
	consumers []Site

	start atomic.Int64 // the phase's start, Unix ns

	mu      sync.Mutex
	carbon  map[int64][]float64
	latency map[int64][][]float64
}

// NewConditions returns the generators for the federation's sites; τ
// counts from now until the first Restart.
func NewConditions(cfg *Config, providers, consumers []Site) *Conditions {
	g := &Conditions{cfg: cfg, providers: providers, consumers: consumers, carbon: map[int64][]float64{}, latency: map[int64][][]float64{}}
	g.Restart(time.Now())
	return g
}

// Restart makes τ = 0 at t: the generators replay from their first value.
func (g *Conditions) Restart(t time.Time) { g.start.Store(t.UnixNano()) }

// Tau is the time since the phase started at t.
func (g *Conditions) Tau(t time.Time) time.Duration {
	return time.Duration(t.UnixNano() - g.start.Load())
}

func refreshIndex(tau, every time.Duration) int64 {
	if tau < 0 || every <= 0 {
		return 0
	}
	return int64(tau / every)
}

// stream returns the generator of refresh index k of one stream (0:
// carbon, 1: latency): the same for every phase.
func (g *Conditions) stream(k int64, s uint64) *rand.Rand {
	return rand.New(rand.NewPCG(g.cfg.Seed, uint64(k)<<1|s))
}

// CarbonAt is provider p's carbon intensity at τ (gCO2eq/kWh).
func (g *Conditions) CarbonAt(tau time.Duration, p int) float64 {
	return g.carbonRow(refreshIndex(tau, g.cfg.Carbon.RefreshInterval.Duration))[p]
}

func (g *Conditions) carbonRow(k int64) []float64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	if row, ok := g.carbon[k]; ok {
		return row
	}
	cc := g.cfg.Carbon
	r := g.stream(k, 0)
	n := len(g.providers)
	frac := 0.0
	if len(cc.GreenFraction) == 2 {
		frac = cc.GreenFraction[0] + r.Float64()*(cc.GreenFraction[1]-cc.GreenFraction[0])
	}
	green := map[int]bool{}
	for _, p := range r.Perm(n)[:int(math.Round(frac*float64(n)))] {
		green[p] = true
	}
	row := make([]float64, n)
	for p := range row {
		base := cc.High
		if green[p] {
			base = cc.Low
		}
		row[p] = max(0, base+(2*r.Float64()-1)*cc.Jitter)
	}
	g.carbon[k] = row
	return row
}

// LatencyAt is the round trip in ms from consumer c to provider p at τ.
func (g *Conditions) LatencyAt(tau time.Duration, c, p int) float64 {
	return g.latencyRows(refreshIndex(tau, g.cfg.Latency.RefreshInterval.Duration))[c][p]
}

func (g *Conditions) latencyRows(k int64) [][]float64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	if rows, ok := g.latency[k]; ok {
		return rows
	}
	lc := g.cfg.Latency
	r := g.stream(k, 1)
	perKm := 0.0
	if lc.MsPerKm != nil {
		perKm = *lc.MsPerKm
	}
	rows := make([][]float64, len(g.consumers))
	for c, cs := range g.consumers {
		rows[c] = make([]float64, len(g.providers))
		for p, ps := range g.providers {
			km := placement.DistanceKM(cs.Lat, cs.Lon, ps.Lat, ps.Lon)
			rows[c][p] = km*perKm + lc.MinMs + r.Float64()*(lc.MaxMs-lc.MinMs)
		}
	}
	g.latency[k] = rows
	return rows
}

// Value is the suite's metric of a placement of consumer c on provider p
// at τ: carbon (the same for every consumer) or latency.
func (g *Conditions) Value(tau time.Duration, c, p int) float64 {
	if g.cfg.Metric == MetricLatency {
		return g.LatencyAt(tau, c, p)
	}
	return g.CarbonAt(tau, p)
}
