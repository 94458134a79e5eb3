package attacktest

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/deploy/testpoll"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/pki"
	"github.com/federation-autoscaler/federation-autoscaler/server/rest/resttest"
)

// Issue #11 items 2, 4, 9 and 10 on the broker's API: hostile values are
// refused with a 400 naming the field and nothing is stored; one
// provider's extreme (but allowed) numbers never break another consumer's
// view or wrap a total; every cross-role and cross-tenant call is
// refused; a scale-down is never throttled; HEAD and the transport's own
// refusals answer as documented.

// caller is one identity calling the broker's API from outside.
type caller struct {
	*resttest.Client
	id   string
	role api.Role
}

// caller issues a client certificate straight from the broker's CA, as the
// holder of the CA key (or of an old bundle) could, bypassing `pki join`'s
// registry: the broker itself must tell identities apart.
func (b *broker) caller(t *testing.T, id string, role api.Role) caller {
	t.Helper()
	ca, err := pki.LoadCA(b.pkiDir)
	if err != nil {
		t.Fatal(err)
	}
	p := &resttest.PKI{Dir: b.pkiDir, CA: ca}
	return caller{Client: p.NewClient(t, "https://"+b.api, id, role, 4), id: id, role: role}
}

// expect fails the test unless r has the status and, for an error, the
// wire code.
func expect(t *testing.T, what string, r *resttest.Response, status int, code string) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("%s: %d %s, want %d %s", what, r.Status, r.Body, status, code)
	}
	if code != "" {
		if e := r.Error(); e.Code != code {
			t.Fatalf("%s: code %q (%s), want %q", what, e.Code, e.Message, code)
		}
	}
}

// advertisement is a valid advertisement of provider id; with() changes
// one field.
func advertisement(id string) map[string]any {
	return map[string]any{
		"clusterId": id, "liqoClusterId": "liqo-" + id,
		"resources":  map[string]any{"cpu": "32", "memory": "64Gi"},
		"unitPrices": map[string]any{"cpu": "0.02", "memory": "0.004"},
	}
}

func heartbeat(id string) map[string]any {
	return map[string]any{"clusterId": id, "liqoClusterId": "liqo-" + id}
}

func reservationOn(provider string) map[string]any {
	return map[string]any{"providerClusterId": provider, "chunkCount": 1, "chunkType": "standard"}
}

func with(m map[string]any, key string, v any) map[string]any {
	out := maps.Clone(m)
	out[key] = v
	return out
}

