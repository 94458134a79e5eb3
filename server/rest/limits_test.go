package rest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// with returns a copy of base with the top-level key set (a nested key is
// written "parent.child").
func with(base map[string]any, key string, v any) map[string]any {
	out := map[string]any{}
	for k, x := range base {
		out[k] = x
	}
	if parent, child, ok := strings.Cut(key, "."); ok {
		inner := map[string]any{}
		if m, ok := out[parent].(map[string]any); ok {
			for k, x := range m {
				inner[k] = x
			}
		}
		inner[child] = v
		out[parent] = inner
		return out
	}
	out[key] = v
	return out
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// TestValueLimitsAtTheBroker: every refused value gets 400 InvalidRequest
// whose message names the field, the value and the allowed range, with
// details {field, value, allowed}; nothing is stored (a refused
// advertisement leaves no provider behind).
func TestValueLimitsAtTheBroker(t *testing.T) {
	b := startBroker(t)
	prov := b.client(t, "p1", api.RoleProvider)
	cons := b.client(t, "c1", api.RoleConsumer)
	ad := advertisement("p1", 4)
	hb := heartbeat("c1")
	nul := "liqo\x00" + strings.Repeat("x", 100<<10)
	tests := []struct {
		name   string
		path   string
		body   any
		raw    string // sent as is when set
		field  string // details.field; "" for decode errors
		inMsg  []string
		header []string
	}{
		// Advertisements: prices, quantities, carbon, names, ids, lists.
		{name: "price near float64 max", path: "/api/v1/advertisements", body: with(ad, "unitPrices", map[string]string{"cpu": "9e307"}),
			field: "unitPrices[cpu]", inMsg: []string{"90e306", "from 0 to 1000000"}},
		{name: "price beyond float64", path: "/api/v1/advertisements", body: with(ad, "unitPrices", map[string]string{"memory": "1e400"}),
			field: "unitPrices[memory]", inMsg: []string{"from 0 to 1000000"}},
		{name: "negative price", path: "/api/v1/advertisements", body: with(ad, "unitPrices", map[string]string{"cpu": "-1m"}),
			field: "unitPrices[cpu]"},
		{name: "exponent that takes minutes to parse", path: "/api/v1/advertisements", body: with(ad, "resources", map[string]string{"cpu": "1e-999999999"}),
			field: "resources[cpu]", inMsg: []string{"decimal exponent from -999 to 999"}},
		{name: "exponent that takes minutes to compare, as a JSON number", path: "/api/v1/advertisements",
			raw: `{"clusterId":"p1","liqoClusterId":"liqo-p1","resources":{"cpu":"4"},"unitPrices":{"cpu":1e999999999}}`, field: "unitPrices[cpu]"},
		{name: "quantity text of 100 bytes", path: "/api/v1/advertisements", body: with(ad, "capacityFixed", map[string]string{"cpu": strings.Repeat("1", 100)}),
			field: "capacityFixed[cpu]"},
		{name: "1e30 CPU", path: "/api/v1/advertisements", body: with(ad, "resources", map[string]string{"cpu": "1e30", "memory": "4Gi"}),
			field: "resources[cpu]", inMsg: []string{"1e30", "from 0 to 1E"}},
		{name: "resource name ../x", path: "/api/v1/advertisements", body: with(ad, "resources", map[string]string{"cpu": "4", "../x": "1"}),
			field: "resources[../x]", inMsg: []string{"a resource name"}},
		{name: "empty resource name", path: "/api/v1/advertisements", body: with(ad, "resources", map[string]string{"": "1"}),
			field: "resources[]"},
		{name: "negative capacityFixed", path: "/api/v1/advertisements", body: with(ad, "capacityFixed", map[string]string{"cpu": "-2"}),
			field: "capacityFixed[cpu]"},
		{name: "negative capacityScalePercent", path: "/api/v1/advertisements", body: with(ad, "capacityScalePercent", map[string]int{"cpu": -5}),
			field: "capacityScalePercent[cpu]", inMsg: []string{"-5", "from 0 to 100"}},
		{name: "capacityScalePercent over 100", path: "/api/v1/advertisements", body: with(ad, "capacityScalePercent", map[string]int{"memory": 101}),
			field: "capacityScalePercent[memory]"},
		{name: "huge carbon", path: "/api/v1/advertisements", body: with(ad, "carbonIntensity", 9e307),
			field: "carbonIntensity", inMsg: []string{"9e+307", "from 0 to 100000"}},
		{name: "carbon beyond float64 (JSON cannot decode it)", path: "/api/v1/advertisements", raw: `{"clusterId":"p1","liqoClusterId":"liqo-p1","resources":{"cpu":"4"},"carbonIntensity":1e309}`,
			inMsg: []string{"decode body", "carbonIntensity"}},
		{name: "unknown field of 100 KiB (not echoed in full)", path: "/api/v1/advertisements", raw: `{"` + strings.Repeat("x", 100<<10) + `":1}`,
			inMsg: []string{"decode body: json: unknown field", "…"}},
		{name: "huge forecast value", path: "/api/v1/advertisements", body: with(ad, "carbonForecast", []float64{10, 1e300}),
			field: "carbonForecast[1]"},
		{name: "forecast too long", path: "/api/v1/advertisements", body: with(ad, "carbonForecast", make([]float64, api.MaxCarbonForecast+1)),
			field: "carbonForecast", inMsg: []string{"169 entries", "at most 168"}},
		{name: "liqoClusterId of 100 KiB with a NUL byte", path: "/api/v1/advertisements", body: with(ad, "liqoClusterId", nul),
			field: "liqoClusterId", inMsg: []string{`"liqo\x00xxx`, "bytes)", "DNS-1123 label"}},
		{name: "liqoClusterId of invalid UTF-8", path: "/api/v1/advertisements",
			raw: "{\"clusterId\":\"p1\",\"liqoClusterId\":\"liqo-\xff\xfe\",\"resources\":{\"cpu\":\"4\"}}", field: "liqoClusterId"},
		{name: "liqoClusterId not a DNS label", path: "/api/v1/advertisements", body: with(ad, "liqoClusterId", "Liqo_P1"), field: "liqoClusterId"},
		{name: "latitude out of range", path: "/api/v1/advertisements", body: with(ad, "topology", map[string]any{"latitude": 91}),
			field: "topology.latitude", inMsg: []string{"from -90 to 90"}},
		{name: "city with a NUL byte", path: "/api/v1/advertisements", body: with(ad, "topology", map[string]any{"city": "Par\x00is"}),
			field: "topology.city"},
		{name: "probeEndpoint too long", path: "/api/v1/advertisements", body: with(ad, "probeEndpoint", strings.Repeat("a", 300)),
			field: "probeEndpoint"},
		{name: "allowed consumer ../p1", path: "/api/v1/advertisements", body: with(ad, "sharing", map[string]any{"allowedConsumers": []string{"c1", "../p1"}}),
			field: "sharing.allowedConsumers[1]"},
		{name: "too many denied consumers", path: "/api/v1/advertisements", body: with(ad, "sharing", map[string]any{"deniedConsumers": repeat("c2", api.MaxSharingConsumers+1)}),
			field: "sharing.deniedConsumers"},
		// Heartbeats: weights, latencies, ids, coordinates, text.
		{name: "weight near float64 max", path: "/api/v1/heartbeat", body: with(hb, "placement", map[string]any{"type": "Weighted", "weights": map[string]any{"price": 9e307}}),
			field: "placement.weights.price", inMsg: []string{"9e+307", "from 0 to 1000"}},
		{name: "latency shortlist past its maximum", path: "/api/v1/heartbeat", body: with(hb, "placement", map[string]any{"type": "Latency", "latencyCandidates": 17}),
			field: "placement.latencyCandidates", inMsg: []string{"17", "from 1 to 16"}},
		{name: "weight above the maximum", path: "/api/v1/heartbeat", body: with(hb, "placement", map[string]any{"type": "Weighted", "weights": map[string]any{"freeCapacity": 1000.5}}),
			field: "placement.weights.freeCapacity"},
		{name: "negative weight", path: "/api/v1/heartbeat", body: with(hb, "placement", map[string]any{"type": "Weighted", "weights": map[string]any{"carbon": -1}}),
			field: "placement.weights.carbon"},
		{name: "chosenProvider ../p1", path: "/api/v1/heartbeat", body: with(hb, "chosenProvider", "../p1"), field: "chosenProvider"},
		{name: "heartbeat liqoClusterId with NUL", path: "/api/v1/heartbeat", body: with(hb, "liqoClusterId", "c\x001"), field: "liqoClusterId"},
		{name: "huge latency", path: "/api/v1/heartbeat", body: with(hb, "measuredLatencies", map[string]float64{"p1": 9e307}),
			field: "measuredLatencies[p1]"},
		{name: "latency keyed by a bad id", path: "/api/v1/heartbeat", body: with(hb, "measuredLatencies", map[string]float64{"../x": 1}),
			field: "measuredLatencies[../x] key"},
		{name: "longitude out of range", path: "/api/v1/heartbeat", body: with(hb, "longitude", 180.5), field: "longitude"},
		{name: "region with a control character", path: "/api/v1/heartbeat", body: with(hb, "region", "eu\nwest"), field: "region"},
		// Reservations: namespaces, provider id.
		{name: "10 000 namespaces", path: "/api/v1/reservations", body: with(reservation("p1"), "namespaces", repeat("default", 10000)),
			field: "namespaces", inMsg: []string{"10000 entries", "at most 64"}},
		{name: "namespace ../x", path: "/api/v1/reservations", body: with(reservation("p1"), "namespaces", []string{"default", "../x"}),
			field: "namespaces[1]"},
		{name: "provider ../p1", path: "/api/v1/reservations", body: reservation("../p1"), field: "providerClusterId"},
		{name: "reservation id with NUL", path: "/api/v1/reservations", body: reservation("p1"), header: []string{api.HeaderReservationID, "res-%00"},
			field: api.HeaderReservationID},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := prov
			if !strings.HasPrefix(tc.path, "/api/v1/advertisements") {
				c = cons
			}
			body := any(tc.body)
			if tc.raw != "" {
				body = tc.raw
			}
			r := c.Must(t, "POST", tc.path, body, tc.header...)
			expect(t, r, 400, api.CodeInvalidRequest)
			e := r.Error()
			if tc.field != "" {
				if e.Details["field"] != tc.field || e.Details["value"] == "" || e.Details["allowed"] == "" {
					t.Errorf("details %v, want field %q with value and allowed", e.Details, tc.field)
				}
				if !strings.HasPrefix(e.Message, tc.field+" = ") || !strings.Contains(e.Message, ": must be ") {
					t.Errorf("message %q does not name the field %q, the value and the range", e.Message, tc.field)
				}
			}
			for _, m := range tc.inMsg {
				if !strings.Contains(e.Message, m) {
					t.Errorf("message %q lacks %q", e.Message, m)
				}
			}
			if len(e.Message) > 1000 {
				t.Errorf("message of %d bytes echoes the input", len(e.Message))
			}
		})
	}
	// Nothing was stored: p1 never advertised, c1's heartbeats were refused.
	if r := prov.Must(t, "GET", "/api/v1/advertisements/p1", nil); r.Status != 404 {
		t.Errorf("a refused advertisement was stored: %d %s", r.Status, r.Body)
	}
	ov, err := b.svc.Overview(context.Background())
	if err != nil || len(ov.Consumers) != 0 || len(ov.Reservations) != 0 {
		t.Errorf("refused requests were stored: %+v %v", ov, err)
	}
}

