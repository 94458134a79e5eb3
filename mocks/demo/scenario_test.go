package demo_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	fav1alpha1 "github.com/federation-autoscaler/federation-autoscaler/agent/apis/v1alpha1"
	"github.com/federation-autoscaler/federation-autoscaler/agent/liqo"
	"github.com/federation-autoscaler/federation-autoscaler/deploy/testpoll"
	"github.com/federation-autoscaler/federation-autoscaler/mocks/demo"
	"github.com/federation-autoscaler/federation-autoscaler/mocks/demo/workload"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

func testLogger() *slog.Logger {
	if os.Getenv("FA_DEMO_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return slog.New(slog.DiscardHandler)
}

// driver drives a running demo through its public surfaces only: the
// consumer console over HTTP (login, CSRF-protected forms), the broker's
// overview on the dashboard listener and the consumer cluster's Kubernetes
// API.
type driver struct {
	t        testing.TB
	fed      *demo.Federation
	http     *http.Client
	consumer kubernetes.Interface
}

// driverTimeout bounds one request of the test driver to a console: a
// bound on a stuck request, not a speed check (the conditions the tests
// poll for have their own deadlines). A console page reads its agent and
// the broker several times, and took more than 10 s under -race at load 12.
const driverTimeout = time.Minute

func newDriver(t testing.TB, fed *demo.Federation) *driver {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	d := &driver{t: t, fed: fed, http: &http.Client{Jar: jar, Timeout: driverTimeout}}
	kube, err := kubernetes.NewForConfig(fed.Consumer.Cluster.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	d.consumer = kube
	resp, err := d.http.PostForm(fed.Consumer.ConsoleURL+"/login", url.Values{"token": {fed.ConsoleToken}})
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasSuffix(resp.Request.URL.Path, "/") {
		t.Fatalf("console login: %s at %s", resp.Status, resp.Request.URL)
	}
	return d
}

var csrfRE = regexp.MustCompile(`name="_csrf" value="([^"]+)"`)

// post submits a consumer console form with the page's CSRF token.
func (d *driver) post(path string, form url.Values) {
	d.t.Helper()
	d.postTo(d.http, d.fed.Consumer.ConsoleURL, path, form)
}

// postTo submits the form at path of the console at base through c (logged
// in there) with the page's CSRF token, and wants it accepted.
func (d *driver) postTo(c *http.Client, base, path string, form url.Values) {
	d.t.Helper()
	resp, err := c.Get(base + "/")
	if err != nil {
		d.t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	m := csrfRE.FindSubmatch(body)
	if m == nil {
		d.t.Fatalf("no CSRF token on the console page %s (%s)", base, resp.Status)
	}
	form.Set("_csrf", string(m[1]))
	resp, err = c.PostForm(base+path, form)
	if err != nil {
		d.t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Request.URL.RawQuery, "ok=") {
		d.t.Fatalf("POST %s%s: %s at %s: %.400s", base, path, resp.Status, resp.Request.URL, body)
	}
}

func (d *driver) policy(p string, weights map[string]string) {
	d.t.Helper()
	form := url.Values{"policy": {p}}
	for k, v := range weights {
		form.Set(k, v)
	}
	d.post("/policy", form)
}

// policyApplied sets the consumer's policy and waits until the broker
// applies it: the consumer's heartbeat carried it and the broker grows the
// consumer on want. The console's POST only writes the ConsumerPolicy and
// asks for a heartbeat; a scale-up before the broker has heard it is
// placed by the policy before (a load spike once made the Weighted step's
// chunks land on the Latency step's provider).
func (d *driver) policyApplied(p string, weights map[string]string, want string) {
	d.t.Helper()
	d.policy(p, weights)
	d.eventually("the broker applies "+p+" to the consumer, growing it on "+want, 60*time.Second, func() (bool, string) {
		for _, c := range d.overview().Consumers {
			if c.ClusterID == demo.ConsumerID {
				return string(c.Placement) == p && c.ChosenProvider == want, fmt.Sprintf("placement %s, grows on %q", c.Placement, c.ChosenProvider)
			}
		}
		return false, "the broker has no heartbeat of the consumer"
	})
}

func (d *driver) workload(on bool, replicas int) {
	d.t.Helper()
	form := url.Values{"replicas": {fmt.Sprint(replicas)}, "pod_cpu": {"1"}, "pod_memory": {"1Gi"}}
	if on {
		form.Set("enabled", "on")
	}
	d.post("/workload", form)
}

func (d *driver) overview() api.Overview {
	d.t.Helper()
	resp, err := d.http.Get(d.fed.DashboardURL + "/api/v1/overview")
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		d.t.Fatalf("overview: %s: %s", resp.Status, b)
	}
	var o api.Overview
	if err := json.NewDecoder(resp.Body).Decode(&o); err != nil {
		d.t.Fatalf("overview: %v", err)
	}
	return o
}

// virtualNodes counts the consumer's Ready virtual nodes per provider.
func (d *driver) virtualNodes() map[string]int {
	d.t.Helper()
	nodes, err := d.consumer.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{LabelSelector: liqo.TypeLabel + "=" + liqo.VirtualNodeType})
	if err != nil {
		d.t.Fatal(err)
	}
	out := map[string]int{}
	for _, n := range nodes.Items {
		out[n.Labels[liqo.RemoteClusterIDLabel]]++
	}
	return out
}

// pods returns the workload's Running and other pods.
func (d *driver) pods() (running, other int) {
	d.t.Helper()
	list, err := d.consumer.CoreV1().Pods("demo").List(context.Background(), metav1.ListOptions{LabelSelector: workload.Label})
	if err != nil {
		d.t.Fatal(err)
	}
	for _, p := range list.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			running++
		} else {
			other++
		}
	}
	return running, other
}