// TestHostileValuesAreRefused: every boundary value class of the issue,
// sent to the real broker, is answered 400 InvalidRequest whose details
// name the field (and the message the field, the value and the range), and
// none of it is stored.
func TestHostileValuesAreRefused(t *testing.T) {
	b := startBroker(t, 1024)
	prov, cons := b.caller(t, "p-bad", api.RoleProvider), b.caller(t, "c-bad", api.RoleConsumer)
	ad, hb := advertisement("p-bad"), heartbeat("c-bad")
	huge := "liqo-\x00" + strings.Repeat("x", 1<<20-16)
	tests := []struct {
		name   string
		caller caller
		path   string
		body   any
		header []string
		field  string
	}{
		{"unit price near float64 max", prov, "/api/v1/advertisements", with(ad, "unitPrices", map[string]any{"cpu": "9e307"}), nil, "unitPrices[cpu]"},
		{"unit price NaN", prov, "/api/v1/advertisements", with(ad, "unitPrices", map[string]any{"memory": "NaN"}), nil, "unitPrices[memory]"},
		{"unit price above the maximum", prov, "/api/v1/advertisements", with(ad, "unitPrices", map[string]any{"cpu": "1000001"}), nil, "unitPrices[cpu]"},
		{"negative unit price", prov, "/api/v1/advertisements", with(ad, "unitPrices", map[string]any{"cpu": "-1"}), nil, "unitPrices[cpu]"},
		{"carbon intensity near float64 max", prov, "/api/v1/advertisements", with(ad, "carbonIntensity", 9e307), nil, "carbonIntensity"},
		{"carbon forecast value negative", prov, "/api/v1/advertisements", with(ad, "carbonForecast", []float64{100, -5}), nil, "carbonForecast[1]"},
		{"quantity 1e30 cpu", prov, "/api/v1/advertisements", with(ad, "resources", map[string]any{"cpu": "1e30", "memory": "1Gi"}), nil, "resources[cpu]"},
		{"quantity text of 1e-999999999", prov, "/api/v1/advertisements", with(ad, "resources", map[string]any{"cpu": "1e-999999999"}), nil, "resources[cpu]"},
		{"negative capacityFixed", prov, "/api/v1/advertisements", with(ad, "capacityFixed", map[string]any{"cpu": "-2"}), nil, "capacityFixed[cpu]"},
		{"negative capacityScalePercent", prov, "/api/v1/advertisements", with(ad, "capacityScalePercent", map[string]any{"cpu": -5}), nil, "capacityScalePercent[cpu]"},
		{"resource named ../x", prov, "/api/v1/advertisements", with(ad, "resources", map[string]any{"cpu": "4", "../x": "1"}), nil, "resources[../x]"},
		{"resource with an empty name", prov, "/api/v1/advertisements", with(ad, "unitPrices", map[string]any{"": "1"}), nil, "unitPrices[]"},
		{"liqoClusterId of 1 MiB with NUL bytes", prov, "/api/v1/advertisements", with(ad, "liqoClusterId", huge[:1<<19]), nil, "liqoClusterId"},
		{"weight near float64 max", cons, "/api/v1/heartbeat", with(hb, "placement", map[string]any{"type": "Weighted", "weights": map[string]any{"price": 9e307}}), nil, "placement.weights.price"},
		{"negative weight", cons, "/api/v1/heartbeat", with(hb, "placement", map[string]any{"type": "Weighted", "weights": map[string]any{"carbon": -1}}), nil, "placement.weights.carbon"},
		{"chosenProvider ../p1", cons, "/api/v1/heartbeat", with(hb, "chosenProvider", "../p1"), nil, "chosenProvider"},
		{"10 001 heartbeat ids", cons, "/api/v1/heartbeat", with(hb, "reservations", slices.Repeat([]string{"res-1"}, api.MaxHeartbeatReservations+1)), nil, "reservations"},
		{"10 000 namespaces", cons, "/api/v1/reservations", with(reservationOn("p-bad"), "namespaces", slices.Repeat([]string{"default"}, 10000)), nil, "namespaces"},
		{"provider ../p1", cons, "/api/v1/reservations", reservationOn("../p1"), nil, "providerClusterId"},
		{"reservation id with NUL", cons, "/api/v1/reservations", reservationOn("p-bad"), []string{api.HeaderReservationID, "res-%00"}, api.HeaderReservationID},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.caller.Must(t, "POST", tc.path, tc.body, tc.header...)
			expect(t, tc.name, r, http.StatusBadRequest, api.CodeInvalidRequest)
			e := r.Error()
			if e.Details["field"] != tc.field || e.Details["value"] == "" || e.Details["allowed"] == "" {
				t.Errorf("details %v, want field %q with the value and what is allowed", e.Details, tc.field)
			}
			if !strings.Contains(e.Message, tc.field) {
				t.Errorf("message %q does not name the field %q", e.Message, tc.field)
			}
			if len(e.Message) > 1000 {
				t.Errorf("a message of %d bytes echoes the input", len(e.Message))
			}
		})
	}
	// Nothing was stored: no advertisement, no consumer, no reservation.
	expect(t, "the refused provider's advertisement", prov.Must(t, "GET", "/api/v1/advertisements/p-bad", nil), http.StatusNotFound, api.CodeNotFound)
	ov := overview(t, b)
	if len(ov.Advertisements) != 0 || len(ov.Consumers) != 0 || len(ov.Reservations) != 0 {
		t.Errorf("refused requests were stored: %d advertisements, %d consumers, %d reservations", len(ov.Advertisements), len(ov.Consumers), len(ov.Reservations))
	}
}