// TestLimitValuesCannotBreakAnotherConsumersView: providers advertising the
// largest accepted values (prices, quantities, carbon, a week of forecast,
// coordinates at the poles) next to a sane provider leave every other
// consumer's GET /api/v1/nodegroups a 200 with finite numbers under every
// policy, including the largest weights; the cheap provider still wins Price.
// The overview totals saturate instead of wrapping: ten providers with 1E of
// memory each hold more standard chunks (10 × 232 830 643) than int32
// counts.
func TestLimitValuesCannotBreakAnotherConsumersView(t *testing.T) {
	b := startBroker(t)
	maxQ, maxP := api.MaxQuantityValue(), api.MaxUnitPriceValue()
	week := make([]float64, api.MaxCarbonForecast)
	for i := range week {
		week[i] = api.MaxCarbonIntensity
	}
	for i := range 10 {
		id := fmt.Sprintf("greedy-%d", i)
		ad := advertisement(id, 1)
		ad["resources"] = map[string]string{"cpu": maxQ.String(), "memory": maxQ.String()}
		ad["unitPrices"] = map[string]string{"cpu": maxP.String(), "memory": maxP.String()}
		ad["capacityFixed"] = map[string]string{"cpu": maxQ.String()}
		ad["carbonIntensity"] = float64(api.MaxCarbonIntensity)
		ad["carbonForecast"] = week
		ad["topology"] = map[string]any{"latitude": 90, "longitude": 180}
		expect(t, b.client(t, id, api.RoleProvider).Must(t, "POST", "/api/v1/advertisements", ad), 200, "")
	}
	fair := advertisement("fair", 4)
	fair["unitPrices"] = map[string]string{"cpu": "0.01", "memory": "0.001"}
	fair["carbonIntensity"] = 50.0
	fair["topology"] = map[string]any{"latitude": 48.86, "longitude": 2.35}
	expect(t, b.client(t, "fair", api.RoleProvider).Must(t, "POST", "/api/v1/advertisements", fair), 200, "")

	top := float64(api.MaxWeight)
	london := b.client(t, "london", api.RoleConsumer)
	for _, pl := range []map[string]any{
		{"type": "Price"}, {"type": "Eco"}, {"type": "Latency"}, {"type": "Standard"},
		{"type": "Weighted", "weights": map[string]any{"price": top, "carbon": top, "distance": top, "freeCapacity": top}},
	} {
		t.Run(pl["type"].(string), func(t *testing.T) {
			hb := heartbeat("london")
			hb["placement"] = pl
			hb["latitude"], hb["longitude"] = 51.5, -0.13
			expect(t, london.Must(t, "POST", "/api/v1/heartbeat", hb), 200, "")
			for _, path := range []string{"/api/v1/nodegroups", "/api/v1/nodegroups?all=true"} {
				r := london.Must(t, "GET", path, nil)
				expect(t, r, 200, "")
				var view api.NodeGroupListResponse
				if err := r.Decode(&view); err != nil {
					t.Fatal(err)
				}
				for _, g := range view.NodeGroups {
					if m := g.PlacementMetric; m != nil && (math.IsNaN(*m) || math.IsInf(*m, 0)) {
						t.Errorf("%s: metric %v", g.ID, *m)
					}
				}
				if pl["type"] == "Price" && path == "/api/v1/nodegroups" {
					if got := growable(t, view); len(got) != 1 || got[0] != "fair" {
						t.Errorf("Price winner %v, want [fair]", got)
					}
				}
			}
		})
	}
	ov, err := b.svc.Overview(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := json.Marshal(ov); err != nil {
		t.Fatalf("the overview does not encode: %v", err)
	}
	c := ov.Capacity
	if c.TotalChunks != math.MaxInt32 || c.AvailableChunks != math.MaxInt32 || c.ByChunkType[api.ChunkStandard].TotalChunks != math.MaxInt32 {
		t.Errorf("capacity %+v: totals must saturate at %d, not wrap", c, math.MaxInt32)
	}
	for _, a := range ov.Advertisements {
		if a.ChunkCount < 0 || a.AvailableChunks < 0 || math.IsInf(a.CostPerChunk, 0) {
			t.Errorf("%s: chunks %d available %d cost %v", a.ClusterID, a.ChunkCount, a.AvailableChunks, a.CostPerChunk)
		}
	}
}

// TestPathIDsAreDecodedOnce: an id in the path is read with one unescape
// (clients escape once); it used to be read raw, so a relayed id showed up
// escaped two or three times in messages.
func TestPathIDsAreDecodedOnce(t *testing.T) {
	b := startBroker(t)
	cons := b.client(t, "c1", api.RoleConsumer)
	r := cons.Must(t, "GET", "/api/v1/reservations/a%20b%25", nil)
	expect(t, r, 404, api.CodeNotFound)
	if msg := r.Error().Message; !strings.Contains(msg, `"a b%"`) {
		t.Errorf("message %q, want the id decoded once", msg)
	}
}
