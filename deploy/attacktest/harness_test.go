package attacktest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/deploy/testbin"
	"github.com/federation-autoscaler/federation-autoscaler/deploy/testcluster"
	"github.com/federation-autoscaler/federation-autoscaler/deploy/testpoll"
	"github.com/federation-autoscaler/federation-autoscaler/server/pki"
)

// patience bounds every wait on a real condition: generous, because a
// loaded 2-core machine is slow; nothing waits for it unless something is
// broken.
const patience = 2 * time.Minute

// bin is the federation-autoscaler binary, built once by TestMain.
var bin string

// EnvBinary names a binary to attack instead of building one (e.g. a
// release, or a build from before a fix, to see the suite fail).
const EnvBinary = "FA_ATTACKTEST_BINARY"

func TestMain(m *testing.M) {
	if bin = os.Getenv(EnvBinary); bin != "" {
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "fa-attacktest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	bin, err = testbin.Build(ctx, dir)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// output collects a process's output, line by line.
type output struct {
	mu      sync.Mutex
	lines   []string
	partial []byte
}

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.partial = append(o.partial, p...)
	for {
		i := bytes.IndexByte(o.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		o.lines = append(o.lines, string(o.partial[:i]))
		o.partial = o.partial[i+1:]
	}
}

// find returns the submatches of the first line matching re, or nil.
func (o *output) find(re *regexp.Regexp) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, l := range o.lines {
		if m := re.FindStringSubmatch(l); m != nil {
			return m
		}
	}
	return nil
}

func (o *output) tail(n int) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return strings.Join(o.lines[max(0, len(o.lines)-n):], "\n")
}

// proc is a child process of the suite: the real binary under a
// file-descriptor limit.
type proc struct {
	name    string
	fdLimit int
	cmd     *exec.Cmd
	out     *output
	exited  chan struct{}
	waitErr error
}

// start runs the binary with args under `prlimit --nofile=fdLimit` (soft and
// hard: the Go runtime cannot raise it) and stops it (SIGTERM) when the test
// ends; its output is logged if the test failed.
func start(t *testing.T, name string, fdLimit int, args ...string) *proc {
	t.Helper()
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Fatalf("the attack suite runs its processes under a low file-descriptor limit with prlimit (util-linux): %v", err)
	}
	cmd := exec.Command(prlimit, fmt.Sprintf("--nofile=%d:%d", fdLimit, fdLimit), "--", bin)
	cmd.Args = append(cmd.Args, args...)
	cmd.Env = childEnv()
	p := &proc{name: name, fdLimit: fdLimit, cmd: cmd, out: &output{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() { p.stop(t) })
	return p
}

// childEnv is the environment of the suite's child processes: the test's,
// without FA_* (no flag fallback from the environment running the tests).
func childEnv() []string {
	return slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "FA_") })
}

func (p *proc) stop(t *testing.T) {
	select {
	case <-p.exited:
	default:
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(patience):
			_ = p.cmd.Process.Kill()
			<-p.exited
			t.Errorf("%s did not stop within %s of SIGTERM", p.name, patience)
		}
	}
	if t.Failed() {
		t.Logf("%s output (last lines):\n%s", p.name, p.out.tail(60))
	}
}

// await waits for an output line matching re and returns its submatches.
func (p *proc) await(t *testing.T, what string, re *regexp.Regexp) []string {
	t.Helper()
	var m []string
	testpoll.UntilNil(t, patience, p.name+": "+what, func() error {
		if m = p.out.find(re); m != nil {
			return nil
		}
		select {
		case <-p.exited:
			t.Fatalf("%s exited (%v) before %s:\n%s", p.name, p.waitErr, what, p.out.tail(60))
		default:
		}
		return fmt.Errorf("no line matches %s", re)
	})
	return m
}

// alive fails the test if the process has exited.
func (p *proc) alive(t *testing.T) {
	t.Helper()
	select {
	case <-p.exited:
		t.Fatalf("%s died (%v):\n%s", p.name, p.waitErr, p.out.tail(60))
	default:
	}
}