// overview reads the dashboard's overview JSON.
func overview(t *testing.T, b *broker) api.Overview {
	t.Helper()
	resp, err := scraper.Get("http://" + b.dashboard + "/api/v1/overview")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ov api.Overview
	if err := json.NewDecoder(resp.Body).Decode(&ov); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("overview: %d %v", resp.StatusCode, err)
	}
	return ov
}

// TestExtremeProvidersBreakNoView: two providers advertising the largest
// amounts and prices the limits allow never make a total wrap or a
// consumer's view fail (it used to answer 500 for every Price consumer
// once one price overflowed to +Inf).
func TestExtremeProvidersBreakNoView(t *testing.T) {
	// Ten providers at the largest amounts hold more chunks together than
	// an int32 counts.
	const providers = 10
	b := startBroker(t, 1024)
	maxQ, maxP := fmt.Sprint(int64(api.MaxQuantity)), fmt.Sprint(api.MaxUnitPrice)
	var sum int64
	for i := range providers {
		p := b.caller(t, fmt.Sprintf("p-huge-%d", i), api.RoleProvider)
		body := with(with(advertisement(p.id), "resources", map[string]any{"cpu": maxQ, "memory": maxQ}), "unitPrices", map[string]any{"cpu": maxP, "memory": maxP})
		r := p.Must(t, "POST", "/api/v1/advertisements", body)
		expect(t, p.id+" advertising the maxima", r, http.StatusOK, "")
		var ad api.AdvertisementResponse
		if err := r.Decode(&ad); err != nil || ad.ChunkCount <= 0 {
			t.Fatalf("%s: %v, chunkCount %d", p.id, err, ad.ChunkCount)
		}
		sum += int64(ad.ChunkCount)
	}
	if sum <= math.MaxInt32 {
		t.Fatalf("the providers hold %d chunks together: the test needs more than an int32 holds", sum)
	}
	ov := overview(t, b)
	if c := ov.Capacity; c.TotalChunks != math.MaxInt32 || c.AvailableChunks != math.MaxInt32 || c.ReservedChunks != 0 {
		t.Errorf("overview totals %+v of %d chunks: want the int32 maximum (saturated), never a wrapped negative", c, sum)
	}
	for _, policy := range []api.PlacementType{api.PlacementPrice, api.PlacementStandard, api.PlacementWeighted} {
		c := b.caller(t, "c-"+strings.ToLower(string(policy)), api.RoleConsumer)
		hb := with(heartbeat(c.id), "placement", map[string]any{"type": policy})
		if policy == api.PlacementWeighted {
			hb = with(hb, "placement", map[string]any{"type": policy, "weights": map[string]any{"price": api.MaxWeight, "freeCapacity": api.MaxWeight}})
		}
		expect(t, string(policy)+" heartbeat", c.Must(t, "POST", "/api/v1/heartbeat", hb), http.StatusOK, "")
		r := c.Must(t, "GET", "/api/v1/nodegroups?all=true", nil)
		expect(t, string(policy)+" consumer's node groups", r, http.StatusOK, "")
		var view api.NodeGroupListResponse
		if err := r.Decode(&view); err != nil || len(view.NodeGroups) != providers {
			t.Fatalf("%s consumer's view: %v, %d groups, want one per provider: %s", policy, err, len(view.NodeGroups), r.Body)
		}
	}
}

