// Package experiment runs the reference's paired policy experiments in one
// process, in minutes: a federation built by the demo's wiring
// (mocks/demo: the real broker, agents from agentcmd.Assemble, the real
// adapter and the CA stand-in, over simulated clusters and Liqo), phases
// that each place with one policy while seeded condition generators
// (carbon intensity per provider, network latency per consumer × provider
// pair) replay the same sequence from the start of every phase, a
// validity check of the replay, and the outputs: CSVs, summary.md,
// summary.json and PNG + SVG charts under results/<suite>/<UTC time>/.
// See docs/experiments.md.
package experiment

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/federation-autoscaler/federation-autoscaler/mocks/demo"
	"github.com/federation-autoscaler/federation-autoscaler/mocks/geo"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/placement"
)

// Modes of a run.
const (
	// ModeReserve drives demand through the whole path: pods → the CA
	// stand-in → the adapter → the consumer agent → the broker's
	// reservation → peering → a virtual node. Every selection is a real
	// reservation.
	ModeReserve = "reserve"
	// ModeObserve records, at every iteration, the provider each
	// consumer's node-group view (its agent's local API, the broker's
	// decision re-masked by measured RTTs) would grow on, without
	// reserving: cheaper, for big federations.
	ModeObserve = "observe"
)

// Metrics a suite compares policies on.
const (
	MetricCarbon  = "carbon"  // gCO2eq/kWh of the chosen provider's grid
	MetricLatency = "latency" // round trip in ms from the consumer to the chosen provider
)

// Limits of a configuration (each process holds every simulated cluster).
const (
	MaxProviders         = 200
	MaxChunksPerProvider = 64
	MaxPhases            = 8
	MaxDemand            = 16
)

// Config is an experiment (YAML or JSON; unknown keys are an error).
type Config struct {
	// Suite names the results folder: results/<suite>/<UTC time>/.
	Suite string `json:"suite"`
	// Metric is what the phases are compared on: carbon or latency.
	Metric string `json:"metric"`
	// Seed seeds every generator (conditions, random regions, the Random
	// policy's draws).
	Seed uint64 `json:"seed"`
	// Consumers and Providers size the federation.
	Consumers int `json:"consumers"`
	Providers int `json:"providers"`
	// ProviderRegions and ConsumerRegions are mock-geo region codes, used
	// in turn; empty: drawn at random (seeded) from the geo data.
	ProviderRegions []string `json:"providerRegions,omitempty"`
	ConsumerRegions []string `json:"consumerRegions,omitempty"`
	// ChunksPerProvider is every provider's capacity in standard chunks.
	ChunksPerProvider int `json:"chunksPerProvider"`
	// Demand is how many chunks each consumer asks for per iteration.
	Demand int `json:"demand"`
	// Mode is reserve or observe.
	Mode string `json:"mode"`
	// Phases run in order with the same replayed conditions; the first is
	// the baseline every later phase is paired with.
	Phases []Phase `json:"phases"`
	// PhaseLength is each phase's duration.
	PhaseLength metav1.Duration `json:"phaseLength"`
	// Hold is how long each iteration's demand stays (reserve mode), Pause
	// the quiet time after it (the CA stand-in scales down).
	Hold  metav1.Duration `json:"hold"`
	Pause metav1.Duration `json:"pause"`
	// Offset is when, after each condition refresh, demand arrives
	// (default half the refresh interval: the agents have seen the new
	// conditions by then, if the cadences allow; see ObservationDelay).
	Offset   *metav1.Duration `json:"offset,omitempty"`
	Carbon   CarbonConfig     `json:"carbon"`
	Latency  LatencyConfig    `json:"latency"`
	Cadences Cadences         `json:"cadences"`
	// Validity is the replay check's pass mark: the fraction of sample
	// instants at which two phases saw the same best provider.
	Validity float64 `json:"validity"`
	// SampleEvery is how often observations and federation snapshots are
	// taken.
	SampleEvery metav1.Duration `json:"sampleEvery"`
	// Output is the results root (default "results").
	Output string `json:"output,omitempty"`
}

