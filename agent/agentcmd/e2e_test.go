package agentcmd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqotech/liqo/apis/authentication/v1beta1"

	"github.com/federation-autoscaler/federation-autoscaler/adapter/localapi"
	"github.com/federation-autoscaler/federation-autoscaler/agent/brokerclient"
	"github.com/federation-autoscaler/federation-autoscaler/agent/consumer"
	"github.com/federation-autoscaler/federation-autoscaler/agent/liqo"
	"github.com/federation-autoscaler/federation-autoscaler/agent/preflight"
	"github.com/federation-autoscaler/federation-autoscaler/agent/provider"
	"github.com/federation-autoscaler/federation-autoscaler/deploy/testcluster"
	"github.com/federation-autoscaler/federation-autoscaler/deploy/testpoll"
	liqosim "github.com/federation-autoscaler/federation-autoscaler/mocks/liqo"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/brokercmd"
	"github.com/federation-autoscaler/federation-autoscaler/server/pki"
	"github.com/federation-autoscaler/federation-autoscaler/server/reservations"
)

// gatedDriver counts Peer calls and can hold them until a gate opens.
type gatedDriver struct {
	liqo.Driver
	mu      sync.Mutex
	peers   int
	started chan string   // receives the provider id of every Peer call
	gate    chan struct{} // when non-nil, Peer waits for it to close
}

func (d *gatedDriver) Peer(ctx context.Context, p, kc string) error {
	d.mu.Lock()
	d.peers++
	gate := d.gate
	d.mu.Unlock()
	select {
	case d.started <- p:
	default:
	}
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return d.Driver.Peer(ctx, p, kc)
}

func (d *gatedDriver) peerCalls() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.peers
}

// federation is a broker (in process, real mTLS, real bbolt file) and two
// agents (in process, through Run) on one real kube-apiserver.
type federation struct {
	tb         testing.TB
	env        *testcluster.Env
	pkiDir     string
	dataDir    string
	brokerAddr string
	// brokerLn listens on brokerAddr until the broker's first start
	// takes it: the address is never free for another process to take
	// between the bundles naming it and the broker listening.
	brokerLn   net.Listener
	brokerStop context.CancelFunc
	brokerDone chan error
	localAPI   string
	// providerConsole and consumerConsole are the agents' console
	// addresses; providerToken is the token the provider printed once,
	// consumerToken the one read from --console-token-file.
	providerConsole, consumerConsole string
	providerToken, consumerToken     string
	driver                           *gatedDriver
	broker                           *brokerclient.Client // the consumer's identity, for checks
	log                              *slog.Logger

	// ha, when set, replaces the in-process broker by replicas of the
	// binary with --store kubernetes --leader-elect (ha_test.go).
	ha *haBrokers

	mu      sync.Mutex
	samples []time.Duration
}

// loopbackListener listens on an ephemeral loopback port; the caller
// hands it to what serves there (closing it and listening again later
// would let another process take the port in between).
func loopbackListener(tb testing.TB) net.Listener {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = ln.Close() }) // when never handed over
	return ln
}

func newFederation(tb testing.TB) *federation {
	tb.Helper()
	return buildFederation(tb, nil)
}

