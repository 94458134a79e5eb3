package experiment

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/federation-autoscaler/federation-autoscaler/adapter/localapi"
	"github.com/federation-autoscaler/federation-autoscaler/agent/agentcmd"
	"github.com/federation-autoscaler/federation-autoscaler/agent/location"
	"github.com/federation-autoscaler/federation-autoscaler/agent/probe"
	"github.com/federation-autoscaler/federation-autoscaler/mocks/demo"
	"github.com/federation-autoscaler/federation-autoscaler/mocks/demo/workload"
	"github.com/federation-autoscaler/federation-autoscaler/mocks/geo"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// Options configure Run.
type Options struct {
	Logger *slog.Logger
	// Progress receives one line per step and per iteration (nil: none).
	Progress func(string)
	// WorkDir holds the run's PKI and broker database (default: a
	// temporary folder, removed afterwards).
	WorkDir string
}

// Timeouts of a run's waits (each says what it waited for when it fails).
const (
	// ReadyTimeout bounds the wait for every provider to advertise and
	// every consumer to heartbeat (at 30 × 70 start-up takes about a
	// minute on two cores).
	ReadyTimeout = 5 * time.Minute
	// DrainTimeout bounds the wait, after a phase, for every reservation to
	// be released.
	DrainTimeout = 2 * time.Minute
	// pollEvery is how often the broker's overview is read for new
	// reservations.
	pollEvery = 250 * time.Millisecond
)

// runner is one run.
type runner struct {
	cfg       *Config
	opts      Options
	log       *slog.Logger
	fed       *demo.Federation
	cond      *Conditions
	providers []Site
	consumers []Site
	provIdx   map[string]int
	consIdx   map[string]int
	byAddr    map[netip.Addr]int
	local     []*localapi.Client
	http      *http.Client
	rec       *Records
	started   time.Time
	// last is the sampler's latest overview.
	last atomic.Pointer[api.Overview]
	// endpoints maps each provider's probe endpoint to its index (set
	// once the federation started).
	endpoints atomic.Pointer[map[string]int]
}

// Run builds the federation, runs every phase and returns what it saw;
// Analyze and Write turn that into the results.
func Run(ctx context.Context, cfg *Config, o Options) (*Records, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Progress == nil {
		o.Progress = func(string) {}
	}
	r := &runner{cfg: cfg, opts: o, log: o.Logger, rec: &Records{}, http: &http.Client{Timeout: 10 * time.Second}, started: time.Now()}
	r.sites()
	r.cond = NewConditions(cfg, r.providers, r.consumers)
	dir := o.WorkDir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "fa-experiment-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	if err := r.start(ctx, dir); err != nil {
		return nil, err
	}
	defer func() { _ = r.fed.Stop() }()
	for i, p := range cfg.Phases {
		if err := r.between(ctx, i, p); err != nil {
			return r.rec, err
		}
		if err := r.phase(ctx, p); err != nil {
			return r.rec, fmt.Errorf("phase %s (%s): %w", p.Name, p.Policy, err)
		}
	}
	// No drain after the last phase: its records are complete once its
	// iterations end, and Stop ends every reservation with the federation.
	return r.rec, nil
}

// between readies phase i: the previous phase's capacity drained (reserve
// mode) while phase i's policy is written and applied. The two overlap: a
// policy change neither grows nor holds capacity (masked groups keep their
// reservations listed, so the CA stand-ins scale them down as before), and
// phase i starts only once both are done.
func (r *runner) between(ctx context.Context, i int, p Phase) error {
	r.opts.Progress(fmt.Sprintf("phase %d/%d %s: %s", i+1, len(r.cfg.Phases), p.Name, p.Policy))
	var drainErr error
	var wg sync.WaitGroup
	if i > 0 && r.cfg.Mode == ModeReserve {
		prev := r.cfg.Phases[i-1]
		wg.Go(func() {
			if err := r.drain(ctx); err != nil {
				drainErr = fmt.Errorf("phase %s (%s): %w", prev.Name, prev.Policy, err)
			}
		})
	}
	policyErr := r.setPolicy(ctx, p)
	wg.Wait()
	if policyErr != nil {
		policyErr = fmt.Errorf("phase %s (%s): %w", p.Name, p.Policy, policyErr)
	}
	return errors.Join(drainErr, policyErr)
}