// Phase is one policy's run.
type Phase struct {
	Name   string            `json:"name"`
	Policy api.PlacementType `json:"policy"`
	// Weights for Weighted (default all 1).
	Weights *api.Weights `json:"weights,omitempty"`
}

// CarbonConfig is the carbon generator: every RefreshInterval a fraction
// of the providers drawn from GreenFraction [min, max] is green (Low), the
// rest High, each ± Jitter (uniform), all in gCO2eq/kWh.
type CarbonConfig struct {
	RefreshInterval metav1.Duration `json:"refreshInterval"`
	Low             float64         `json:"low"`
	High            float64         `json:"high"`
	Jitter          float64         `json:"jitter"`
	GreenFraction   []float64       `json:"greenFraction"`
}

// Networks the consumers' latency probes travel over.
const (
	// NetworkSimulated answers every probe from the latency model (plus
	// JitterMs) without waiting: what the probes measure does not depend
	// on the machine's load. The default.
	NetworkSimulated = "simulated"
	// NetworkUDP sends real UDP probes on loopback; each provider's echo
	// waits the pair's round trip before answering, so a CPU-starved
	// process measures its own scheduling delay on top.
	NetworkUDP = "udp"
)

// MaxJitterMs bounds latency.jitterMs.
const MaxJitterMs = 50

// LatencyConfig is the latency generator: every RefreshInterval each
// (consumer, provider) pair's round trip is the great-circle distance ×
// MsPerKm plus a uniform draw in [MinMs, MaxMs].
type LatencyConfig struct {
	RefreshInterval metav1.Duration `json:"refreshInterval"`
	MinMs           float64         `json:"minMs"`
	MaxMs           float64         `json:"maxMs"`
	// MsPerKm is the distance term (default the demo's 0.01 ms/km: light
	// in fibre; 0: pure random, as the reference's generator).
	MsPerKm *float64 `json:"msPerKm,omitempty"`
	// Network is what the probes travel over: simulated (default) or udp.
	Network string `json:"network,omitempty"`
	// JitterMs is the simulated network's measurement noise: each probe's
	// round trip is the model's plus an exponential draw of this mean
	// (one-sided, as queueing is). Default 1 ms; udp ignores it.
	JitterMs *float64 `json:"jitterMs,omitempty"`
}

// Cadences are the agents' and the CA stand-in's periods: short enough
// that a phase can be minutes.
type Cadences struct {
	Advertisement     metav1.Duration `json:"advertisement"`
	Heartbeat         metav1.Duration `json:"heartbeat"`
	ProbeTTL          metav1.Duration `json:"probeTTL"`
	PolicyPoll        metav1.Duration `json:"policyPoll"`
	Scan              metav1.Duration `json:"scan"`
	ScaleDownUnneeded metav1.Duration `json:"scaleDownUnneeded"`
	PeeringDelay      metav1.Duration `json:"peeringDelay"`
}

// LoadConfig reads and checks a configuration file.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the experiment configuration: %w", err)
	}
	c, err := ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("experiment configuration %s: %w", path, err)
	}
	return c, nil
}

// ParseConfig parses a configuration (unknown keys are an error), fills
// the defaults and checks it, naming every mistake at once.
func ParseConfig(data []byte) (*Config, error) {
	var c Config
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return nil, fmt.Errorf("%w (the keys are listed in docs/experiments.md)", err)
	}
	c.defaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

