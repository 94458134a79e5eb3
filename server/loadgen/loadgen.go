// Package loadgen drives a running broker with simulated agents and reports
// what it costs: each simulated provider and consumer has its own mTLS
// client certificate (issued in memory by server/pki) and its own keep-alive
// HTTP/1.1 transport (the agents' own, agent/brokerclient.NewTransport), and
// follows the agents' cadences — advertisements every 30 s, heartbeats every
// 15 s, node-group lists every 5 s, instruction long-polls (or polls every
// 5 s, the reference agents' model). Start times are jittered; after a
// warm-up, a fixed window is measured: per-route latency histograms, errors
// per route and status, the broker's CPU seconds per request and its RSS
// from /proc/<pid>, and the generator's own CPU and scheduling lag (which say
// when the generator, not the broker, is the limit).
package loadgen

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/federation-autoscaler/federation-autoscaler/agent/brokerclient"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/pki"
)

// InstructionMode is how simulated agents fetch their instructions.
type InstructionMode string

const (
	// LongPoll holds GET /api/v1/instructions?wait=… back to back, as the
	// project's agents do.
	LongPoll InstructionMode = "longpoll"
	// Poll asks without waiting every PollEvery (the reference agents).
	Poll InstructionMode = "poll"
)

// Routes, as reported.
const (
	RouteAdvertise    = "POST /api/v1/advertisements"
	RouteHeartbeat    = "POST /api/v1/heartbeat"
	RouteNodeGroups   = "GET /api/v1/nodegroups"
	RouteInstructions = "GET /api/v1/instructions"
)

var routes = []string{RouteAdvertise, RouteHeartbeat, RouteNodeGroups, RouteInstructions}

// Config configures Run. Zero durations take the defaults.
type Config struct {
	// BrokerURL is the Broker API's base URL, e.g. https://127.0.0.1:8443.
	BrokerURL string
	// CA issues the agents' client certificates and is the root the broker's
	// certificate is verified against.
	CA *pki.CA
	// Providers and Consumers are how many agents of each role to simulate.
	Providers, Consumers int
	// Prefix starts every simulated cluster id (default "lg").
	Prefix string
	// Warmup runs the agents before measuring (default 40 s); Window is the
	// measured span (default 2 min).
	Warmup, Window time.Duration
	// Cadences (defaults: 30 s, 15 s, 5 s, 5 s, 30 s).
	AdvertiseEvery, HeartbeatEvery, NodeGroupsEvery, PollEvery, LongPollWait time.Duration
	// Instructions selects long-polls (default) or polls.
	Instructions InstructionMode
	// BrokerPID, when > 0, is sampled from /proc for CPU and RSS.
	BrokerPID int
	// DashboardURL and Viewers: that many websocket viewers of the live
	// dashboard (http://host:port of the dashboard listener, no token).
	DashboardURL string
	Viewers      int
	// MetricsURL, when set, is the broker's /metrics: its own request
	// latency histogram is read at both ends of the window, so the report
	// tells the broker's share of the latency from the generator's.
	MetricsURL string
	// RequestTimeout bounds one request besides a long-poll's wait
	// (default 30 s).
	RequestTimeout time.Duration
	Log            *slog.Logger
}