// sites places the providers and consumers: the configured regions in
// turn, or regions drawn from mock-geo's table with the seed.
func (r *runner) sites() {
	rng := rand.New(rand.NewPCG(r.cfg.Seed, 0x5173))
	regions := Regions()
	pick := func(list []string, i int) string {
		if len(list) > 0 {
			return list[i%len(list)]
		}
		return regions[rng.IntN(len(regions))]
	}
	site := func(id, region string) Site {
		home, _ := geo.Home(region)
		return Site{ID: id, Region: region, Lat: home.Latitude, Lon: home.Longitude}
	}
	r.provIdx, r.consIdx, r.byAddr = map[string]int{}, map[string]int{}, map[netip.Addr]int{}
	for i := range r.cfg.Providers {
		s := site(fmt.Sprintf("p%03d", i+1), pick(r.cfg.ProviderRegions, i))
		r.provIdx[s.ID] = i
		r.providers = append(r.providers, s)
	}
	for i := range r.cfg.Consumers {
		s := site(fmt.Sprintf("c%03d", i+1), pick(r.cfg.ConsumerRegions, i))
		r.consIdx[s.ID] = i
		r.consumers = append(r.consumers, s)
	}
}

// scenario is the demo's world with the experiment's cadences, a consumer
// node too small for a workload pod (every pod needs a borrowed chunk)
// and pods that take one standard chunk each.
func (r *runner) scenario() (*demo.Scenario, error) {
	sc, err := demo.DefaultScenario()
	if err != nil {
		return nil, err
	}
	cd := r.cfg.Cadences
	sc.Agents.ConsumerHeartbeat, sc.Agents.PolicyPoll, sc.Agents.ProbeTTL = cd.Heartbeat, cd.PolicyPoll, cd.ProbeTTL
	sc.Agents.Resync = cd.Heartbeat
	sc.Consumer.Node = demo.NodeScenario{CPU: resource.MustParse("1"), Memory: resource.MustParse("2Gi")}
	sc.Workload = demo.WorkloadScenario{Namespace: "experiment", CPU: resource.MustParse("1500m"), Memory: resource.MustParse("1Gi")}
	return sc, sc.Validate()
}

func (r *runner) start(ctx context.Context, dir string) error {
	sc, err := r.scenario()
	if err != nil {
		return err
	}
	prng := rand.New(rand.NewPCG(r.cfg.Seed, 0x9a1ce))
	var provs []demo.ProviderSpec
	n := r.cfg.ChunksPerProvider
	for _, s := range r.providers {
		provs = append(provs, demo.ProviderSpec{
			ID: s.ID, Region: s.Region, Nodes: 1, NodeCPU: fmt.Sprint(2 * n), NodeMemory: fmt.Sprintf("%dGi", 4*n),
			CPUPrice: fmt.Sprintf("%.3f", 0.02+0.03*prng.Float64()), MemoryPrice: fmt.Sprintf("%.4f", 0.002+0.003*prng.Float64()),
		})
	}
	var cons []demo.ConsumerSpec
	for i, s := range r.consumers {
		cons = append(cons, demo.ConsumerSpec{ID: s.ID, Region: s.Region, Host: byte(demo.MinExtraConsumerHost + i)})
	}
	cd := r.cfg.Cadences
	var probeNet func(demo.ConsumerSpec) probe.Network
	if r.cfg.Latency.Network == NetworkSimulated {
		probeNet = func(s demo.ConsumerSpec) probe.Network { return r.simNetwork(r.consIdx[s.ID]) }
	}
	r.opts.Progress(fmt.Sprintf("starting the federation: %d providers, %d consumers (the demo's wiring)", len(provs), len(cons)))
	fed, err := demo.Start(ctx, demo.Options{
		DataDir: dir, Providers: provs, Consumers: cons, Scenario: sc, NoConsoles: true,
		// A phase measures where scale-ups land: no lifecycle move (a
		// migration or a consolidation) re-places capacity during a phase
		// or holds it across the drain between phases.
		NoMigration: true, NoConsolidation: true,
		Carbon:       func(p demo.ProviderSpec) agentcmd.CarbonSource { return carbonSource{r, r.provIdx[p.ID]} },
		ProbeNetwork: probeNet, RandomSeed: r.cfg.Seed, PeeringDelay: cd.PeeringDelay.Duration, ScanInterval: cd.Scan.Duration,
		ScaleDownUnneededTime: cd.ScaleDownUnneeded.Duration, AdvertiseInterval: cd.Advertisement.Duration,
		Logger: r.log, Progress: func(s string) { r.log.Debug(s) },
	})
	if err != nil {
		return fmt.Errorf("starting the federation: %w", err)
	}
	r.fed = fed
	for i, c := range fed.Consumers {
		r.byAddr[netip.MustParseAddr(c.Address)] = i
		cl, err := localapi.NewClient(c.LocalAPIURL, nil)
		if err != nil {
			return err
		}
		r.local = append(r.local, cl)
	}
	endpoints := map[string]int{}
	for _, p := range fed.Providers {
		endpoints[p.ProbeAddr] = r.provIdx[p.Spec.ID]
	}
	r.endpoints.Store(&endpoints)
	for _, p := range fed.Providers {
		if r.cfg.Latency.Network != NetworkUDP {
			break // the simulated network answers without the echoes
		}
		pi := r.provIdx[p.Spec.ID]
		p.ProbeResponder().SetDelayFunc(func(from netip.Addr) time.Duration {
			c, ok := r.byAddr[from]
			if !ok {
				return 0
			}
			return time.Duration(r.cond.LatencyAt(r.cond.Tau(time.Now()), c, pi) * float64(time.Millisecond))
		})
	}
	return r.waitReady(ctx)
}