func (c *Config) defaults() {
	if c.Mode == "" {
		c.Mode = ModeReserve
	}
	if c.Demand == 0 {
		c.Demand = 1
	}
	if c.Validity == 0 {
		c.Validity = 0.75
	}
	if c.Output == "" {
		c.Output = "results"
	}
	def := func(d *metav1.Duration, v time.Duration) {
		if d.Duration == 0 {
			d.Duration = v
		}
	}
	def(&c.SampleEvery, time.Second)
	def(&c.Hold, 8*time.Second)
	def(&c.Pause, 8*time.Second)
	cd := &c.Cadences
	def(&cd.Advertisement, time.Second)
	def(&cd.Heartbeat, time.Second)
	def(&cd.ProbeTTL, time.Second)
	def(&cd.PolicyPoll, 500*time.Millisecond)
	def(&cd.Scan, time.Second)
	def(&cd.ScaleDownUnneeded, 2*time.Second)
	def(&cd.PeeringDelay, 200*time.Millisecond)
	if c.Latency.MsPerKm == nil {
		v := float64(demo.RTTPerKM) / float64(time.Millisecond)
		c.Latency.MsPerKm = &v
	}
	if c.Latency.Network == "" {
		c.Latency.Network = NetworkSimulated
	}
	if c.Latency.JitterMs == nil {
		v := 1.0
		c.Latency.JitterMs = &v
	}
	if c.Offset == nil {
		c.Offset = &metav1.Duration{Duration: c.refresh() / 2}
	}
	for i := range c.Phases {
		if c.Phases[i].Policy == api.PlacementWeighted && c.Phases[i].Weights == nil {
			c.Phases[i].Weights = &api.Weights{Price: 1, Carbon: 1, Distance: 1, FreeCapacity: 1}
		}
	}
}

// refresh is the refresh interval of the suite's metric.
func (c *Config) refresh() time.Duration {
	if c.Metric == MetricLatency {
		return c.Latency.RefreshInterval.Duration
	}
	return c.Carbon.RefreshInterval.Duration
}

// Period is one iteration: demand for Hold, then Pause, rounded up to a
// whole number of refresh intervals so that demand always arrives Offset
// after a refresh.
func (c *Config) Period() time.Duration {
	p, step := c.Hold.Duration+c.Pause.Duration, c.refresh()
	if step <= 0 {
		return p
	}
	return (p + step - 1) / step * step
}

// Iterations is how many iterations fit in a phase.
func (c *Config) Iterations() int {
	n := int((c.PhaseLength.Duration - c.Offset.Duration) / c.Period())
	return max(n, 0)
}

// Validate says what is wrong with c and how to fix it, every mistake at
// once.
func (c *Config) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	c.validateSize(add)
	c.validatePhases(add)
	c.validateCarbon(add)
	c.validateLatency(add)
	c.validateTiming(add)
	return errors.Join(errs...)
}

// validateSize checks the suite, the metric and the federation's size.
func (c *Config) validateSize(add func(string, ...any)) {
	if c.Suite == "" || strings.ContainsAny(c.Suite, `/\ `) || c.Suite == "." || c.Suite == ".." {
		add("suite %q: give a folder name without slashes or spaces (results/<suite>/...)", c.Suite)
	}
	if c.Metric != MetricCarbon && c.Metric != MetricLatency {
		add("metric %q: use %q or %q", c.Metric, MetricCarbon, MetricLatency)
	}
	if c.Consumers < 1 || c.Consumers > demo.MaxConsumers {
		add("consumers %d: use 1 to %d", c.Consumers, demo.MaxConsumers)
	}
	if c.Providers < 2 || c.Providers > MaxProviders {
		add("providers %d: use 2 to %d (a comparison needs a choice)", c.Providers, MaxProviders)
	}
	c.validateRegions(add)
	if c.ChunksPerProvider < 1 || c.ChunksPerProvider > MaxChunksPerProvider {
		add("chunksPerProvider %d: use 1 to %d", c.ChunksPerProvider, MaxChunksPerProvider)
	}
	if c.Demand < 1 || c.Demand > MaxDemand {
		add("demand %d: use 1 to %d chunks per consumer per iteration", c.Demand, MaxDemand)
	}
	if c.Mode != ModeReserve && c.Mode != ModeObserve {
		add("mode %q: use %q or %q", c.Mode, ModeReserve, ModeObserve)
	}
	if c.Providers >= 1 && c.ChunksPerProvider >= 1 && c.Consumers*c.Demand > c.Providers*c.ChunksPerProvider {
		add("demand: %d consumers × %d chunks exceed the federation's %d × %d chunks; lower demand or raise chunksPerProvider", c.Consumers, c.Demand, c.Providers, c.ChunksPerProvider)
	}
}

