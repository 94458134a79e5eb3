package rest_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/federation-autoscaler/federation-autoscaler/deploy/testpoll"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/placement"
	"github.com/federation-autoscaler/federation-autoscaler/server/reservations"
	"github.com/federation-autoscaler/federation-autoscaler/server/rest"
	"github.com/federation-autoscaler/federation-autoscaler/server/rest/resttest"
	"github.com/federation-autoscaler/federation-autoscaler/server/store/bolt"
)

// broker is the real broker (domain on a temporary bbolt file) served by
// rest.NewApp over mTLS on 127.0.0.1.
type broker struct {
	pki   *resttest.PKI
	url   string
	svc   *reservations.Service
	clock *testingclock.FakeClock
	reg   *prometheus.Registry
}

func startBroker(tb testing.TB, mutate ...func(*rest.Config)) *broker {
	tb.Helper()
	b := &broker{pki: resttest.NewPKI(tb), clock: testingclock.NewFakeClock(time.Now()), reg: prometheus.NewRegistry()}
	st, err := bolt.OpenFile(filepath.Join(tb.TempDir(), "broker.db"), bolt.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	chunks := placement.DefaultChunkConfig()
	b.svc, err = reservations.New(reservations.Config{
		Store:       st,
		Clock:       b.clock,
		ChunkConfig: chunks,
		Placer:      placement.NewIndex(chunks, placement.WithClock(b.clock.Now)),
	})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan struct{})
	go func() { defer close(runDone); _ = b.svc.Run(ctx) }()
	cfg := rest.Config{
		Broker:         b.svc,
		RateLimitBurst: 1_000_000,
		RateLimitRPS:   1_000_000,
		Metrics:        b.reg,
		BaseContext:    func() context.Context { return ctx },
	}
	for _, m := range mutate {
		m(&cfg)
	}
	app := rest.NewApp(cfg)
	// Cleanups run last-registered first: end the long-polls, shut the
	// listener down, then stop the domain.
	tb.Cleanup(func() {
		<-runDone
		if err := b.svc.Close(); err != nil {
			tb.Errorf("close: %v", err)
		}
	})
	b.url = resttest.Serve(tb, app, b.pki.ServerTLS(tb))
	tb.Cleanup(cancel)
	return b
}

func (b *broker) client(tb testing.TB, cn string, role api.Role) *resttest.Client {
	return b.pki.NewClient(tb, b.url, cn, role, 64)
}

// resources of n standard chunks (2 CPU / 4 GiB each).
func chunksOf(n int) map[string]string {
	return map[string]string{"cpu": fmt.Sprint(2 * n), "memory": fmt.Sprintf("%dGi", 4*n)}
}

func advertisement(id string, n int) map[string]any {
	return map[string]any{"clusterId": id, "liqoClusterId": "liqo-" + id, "resources": chunksOf(n)}
}

func heartbeat(id string) map[string]any {
	return map[string]any{"clusterId": id, "liqoClusterId": "liqo-" + id}
}

func reservation(provider string) map[string]any {
	return map[string]any{"providerClusterId": provider, "chunkCount": 1, "chunkType": "standard"}
}

func expect(tb testing.TB, r *resttest.Response, status int, code string) {
	tb.Helper()
	if r.Status != status {
		tb.Fatalf("status %d, want %d: %s", r.Status, status, r.Body)
	}
	if code != "" {
		if e := r.Error(); e.Code != code || e.Message == "" || e.RequestID == "" {
			tb.Fatalf("error body %s, want code %s with message and requestId", r.Body, code)
		}
	}
	if r.Header.Get(api.HeaderLongPoll) != "1" {
		tb.Errorf("response without %s", api.HeaderLongPoll)
	}
}