// TestCrossRoleAndCrossTenantCallsAreRefused: a caller is its
// certificate's CN and role. A consumer never reads, releases or reports on
// another consumer's reservation or instructions, and a provider
// certificate named like a consumer (issued from the CA, bypassing `pki
// join`) gets nothing of that consumer's: no Peer instruction (which
// inlines the peering kubeconfig), no result.
func TestCrossRoleAndCrossTenantCallsAreRefused(t *testing.T) {
	b := startBroker(t, 1024)
	p1 := b.caller(t, "p1", api.RoleProvider)
	c1, c2 := b.caller(t, "c1", api.RoleConsumer), b.caller(t, "c2", api.RoleConsumer)
	fakeC1 := b.caller(t, "c1", api.RoleProvider)
	fakeP1 := b.caller(t, "p1", api.RoleConsumer)

	// A live reservation of c1 on p1, with its Peer instruction waiting.
	expect(t, "p1 advertises", p1.Must(t, "POST", "/api/v1/advertisements", advertisement("p1")), http.StatusOK, "")
	for _, c := range []caller{c1, c2} {
		expect(t, c.id+" heartbeat", c.Must(t, "POST", "/api/v1/heartbeat", heartbeat(c.id)), http.StatusOK, "")
	}
	expect(t, "c1 reserves", c1.Must(t, "POST", "/api/v1/reservations", reservationOn("p1"), api.HeaderReservationID, "res-c1"), http.StatusCreated, "")
	gk := awaitInstruction(t, p1, api.KindGenerateKubeconfig)
	expect(t, "p1 answers "+gk.ID, p1.Must(t, "POST", "/api/v1/instructions/"+gk.ID+"/result", map[string]any{
		"status": "Succeeded", "payload": map[string]any{"kind": api.PayloadKubeconfig, "kubeconfig": "apiVersion: v1\nkind: Config\n# secret peering credentials\n"},
	}), http.StatusOK, "")
	peer := awaitInstruction(t, c1, api.KindPeer)

	result := map[string]any{"status": "Succeeded", "payload": map[string]any{"kind": api.PayloadPeer, "virtualNodeNames": []string{"stolen"}}}
	tests := []struct {
		name         string
		caller       caller
		method, path string
		body         any
		status       int
		code         string
	}{
		// Cross-tenant: consumer c2 on consumer c1's things.
		{"c2 reads c1's reservation", c2, "GET", "/api/v1/reservations/res-c1", nil, http.StatusForbidden, api.CodeForbidden},
		{"c2 releases c1's reservation", c2, "DELETE", "/api/v1/reservations/res-c1", nil, http.StatusForbidden, api.CodeForbidden},
		{"c2 reports c1's Peer", c2, "POST", "/api/v1/instructions/" + peer.ID + "/result", result, http.StatusForbidden, api.CodeForbidden},
		{"c2 heartbeats as c1", c2, "POST", "/api/v1/heartbeat", heartbeat("c1"), http.StatusForbidden, api.CodeForbidden},
		// A provider certificate named c1.
		{"provider-role c1 reads c1's reservation", fakeC1, "GET", "/api/v1/reservations/res-c1", nil, http.StatusForbidden, api.CodeForbidden},
		{"provider-role c1 reports c1's Peer", fakeC1, "POST", "/api/v1/instructions/" + peer.ID + "/result", result, http.StatusForbidden, api.CodeForbidden},
		{"provider-role c1 heartbeats", fakeC1, "POST", "/api/v1/heartbeat", heartbeat("c1"), http.StatusForbidden, api.CodeForbidden},
		{"provider-role c1 lists node groups", fakeC1, "GET", "/api/v1/nodegroups", nil, http.StatusForbidden, api.CodeForbidden},
		{"provider-role c1 reserves", fakeC1, "POST", "/api/v1/reservations", reservationOn("p1"), http.StatusForbidden, api.CodeForbidden},
		{"provider-role c1 releases c1's reservation", fakeC1, "DELETE", "/api/v1/reservations/res-c1", nil, http.StatusForbidden, api.CodeForbidden},
		// Provider p1 on consumer routes, and on the consumer's instruction.
		{"p1 reports c1's Peer", p1, "POST", "/api/v1/instructions/" + peer.ID + "/result", result, http.StatusForbidden, api.CodeForbidden},
		{"p1 heartbeats", p1, "POST", "/api/v1/heartbeat", heartbeat("p1"), http.StatusForbidden, api.CodeForbidden},
		{"p1 releases the reservation it serves", p1, "DELETE", "/api/v1/reservations/res-c1", nil, http.StatusForbidden, api.CodeForbidden},
		// Consumers on provider routes, and a consumer certificate named p1.
		{"c1 advertises", c1, "POST", "/api/v1/advertisements", advertisement("c1"), http.StatusForbidden, api.CodeForbidden},
		{"c1 reads p1's advertisement", c1, "GET", "/api/v1/advertisements/p1", nil, http.StatusForbidden, api.CodeForbidden},
		{"consumer-role p1 advertises as p1", fakeP1, "POST", "/api/v1/advertisements", advertisement("p1"), http.StatusForbidden, api.CodeForbidden},
		{"consumer-role p1 reads p1's advertisement", fakeP1, "GET", "/api/v1/advertisements/p1", nil, http.StatusForbidden, api.CodeForbidden},
		{"consumer-role p1 reads the reservation p1 serves", fakeP1, "GET", "/api/v1/reservations/res-c1", nil, http.StatusForbidden, api.CodeForbidden},
		{"c1 reports p1's GenerateKubeconfig", c1, "POST", "/api/v1/instructions/" + gk.ID + "/result", map[string]any{
			"status": "Succeeded", "payload": map[string]any{"kind": api.PayloadKubeconfig, "kubeconfig": "evil"},
		}, http.StatusForbidden, api.CodeForbidden},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			expect(t, tc.name, tc.caller.Must(t, tc.method, tc.path, tc.body), tc.status, tc.code)
		})
	}
	// Nobody but c1 is given c1's Peer (and its kubeconfig).
	for _, c := range []caller{c2, fakeC1, fakeP1, p1} {
		for _, in := range instructions(t, c) {
			if in.Kind == api.KindPeer || in.Kubeconfig != "" {
				t.Errorf("%s (%s certificate) was given %s of %s", c.id, c.role, in.ID, in.ReservationID)
			}
		}
	}
	// The owners still can: the refusals changed nothing.
	expect(t, "c1 reads its reservation", c1.Must(t, "GET", "/api/v1/reservations/res-c1", nil), http.StatusOK, "")
	expect(t, "p1 reads the reservation it serves", p1.Must(t, "GET", "/api/v1/reservations/res-c1", nil), http.StatusOK, "")
	if got := awaitInstruction(t, c1, api.KindPeer); got.ID != peer.ID || got.Kubeconfig == "" {
		t.Errorf("c1's Peer after the attacks: %+v", got)
	}
	expect(t, "c1 reports its Peer", c1.Must(t, "POST", "/api/v1/instructions/"+peer.ID+"/result", result), http.StatusOK, "")
}