// live returns the consumer's non-terminal reservations per provider.
func (d *driver) live() map[string]int {
	out := map[string]int{}
	for _, r := range d.overview().Reservations {
		if r.ConsumerClusterID == demo.ConsumerID && !r.Status.Terminal() {
			out[r.ProviderClusterID]++
		}
	}
	return out
}

// advertisement is provider id's row of the broker's overview.
func (d *driver) advertisement(id string) (api.AdvertisementSnapshot, bool) {
	for _, a := range d.overview().Advertisements {
		if a.ClusterID == id {
			return a, true
		}
	}
	return api.AdvertisementSnapshot{}, false
}

// liveIDs lists the consumer's live reservations on provider, sorted.
func (d *driver) liveIDs(provider string) []string {
	var out []string
	for _, r := range d.overview().Reservations {
		if r.ConsumerClusterID == demo.ConsumerID && r.ProviderClusterID == provider && !r.Status.Terminal() {
			out = append(out, r.ReservationID)
		}
	}
	sort.Strings(out)
	return out
}

// watchRunning samples the workload's Running pods until the test ends;
// the returned func gives the fewest seen so far (-1 when a listing
// failed).
func (d *driver) watchRunning() func() int {
	return d.watchFewest(100*time.Millisecond, func(ctx context.Context) (int, error) {
		list, err := d.consumer.CoreV1().Pods("demo").List(ctx, metav1.ListOptions{LabelSelector: workload.Label})
		if err != nil {
			return 0, err
		}
		running := 0
		for _, p := range list.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				running++
			}
		}
		return running, nil
	})
}

// watchFewest samples count every period until the test ends; the returned
// func gives the fewest seen so far (-1 when a sample failed).
func (d *driver) watchFewest(period time.Duration, count func(context.Context) (int, error)) func() int {
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	fewest := math.MaxInt
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			n, err := count(ctx)
			if err != nil {
				n = -1
			}
			if ctx.Err() != nil {
				return
			}
			mu.Lock()
			fewest = min(fewest, n)
			mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(period):
			}
		}
	}()
	d.t.Cleanup(func() { cancel(); <-done })
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		return fewest
	}
}

// disconnectGrace sets the consumer's own disconnect grace in its
// ConsumerPolicy (the one the console writes) through the consumer
// cluster's Kubernetes API, and waits for the broker to apply it.
func (d *driver) disconnectGrace(seconds int32) {
	d.t.Helper()
	dyn, err := dynamic.NewForConfig(d.fed.Consumer.Cluster.RESTConfig())
	if err != nil {
		d.t.Fatal(err)
	}
	gvr := fav1alpha1.GroupVersion.WithResource("consumerpolicies")
	patch := fmt.Sprintf(`{"spec":{"lifecycle":{"disconnectGraceSeconds":%d}}}`, seconds)
	ctx := context.Background()
	if _, err := dyn.Resource(gvr).Namespace(d.fed.Consumer.Namespace).Patch(ctx, "default", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		d.t.Fatalf("setting the ConsumerPolicy's disconnect grace: %v", err)
	}
}

func (d *driver) eventually(what string, timeout time.Duration, cond func() (bool, string)) {
	d.t.Helper()
	testpoll.UntilSeen(d.t, timeout, what, cond)
}

// runningOn waits for replicas Running pods, every borrowed node and every
// live reservation on want (a provider id → count of chunks, exact).
func (d *driver) runningOn(replicas int, want map[string]int) time.Duration {
	d.t.Helper()
	return d.runningOnWithin(replicas, want, 60*time.Second)
}

