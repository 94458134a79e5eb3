package brokercmd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/deploy/brokerproc"
	"github.com/federation-autoscaler/federation-autoscaler/deploy/testcluster"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/rest/resttest"
)

// phaseRank orders the phases of a reservation's normal life.
var phaseRank = map[api.Phase]int{
	api.PhasePending: 0, api.PhaseGeneratingKubeconfig: 1, api.PhaseKubeconfigReady: 2, api.PhasePeering: 3,
	api.PhasePeered: 4, api.PhaseUnpeering: 5, api.PhaseReleased: 6,
}

// ledger records what the broker acknowledged: reservation → the phase the
// last 2xx answer implies it has at least reached.
type ledger struct {
	mu    sync.Mutex
	acked map[string]api.Phase
}

func (l *ledger) ack(id string, p api.Phase) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if old, ok := l.acked[id]; !ok || phaseRank[p] > phaseRank[old] {
		l.acked[id] = p
	}
}

// waitUnpeer is the consumer loop's step after an acknowledged release.
const waitUnpeer api.Phase = "wait-unpeer"

// switchable points clients at the current incarnations of the broker:
// one URL, or the replicas' URLs (a client moves to the next one when an
// answer fails, as a client of a Service reaches another pod).
type switchable struct {
	urls atomic.Pointer[[]string]
	at   atomic.Uint64
}

func (s *switchable) set(u ...string) { s.urls.Store(&u) }
func (s *switchable) get() string {
	u := *s.urls.Load()
	return u[s.at.Load()%uint64(len(u))]
}
func (s *switchable) next() { s.at.Add(1) }

// agent is one member cluster's client that follows the broker across
// restarts.
type agent struct {
	c   *resttest.Client
	url *switchable
}

// do sends until the broker answers (it may be down), or ctx ends.
func (a *agent) do(ctx context.Context, method, path string, body any, header ...string) (*resttest.Response, bool) {
	for ctx.Err() == nil {
		a.c.BaseURL = a.url.get()
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		r, err := a.c.Do(rctx, method, path, body, header...)
		cancel()
		if err == nil && r.Status < 500 {
			return r, true
		}
		a.url.next()
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Millisecond): // the broker is restarting
		}
	}
	return nil, false
}

func (a *agent) instructions(ctx context.Context) []api.InstructionView {
	r, ok := a.do(ctx, "GET", "/api/v1/instructions?wait=1s", nil)
	if !ok || r.Status != 200 {
		return nil
	}
	var list api.InstructionListResponse
	if err := json.Unmarshal(r.Body, &list); err != nil {
		return nil
	}
	return list.Instructions
}

func succeed(ctx context.Context, a *agent, in api.InstructionView, payload *api.InstructionPayload) bool {
	r, ok := a.do(ctx, "POST", "/api/v1/instructions/"+in.ID+"/result", api.InstructionResultRequest{Status: api.ResultSucceeded, Payload: payload})
	return ok && r.Status == 200
}

// providerLoop plays the provider agent: it advertises and answers every
// instruction successfully.
func providerLoop(ctx context.Context, a *agent, chunks int) {
	ad := map[string]any{"clusterId": "prov-a", "liqoClusterId": "liqo-prov-a",
		"resources": map[string]string{"cpu": fmt.Sprint(2 * chunks), "memory": fmt.Sprintf("%dGi", 4*chunks)}}
	last := time.Time{}
	for ctx.Err() == nil {
		if time.Since(last) > time.Second {
			if _, ok := a.do(ctx, "POST", "/api/v1/advertisements", ad); ok {
				last = time.Now()
			}
		}
		for _, in := range a.instructions(ctx) {
			var p *api.InstructionPayload
			if in.Kind == api.KindGenerateKubeconfig {
				p = &api.InstructionPayload{Kind: api.PayloadKubeconfig, Kubeconfig: "apiVersion: v1\nkind: Config\n"}
			}
			succeed(ctx, a, in, p)
		}
	}
}