// instructions lists c's pending instructions.
func instructions(t *testing.T, c caller) []api.InstructionView {
	t.Helper()
	r := c.Must(t, "GET", "/api/v1/instructions", nil)
	var list api.InstructionListResponse
	if r.Status != http.StatusOK || r.Decode(&list) != nil {
		t.Fatalf("%s: GET /api/v1/instructions: %d %s", c.id, r.Status, r.Body)
	}
	return list.Instructions
}

// awaitInstruction long-polls until c has an instruction of kind.
func awaitInstruction(t *testing.T, c caller, kind api.InstructionKind) api.InstructionView {
	t.Helper()
	var found api.InstructionView
	testpoll.UntilNil(t, patience, fmt.Sprintf("a %s instruction for %s", kind, c.id), func() error {
		r := c.Must(t, "GET", "/api/v1/instructions?wait=5s", nil)
		var list api.InstructionListResponse
		if r.Status != http.StatusOK || r.Decode(&list) != nil {
			return fmt.Errorf("%d %s", r.Status, r.Body)
		}
		for _, in := range list.Instructions {
			if in.Kind == kind {
				found = in
				return nil
			}
		}
		return fmt.Errorf("%d other instructions", len(list.Instructions))
	})
	return found
}

// TestScaleDownIsNeverThrottled: with the default rate limits, a consumer
// whose general bucket is empty releases 14 nodes at once (a Cluster
// Autoscaler scale-down) and gets no 429: releases have their own bucket.
func TestScaleDownIsNeverThrottled(t *testing.T) {
	const nodes = 14
	// The defaults again (startBroker raises them for the healthy clients).
	b := startBroker(t, 1024, "--rate-limit-burst", "10", "--rate-limit-rps", "5")
	p1, c1 := b.caller(t, "p1", api.RoleProvider), b.caller(t, "c1", api.RoleConsumer)
	expect(t, "p1 advertises", p1.Must(t, "POST", "/api/v1/advertisements", advertisement("p1")), http.StatusOK, "")
	expect(t, "c1 heartbeat", c1.Must(t, "POST", "/api/v1/heartbeat", heartbeat("c1")), http.StatusOK, "")
	for i := range nodes {
		id := fmt.Sprintf("res-%02d", i)
		testpoll.UntilNil(t, patience, "reserving "+id, func() error {
			r := c1.Must(t, "POST", "/api/v1/reservations", reservationOn("p1"), api.HeaderReservationID, id)
			if r.Status == http.StatusTooManyRequests {
				return fmt.Errorf("429, Retry-After %s", r.Header.Get("Retry-After")) // creates are paced: not what is tested
			}
			if r.Status != http.StatusCreated {
				t.Fatalf("reserve %s: %d %s", id, r.Status, r.Body)
			}
			return nil
		})
	}
	// Empty the general bucket (an agent's node-group lists).
	throttled := false
	for range 30 {
		if c1.Must(t, "GET", "/api/v1/nodegroups", nil).Status == http.StatusTooManyRequests {
			throttled = true
			break
		}
	}
	if !throttled {
		t.Fatal("30 node-group lists at once were never throttled: the default rate limit is not in force")
	}
	statuses := make([]int, nodes)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range nodes {
		wg.Go(func() {
			statuses[i] = c1.Must(t, "DELETE", fmt.Sprintf("/api/v1/reservations/res-%02d", i), nil).Status
		})
	}
	wg.Wait()
	took := time.Since(start)
	for i, st := range statuses {
		if st != http.StatusAccepted {
			t.Errorf("release of res-%02d: %d, want 202 (statuses: %v)", i, st, statuses)
		}
	}
	t.Logf("%d releases at once with an empty general bucket: all answered in %s", nodes, took.Round(time.Millisecond))
}