// validateRegions checks the region lists against mock-geo's table.
func (c *Config) validateRegions(add func(string, ...any)) {
	for _, r := range slices.Concat(c.ProviderRegions, c.ConsumerRegions) {
		if _, ok := geo.LoopbackAddress(r, 10); !ok {
			add("region %q is not in mock-geo's table: use one of %s, or leave the list out for random regions", r, strings.Join(Regions(), ", "))
		}
	}
}

// validateTiming checks the phase length, the periods and the pass mark.
func (c *Config) validateTiming(add func(string, ...any)) {
	if c.Validity <= 0 || c.Validity > 1 {
		add("validity %v: use a fraction in (0, 1]", c.Validity)
	}
	if c.PhaseLength.Duration <= 0 {
		add("phaseLength: set how long each phase runs (e.g. 60s)")
	} else if c.Hold.Duration > 0 && c.Pause.Duration > 0 && c.Offset != nil && c.Iterations() < 1 {
		add("phaseLength %s holds no iteration (offset %s + hold %s + pause %s): lengthen it", c.PhaseLength.Duration, c.Offset.Duration, c.Hold.Duration, c.Pause.Duration)
	}
	for name, d := range map[string]time.Duration{
		"hold": c.Hold.Duration, "pause": c.Pause.Duration, "sampleEvery": c.SampleEvery.Duration,
		"cadences.advertisement": c.Cadences.Advertisement.Duration, "cadences.heartbeat": c.Cadences.Heartbeat.Duration,
		"cadences.probeTTL": c.Cadences.ProbeTTL.Duration, "cadences.policyPoll": c.Cadences.PolicyPoll.Duration,
		"cadences.scan": c.Cadences.Scan.Duration, "cadences.scaleDownUnneeded": c.Cadences.ScaleDownUnneeded.Duration,
	} {
		if d < 0 {
			add("%s %s is negative", name, d)
		}
	}
	if c.Offset != nil && (c.Offset.Duration < 0 || (c.refresh() > 0 && c.Offset.Duration >= c.refresh())) {
		add("offset %s: use 0 up to the refresh interval %s", c.Offset.Duration, c.refresh())
	}
}

func (c *Config) validatePhases(add func(string, ...any)) {
	if len(c.Phases) < 2 || len(c.Phases) > MaxPhases {
		add("phases: list 2 to %d (the first is the baseline, e.g. Random, then Eco)", MaxPhases)
	}
	names := map[string]bool{}
	for i, p := range c.Phases {
		if p.Name == "" || names[p.Name] {
			add("phases[%d]: give each phase a distinct name", i)
		}
		names[p.Name] = true
		if applied, known := placement.NormalizePolicy(p.Policy); !known || applied != p.Policy {
			add("phases[%d].policy %q: use Random, Standard, Price, Eco, Latency or Weighted", i, p.Policy)
		}
		if p.Weights != nil {
			for _, w := range []float64{p.Weights.Price, p.Weights.Carbon, p.Weights.Distance, p.Weights.FreeCapacity} {
				if fe := api.CheckWeight("weights", w); fe != nil {
					add("phases[%d].weights: %v", i, fe)
				}
			}
		}
	}
}