// openFDs is the number of file descriptors the process holds (-1 if
// unknown).
func (p *proc) openFDs() int {
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p.cmd.Process.Pid))
	if err != nil {
		return -1
	}
	return len(entries)
}

// peakFDs samples openFDs until the returned function is called, which
// returns the highest count seen.
func (p *proc) peakFDs() func() int {
	var peak atomic.Int64
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(10 * time.Millisecond) // sampling for a report
		defer t.Stop()
		for {
			if n := int64(p.openFDs()); n > peak.Load() {
				peak.Store(n)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() int {
		close(done)
		<-stopped
		return int(peak.Load())
	}
}

// run runs the binary to completion (pki init, pki join).
func run(t *testing.T, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput(); err != nil {
		t.Fatalf("federation-autoscaler %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// endpoint is one listener of a process under attack and the request a
// healthy client sends it (GET path, answered 200).
type endpoint struct {
	// name is the listener's name in the fa_listener_* metrics.
	name string
	addr string
	path string
	// tls is the client's (m)TLS configuration; nil for plain HTTP.
	tls *tls.Config
	// metrics, when set, is the /metrics URL that counts this listener.
	metrics string
}

func (e endpoint) url() string {
	if e.tls != nil {
		return "https://" + e.addr + e.path
	}
	return "http://" + e.addr + e.path
}

// client dials from the loopback address src; without keepAlive every
// request opens a fresh connection, with keepAlive every request goes over
// one connection (keepAliveTransport).
func (e endpoint) client(src string, keepAlive bool) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 30 * time.Second}
	if keepAlive {
		return &http.Client{Timeout: 30 * time.Second, Transport: &keepAliveTransport{dial: d, tls: e.tls}}
	}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext: d.DialContext, TLSClientConfig: e.tls, DisableKeepAlives: true,
	}}
}

// keepAliveTransport sends every request over one connection (to the host
// of the last request), one request at a time, and dials again only when
// the server closed it or the host changed. net/http's
// Transport is not such a client on a starved machine: it drops a
// keep-alive connection whenever its write goroutine reports the written
// request more than 50 ms after the response was read
// (maxWriteWaitBeforeConnReuse), and dials a new one — which a flood from
// the client's own address is meant to get refused. That made the
// same-address flood tests fail at load 30-40 with the connection "closed
// by the client".
type keepAliveTransport struct {
	dial *net.Dialer
	tls  *tls.Config

	mu   sync.Mutex
	host string // of conn
	conn net.Conn
	br   *bufio.Reader
	// ended says how the last connection ended, for a failed request.
	ended string
}

func (k *keepAliveTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.conn != nil && k.host != req.URL.Host {
		_ = k.conn.Close() // one connection, to the host of the last request
		k.conn = nil
	}
	if k.conn == nil {
		c, err := k.dial.DialContext(req.Context(), "tcp", req.URL.Host)
		if err != nil {
			return nil, fmt.Errorf("%w (the previous connection: %s)", err, k.ended)
		}
		if k.tls != nil {
			cfg := k.tls.Clone()
			if cfg.ServerName == "" {
				cfg.ServerName = req.URL.Hostname()
			}
			tc := tls.Client(c, cfg)
			if err := tc.HandshakeContext(req.Context()); err != nil {
				_ = c.Close()
				return nil, err
			}
			c = tc
		}
		k.conn, k.br, k.host = c, bufio.NewReader(c), req.URL.Host
	}
	fail := func(err error) (*http.Response, error) {
		k.ended = fmt.Sprintf("%s->%s ended at %s: %v", k.conn.LocalAddr(), k.conn.RemoteAddr(), time.Now().UTC().Format("15:04:05.000"), err)
		_ = k.conn.Close()
		k.conn = nil
		return nil, err
	}
	if dl, ok := req.Context().Deadline(); ok {
		_ = k.conn.SetDeadline(dl)
	}
	if err := req.Write(k.conn); err != nil {
		return fail(err)
	}
	resp, err := http.ReadResponse(k.br, req)
	if err != nil {
		return fail(err)
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return fail(err)
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if resp.Close {
		_, _ = fail(errors.New("the server answered Connection: close"))
	}
	return resp, nil
}

// get sends the healthy request once.
func (e endpoint) get(c *http.Client) error {
	resp, err := c.Get(e.url())
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", e.url(), resp.Status)
	}
	return nil
}

// bundleTLS is the mTLS client configuration of a join bundle.
func bundleTLS(t *testing.T, path string) *tls.Config {
	t.Helper()
	b, err := pki.LoadBundle(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := b.ClientTLSConfig()
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// scraper reads metrics from an address no flood comes from, as an
// operator's Prometheus would.
var scraper = endpoint{}.client("127.0.0.3", true)

// metric sums the samples of family name whose labels include labels, read
// from a Prometheus text endpoint.
func metric(url, name string, labels map[string]string) (float64, error) {
	resp, err := scraper.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	var sum float64
lines:
	for _, l := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(l, name+"{") && !strings.HasPrefix(l, name+" ") {
			continue
		}
		for k, v := range labels {
			if !strings.Contains(l, k+`="`+v+`"`) {
				continue lines
			}
		}
		f, err := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %q: %w", url, l, err)
		}
		sum += f
	}
	return sum, nil
}

// broker is a running `federation-autoscaler broker`.
type broker struct {
	*proc
	api, dashboard, pkiDir string
}

// startBroker starts a broker on loopback with a fresh PKI (`pki init`) and
// waits until it is ready. Its per-certificate rate limit is raised: the
// healthy clients of the suite call faster than agents do.
func startBroker(t *testing.T, fdLimit int, args ...string) *broker {
	t.Helper()
	b := &broker{pkiDir: t.TempDir()}
	run(t, "pki", "init", "--dir", b.pkiDir)
	b.proc = start(t, "broker", fdLimit, append([]string{"broker", "--pki-dir", b.pkiDir, "--data-dir", t.TempDir(),
		"--listen", "127.0.0.1:0", "--dashboard-listen", "127.0.0.1:0", "--rate-limit-burst", "100000", "--rate-limit-rps", "100000"}, args...)...)
	b.api = b.await(t, "the API address", regexp.MustCompile(`Broker API listening.* addr=(\S+)`))[1]
	b.dashboard = b.await(t, "the dashboard address", regexp.MustCompile(`Dashboard listening.* addr=(\S+)`))[1]
	ready := endpoint{addr: b.dashboard, path: "/readyz"}
	testpoll.UntilNil(t, patience, "the broker's readiness", func() error { return ready.get(http.DefaultClient) })
	return b
}

// join mints a join bundle (`pki join`) for this broker.
func (b *broker) join(t *testing.T, id, role string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), id+".tar.gz")
	run(t, "pki", "join", "--dir", b.pkiDir, "--cluster-id", id, "--role", role, "--broker-url", "https://"+b.api, "--out", out)
	return out
}