// carbonSource is one provider's carbon: the generator's value now.
type carbonSource struct {
	r *runner
	p int
}

func (c carbonSource) Carbon(context.Context, string) (location.Carbon, error) {
	now := time.Now()
	return location.Carbon{Intensity: c.r.cond.CarbonAt(c.r.cond.Tau(now), c.p), FetchedAt: now}, nil
}

// overview reads the broker's overview from its dashboard listener.
func (r *runner) overview(ctx context.Context) (*api.Overview, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.fed.DashboardURL+"/api/v1/overview", nil)
	if err != nil {
		return nil, err
	}
	resp, err := r.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reading the broker's overview: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("reading the broker's overview: %s", resp.Status)
	}
	var ov api.Overview
	if err := json.NewDecoder(resp.Body).Decode(&ov); err != nil {
		return nil, fmt.Errorf("decoding the broker's overview: %w", err)
	}
	return &ov, nil
}

// until polls the overview until done says so. It fails once timeout has
// passed with no progress — what done saw has not changed — or after
// stallCap × timeout in all, naming what it waited for and what it saw
// last: a loaded machine that drains slowly but steadily is not stuck.
func (r *runner) until(ctx context.Context, timeout time.Duration, what string, done func(*api.Overview) (bool, string)) error {
	ctx, cancel := context.WithTimeout(ctx, stallCap*timeout)
	defer cancel()
	w := newStallWatch(time.Now(), timeout)
	var last string
	for {
		if ov, err := r.overview(ctx); err == nil {
			ok, seen := done(ov)
			if ok {
				return nil
			}
			last = seen
			w.saw(time.Now(), seen)
		} else {
			last = err.Error()
		}
		if w.stalled(time.Now()) {
			return fmt.Errorf("waited %s with no progress for %s; last seen: %s", timeout, what, last)
		}
		select {
		case <-ctx.Done():
			if ctx.Err() == context.DeadlineExceeded {
				return fmt.Errorf("waited %s in all for %s; last seen: %s", stallCap*timeout, what, last)
			}
			return ctx.Err()
		case <-r.fed.Done():
			return fmt.Errorf("the federation stopped while waiting for %s", what)
		case <-time.After(pollEvery):
		}
	}
}

// stallCap bounds a wait that keeps making progress, in multiples of its
// no-progress timeout.
const stallCap = 4