// buildFederation starts the federation; ha non-nil runs the broker as
// its replicas (the bundles list them all).
func buildFederation(tb testing.TB, ha *haBrokers) *federation {
	tb.Helper()
	ln := loopbackListener(tb)
	f := &federation{tb: tb, env: kubeEnv(tb), pkiDir: tb.TempDir(), dataDir: tb.TempDir(), brokerAddr: ln.Addr().String(), brokerLn: ln,
		driver: &gatedDriver{started: make(chan string, 16)}, ha: ha}
	f.log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx := context.Background()
	kube, err := kubernetes.NewForConfig(f.env.Config)
	if err != nil {
		tb.Fatal(err)
	}
	// One Ready worker with room for four standard chunks (2 CPU, 4Gi).
	n, err := kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-1"}}, metav1.CreateOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110")}
	n.Status = corev1.NodeStatus{Allocatable: alloc, Capacity: alloc,
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}},
		Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}}
	if _, err := kube.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		tb.Fatal(err)
	}
	// No namespace is created for the agents: the consumer agent creates
	// its own (the provider keeps nothing in one).
	now := time.Now()
	if err := pki.Init(f.pkiDir, nil, false, now); err != nil {
		tb.Fatal(err)
	}
	url := "https://" + f.brokerAddr
	if f.ha != nil {
		url = f.ha.setup(f)
	}
	bundles := map[string]string{}
	for _, id := range []string{"provider-1", "consumer-1"} {
		role := api.RoleProvider
		if id == "consumer-1" {
			role = api.RoleConsumer
		}
		bundles[id] = filepath.Join(f.pkiDir, id+".tar.gz")
		if err := pki.WriteJoinBundle(f.pkiDir, id, role, url, bundles[id], false, now); err != nil {
			tb.Fatal(err)
		}
	}
	b, err := pki.LoadBundle(bundles["consumer-1"])
	if err != nil {
		tb.Fatal(err)
	}
	tlsCfg, err := b.ClientTLSConfig()
	if err != nil {
		tb.Fatal(err)
	}
	if f.broker, err = brokerclient.New(brokerclient.Config{BaseURL: b.BrokerURL, AlternateURLs: b.AlternateBrokerURLs, TLS: tlsCfg}); err != nil {
		tb.Fatal(err)
	}
	f.startBroker()

	agentCtx, stopAgents := context.WithCancel(ctx)
	var wg sync.WaitGroup
	tb.Cleanup(func() {
		stopAgents()
		wg.Wait()
		f.stopBroker()
	})
	ready := make(chan Addrs, 2)
	run := func(o Options) {
		o.Kubeconfig, o.LiqoDriver, o.InstallCRDs, o.HealthListen = f.env.Kubeconfig, "sim", false, "127.0.0.1:0"
		if o.LiqoDrivers == nil {
			o.LiqoDrivers = []liqo.DriverChoice{liqosim.DriverChoice()}
		}
		o.Ready = func(a Addrs) { ready <- a }
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := Run(agentCtx, o, f.log.With("agent", o.Role)); err != nil {
				tb.Errorf("%s agent: %v", o.Role, err)
				ready <- Addrs{}
			}
		}()
	}
	var printed bytes.Buffer
	run(Options{Role: "provider", Bundle: bundles["provider-1"], Namespace: "fa-provider", ProbeListen: "127.0.0.1:0",
		ConsoleListen: "127.0.0.1:0", ConsoleTokenStore: filepath.Join(tb.TempDir(), "console-token"), Stderr: &printed,
		TuneProvider: func(c *provider.Config) { c.Interval = 5 * time.Second }})
	pa := <-ready
	f.providerConsole = pa.Console
	if m := regexp.MustCompile(`\n  (\S+)\n`).FindStringSubmatch(printed.String()); m != nil {
		f.providerToken = m[1]
	}
	f.consumerToken = "consumer-console-token-0123456789abcdef"
	tokenFile := filepath.Join(tb.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(f.consumerToken+"\n"), 0o600); err != nil {
		tb.Fatal(err)
	}
	run(Options{Role: "consumer", Bundle: bundles["consumer-1"], Namespace: "fa-consumer", LocalAPIListen: "127.0.0.1:0",
		LiqoDrivers:   []liqo.DriverChoice{{Name: "sim", Factory: liqosim.Factory(50 * time.Millisecond)}},
		ConsoleListen: "127.0.0.1:0", ConsoleTokenFile: tokenFile,
		WrapDriver: func(d liqo.Driver) liqo.Driver { f.driver.Driver = d; return f.driver },
		TuneConsumer: func(c *consumer.Config) {
			c.Interval = 5 * time.Second
			c.ObserveReserveToPeer = func(_ string, d time.Duration) {
				f.mu.Lock()
				f.samples = append(f.samples, d)
				f.mu.Unlock()
			}
		}})
	a := <-ready
	if a.LocalAPI == "" {
		tb.Fatal("the consumer agent did not start")
	}
	f.localAPI = "http://" + a.LocalAPI
	f.consumerConsole = a.Console
	return f
}

func (f *federation) startBroker() {
	if f.ha != nil {
		f.ha.startAll()
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.brokerStop, f.brokerDone = cancel, make(chan error, 1)
	// The first start serves on the listener held since the bundles named
	// its address; a restart listens on that address again (it was free
	// only since the broker stopped).
	ln := f.brokerLn
	f.brokerLn = nil
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", f.brokerAddr); err != nil {
			f.tb.Fatalf("the broker's address again after its stop: %v", err)
		}
	}
	o := brokercmd.Options{PKIDir: f.pkiDir, DataDir: f.dataDir, Listen: f.brokerAddr, APIListener: ln,
		ReservationLease: reservations.DefaultReservationLease, ProviderStaleAfter: reservations.DefaultProviderStaleAfter,
		RateLimitBurst: 1000, RateLimitRPS: 1000}
	go func() { f.brokerDone <- brokercmd.Run(ctx, o, f.log.With("component", "broker")) }()
	f.eventually("broker listening", func() bool {
		c, err := net.Dial("tcp", f.brokerAddr)
		if err == nil {
			_ = c.Close()
		}
		return err == nil
	})
}