// endpoints are the broker's listeners: the API (mTLS, a consumer's
// certificate) and the dashboard.
func (b *broker) endpoints(t *testing.T) []endpoint {
	t.Helper()
	metrics := "http://" + b.dashboard + "/metrics"
	return []endpoint{
		{name: "api", addr: b.api, path: "/healthz", tls: bundleTLS(t, b.join(t, "healthy-client", "consumer")), metrics: metrics},
		{name: "dashboard", addr: b.dashboard, path: "/healthz", metrics: metrics},
	}
}

// agent is a running `federation-autoscaler agent`.
type agent struct {
	*proc
	health, localAPI, console string
	// consoleToken logs in to the console.
	consoleToken string
}

// startAgent starts a consumer agent of b (simulated Liqo) on a simulated
// Kubernetes API served by the test (mocks/kubeapi) that already holds
// the agent's namespace, with its health, local API and console listeners
// on loopback, and waits until it serves.
func startAgent(t *testing.T, b *broker, fdLimit int) *agent {
	t.Helper()
	kube := testcluster.StartSimulated(t)
	kube.EnsureNamespace(t, "federation-autoscaler")
	return startAgentOn(t, b, fdLimit, kube, "consumer", "consumer-1")
}

// startAgentOn starts an agent of role and cluster id on kube (simulated
// Liqo, CRDs already installed) and waits until its listeners serve; args
// are more flags.
func startAgentOn(t *testing.T, b *broker, fdLimit int, kube *testcluster.Env, role, id string, args ...string) *agent {
	t.Helper()
	a := &agent{consoleToken: "attack-suite-console-token-0123456789"}
	token := filepath.Join(t.TempDir(), "console-token")
	if err := os.WriteFile(token, []byte(a.consoleToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	flags := []string{"agent", "--role", role, "--bundle", b.join(t, id, role),
		"--kubeconfig", kube.Kubeconfig, "--liqo-driver", "sim", "--install-crds=false",
		"--health-listen", "127.0.0.1:0", "--console-listen", "127.0.0.1:0", "--console-token-file", token}
	if role == "consumer" {
		flags = append(flags, "--local-api-listen", "127.0.0.1:0")
	}
	a.proc = start(t, role+" agent", fdLimit, append(flags, args...)...)
	m := a.await(t, "its addresses", regexp.MustCompile(`Agent started.* health=(\S+) localAPI=(\S*) .*console=(\S+)`))
	a.health, a.localAPI, a.console = m[1], strings.Trim(m[2], `"`), m[3] // a provider logs localAPI=""
	for _, e := range a.endpoints() {
		testpoll.UntilNil(t, patience, "the agent's "+e.name, func() error { return e.get(http.DefaultClient) })
	}
	return a
}

// endpoints are the agent's listeners. The local API's node groups come
// from the broker: answering them needs the agent's outgoing calls too.
func (a *agent) endpoints() []endpoint {
	metrics := "http://" + a.health + "/metrics"
	eps := []endpoint{{name: "health", addr: a.health, path: "/healthz", metrics: metrics}}
	if a.localAPI != "" {
		eps = append(eps, endpoint{name: "local-api", addr: a.localAPI, path: "/local/nodegroups", metrics: metrics})
	}
	return append(eps, endpoint{name: "console", addr: a.console, path: "/login", metrics: metrics})
}

// demo is a running `federation-autoscaler demo` (one provider).
type demo struct {
	*proc
	dataDir                         string
	api, dashboard, consumerConsole string
}

// startDemo starts the demo on ephemeral loopback ports and waits until it
// prints its addresses.
func startDemo(t *testing.T, fdLimit int) *demo {
	t.Helper()
	d := &demo{dataDir: t.TempDir()}
	d.proc = start(t, "demo", fdLimit, "demo", "--base-port", "0", "--data-dir", d.dataDir, "--providers", "1", "--peering-delay", "0s")
	d.await(t, "the demo to run", regexp.MustCompile(`Ctrl-C stops`))
	d.dashboard = d.await(t, "the dashboard URL", regexp.MustCompile(`Broker dashboard\s+http://(\S+)`))[1]
	d.consumerConsole = d.await(t, "the consumer console URL", regexp.MustCompile(`Consumer console\s+http://(\S+)`))[1]
	d.api = d.await(t, "the broker API URL", regexp.MustCompile(`Broker API \(mTLS\) https://([^,\s]+)`))[1]
	return d
}

// endpoints are the demo's broker API (the consumer's bundle), its
// dashboard and the consumer console.
func (d *demo) endpoints(t *testing.T) []endpoint {
	t.Helper()
	metrics := "http://" + d.dashboard + "/metrics"
	return []endpoint{
		{name: "api", addr: d.api, path: "/healthz", tls: bundleTLS(t, filepath.Join(d.dataDir, "bundles", "london.tar.gz")), metrics: metrics},
		{name: "dashboard", addr: d.dashboard, path: "/healthz", metrics: metrics},
		{name: "console", addr: d.consumerConsole, path: "/login"},
	}
}

// redialPause is the flood's pacing: after the server closed one of its
// connections, that slot dials again this much later. A tighter loop
// measures how much CPU the refusals cost, which is another attack.
const redialPause = time.Second

// flood holds up to n raw TCP connections (no TLS, no request) to a
// listener from one loopback address, dialling again whenever the server
// closes one, until stop.
type flood struct {
	addr, from string
	n          int
	connects   atomic.Int64 // connections established
	closed     atomic.Int64 // connections the server closed
	cancel     context.CancelFunc
	wg         sync.WaitGroup
}

// startFlood starts a flood; the test's end stops it.
func startFlood(t *testing.T, addr, from string, n int) *flood {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	f := &flood{addr: addr, from: from, n: n, cancel: cancel}
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 10 * time.Second}
	pause := func() bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(redialPause):
			return true
		}
	}
	for range n {
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			for ctx.Err() == nil {
				c, err := d.DialContext(ctx, "tcp", addr)
				if err != nil {
					if !pause() {
						return
					}
					continue
				}
				f.connects.Add(1)
				stop := context.AfterFunc(ctx, func() { _ = c.Close() })
				_, _ = c.Read(make([]byte, 1)) // until the server closes it
				if stop() {
					f.closed.Add(1)
				}
				_ = c.Close()
				if !pause() {
					return
				}
			}
		}()
	}
	t.Cleanup(f.stop)
	return f
}