func (c *Config) validateCarbon(add func(string, ...any)) {
	cc := c.Carbon
	if c.Metric == MetricCarbon || cc.RefreshInterval.Duration != 0 {
		if cc.RefreshInterval.Duration <= 0 {
			add("carbon.refreshInterval: set how often carbon intensity changes (e.g. 20s)")
		}
		if !(cc.Low >= 0 && cc.Low < cc.High && cc.High <= api.MaxCarbonIntensity) {
			add("carbon.low %v and carbon.high %v: need 0 ≤ low < high ≤ %v gCO2eq/kWh", cc.Low, cc.High, api.MaxCarbonIntensity)
		}
		if cc.Jitter < 0 || cc.Jitter > cc.Low {
			add("carbon.jitter %v: use 0 up to low (%v), so that no value is negative", cc.Jitter, cc.Low)
		}
		if len(cc.GreenFraction) != 2 || cc.GreenFraction[0] < 0 || cc.GreenFraction[0] > cc.GreenFraction[1] || cc.GreenFraction[1] > 1 {
			add("carbon.greenFraction %v: give [min, max] with 0 ≤ min ≤ max ≤ 1", cc.GreenFraction)
		}
	}
}

func (c *Config) validateLatency(add func(string, ...any)) {
	lc := c.Latency
	if c.Metric == MetricLatency || lc.RefreshInterval.Duration != 0 {
		if lc.RefreshInterval.Duration <= 0 {
			add("latency.refreshInterval: set how often latencies change (e.g. 20s)")
		}
		if !(lc.MinMs >= 0 && lc.MinMs <= lc.MaxMs && lc.MaxMs <= 250) {
			add("latency.minMs %v and latency.maxMs %v: need 0 ≤ min ≤ max ≤ 250 (the probes time out at 300 ms)", lc.MinMs, lc.MaxMs)
		}
		if lc.MsPerKm != nil && (*lc.MsPerKm < 0 || *lc.MsPerKm > 0.0125) {
			add("latency.msPerKm %v: use 0 to 0.0125 (half the Earth's circumference then stays under the probes' timeout)", *lc.MsPerKm)
		}
	}
	if lc.Network != NetworkSimulated && lc.Network != NetworkUDP {
		add("latency.network %q: use %q (probes answered from the latency model) or %q (real UDP probes on loopback)", lc.Network, NetworkSimulated, NetworkUDP)
	}
	if lc.JitterMs != nil && (*lc.JitterMs < 0 || *lc.JitterMs > MaxJitterMs) {
		add("latency.jitterMs %v: use 0 to %d ms (the simulated probes' mean added noise)", *lc.JitterMs, MaxJitterMs)
	}
}

// ObservationDelay is how long after a condition refresh the placement
// can have seen it: an advertisement period (carbon: the provider reads
// it when it advertises) or a probe TTL plus a heartbeat (latency: the
// consumer's measurements).
func (c *Config) ObservationDelay() time.Duration {
	if c.Metric == MetricLatency {
		return c.Cadences.ProbeTTL.Duration + c.Cadences.Heartbeat.Duration
	}
	return c.Cadences.Advertisement.Duration
}

// Warnings are the configuration's pitfalls that do not stop a run: an
// observation delay longer than half the refresh interval (the
// reference's pitfall: the policy then places on conditions that are no
// longer true, and the phases compare lags, not policies), or demand
// arriving before the agents can have seen a refresh.
func (c *Config) Warnings() []string {
	var out []string
	obs, ref := c.ObservationDelay(), c.refresh()
	if ref > 0 && obs > ref/2 {
		out = append(out, fmt.Sprintf("observation delay %s is longer than half the %s refresh interval %s: placements will act on stale conditions; shorten the cadences or lengthen the refresh interval", obs, c.Metric, ref))
	}
	if c.Offset != nil && c.Offset.Duration < obs {
		out = append(out, fmt.Sprintf("demand arrives %s after each refresh, before the %s observation delay: the first placements see the previous conditions", c.Offset.Duration, obs))
	}
	return out
}

// Regions are mock-geo's regions with a loopback range (the choices for
// the region lists).
func Regions() []string {
	var out []string
	for _, p := range geo.Places() {
		if _, ok := geo.LoopbackAddress(p.Region, 10); ok && !slices.Contains(out, p.Region) {
			out = append(out, p.Region)
		}
	}
	slices.Sort(out)
	return out
}