func (f *federation) stopBroker() {
	if f.ha != nil {
		f.ha.stopAll()
		return
	}
	if f.brokerStop == nil {
		return
	}
	f.brokerStop()
	if err := <-f.brokerDone; err != nil {
		f.tb.Errorf("broker: %v", err)
	}
	f.brokerStop = nil
}

func (f *federation) eventually(what string, cond func() bool) {
	f.tb.Helper()
	testpoll.Until(f.tb, 60*time.Second, what, cond)
}

func (f *federation) call(method, path string, body any, hdr map[string]string, out any) int {
	f.tb.Helper()
	var rd *bytes.Reader
	if body != nil {
		data, _ := json.Marshal(body)
		rd = bytes.NewReader(data)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, _ := http.NewRequest(method, f.localAPI+path, rd)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.tb.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	if out != nil {
		_ = json.NewDecoder(resp.Body).Decode(out)
	}
	return resp.StatusCode
}

func (f *federation) growable() bool {
	var view api.NodeGroupListResponse
	if f.call("GET", localapi.PathNodeGroups, nil, nil, &view) != 200 {
		return false
	}
	for _, g := range view.NodeGroups {
		if g.ID == "ng-provider-1-standard" && g.MaxSize > g.CurrentReserved {
			return true
		}
	}
	return false
}

func (f *federation) reserve(id string) int {
	var resp api.ReservationResponse
	return f.call("POST", localapi.PathReservations, api.ReservationRequest{ProviderClusterID: "provider-1", NodeGroupID: "ng-provider-1-standard", ChunkCount: 1, ChunkType: api.ChunkStandard},
		map[string]string{api.HeaderReservationID: id}, &resp)
}

func (f *federation) virtualNode(id string) (localapi.VirtualNode, bool) {
	var list localapi.VirtualNodeList
	if f.call("GET", localapi.PathVirtualNodes, nil, nil, &list) != 200 {
		return localapi.VirtualNode{}, false
	}
	for _, v := range list.VirtualNodes {
		if v.ReservationID == id {
			return v, true
		}
	}
	return localapi.VirtualNode{}, false
}

func (f *federation) phase(id string) api.Phase {
	r, err := f.broker.Reservation(context.Background(), id)
	if err != nil {
		return ""
	}
	return r.Status
}

// cycle runs one reservation end to end: reserve → Running virtual node
// (broker Peered) → release → Released, virtual node gone.
func (f *federation) cycle(id string) {
	f.tb.Helper()
	f.eventually("a growable node group", f.growable)
	if st := f.reserve(id); st != http.StatusCreated {
		f.tb.Fatalf("reserve %s: status %d, want 201", id, st)
	}
	f.eventually(id+" Running", func() bool {
		v, ok := f.virtualNode(id)
		return ok && v.Phase == localapi.PhaseRunning && v.ProviderID == "liqo://provider-1/"+id
	})
	f.eventually(id+" Peered", func() bool { return f.phase(id) == api.PhasePeered })
	if st := f.call("DELETE", localapi.PathReservations+"/"+id, nil, nil, nil); st != http.StatusAccepted {
		f.tb.Fatalf("release %s: status %d, want 202", id, st)
	}
	f.eventually(id+" Released", func() bool { return f.phase(id) == api.PhaseReleased })
	f.eventually(id+" virtual node gone", func() bool { _, ok := f.virtualNode(id); return !ok })
}

func (f *federation) slices(id string) int {
	var list authv1beta1.ResourceSliceList
	if err := f.env.Client.List(context.Background(), &list, client.InNamespace(liqo.TenantNamespace("provider-1"))); err != nil {
		f.tb.Fatal(err)
	}
	n := 0
	for _, rs := range list.Items {
		if rs.Name == "rs-"+id {
			n++
		}
	}
	return n
}

// TestEndToEnd: broker over mTLS + provider + consumer agents on a real
// kube-apiserver without the agents' namespace, driven through the
// consumer's local API.
func TestEndToEnd(t *testing.T) {
	f := newFederation(t)
	var ns corev1.Namespace
	if err := f.env.Client.Get(context.Background(), client.ObjectKey{Name: "fa-consumer"}, &ns); err != nil || ns.Labels[preflight.ManagedByLabel] != preflight.ManagedBy {
		t.Fatalf("the consumer agent did not create its namespace: %v %v", err, ns.Labels)
	}
	f.cycle("res-e2e-1")
	// A replay of a live id answers 200, not 201 (passed through).
	f.eventually("a growable node group", f.growable)
	if st := f.reserve("res-e2e-2"); st != http.StatusCreated {
		t.Fatalf("reserve: %d", st)
	}
	if st := f.reserve("res-e2e-2"); st != http.StatusOK {
		t.Fatalf("replay: %d, want 200", st)
	}
	f.eventually("res-e2e-2 Peered", func() bool { return f.phase("res-e2e-2") == api.PhasePeered })
	if f.slices("res-e2e-2") != 1 {
		t.Errorf("res-e2e-2 has %d slices", f.slices("res-e2e-2"))
	}
}

// TestBrokerOutage: the broker stops while a Peer is in flight and comes
// back after FA_OUTAGE (default 20s; the issue asks for 2m: FA_OUTAGE=2m): the peering happens once, the result
// is delivered after the restart, the reservation converges to Peered and
// then to Released.
func TestBrokerOutage(t *testing.T) {
	outage := 20 * time.Second
	if v := os.Getenv("FA_OUTAGE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatal(err)
		}
		outage = d
	}
	f := newFederation(t)
	gate := make(chan struct{})
	f.driver.mu.Lock()
	f.driver.gate = gate
	f.driver.mu.Unlock()
	f.eventually("a growable node group", f.growable)
	if st := f.reserve("res-out-1"); st != http.StatusCreated {
		t.Fatalf("reserve: %d", st)
	}
	select {
	case <-f.driver.started:
	case <-time.After(60 * time.Second):
		t.Fatal("the Peer handler never started")
	}
	f.stopBroker()
	close(gate) // the Peer completes while the broker is down
	f.eventually("virtual node Running during the outage", func() bool {
		v, ok := f.virtualNode("res-out-1")
		return ok && v.Phase == localapi.PhaseRunning
	})
	timer := time.NewTimer(outage) // the scenario's outage length, not a wait for luck
	<-timer.C
	f.startBroker()
	f.eventually("res-out-1 Peered after the restart", func() bool { return f.phase("res-out-1") == api.PhasePeered })
	if n := f.driver.peerCalls(); n != 1 {
		t.Errorf("Peer ran %d times, want 1", n)
	}
	if n := f.slices("res-out-1"); n != 1 {
		t.Errorf("%d slices, want 1", n)
	}
	if v, ok := f.virtualNode("res-out-1"); !ok || v.Phase != localapi.PhaseRunning {
		t.Errorf("after resync: %+v %v", v, ok)
	}
	if st := f.call("DELETE", localapi.PathReservations+"/res-out-1", nil, nil, nil); st != http.StatusAccepted {
		t.Fatalf("release: %d", st)
	}
	f.eventually("res-out-1 Released", func() bool { return f.phase("res-out-1") == api.PhaseReleased })
	f.eventually("virtual node gone", func() bool { _, ok := f.virtualNode("res-out-1"); return !ok })
}

// BenchmarkReserveToPeerStart measures, per reservation made through the
// local API, the time from the reserve call to the start of the consumer's
// Peer handler (GenerateKubeconfig on the provider and both long polls
// included; the simulated peering delay is not). Reports p50 and p99.
func BenchmarkReserveToPeerStart(b *testing.B) {
	f := newFederation(b)
	b.ResetTimer()
	for i := range b.N {
		f.cycle(fmt.Sprintf("res-bench-%d", i))
	}
	b.StopTimer()
	f.mu.Lock()
	s := slices.Clone(f.samples)
	f.mu.Unlock()
	if len(s) == 0 {
		b.Fatal("no samples")
	}
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	pct := func(p float64) time.Duration { return s[min(len(s)-1, int(p*float64(len(s))))] }
	b.ReportMetric(float64(pct(0.5).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(pct(0.99).Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(s[len(s)-1].Microseconds())/1000, "max-ms")
}