// await waits until the flood has established at least n connections to
// p's listener; p dying first fails the test at once, and so does an error
// of during (when set), which runs at every poll.
func (f *flood) await(t *testing.T, p *proc, during func() error) {
	t.Helper()
	testpoll.UntilNil(t, patience, fmt.Sprintf("%d flood connections to %s", f.n, f.addr), func() error {
		p.alive(t)
		if during != nil {
			if err := during(); err != nil {
				t.Fatalf("while the flood on %s built up: %v", f.addr, err)
			}
		}
		if got := f.connects.Load(); got < int64(f.n) {
			return fmt.Errorf("%d connections so far", got)
		}
		return nil
	})
}

// stop closes every flood connection and waits for the dialers.
func (f *flood) stop() {
	f.cancel()
	f.wg.Wait()
}

// latencies are the durations of a healthy client's requests.
type latencies []time.Duration

// quantile is the q-quantile (nearest rank) of l.
func (l latencies) quantile(q float64) time.Duration {
	s := slices.Clone(l)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

func (l latencies) String() string {
	return fmt.Sprintf("%d requests: p50 %s, p99 %s, max %s", len(l),
		l.quantile(0.5).Round(10*time.Microsecond), l.quantile(0.99).Round(10*time.Microsecond), l.quantile(1).Round(10*time.Microsecond))
}

// measure sends n healthy requests to e one after the other with c; the
// first failure ends it.
func measure(e endpoint, c *http.Client, n int) (latencies, error) {
	out := make(latencies, 0, n)
	for i := range n {
		start := time.Now()
		if err := e.get(c); err != nil {
			return nil, fmt.Errorf("%s: healthy request %d/%d failed: %w", e.name, i+1, n, err)
		}
		out = append(out, time.Since(start))
	}
	return out, nil
}

// measureAll measures every endpoint at once, each with its client, so that
// all of them are measured over the same stretch of an attack.
func measureAll(eps []endpoint, clients []*http.Client, n int) ([]latencies, error) {
	out := make([]latencies, len(eps))
	errs := make([]error, len(eps))
	var wg sync.WaitGroup
	for i, e := range eps {
		wg.Go(func() { out[i], errs[i] = measure(e, clients[i], n) })
	}
	wg.Wait()
	return out, errors.Join(errs...)
}