// TestTransportAnswers: HEAD is answered like GET on API routes, and the
// transport's own refusals carry their own codes on both listeners.
func TestTransportAnswers(t *testing.T) {
	b := startBroker(t, 1024)
	c1 := b.caller(t, "c1", api.RoleConsumer)
	for _, path := range []string{"/healthz", "/api/v1/nodegroups"} {
		r := c1.Must(t, "HEAD", path, nil)
		if r.Status != http.StatusOK || len(r.Body) != 0 {
			t.Errorf("HEAD %s: %d with %d body bytes, want 200 and no body", path, r.Status, len(r.Body))
		}
	}
	big := strings.Repeat("a", 8<<10)
	// Each oversized request goes in one write: with the transport's
	// default 4 KiB write buffer a listener could read the first 4 KiB,
	// answer 431 and close while the rest was still being written, and the
	// client saw only its own broken pipe (seen on both listeners in
	// fresh-clone runs). On the API the 8 KiB fit one TLS record.
	apiTr := c1.HTTP.Transport.(*http.Transport).Clone()
	apiTr.WriteBufferSize, apiTr.DisableKeepAlives = 64<<10, true
	apiOneWrite := &resttest.Client{BaseURL: c1.BaseURL, HTTP: &http.Client{Timeout: 30 * time.Second, Transport: apiTr}}
	expect(t, "API: 8 KiB of headers", apiOneWrite.Must(t, "GET", "/healthz", nil, "X-Filler", big), http.StatusRequestHeaderFieldsTooLarge, api.CodeRequestHeadersTooLarge)
	req, _ := http.NewRequest("GET", "http://"+b.dashboard+"/healthz", nil)
	req.Header.Set("X-Filler", big)
	oneWrite := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{WriteBufferSize: 64 << 10, DisableKeepAlives: true}}
	resp, err := oneWrite.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e api.ErrorResponse
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil || resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge || e.Code != api.CodeRequestHeadersTooLarge {
		t.Errorf("dashboard: 8 KiB of headers: %d %+v %v, want 431 %s", resp.StatusCode, e, err, api.CodeRequestHeadersTooLarge)
	}
}