func (c *Config) defaults() error {
	if c.CA == nil {
		return errors.New("loadgen: a CA is required to issue the agents' certificates")
	}
	if _, err := url.Parse(c.BrokerURL); err != nil || c.BrokerURL == "" {
		return fmt.Errorf("loadgen: broker URL %q: want https://host:port", c.BrokerURL)
	}
	if c.Providers < 0 || c.Consumers < 0 || c.Providers+c.Consumers == 0 {
		return fmt.Errorf("loadgen: want at least one agent (providers %d, consumers %d)", c.Providers, c.Consumers)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.Warmup, 40*time.Second)
	def(&c.Window, 2*time.Minute)
	def(&c.AdvertiseEvery, 30*time.Second)
	def(&c.HeartbeatEvery, 15*time.Second)
	def(&c.NodeGroupsEvery, 5*time.Second)
	def(&c.PollEvery, 5*time.Second)
	def(&c.LongPollWait, 30*time.Second)
	def(&c.RequestTimeout, 30*time.Second)
	if c.Prefix == "" {
		c.Prefix = "lg"
	}
	switch c.Instructions {
	case "":
		c.Instructions = LongPoll
	case LongPoll, Poll:
	default:
		return fmt.Errorf("loadgen: instruction mode %q: want %q or %q", c.Instructions, LongPoll, Poll)
	}
	if c.Viewers > 0 && c.DashboardURL == "" {
		return errors.New("loadgen: viewers need the dashboard's URL")
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return nil
}

// ConnectionsPerAgent is how many connections one simulated agent keeps to
// the broker: the long-poll's and one for everything else, or one when
// polling.
func ConnectionsPerAgent(m InstructionMode) int {
	if m == Poll {
		return 1
	}
	return 2
}

// recorder collects what the measured window saw.
type recorder struct {
	start, end time.Time // the window
	hists      map[string]*histogram
	mu         sync.Mutex
	errs       map[string]map[string]int64 // route → status → count
	lag        histogram                   // how late the agents' scheduled requests started
}

func newRecorder() *recorder {
	r := &recorder{hists: map[string]*histogram{}, errs: map[string]map[string]int64{}}
	for _, rt := range routes {
		r.hists[rt] = &histogram{}
		r.errs[rt] = map[string]int64{}
	}
	return r
}

func (r *recorder) in(t time.Time) bool { return !t.Before(r.start) && !t.After(r.end) }

// done records one request that ended at end: its latency when it
// succeeded, its status (or "transport") when it failed.
func (r *recorder) done(route string, began, end time.Time, status int, err error) {
	if !r.in(end) {
		return
	}
	if err == nil && status >= 200 && status < 300 {
		r.hists[route].record(end.Sub(began))
		return
	}
	key := strconv.Itoa(status)
	if status == 0 {
		key = transportError(err)
	}
	r.mu.Lock()
	r.errs[route][key]++
	r.mu.Unlock()
}

// transportError names the kind of a failed request without an answer.
func transportError(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.EPIPE):
		return "reset"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "eof"
	}
	return "transport"
}

// agent is one simulated cluster with its own transport.
type agent struct {
	id     string
	role   api.Role
	client *http.Client
	base   string
	body   []byte // the advertisement or heartbeat, encoded once
	cfg    *Config
	rec    *recorder
	rng    *rand.Rand
}

func (a *agent) do(ctx context.Context, route, method, path string, body []byte, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	began := time.Now()
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, rd)
	if err != nil {
		a.rec.done(route, began, time.Now(), 0, err)
		return
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.client.Do(req)
	status := 0
	if err == nil {
		status = resp.StatusCode
		// Drain the body so the connection is reused.
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	end := time.Now()
	if err != nil && ctx.Err() != nil && errors.Is(context.Cause(ctx), context.Canceled) {
		return // the run ended
	}
	a.rec.done(route, began, end, status, err)
}

// task is a periodic request of an agent.
type task struct {
	route, method, path string
	body                []byte
	every               time.Duration
	next                time.Time
}

// periodic runs the agent's periodic requests one after the other from one
// goroutine: the first task once at start (the registration), then every
// task at its period.
func (a *agent) periodic(ctx context.Context, start time.Time, tasks []*task) {
	// The registration (tasks[0]) goes first; every task then runs at a
	// random phase of its period, so the rates are steady from the first
	// period on, as with agents that started at random times.
	first := tasks[0]
	for _, t := range tasks {
		t.next = start.Add(time.Duration(a.rng.Int64N(int64(t.every))) + time.Millisecond)
	}
	timer := time.NewTimer(time.Until(start))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return
	case <-timer.C:
	}
	a.do(ctx, first.route, first.method, first.path, first.body, a.cfg.RequestTimeout)
	for {
		sort.Slice(tasks, func(i, j int) bool { return tasks[i].next.Before(tasks[j].next) })
		t := tasks[0]
		timer.Reset(time.Until(t.next))
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		if now := time.Now(); a.rec.in(now) {
			a.rec.lag.record(now.Sub(t.next))
		}
		a.do(ctx, t.route, t.method, t.path, t.body, a.cfg.RequestTimeout)
		t.next = t.next.Add(t.every)
		if now := time.Now(); t.next.Before(now) {
			t.next = now // overloaded: do not burst to catch up
		}
	}
}