// runningOnWithin is runningOn with its own deadline.
func (d *driver) runningOnWithin(replicas int, want map[string]int, timeout time.Duration) time.Duration {
	d.t.Helper()
	start := time.Now()
	d.eventually(fmt.Sprintf("%d pods Running on %v", replicas, want), timeout, func() (bool, string) {
		run, other := d.pods()
		vn, live := d.virtualNodes(), d.live()
		state := fmt.Sprintf("pods running=%d other=%d, virtual nodes %v, live reservations %v", run, other, vn, live)
		return run == replicas && other == 0 && equal(vn, want) && equal(live, want), state
	})
	return time.Since(start)
}

func equal(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// off switches the workload off and waits for zero borrowed nodes and every
// reservation of the consumer terminal, the ones it gave back Released.
func (d *driver) off() {
	d.t.Helper()
	d.workload(false, 6)
	d.eventually("scale-down to zero borrowed nodes, reservations Released", 60*time.Second, func() (bool, string) {
		vn := d.virtualNodes()
		var notReleased []string
		for _, r := range d.overview().Reservations {
			if r.ConsumerClusterID == demo.ConsumerID && r.Status != api.PhaseReleased && r.Status != api.PhaseFailed {
				notReleased = append(notReleased, r.ReservationID+"="+string(r.Status))
			}
		}
		sort.Strings(notReleased)
		return len(vn) == 0 && len(notReleased) == 0, fmt.Sprintf("virtual nodes %v, not released %v", vn, notReleased)
	})
}

// startFederation starts the scenario federation: the three default
// providers plus Tokyo, the cheapest of all, which denies the consumer.
// Providers advertise every second and the broker's staleness window is
// shortened to 15 s, so that a stopped provider is noticed within the
// scenario's deadline. It was 3 s once: a load spike that starved the
// processes for 3 s made every provider stale at once, and the broker
// rightly failed their reservations under running pods (a flake whose
// cause was the test's setting, not the system).
func startFederation(t *testing.T) *demo.Federation {
	t.Helper()
	provs := demo.DefaultProviders(3)
	tokyo := demo.DefaultProviders(6)[5]
	tokyo.CPUPrice, tokyo.MemoryPrice, tokyo.DeniedConsumers = "0.001", "0.0001", []string{demo.ConsumerID}
	provs = append(provs, tokyo)
	return startDemo(t, provs, nil)
}

// startDemo starts a scenario federation of provs (tune, when set, adjusts
// the options) and stops it when the test ends.
func startDemo(t *testing.T, provs []demo.ProviderSpec, tune func(*demo.Options)) *demo.Federation {
	t.Helper()
	o := demo.Options{
		DataDir: t.TempDir(), Providers: provs, PeeringDelay: 0, ScanInterval: time.Second,
		ScaleDownUnneededTime: 2 * time.Second, ProviderStaleAfter: 15 * time.Second, AdvertiseInterval: time.Second,
		Logger: testLogger(),
	}
	if tune != nil {
		tune(&o)
	}
	ctx, cancel := context.WithCancel(context.Background())
	fed, err := demo.Start(ctx, o)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		if err := fed.Stop(); err != nil {
			t.Errorf("demo stopped with: %v", err)
		}
	})
	return fed
}