// stallWatch tells a wait that is stuck from one that is slow: it is
// stalled once timeout has passed since what was seen last changed.
type stallWatch struct {
	timeout time.Duration
	seen    string
	since   time.Time
	any     bool
}

func newStallWatch(now time.Time, timeout time.Duration) *stallWatch {
	return &stallWatch{timeout: timeout, since: now}
}

// saw records what the wait saw at now; a change is progress.
func (w *stallWatch) saw(now time.Time, seen string) {
	if !w.any || seen != w.seen {
		w.seen, w.since, w.any = seen, now, true
	}
}

// stalled reports whether timeout has passed since the last progress.
func (w *stallWatch) stalled(now time.Time) bool {
	return now.Sub(w.since) >= w.timeout
}

func (r *runner) waitReady(ctx context.Context) error {
	r.opts.Progress("waiting for every provider to advertise and every consumer to heartbeat")
	return r.until(ctx, ReadyTimeout, "every provider and consumer", func(ov *api.Overview) (bool, string) {
		avail := 0
		for _, a := range ov.Advertisements {
			if a.Available && a.CarbonIntensity != nil && a.Topology != nil {
				avail++
			}
		}
		located := 0
		for _, c := range ov.Consumers {
			if c.Latitude != nil {
				located++
			}
		}
		return avail == len(r.providers) && located == len(r.consumers),
			fmt.Sprintf("%d/%d providers advertised with carbon and location, %d/%d consumers heartbeated with a location", avail, len(r.providers), located, len(r.consumers))
	})
}

// setPolicy writes every consumer's ConsumerPolicy and waits until the
// broker applies it to all of them.
func (r *runner) setPolicy(ctx context.Context, p Phase) error {
	errs := make([]error, len(r.fed.Consumers))
	var wg sync.WaitGroup
	for i, c := range r.fed.Consumers {
		wg.Go(func() { errs[i] = c.SetPolicy(ctx, p.Policy, p.Weights) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return r.until(ctx, time.Minute, "every consumer to apply "+string(p.Policy), func(ov *api.Overview) (bool, string) {
		n := 0
		for _, c := range ov.Consumers {
			if c.AppliedPlacement == p.Policy {
				n++
			}
		}
		return n == len(r.consumers), fmt.Sprintf("%d/%d consumers on %s", n, len(r.consumers), p.Policy)
	})
}

// setDemand sets every consumer's workload to n pods of one chunk each.
func (r *runner) setDemand(n int) error {
	sc, err := r.scenario()
	if err != nil {
		return err
	}
	for _, c := range r.fed.Consumers {
		spec := workload.Spec{Enabled: n > 0, Replicas: int32(n), CPU: sc.Workload.CPU, Memory: sc.Workload.Memory}
		if err := c.Workload.Set(spec); err != nil {
			return err
		}
	}
	return nil
}

// drain ends a phase: no demand, then every reservation released.
func (r *runner) drain(ctx context.Context) error {
	if err := r.setDemand(0); err != nil {
		return err
	}
	return r.until(ctx, DrainTimeout, "every reservation to be released", func(ov *api.Overview) (bool, string) {
		live := 0
		for _, res := range ov.Reservations {
			if !res.Status.Terminal() {
				live++
			}
		}
		return live == 0, fmt.Sprintf("%d live reservations", live)
	})
}

// phase runs one phase (its policy applied by between): the generators
// restarted, the iterations at their fixed relative instants, the
// samplers.
func (r *runner) phase(ctx context.Context, p Phase) error {
	start := time.Now()
	r.cond.Restart(start)
	pctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); r.sample(pctx, p, start) }()
	seen := newSeen()
	if r.cfg.Mode == ModeReserve {
		wg.Add(1)
		go func() { defer wg.Done(); r.watchReservations(pctx, p, seen) }()
	}
	err := r.iterations(ctx, p, start, seen)
	cancel()
	wg.Wait()
	return err
}

// wait sleeps until t (a scheduled instant of the phase).
func (r *runner) wait(ctx context.Context, t time.Time) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-r.fed.Done():
		return fmt.Errorf("the federation stopped")
	case <-time.After(time.Until(t)):
		return nil
	}
}