// consumerLoop plays one consumer: reserve → Peer → release → Unpeer, again
// and again, recording every acknowledged step.
func consumerLoop(ctx context.Context, tb testing.TB, a *agent, id string, l *ledger) {
	for seq := 0; ctx.Err() == nil; seq++ {
		res := fmt.Sprintf("%s-r%03d", id, seq)
		// Reserve (retrying the same id is a replay).
		for ctx.Err() == nil {
			if _, ok := a.do(ctx, "POST", "/api/v1/heartbeat", map[string]any{"clusterId": id, "liqoClusterId": "liqo-" + id}); !ok {
				return
			}
			r, ok := a.do(ctx, "POST", "/api/v1/reservations",
				api.ReservationRequest{ProviderClusterID: "prov-a", ChunkCount: 1, ChunkType: api.ChunkStandard},
				api.HeaderReservationID, res)
			if !ok {
				return
			}
			if r.Status == 200 || r.Status == 201 {
				l.ack(res, api.PhasePending)
				break
			}
			if r.Status != 409 && r.Status != 404 && r.Status != 503 { // full, or provider not advertised yet
				tb.Errorf("reserve %s: %d %s", res, r.Status, r.Body)
				return
			}
		}
		// Peer, then release, then Unpeer.
		for step := api.PhasePeered; ctx.Err() == nil && step != api.PhaseReleased; {
			if step == api.PhaseUnpeering {
				r, ok := a.do(ctx, "DELETE", "/api/v1/reservations/"+res, nil)
				if !ok {
					return
				}
				if r.Status != 202 {
					tb.Errorf("release %s: %d %s", res, r.Status, r.Body)
					return
				}
				l.ack(res, api.PhaseUnpeering)
				step = waitUnpeer
				continue
			}
			for _, in := range a.instructions(ctx) {
				var p *api.InstructionPayload
				if in.Kind == api.KindPeer {
					p = &api.InstructionPayload{Kind: api.PayloadPeer, VirtualNodeNames: []string{"vk-" + in.ReservationID}}
				}
				if !succeed(ctx, a, in, p) || in.ReservationID != res {
					continue
				}
				switch {
				case in.Kind == api.KindPeer && step == api.PhasePeered:
					l.ack(res, api.PhasePeered)
					step = api.PhaseUnpeering
				case in.Kind == api.KindUnpeer && step == waitUnpeer:
					l.ack(res, api.PhaseReleased)
					step = api.PhaseReleased
				}
			}
		}
	}
}

// TestCrashRecovery SIGKILLs the broker at random moments under a churn of
// reserve → instructions → results → release and checks that nothing
// acknowledged is lost and no chunk is leaked.
func TestCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test runs a child broker")
	}
	crashRecovery(t, "--data-dir", t.TempDir())
}

// TestCrashRecoveryKubernetes is TestCrashRecovery with the state in a real
// kube-apiserver + etcd (--store kubernetes).
func TestCrashRecoveryKubernetes(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test runs a child broker")
	}
	crashRecovery(t, kubeStoreArgs(t)...)
}

// kubeStoreArgs starts a real control plane with the broker's CRDs and
// returns the flags of a Kubernetes store in a fresh namespace of it.
func kubeStoreArgs(t *testing.T) []string {
	t.Helper()
	args, _ := kubeStore(t)
	return args
}

// kubeStore is kubeStoreArgs that also returns the control plane.
func kubeStore(t *testing.T) ([]string, *testcluster.Env) {
	t.Helper()
	env := testcluster.Start(t)
	return brokerproc.KubeStore(t, env, "fa-broker"), env
}

func crashRecovery(t *testing.T, storeArgs ...string) {
	const (
		kills     = 22
		consumers = 6
		chunks    = 10
	)
	p := resttest.NewPKI(t)
	args := append([]string{"--pki-dir", p.Dir, "--rate-limit-burst", "100000", "--rate-limit-rps", "100000"}, storeArgs...)
	proc := startBroker(t, args...)
	url := &switchable{}
	url.set("https://" + proc.APIAddr)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l, wg := startChurn(ctx, t, p, url, consumers, chunks)

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	start := time.Now()
	for k := range kills {
		time.Sleep(time.Duration(50+rng.IntN(400)) * time.Millisecond) // a random moment to crash at
		proc.Kill(t)
		proc = startBroker(t, args...)
		url.set("https://" + proc.APIAddr)
		if k == kills-1 {
			cancel()
		}
	}
	wg.Wait()
	proc.Kill(t)
	proc = startBroker(t, args...)
	t.Logf("%d kills in %s", kills, time.Since(start).Round(time.Millisecond))
	verifyAcked(t, p, proc, l, consumers)
	if err := proc.Stop(t); err != nil {
		t.Errorf("graceful stop: %v", err)
	}
}