// TestScenarios runs the scenarios in order on one federation.
func TestScenarios(t *testing.T) {
	fed := startFederation(t)
	d := newDriver(t, fed)
	d.eventually("four providers advertised", 30*time.Second, func() (bool, string) {
		o := d.overview()
		return len(o.Advertisements) == 4, fmt.Sprintf("%d advertisements", len(o.Advertisements))
	})

	steps := []struct {
		name    string
		policy  string
		weights map[string]string
		want    string
	}{
		{"Price", "Price", nil, "sydney"},
		{"Eco", "Eco", nil, "montreal"},
		{"Latency", "Latency", nil, "paris"},
		{"Weighted", "Weighted", map[string]string{"w_carbon": "1"}, "montreal"},
	}
	for _, s := range steps {
		if !t.Run(s.name, func(t *testing.T) {
			d.t = t
			d.policyApplied(s.policy, s.weights, s.want)
			start := time.Now()
			d.workload(true, 6)
			// 6 pods of 1 CPU: 2 on the local 2-CPU node, 4 in two chunks.
			d.runningOn(6, map[string]int{s.want: 2})
			t.Logf("%s: workload on → 6 pods Running on %s in %s", s.name, s.want, time.Since(start).Round(time.Millisecond))
			d.off()
		}) {
			return
		}
	}
	if !t.Run("Spill", func(t *testing.T) {
		d.t = t
		d.policyApplied("Price", nil, "sydney")
		// 12 pods: 10 borrowed = 5 chunks; Sydney has 4, the rest spills to
		// the next cheapest, Montreal. One chunk more than needed may be
		// borrowed when the scheduler places pods on a node that registered
		// during a scan (the real CA over-provisions in the same race and
		// scales the spare node down later), so Montreal may hold 1 or 2.
		d.workload(true, 12)
		d.eventually("12 pods Running, Sydney full, the rest spilled to Montreal only", 60*time.Second, func() (bool, string) {
			run, other := d.pods()
			vn, live := d.virtualNodes(), d.live()
			state := fmt.Sprintf("pods running=%d other=%d, virtual nodes %v, live reservations %v", run, other, vn, live)
			spilled := len(vn) == 2 && vn["sydney"] == 4 && (vn["montreal"] == 1 || vn["montreal"] == 2)
			return run == 12 && other == 0 && spilled && equal(vn, live), state
		})
		d.off()
	}) {
		return
	}
	if !t.Run("ProviderRestartedWithinGrace", func(t *testing.T) {
		d.t = t
		d.policyApplied("Price", nil, "sydney")
		d.workload(true, 6)
		d.runningOn(6, map[string]int{"sydney": 2})
		before := d.liveIDs("sydney")
		floor := d.watchRunning()
		sydney := fed.Provider("sydney")
		sydney.Stop()
		// The broker notices (15 s) and keeps the borrowed capacity: the
		// broker's grace is 5 min.
		d.eventually("sydney disconnected, its reservations in their grace", 30*time.Second, func() (bool, string) {
			a, ok := d.advertisement("sydney")
			return ok && !a.Available && a.GraceUntil != nil, fmt.Sprintf("available=%v graceUntil=%v", a.Available, a.GraceUntil)
		})
		if err := sydney.Restart(); err != nil {
			t.Fatal(err)
		}
		d.eventually("sydney advertising again, no grace left", 30*time.Second, func() (bool, string) {
			a, ok := d.advertisement("sydney")
			return ok && a.Available && a.GraceUntil == nil, fmt.Sprintf("available=%v graceUntil=%v", a.Available, a.GraceUntil)
		})
		d.runningOn(6, map[string]int{"sydney": 2})
		if fewest := floor(); fewest < 6 {
			t.Errorf("Running pods fell to %d while sydney's agent restarted, want never below 6", fewest)
		}
		if after := d.liveIDs("sydney"); !slices.Equal(before, after) {
			t.Errorf("reservations on sydney %v before the restart, %v after: want the same ones kept", before, after)
		}
		d.off()
	}) {
		return
	}
	t.Run("ProviderStoppedPastGrace", func(t *testing.T) {
		d.t = t
		// The consumer's own grace, through its ConsumerPolicy on the
		// consumer cluster's Kubernetes API.
		d.disconnectGrace(10)
		d.policyApplied("Price", nil, "sydney")
		d.workload(true, 6)
		d.runningOn(6, map[string]int{"sydney": 2})
		sydney := fed.Provider("sydney")
		sydney.Stop()
		d.eventually("sydney's reservations failed: 15 s stale + 10 s grace", 60*time.Second, func() (bool, string) {
			live := d.liveIDs("sydney")
			return len(live) == 0, fmt.Sprintf("live on sydney: %v", live)
		})
		d.runningOn(6, map[string]int{"montreal": 2})
		failed := 0
		for _, r := range d.overview().Reservations {
			if r.ProviderClusterID == "sydney" && r.ConsumerClusterID == demo.ConsumerID {
				if !r.Status.Terminal() {
					t.Errorf("reservation %s on the stopped provider is %s", r.ReservationID, r.Status)
				}
				if r.Status == api.PhaseFailed {
					failed++
					if want := "disconnect grace of 10s ran out"; !strings.Contains(r.Message, want) {
						t.Errorf("reservation %s failed with %q, want it to say %q", r.ReservationID, r.Message, want)
					}
				}
			}
		}
		if failed < 2 {
			t.Errorf("%d reservations on the stopped provider Failed, want 2", failed)
		}
		d.off()
	})
	// Tokyo, the cheapest, denies the consumer: never used.
	for _, r := range d.overview().Reservations {
		if r.ProviderClusterID == "tokyo" {
			t.Errorf("reservation %s on tokyo, which denies %s", r.ReservationID, demo.ConsumerID)
		}
	}
}