// longPoll holds instruction long-polls back to back from start.
func (a *agent) longPoll(ctx context.Context, start time.Time) {
	select {
	case <-ctx.Done():
		return
	case <-time.After(time.Until(start)):
	}
	path := "/api/v1/instructions?wait=" + a.cfg.LongPollWait.String()
	for ctx.Err() == nil {
		a.do(ctx, RouteInstructions, http.MethodGet, path, nil, a.cfg.LongPollWait+a.cfg.RequestTimeout)
	}
}

// Issued is how long issuing the agents' certificates took.
type Issued struct {
	Count   int     `json:"count"`
	Seconds float64 `json:"seconds"`
}

// agents issues a certificate per simulated cluster and builds its client.
func buildAgents(cfg *Config, rec *recorder) ([]*agent, Issued, error) {
	roots := x509.NewCertPool()
	roots.AddCert(cfg.CA.Certificate())
	u, err := url.Parse(cfg.BrokerURL)
	if err != nil {
		return nil, Issued{}, err
	}
	n := cfg.Providers + cfg.Consumers
	agents := make([]*agent, n)
	began := time.Now()
	now := time.Now()
	var wg sync.WaitGroup
	errc := make(chan error, 1)
	var next atomic.Int64
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				a, err := newAgent(cfg, rec, i, roots, u.Hostname(), now)
				if err != nil {
					select {
					case errc <- err:
					default:
					}
					return
				}
				agents[i] = a
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errc:
		return nil, Issued{}, err
	default:
	}
	return agents, Issued{Count: n, Seconds: time.Since(began).Seconds()}, nil
}

func newAgent(cfg *Config, rec *recorder, i int, roots *x509.CertPool, host string, now time.Time) (*agent, error) {
	role, id := api.RoleProvider, fmt.Sprintf("%s-p%05d", cfg.Prefix, i)
	if i >= cfg.Providers {
		role, id = api.RoleConsumer, fmt.Sprintf("%s-c%05d", cfg.Prefix, i-cfg.Providers)
	}
	certPEM, keyPEM, err := cfg.CA.IssueClient(id, role, now)
	if err != nil {
		return nil, fmt.Errorf("issue the certificate of %s: %w", id, err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("key pair of %s: %w", id, err)
	}
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: roots, Certificates: []tls.Certificate{pair}, ServerName: host}
	a := &agent{
		id: id, role: role, base: cfg.BrokerURL, cfg: cfg, rec: rec,
		client: &http.Client{Transport: brokerclient.NewTransport(tlsCfg, 0)},
		rng:    rand.New(rand.NewPCG(uint64(i), 0x10ad)),
	}
	if role == api.RoleProvider {
		a.body, err = json.Marshal(Advertisement(id, i))
	} else {
		a.body, err = json.Marshal(Heartbeat(id, i))
	}
	return a, err
}

// Advertisement is the i-th simulated provider's report: 16–79 CPUs,
// 4 GiB per CPU, a price, a location and a carbon intensity. Benchmarks of
// the broker's domain use the same population.
func Advertisement(id string, i int) api.AdvertisementRequest {
	cpus := 16 + i%64
	carbon := float64(50 + i%400)
	return api.AdvertisementRequest{
		ClusterID: id, LiqoClusterID: "liqo-" + id,
		Resources: corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewQuantity(int64(cpus), resource.DecimalSI),
			corev1.ResourceMemory: *resource.NewQuantity(int64(cpus)*4<<30, resource.BinarySI),
		},
		Topology: &api.Topology{Region: "region-" + strconv.Itoa(i%20), City: "city-" + strconv.Itoa(i%200),
			Latitude: float64(i%170) - 85, Longitude: float64(i%360) - 180},
		UnitPrices: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse(fmt.Sprintf("0.0%d", 10+i%80)),
			corev1.ResourceMemory: resource.MustParse("0.005"),
		},
		CarbonIntensity: &carbon,
	}
}

var placements = []api.PlacementType{api.PlacementStandard, api.PlacementPrice, api.PlacementEco, api.PlacementLatency}