// startChurn runs one provider (chunks chunks) and consumers consumer
// loops against url until ctx ends; wait on the group before checking.
func startChurn(ctx context.Context, t *testing.T, p *resttest.PKI, url *switchable, consumers, chunks int) (*ledger, *sync.WaitGroup) {
	l := &ledger{acked: map[string]api.Phase{}}
	wg := &sync.WaitGroup{}
	wg.Add(1)
	go func() {
		defer wg.Done()
		providerLoop(ctx, &agent{c: p.NewClient(t, "", "prov-a", api.RoleProvider, 4), url: url}, chunks)
	}()
	for i := range consumers {
		id := fmt.Sprintf("cons-%d", i)
		a := &agent{c: p.NewClient(t, "", id, api.RoleConsumer, 4), url: url}
		wg.Add(1)
		go func() { defer wg.Done(); consumerLoop(ctx, t, a, id, l) }()
	}
	return l, wg
}

// verifyAcked checks, on the broker proc, that every acknowledged
// reservation is there in at least its acknowledged phase, that reserved
// chunks equal the live reservations' chunks and that no provider is
// overbooked.
func verifyAcked(t *testing.T, p *resttest.PKI, proc *brokerproc.Process, l *ledger, consumers int) {
	byPhase := map[api.Phase]int{}
	for _, ph := range l.acked {
		byPhase[ph]++
	}
	t.Logf("%d reservations acknowledged, by last acknowledged phase: %v", len(l.acked), byPhase)

	if len(l.acked) < consumers {
		t.Errorf("only %d reservations acknowledged: the churn did not run", len(l.acked))
	}
	peered := 0
	// One client (one kept-alive connection) per consumer, as agents have:
	// a client per reservation left ~150 idle connections from one address
	// open, and the broker's per-address cap (netguard) rightly reset the
	// ones beyond it.
	clients := map[string]*resttest.Client{}
	for res, want := range l.acked {
		consumer, _, _ := strings.Cut(res, "-r")
		c := clients[consumer]
		if c == nil {
			c = p.NewClient(t, "https://"+proc.APIAddr, consumer, api.RoleConsumer, 1)
			clients[consumer] = c
		}
		r := c.Must(t, "GET", "/api/v1/reservations/"+res, nil)
		if r.Status != 200 {
			t.Errorf("acknowledged reservation %s (%s): %d %s", res, want, r.Status, r.Body)
			continue
		}
		var got api.ReservationResponse
		if err := r.Decode(&got); err != nil {
			t.Fatal(err)
		}
		rank, ok := phaseRank[got.Status]
		if !ok || rank < phaseRank[want] {
			t.Errorf("reservation %s: phase %s, but %s was acknowledged", res, got.Status, want)
		}
		if phaseRank[want] >= phaseRank[api.PhasePeered] {
			peered++
		}
	}
	if peered == 0 {
		t.Errorf("no reservation reached Peered: the churn did not exercise the phase machine")
	}

	resp, err := http.Get("http://" + proc.DashAddr + "/api/v1/overview")
	if err != nil {
		t.Fatal(err)
	}
	var ov api.Overview
	err = json.NewDecoder(resp.Body).Decode(&ov)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	live := int32(0)
	for _, r := range ov.Reservations {
		if !r.Status.Terminal() {
			live += r.ChunkCount
		}
	}
	if ov.Capacity.ReservedChunks != live {
		t.Errorf("reserved chunks %d != chunks of live reservations %d", ov.Capacity.ReservedChunks, live)
	}
	for _, ad := range ov.Advertisements {
		if ad.ReservedChunks > ad.ChunkCount {
			t.Errorf("provider %s overbooked: %d of %d", ad.ClusterID, ad.ReservedChunks, ad.ChunkCount)
		}
	}
}