// findInstruction returns the first instruction of kind for reservation.
func findInstruction(list []api.InstructionView, kind api.InstructionKind, res string) (api.InstructionView, bool) {
	for _, in := range list {
		if in.Kind == kind && (in.ReservationID == res || contains(in.ReservationIDs, res)) {
			return in, true
		}
	}
	return api.InstructionView{}, false
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func waitInstruction(tb testing.TB, c *resttest.Client, kind api.InstructionKind, res string) api.InstructionView {
	tb.Helper()
	var found api.InstructionView
	testpoll.UntilSeen(tb, 20*time.Second, fmt.Sprintf("a %s instruction for %s", kind, res), func() (bool, string) {
		r := c.Must(tb, "GET", "/api/v1/instructions?wait=5s", nil)
		expect(tb, r, 200, "")
		var list api.InstructionListResponse
		if err := r.Decode(&list); err != nil {
			tb.Fatal(err)
		}
		in, ok := findInstruction(list.Instructions, kind, res)
		found = in
		return ok, fmt.Sprintf("instructions %s", r.Body)
	})
	return found
}

func getReservation(tb testing.TB, c *resttest.Client, id string) api.ReservationResponse {
	tb.Helper()
	r := c.Must(tb, "GET", "/api/v1/reservations/"+id, nil)
	expect(tb, r, 200, "")
	var res api.ReservationResponse
	if err := r.Decode(&res); err != nil {
		tb.Fatal(err)
	}
	return res
}

func TestAPIOverMTLS(t *testing.T) {
	b := startBroker(t)
	prov := b.client(t, "prov-a", api.RoleProvider)
	provB := b.client(t, "prov-b", api.RoleProvider)
	cons := b.client(t, "cons-a", api.RoleConsumer)
	consB := b.client(t, "cons-b", api.RoleConsumer)

	t.Run("healthz and request id", func(t *testing.T) {
		r := prov.Must(t, "GET", "/healthz", nil, api.HeaderRequestID, "abc-123")
		expect(t, r, 200, "")
		if r.Header.Get(api.HeaderRequestID) != "abc-123" || string(r.Body) != `{"status":"ok"}` {
			t.Errorf("healthz: %v %s", r.Header, r.Body)
		}
		r = prov.Must(t, "GET", "/healthz", nil)
		if len(r.Header.Get(api.HeaderRequestID)) != 36 {
			t.Errorf("no generated request id: %v", r.Header)
		}
	})
	t.Run("advertisements", func(t *testing.T) {
		expect(t, provB.Must(t, "GET", "/api/v1/advertisements/prov-b", nil), 404, api.CodeNotFound)
		r := prov.Must(t, "POST", "/api/v1/advertisements", advertisement("prov-a", 10))
		expect(t, r, 200, "")
		var ad api.AdvertisementResponse
		if err := r.Decode(&ad); err != nil || !ad.Accepted || ad.ChunkCount != 10 || ad.NextReportIn != "30s" {
			t.Fatalf("advertise: %s", r.Body)
		}
		expect(t, prov.Must(t, "POST", "/api/v1/advertisements", advertisement("prov-b", 1)), 403, api.CodeForbidden)
		expect(t, prov.Must(t, "POST", "/api/v1/advertisements", `{"clusterId":"prov-b"}`), 400, api.CodeInvalidRequest)
		expect(t, prov.Must(t, "POST", "/api/v1/advertisements", `{"clusterId":"prov-a","x":1}`), 400, api.CodeInvalidRequest)
		expect(t, cons.Must(t, "POST", "/api/v1/advertisements", advertisement("cons-a", 1)), 403, api.CodeForbidden)
		r = prov.Must(t, "GET", "/api/v1/advertisements/prov-a", nil)
		expect(t, r, 200, "")
		var snap api.AdvertisementSnapshot
		if err := r.Decode(&snap); err != nil || snap.ChunkCount != 10 || snap.AvailableChunks != 10 || !snap.Available {
			t.Fatalf("snapshot: %s", r.Body)
		}
		expect(t, provB.Must(t, "GET", "/api/v1/advertisements/prov-a", nil), 403, api.CodeForbidden)
		expect(t, cons.Must(t, "GET", "/api/v1/advertisements/cons-a", nil), 403, api.CodeForbidden)
	})
	t.Run("reserve before heartbeat", func(t *testing.T) {
		expect(t, cons.Must(t, "POST", "/api/v1/reservations", reservation("prov-a")), 412, api.CodePreconditionFailed)
	})
	t.Run("heartbeat and nodegroups", func(t *testing.T) {
		expect(t, cons.Must(t, "POST", "/api/v1/heartbeat", heartbeat("cons-b")), 403, api.CodeForbidden)
		expect(t, cons.Must(t, "POST", "/api/v1/heartbeat", `{"clusterId":"cons-a"}`), 400, api.CodeInvalidRequest)
		expect(t, prov.Must(t, "POST", "/api/v1/heartbeat", heartbeat("prov-a")), 403, api.CodeForbidden)
		r := cons.Must(t, "POST", "/api/v1/heartbeat", heartbeat("cons-a"))
		expect(t, r, 200, "")
		expect(t, consB.Must(t, "POST", "/api/v1/heartbeat", heartbeat("cons-b")), 200, "")
		for _, q := range []string{"", "?all=true"} {
			r = cons.Must(t, "GET", "/api/v1/nodegroups"+q, nil)
			expect(t, r, 200, "")
			var ng api.NodeGroupListResponse
			if err := r.Decode(&ng); err != nil || len(ng.NodeGroups) != 1 || ng.NodeGroups[0].ID != "ng-prov-a-standard" || ng.NodeGroups[0].MaxSize != 10 {
				t.Fatalf("nodegroups%s: %s", q, r.Body)
			}
		}
		expect(t, prov.Must(t, "GET", "/api/v1/nodegroups", nil), 403, api.CodeForbidden)
		expect(t, cons.Must(t, "GET", "/api/v1/nodegroups?all=perhaps", nil), 400, api.CodeInvalidRequest)
	})
	t.Run("reservation lifecycle", func(t *testing.T) {
		expect(t, cons.Must(t, "POST", "/api/v1/reservations", reservation("nope")), 404, api.CodeNotFound)
		gpu := map[string]any{"providerClusterId": "prov-a", "chunkCount": 1, "chunkType": "gpu"}
		expect(t, cons.Must(t, "POST", "/api/v1/reservations", gpu), 404, api.CodeNotFound)
		expect(t, cons.Must(t, "POST", "/api/v1/reservations", reservation("prov-a"), api.HeaderReservationID, "Not_Valid"), 400, api.CodeInvalidRequest)
		expect(t, prov.Must(t, "POST", "/api/v1/reservations", reservation("prov-a")), 403, api.CodeForbidden)
		expect(t, cons.Must(t, "POST", "/api/v1/reservations", map[string]any{"providerClusterId": "prov-a", "chunkCount": 2, "chunkType": "standard"}), 400, api.CodeInvalidRequest)

		r := cons.Must(t, "POST", "/api/v1/reservations", reservation("prov-a"), api.HeaderReservationID, "res-life")
		expect(t, r, 201, "")
		var res api.ReservationResponse
		if err := r.Decode(&res); err != nil || res.ReservationID != "res-life" || res.ConsumerClusterID != "cons-a" || res.ChunkCount != 1 {
			t.Fatalf("reserve: %s", r.Body)
		}
		expect(t, cons.Must(t, "POST", "/api/v1/reservations", reservation("prov-a"), api.HeaderReservationID, "res-life"), 200, "")
		expect(t, cons.Must(t, "POST", "/api/v1/reservations", gpu, api.HeaderReservationID, "res-life"), 409, api.CodeConflict)

		getReservation(t, cons, "res-life")
		getReservation(t, prov, "res-life")
		expect(t, consB.Must(t, "GET", "/api/v1/reservations/res-life", nil), 403, api.CodeForbidden)
		expect(t, cons.Must(t, "GET", "/api/v1/reservations/res-missing", nil), 404, api.CodeNotFound)

		// Provider: GenerateKubeconfig.
		gk := waitInstruction(t, prov, api.KindGenerateKubeconfig, "res-life")
		if gk.ConsumerClusterID != "cons-a" {
			t.Errorf("gk: %+v", gk)
		}
		ok := map[string]any{"status": "Succeeded", "payload": map[string]any{"kind": api.PayloadKubeconfig, "kubeconfig": "apiVersion: v1\nkind: Config\n"}}
		expect(t, cons.Must(t, "POST", "/api/v1/instructions/"+gk.ID+"/result", ok), 403, api.CodeForbidden)
		expect(t, prov.Must(t, "POST", "/api/v1/instructions/nope/result", ok), 404, api.CodeNotFound)
		expect(t, prov.Must(t, "POST", "/api/v1/instructions/"+gk.ID+"/result", `{"status":"Failed"}`), 400, api.CodeInvalidRequest)
		expect(t, prov.Must(t, "POST", "/api/v1/instructions/"+gk.ID+"/result", ok), 200, "")
		expect(t, prov.Must(t, "POST", "/api/v1/instructions/"+gk.ID+"/result", ok), 200, "") // enforced replay

		// Consumer: Peer carries the kubeconfig.
		peer := waitInstruction(t, cons, api.KindPeer, "res-life")
		if !strings.Contains(peer.Kubeconfig, "kind: Config") || peer.ProviderClusterID != "prov-a" {
			t.Errorf("peer: %+v", peer)
		}
		expect(t, cons.Must(t, "POST", "/api/v1/instructions/"+peer.ID+"/result",
			map[string]any{"status": "Succeeded", "payload": map[string]any{"kind": api.PayloadPeer, "virtualNodeNames": []string{"vk-1"}}}), 200, "")
		if got := getReservation(t, cons, "res-life"); got.Status != api.PhasePeered {
			t.Fatalf("after Peer: %s", got.Status)
		}

		// Release.
		expect(t, cons.Must(t, "DELETE", "/api/v1/reservations/res-life?chunks=x", nil), 400, api.CodeInvalidRequest)
		expect(t, cons.Must(t, "DELETE", "/api/v1/reservations/res-life?chunks=3", nil), 501, api.CodeNotImplemented)
		expect(t, consB.Must(t, "DELETE", "/api/v1/reservations/res-life", nil), 403, api.CodeForbidden)
		expect(t, prov.Must(t, "DELETE", "/api/v1/reservations/res-life", nil), 403, api.CodeForbidden)
		expect(t, cons.Must(t, "DELETE", "/api/v1/reservations/res-missing", nil), 404, api.CodeNotFound)
		r = cons.Must(t, "DELETE", "/api/v1/reservations/res-life?chunks=1", nil)
		expect(t, r, 202, "")
		var rel api.ReleaseResponse
		if err := r.Decode(&rel); err != nil || rel.Status != api.PhaseUnpeering {
			t.Fatalf("release: %s", r.Body)
		}
		expect(t, cons.Must(t, "DELETE", "/api/v1/reservations/res-life", nil), 202, "")
		unpeer := waitInstruction(t, cons, api.KindUnpeer, "res-life")
		expect(t, cons.Must(t, "POST", "/api/v1/instructions/"+unpeer.ID+"/result", map[string]any{"status": "Succeeded"}), 200, "")
		if got := getReservation(t, cons, "res-life"); got.Status != api.PhaseReleased {
			t.Fatalf("after Unpeer: %s", got.Status)
		}
	})
	t.Run("release before peering, failed result, sharing", func(t *testing.T) {
		expect(t, cons.Must(t, "GET", "/api/v1/reservations/", nil), 400, api.CodeInvalidRequest)
		expect(t, cons.Must(t, "POST", "/api/v1/reservations", reservation("prov-a"), api.HeaderReservationID, "res-early"), 201, "")
		r := cons.Must(t, "DELETE", "/api/v1/reservations/res-early", nil)
		expect(t, r, 202, "")
		var rel api.ReleaseResponse
		if err := r.Decode(&rel); err != nil || rel.Status != api.PhaseReleased {
			t.Fatalf("release before peering: %s", r.Body)
		}

		expect(t, cons.Must(t, "POST", "/api/v1/reservations", reservation("prov-a"), api.HeaderReservationID, "res-fail"), 201, "")
		gk := waitInstruction(t, prov, api.KindGenerateKubeconfig, "res-fail")
		expect(t, prov.Must(t, "POST", "/api/v1/instructions/"+gk.ID+"/result",
			map[string]any{"status": "Failed", "error": map[string]any{"code": "InternalError", "message": "liqoctl failed"}}), 200, "")
		if got := getReservation(t, cons, "res-fail"); got.Status != api.PhaseFailed {
			t.Fatalf("after a failed GenerateKubeconfig: %s", got.Status)
		}

		ad := advertisement("prov-a", 10)
		ad["sharing"] = map[string]any{"deniedConsumers": []string{"cons-b"}}
		expect(t, prov.Must(t, "POST", "/api/v1/advertisements", ad), 200, "")
		expect(t, consB.Must(t, "POST", "/api/v1/reservations", reservation("prov-a")), 403, api.CodeForbidden)
	})
	t.Run("long-poll wait limits", func(t *testing.T) {
		expect(t, cons.Must(t, "GET", "/api/v1/instructions?wait=61s", nil), 400, api.CodeInvalidRequest)
		expect(t, cons.Must(t, "GET", "/api/v1/instructions?wait=-1s", nil), 400, api.CodeInvalidRequest)
		r := consB.Must(t, "GET", "/api/v1/instructions?wait=10ms", nil)
		expect(t, r, 200, "")
		if string(r.Body) != `{"instructions":[]}` {
			t.Errorf("idle long-poll: %s", r.Body)
		}
	})
	t.Run("stale provider", func(t *testing.T) {
		expect(t, provB.Must(t, "POST", "/api/v1/advertisements", advertisement("prov-b", 2)), 200, "")
		b.clock.Step(2 * time.Minute) // neither provider advertises again
		testpoll.UntilSeen(t, 10*time.Second, "prov-b stale: a reservation on it refused with 503", func() (bool, string) {
			r := cons.Must(t, "POST", "/api/v1/reservations", reservation("prov-b"))
			if r.Status == 503 {
				expect(t, r, 503, api.CodeServiceUnavailable)
				return true, ""
			}
			return false, fmt.Sprintf("%d %s", r.Status, r.Body)
		})
	})
	t.Run("unrouted", func(t *testing.T) {
		expect(t, cons.Must(t, "GET", "/api/v2/whatever", nil), 404, api.CodeNotFound)
		r := cons.Must(t, "PUT", "/api/v1/reservations", "{}")
		expect(t, r, 405, api.CodeMethodNotAllowed)
		if r.Header.Get("Allow") == "" {
			t.Error("405 without Allow")
		}
	})
	t.Run("body limit", func(t *testing.T) {
		big := `{"clusterId":"prov-a","liqoClusterId":"` + strings.Repeat("x", 2<<20) + `"}`
		expect(t, prov.Must(t, "POST", "/api/v1/advertisements", big), 413, api.CodePayloadTooLarge)
		// Over the transport cap fasthttp stops reading: the client gets the
		// JSON 413 or, when the server closed before the client finished
		// writing, a reset — never a 2xx.
		huge := strings.Repeat("x", 5<<20)
		r, err := prov.Do(context.Background(), "POST", "/api/v1/advertisements", huge)
		if err == nil {
			expect(t, r, 413, api.CodePayloadTooLarge)
		} else if !strings.Contains(err.Error(), "reset") && !strings.Contains(err.Error(), "broken pipe") {
			t.Errorf("5 MiB body: %v", err)
		}
	})
}

func TestNoClientCertificateIsRefused(t *testing.T) {
	b := startBroker(t)
	anon := b.client(t, "", "")
	if r, err := anon.Do(context.Background(), "GET", "/healthz", nil); err == nil {
		t.Fatalf("request without a client certificate answered %d %s", r.Status, r.Body)
	}
	// A certificate from another CA is refused too.
	other := resttest.NewPKI(t)
	stranger := other.NewClient(t, b.url, "prov-a", api.RoleProvider, 1)
	stranger.HTTP.Transport.(*http.Transport).TLSClientConfig.RootCAs = b.pki.ClientTLS(t, "", "").RootCAs
	if r, err := stranger.Do(context.Background(), "GET", "/healthz", nil); err == nil {
		t.Fatalf("foreign certificate answered %d", r.Status)
	}
}

func TestLegacyCertificates(t *testing.T) {
	for _, allow := range []bool{false, true} {
		t.Run(fmt.Sprintf("allow=%v", allow), func(t *testing.T) {
			b := startBroker(t, func(c *rest.Config) { c.AllowLegacyCerts = allow })
			prov := b.client(t, "prov-a", "")
			cons := b.client(t, "cons-a", "")
			ad := prov.Must(t, "POST", "/api/v1/advertisements", advertisement("prov-a", 1))
			hb := cons.Must(t, "POST", "/api/v1/heartbeat", heartbeat("cons-a"))
			if !allow {
				expect(t, ad, 403, api.CodeForbidden)
				expect(t, hb, 403, api.CodeForbidden)
				if !strings.Contains(ad.Error().Message, "carries no role") {
					t.Errorf("message does not explain: %s", ad.Body)
				}
				return
			}
			expect(t, ad, 200, "")
			expect(t, hb, 200, "")
			expect(t, cons.Must(t, "POST", "/api/v1/reservations", reservation("prov-a")), 201, "")
		})
	}
}

func TestRateLimitOverMTLS(t *testing.T) {
	b := startBroker(t, func(c *rest.Config) { c.RateLimitBurst, c.RateLimitRPS = 3, 0.01 })
	c := b.client(t, "cons-a", api.RoleConsumer)
	for range 3 {
		expect(t, c.Must(t, "GET", "/healthz", nil), 200, "")
	}
	r := c.Must(t, "GET", "/healthz", nil)
	expect(t, r, 429, api.CodeTooManyRequests)
	if ra := r.Header.Get("Retry-After"); ra == "" || ra == "0" {
		t.Errorf("Retry-After = %q", ra)
	}
	if r.Error().Details["clusterId"] != "cons-a" {
		t.Errorf("details: %s", r.Body)
	}
	// Unknown routes are limited too (the limit runs before routing).
	expect(t, c.Must(t, "GET", "/nope", nil), 429, api.CodeTooManyRequests)
	expect(t, b.client(t, "cons-b", api.RoleConsumer).Must(t, "GET", "/healthz", nil), 200, "")
}

// TestReserveRace: 1 000 concurrent reservation attempts on a provider with
// 10 free chunks: exactly 10 win.
func TestReserveRace(t *testing.T) {
	b := startBroker(t)
	prov := b.client(t, "prov-a", api.RoleProvider)
	expect(t, prov.Must(t, "POST", "/api/v1/advertisements", advertisement("prov-a", 10)), 200, "")
	const consumers = 4
	clients := make([]*resttest.Client, consumers)
	for i := range clients {
		id := fmt.Sprintf("cons-%d", i)
		clients[i] = b.pki.NewClient(t, b.url, id, api.RoleConsumer, 16)
		expect(t, clients[i].Must(t, "POST", "/api/v1/heartbeat", heartbeat(id)), 200, "")
	}
	const attempts = 1000
	var mu sync.Mutex
	counts := map[string]int{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range attempts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			r, err := clients[i%consumers].Do(context.Background(), "POST", "/api/v1/reservations", reservation("prov-a"),
				api.HeaderReservationID, fmt.Sprintf("race-%04d", i))
			key := "transport error"
			if err == nil {
				key = fmt.Sprintf("%d %s", r.Status, r.Error().Code)
			}
			mu.Lock()
			counts[key]++
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	want := map[string]int{"201 ": 10, "409 " + api.CodeInsufficientCapacity: attempts - 10}
	if fmt.Sprint(counts) != fmt.Sprint(want) {
		t.Fatalf("answers %v, want %v", counts, want)
	}
	r := prov.Must(t, "GET", "/api/v1/advertisements/prov-a", nil)
	var snap api.AdvertisementSnapshot
	if err := r.Decode(&snap); err != nil || snap.ReservedChunks != 10 || snap.AvailableChunks != 0 {
		t.Errorf("advertisement after the race: %s", r.Body)
	}
	ov, err := b.svc.Overview(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	live := 0
	for _, res := range ov.Reservations {
		if !res.Status.Terminal() {
			live++
		}
	}
	if live != 10 || ov.Capacity.ReservedChunks != 10 || ov.Capacity.AvailableChunks != 0 {
		t.Errorf("overview: %d live, capacity %+v", live, ov.Capacity)
	}
}