// Heartbeat is the i-th simulated consumer's report: the four policies in
// turn, each consumer at its own location.
func Heartbeat(id string, i int) api.HeartbeatRequest {
	lat, lon := float64(i%170)-85, float64((i*7)%360)-180
	return api.HeartbeatRequest{
		ClusterID: id, LiqoClusterID: "liqo-" + id,
		Placement: &api.Placement{Type: placements[i%len(placements)]},
		Latitude:  &lat, Longitude: &lon,
	}
}

// Run simulates the agents, measures the window and reports.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	rec := newRecorder()
	agents, issued, err := buildAgents(&cfg, rec)
	if err != nil {
		return nil, err
	}
	cfg.Log.Info("Certificates issued", "count", issued.Count, "seconds", issued.Seconds)
	defer func() {
		for _, a := range agents {
			a.client.CloseIdleConnections()
		}
	}()

	t0 := time.Now()
	rec.start = t0.Add(cfg.Warmup)
	rec.end = rec.start.Add(cfg.Window)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	startAgents(runCtx, &cfg, agents, t0, &wg)
	var views viewers
	if cfg.Viewers > 0 {
		if err := views.start(runCtx, cfg.DashboardURL, cfg.Viewers, &wg); err != nil {
			stop()
			wg.Wait()
			return nil, err
		}
	}
	m, err := measureWindow(ctx, &cfg, rec, &views)
	stop()
	wg.Wait()
	if err != nil {
		return nil, err
	}
	return report(&cfg, rec, issued, m), nil
}

// startAgents starts every agent's periodic calls (and long poll). Agents
// register (and make their TLS handshakes) spread over the first half of
// the warm-up, so every cadence runs at its steady rate when the window
// opens; a longer warm-up spreads the handshakes of a large run.
func startAgents(ctx context.Context, cfg *Config, agents []*agent, t0 time.Time, wg *sync.WaitGroup) {
	spread := cfg.Warmup / 2
	for _, a := range agents {
		start := t0.Add(time.Duration(a.rng.Int64N(int64(spread) + 1)))
		tasks := agentTasks(cfg, a)
		wg.Add(1)
		go func() { defer wg.Done(); a.periodic(ctx, start, tasks) }()
		if cfg.Instructions == LongPoll {
			// After the registration, so the first poll is not refused.
			lpStart := start.Add(time.Second)
			wg.Add(1)
			go func() { defer wg.Done(); a.longPoll(ctx, lpStart) }()
		}
	}
}

// agentTasks are the periodic calls of agent a: advertisements for a
// provider, heartbeats and node groups for a consumer, and instruction
// polls when they are not long polls.
func agentTasks(cfg *Config, a *agent) []*task {
	var tasks []*task
	if a.role == api.RoleProvider {
		tasks = append(tasks, &task{route: RouteAdvertise, method: http.MethodPost, path: "/api/v1/advertisements", body: a.body, every: cfg.AdvertiseEvery})
	} else {
		tasks = append(tasks,
			&task{route: RouteHeartbeat, method: http.MethodPost, path: "/api/v1/heartbeat", body: a.body, every: cfg.HeartbeatEvery},
			&task{route: RouteNodeGroups, method: http.MethodGet, path: "/api/v1/nodegroups", every: cfg.NodeGroupsEvery})
	}
	if cfg.Instructions == Poll {
		tasks = append(tasks, &task{route: RouteInstructions, method: http.MethodGet, path: "/api/v1/instructions", every: cfg.PollEvery})
	}
	return tasks
}

// window is what measureWindow saw of the broker and the generator.
type window struct {
	loadStart, loadEnd string
	bStart, bEnd       time.Duration
	gStart, gEnd       time.Duration
	viewMsgs           int64
	viewBytes          int64
	rss                rssStats
	// hStart, hEnd: the broker's latency histogram (nil: not scraped).
	hStart, hEnd brokerHist
}

// measureWindow waits for the window, then measures broker and generator
// CPU at both ends and the broker's RSS every second until it closes.
func measureWindow(ctx context.Context, cfg *Config, rec *recorder, views *viewers) (window, error) {
	var m window
	select {
	case <-ctx.Done():
		return m, ctx.Err()
	case <-time.After(time.Until(rec.start)):
	}
	m.loadStart = loadAverage()
	var err error
	if m.bStart, err = procCPU(cfg.BrokerPID); err != nil {
		return m, err
	}
	m.gStart = selfCPU()
	if cfg.MetricsURL != "" {
		if m.hStart, err = scrapeBrokerHist(ctx, cfg.MetricsURL); err != nil {
			cfg.Log.Warn("The broker's latency histogram is not read; the report shows the generator's latencies only", "err", err)
		}
	}
	viewMsgs0, viewBytes0 := views.messages.Load(), views.bytes.Load()
	m.rss.sample(cfg.BrokerPID)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	deadline := time.NewTimer(time.Until(rec.end))
	defer deadline.Stop()
sampling:
	for {
		select {
		case <-ctx.Done():
			return m, ctx.Err()
		case <-tick.C:
			m.rss.sample(cfg.BrokerPID)
		case <-deadline.C:
			break sampling
		}
	}
	m.bEnd, _ = procCPU(cfg.BrokerPID)
	m.gEnd = selfCPU()
	if m.hStart != nil {
		var err error
		if m.hEnd, err = scrapeBrokerHist(ctx, cfg.MetricsURL); err != nil {
			cfg.Log.Warn("The broker's latency histogram is not read; the report shows the generator's latencies only", "err", err)
		}
	}
	m.rss.sample(cfg.BrokerPID)
	m.loadEnd = loadAverage()
	m.viewMsgs, m.viewBytes = views.messages.Load()-viewMsgs0, views.bytes.Load()-viewBytes0
	return m, nil
}

// report sums the window's measurements and every route's latencies.
func report(cfg *Config, rec *recorder, issued Issued, m window) *Report {
	rep := &Report{
		Providers: cfg.Providers, Consumers: cfg.Consumers, Instructions: string(cfg.Instructions),
		WarmupSeconds: cfg.Warmup.Seconds(), WindowSeconds: cfg.Window.Seconds(), Certificates: issued,
		Viewers: cfg.Viewers, ViewerMessages: m.viewMsgs, ViewerBytes: m.viewBytes, LoadAverageStart: m.loadStart, LoadAverageEnd: m.loadEnd,
		GeneratorCPUSeconds: (m.gEnd - m.gStart).Seconds(),
	}
	rep.GeneratorCores = rep.GeneratorCPUSeconds / cfg.Window.Seconds()
	lq, _ := rec.lag.quantiles(0.99, 1)
	rep.ScheduleLagP99Ms, rep.ScheduleLagMaxMs = ms(lq[0]), ms(lq[1])
	for _, rt := range routes {
		q, n := rec.hists[rt].quantiles(0.5, 0.9, 0.99, 1)
		rs := RouteStats{Route: rt, Requests: n, P50Ms: ms(q[0]), P90Ms: ms(q[1]), P99Ms: ms(q[2]), MaxMs: ms(q[3]), Errors: map[string]int64{}}
		for k, v := range rec.errs[rt] {
			rs.Errors[k] = v
			rs.ErrorCount += v
		}
		if m.hEnd != nil {
			if le, n := quantileBound(m.hStart, m.hEnd, rt, 0.99); n > 0 {
				rs.BrokerP99LeMs = -1 // above the histogram's last bound
				if !math.IsInf(le, 1) {
					rs.BrokerP99LeMs = le * 1000
				}
			}
		}
		if rt == RouteInstructions && cfg.Instructions == LongPoll {
			rs.Note = "long-poll: latency includes the wait (" + cfg.LongPollWait.String() + ")"
		}
		rep.Routes = append(rep.Routes, rs)
		rep.Requests += n
		rep.Errors += rs.ErrorCount
	}
	rep.RequestsPerSecond = float64(rep.Requests) / cfg.Window.Seconds()
	if cfg.BrokerPID > 0 {
		rep.BrokerCPUSeconds = (m.bEnd - m.bStart).Seconds()
		rep.BrokerCores = rep.BrokerCPUSeconds / cfg.Window.Seconds()
		if rep.Requests > 0 {
			rep.BrokerCPUMsPerRequest = rep.BrokerCPUSeconds * 1000 / float64(rep.Requests+rep.Errors)
		}
		rep.BrokerRSSMiBMax, rep.BrokerRSSMiBMean = m.rss.maxMiB(), m.rss.meanMiB()
	}
	return rep
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// selfCPU is the generator's user+system CPU time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
