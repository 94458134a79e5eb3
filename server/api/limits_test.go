package api

import (
	"math"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestChecksAtTheirBoundaries: each rule accepts its limits and refuses the
// values just beyond them, NaN and ±Inf, naming the field.
func TestChecksAtTheirBoundaries(t *testing.T) {
	q := resource.MustParse
	inf, nan := math.Inf(1), math.NaN()
	tests := []struct {
		name string
		fe   *FieldError
		ok   bool
	}{
		{"price 0", CheckUnitPrice("p", q("0")), true},
		{"price at the limit", CheckUnitPrice("p", q("1M")), true},
		{"price 1n above", CheckUnitPrice("p", q("1000000.000000001")), false},
		{"price 9e307", CheckUnitPrice("p", q("9e307")), false},
		{"price negative", CheckUnitPrice("p", q("-1n")), false},
		{"quantity at the limit", CheckQuantity("q", q("1E")), true},
		{"quantity above", CheckQuantity("q", q("1000000000000000001")), false},
		{"quantity 1Ei (above 1E)", CheckQuantity("q", q("1Ei")), false},
		{"quantity 1e30", CheckQuantity("q", q("1e30")), false},
		{"carbon 0", CheckCarbon("c", 0), true},
		{"carbon at the limit", CheckCarbon("c", MaxCarbonIntensity), true},
		{"carbon above", CheckCarbon("c", math.Nextafter(MaxCarbonIntensity, inf)), false},
		{"carbon NaN", CheckCarbon("c", nan), false},
		{"carbon +Inf", CheckCarbon("c", inf), false},
		{"carbon -0", CheckCarbon("c", math.Copysign(0, -1)), true},
		{"weight at the limit", CheckWeight("w", MaxWeight), true},
		{"weight above", CheckWeight("w", 1000.0001), false},
		{"weight NaN", CheckWeight("w", nan), false},
		{"weight -Inf", CheckWeight("w", -inf), false},
		{"latency at the limit", CheckLatency("l", MaxLatencyMillis), true},
		{"latency NaN", CheckLatency("l", nan), false},
		{"latitude -90", CheckLatitude("lat", -90), true},
		{"latitude 90.1", CheckLatitude("lat", 90.1), false},
		{"longitude NaN", CheckLongitude("lon", nan), false},
		{"percent 0", CheckPercent("p", 0), true},
		{"percent 100", CheckPercent("p", 100), true},
		{"percent -1", CheckPercent("p", -1), false},
		{"percent 101", CheckPercent("p", 101), false},
		{"cluster id", CheckClusterID("id", "provider-1"), true},
		{"cluster id 63 chars", CheckClusterID("id", strings.Repeat("a", 63)), true},
		{"cluster id 64 chars", CheckClusterID("id", strings.Repeat("a", 64)), false},
		{"cluster id empty", CheckClusterID("id", ""), false},
		{"cluster id ../p1", CheckClusterID("id", "../p1"), false},
		{"cluster id dotted", CheckClusterID("id", "a.b"), false},
		{"cluster id NUL", CheckClusterID("id", "a\x00b"), false},
		{"cluster id invalid UTF-8", CheckClusterID("id", "a\xffb"), false},
		{"cluster id 1 MiB", CheckClusterID("id", strings.Repeat("a", 1<<20)), false},
		{"optional cluster id empty", CheckOptionalClusterID("id", ""), true},
		{"reservation id dotted", CheckReservationID("id", "res.1"), true},
		{"reservation id 254 chars", CheckReservationID("id", strings.Repeat("a", 254)), false},
		{"namespace", CheckNamespace("ns", "kube-system"), true},
		{"namespace dotted", CheckNamespace("ns", "a.b"), false},
		{"resource cpu", CheckResourceName("r", corev1.ResourceCPU), true},
		{"resource nvidia.com/gpu", CheckResourceName("r", "nvidia.com/gpu"), true},
		{"resource hugepages-2Mi", CheckResourceName("r", "hugepages-2Mi"), true},
		{"resource ../x", CheckResourceName("r", "../x"), false},
		{"resource empty", CheckResourceName("r", ""), false},
		{"text São Paulo", CheckText("t", "São Paulo"), true},
		{"text with NUL", CheckText("t", "a\x00"), false},
		{"text with newline", CheckText("t", "a\nb"), false},
		{"text invalid UTF-8", CheckText("t", "\xff"), false},
		{"text 257 bytes", CheckText("t", strings.Repeat("a", 257)), false},
		{"count at the limit", CheckCount("l", 64, 64), true},
		{"count above", CheckCount("l", 65, 64), false},
	}
	for _, tc := range tests {
		if (tc.fe == nil) != tc.ok {
			t.Errorf("%s: error %v, want ok=%v", tc.name, tc.fe, tc.ok)
		}
		if tc.fe != nil {
			if tc.fe.Field == "" || tc.fe.Value == "" || tc.fe.Want == "" || len(tc.fe.Error()) > 400 {
				t.Errorf("%s: error %+v must name a field, a (short) value and the range", tc.name, tc.fe)
			}
			e := tc.fe.APIError()
			if e.Code != CodeInvalidRequest || Status(e.Code) != 400 || e.Details["field"] != tc.fe.Field {
				t.Errorf("%s: API error %+v", tc.name, e)
			}
		}
	}
}

// TestRequestValidation covers the request-level rules that are not a
// single Check: required lists, chunk counts, node-group ids and result
// statuses.
func TestRequestValidation(t *testing.T) {
	ok := AdvertisementRequest{ClusterID: "p1", LiqoClusterID: "liqo-p1", Resources: corev1.ResourceList{"cpu": resource.MustParse("4")}}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	noRes := ok
	noRes.Resources = nil
	weights := HeartbeatRequest{ClusterID: "c1", LiqoClusterID: "liqo-c1", Placement: &Placement{Type: PlacementWeighted, Weights: &Weights{Distance: math.NaN()}}}
	grace := func(s int32) *HeartbeatRequest {
		return &HeartbeatRequest{ClusterID: "c1", LiqoClusterID: "l", Lifecycle: &Lifecycle{DisconnectGraceSeconds: &s}}
	}
	moves := func(n, w int32) *HeartbeatRequest {
		return &HeartbeatRequest{ClusterID: "c1", LiqoClusterID: "l", Lifecycle: &Lifecycle{MaxMovesPerWindow: &n, MoveWindowSeconds: &w}}
	}
	lost := &HeartbeatRequest{ClusterID: "c1", LiqoClusterID: "l", NotReadyReservations: make([]string, MaxHeartbeatReservations+1)}
	starting := &HeartbeatRequest{ClusterID: "c1", LiqoClusterID: "l", StartingReservations: make([]string, MaxHeartbeatReservations+1)}
	budget := func(n, w *int32) *HeartbeatRequest {
		return &HeartbeatRequest{ClusterID: "c1", LiqoClusterID: "l", Lifecycle: &Lifecycle{Migrations: &MigrationBudget{MaxPerWindow: n, WindowSeconds: w}}}
	}
	i32 := func(v int32) *int32 { return &v }
	shortlist := func(n int) *HeartbeatRequest {
		return &HeartbeatRequest{ClusterID: "c1", LiqoClusterID: "l", Placement: &Placement{Type: PlacementLatency, LatencyCandidates: n}}
	}
	tests := []struct {
		name  string
		err   error
		field string
	}{
		{"valid advertisement", ok.Validate(), ""},
		{"no resources", noRes.Validate(), "resources"},
		{"NaN weight", weights.Validate(), "placement.weights.distance"},
		{"latency shortlist unset", shortlist(0).Validate(), ""},
		{"latency shortlist of one", shortlist(1).Validate(), ""},
		{"latency shortlist at its maximum", shortlist(MaxLatencyCandidates).Validate(), ""},
		{"latency shortlist past its maximum", shortlist(MaxLatencyCandidates + 1).Validate(), "placement.latencyCandidates"},
		{"negative latency shortlist", shortlist(-1).Validate(), "placement.latencyCandidates"},
		{"unknown policy is served as Standard", (&HeartbeatRequest{ClusterID: "c1", LiqoClusterID: "l", Placement: &Placement{Type: "Cheapest"}}).Validate(), ""},
		{"disconnect grace 0", grace(0).Validate(), ""},
		{"disconnect grace one day", grace(MaxDisconnectGraceSeconds).Validate(), ""},
		{"disconnect grace over a day", grace(MaxDisconnectGraceSeconds + 1).Validate(), "lifecycle.disconnectGraceSeconds"},
		{"negative disconnect grace", grace(-1).Validate(), "lifecycle.disconnectGraceSeconds"},
		{"no disconnect grace set", (&HeartbeatRequest{ClusterID: "c1", LiqoClusterID: "l", Lifecycle: &Lifecycle{}}).Validate(), ""},
		{"move budget 0 per hour", moves(0, 3600).Validate(), ""},
		{"move budget at its bounds", moves(MaxMovesPerWindow, MaxMoveWindowSeconds).Validate(), ""},
		{"negative move budget", moves(-1, 60).Validate(), "lifecycle.maxMovesPerWindow"},
		{"move budget too large", moves(MaxMovesPerWindow+1, 60).Validate(), "lifecycle.maxMovesPerWindow"},
		{"move window 0", moves(1, 0).Validate(), "lifecycle.moveWindowSeconds"},
		{"move window over a week", moves(1, MaxMoveWindowSeconds+1).Validate(), "lifecycle.moveWindowSeconds"},
		{"too many lost virtual nodes", lost.Validate(), "notReadyReservations"},
		{"too many starting virtual nodes", starting.Validate(), "startingReservations"},
		{"migration budget 0 (off)", budget(i32(0), nil).Validate(), ""},
		{"migration budget at the cap, a week", budget(i32(MaxMigrationsPerWindow), i32(MaxMigrationWindowSeconds)).Validate(), ""},
		{"migration budget over the cap", budget(i32(MaxMigrationsPerWindow+1), nil).Validate(), "lifecycle.migrations.maxPerWindow"},
		{"negative migration budget", budget(i32(-1), nil).Validate(), "lifecycle.migrations.maxPerWindow"},
		{"migration window 0", budget(nil, i32(0)).Validate(), "lifecycle.migrations.windowSeconds"},
		{"migration window over a week", budget(nil, i32(MaxMigrationWindowSeconds+1)).Validate(), "lifecycle.migrations.windowSeconds"},
		{"chunkCount 0", (&ReservationRequest{ProviderClusterID: "p1", ChunkType: ChunkStandard}).Validate(), "chunkCount"},
		{"chunkCount 2", (&ReservationRequest{ProviderClusterID: "p1", ChunkCount: 2, ChunkType: ChunkStandard}).Validate(), "chunkCount"},
		{"node group mismatch", (&ReservationRequest{ProviderClusterID: "p1", ChunkCount: 1, ChunkType: ChunkStandard, NodeGroupID: "ng-p2-standard"}).Validate(), "nodeGroupId"},
		{"valid reservation", (&ReservationRequest{ProviderClusterID: "p1", ChunkCount: 1, ChunkType: ChunkGPU, NodeGroupID: "ng-p1-gpu", Namespaces: []string{"default"}}).Validate(), ""},
		{"failed result without message", (&InstructionResultRequest{Status: ResultFailed}).Validate(), "error.message"},
		{"unknown status", (&InstructionResultRequest{Status: "Done"}).Validate(), "status"},
		{"unknown payload kind", (&InstructionResultRequest{Status: ResultSucceeded, Payload: &InstructionPayload{Kind: "X"}}).Validate(), "payload.kind"},
		{"valid result", (&InstructionResultRequest{Status: ResultSucceeded, Payload: &InstructionPayload{Kind: PayloadPeer}}).Validate(), ""},
	}
	for _, tc := range tests {
		if tc.field == "" {
			if tc.err != nil {
				t.Errorf("%s: %v", tc.name, tc.err)
			}
			continue
		}
		var e *Error
		if tc.err == nil || !asAPIError(tc.err, &e) || e.Details["field"] != tc.field || CodeOf(tc.err) != CodeInvalidRequest {
			t.Errorf("%s: %v, want a 400 naming %s", tc.name, tc.err, tc.field)
		}
	}
}

func asAPIError(err error, e **Error) bool {
	x, ok := err.(*Error)
	*e = x
	return ok
}

// TestQuantityTextIsScreenedBeforeParsing: resource.ParseQuantity spends
// minutes on "1e-999999999"; the text is refused first, wherever it sits in
// a JSON document (string or number, nested in a result's payload).
func TestQuantityTextIsScreenedBeforeParsing(t *testing.T) {
	for _, tc := range []struct {
		text string
		ok   bool
	}{
		{"8Gi", true}, {"500m", true}, {"1E", true}, {"1Ei", true}, {"1e3", true}, {"1e999", true}, {"5E-999", true},
		{"0.000000001", true}, {"+1", true}, {"80%", true}, {"lots", true}, // syntax is the parser's business
		{"1e1000", false}, {"1e-999999999", false}, {"1E8888888888888", false}, {"-1e+99999", false},
		{strings.Repeat("1", 65), false},
	} {
		if fe := CheckQuantityText("q", tc.text); (fe == nil) != tc.ok {
			t.Errorf("CheckQuantityText(%q) = %v, want ok=%v", tc.text, fe, tc.ok)
		}
	}
	for _, tc := range []struct {
		doc, field string
	}{
		{`{"resources":{"cpu":"1e-999999999"}}`, "resources[cpu]"},
		{`{"clusterId":"x","unitPrices":{"memory":1e999999999}}`, "unitPrices[memory]"},
		{`{"status":"Succeeded","payload":{"advertisement":{"capacityFixed":{"cpu":"1e-5000"}}}}`, "payload.advertisement.capacityFixed[cpu]"},
		{`{"topology":{"city":"1e-999999999"},"resources":{"cpu":"4"}}`, ""},
		{`{"resources":{"cpu":"4"}`, ""}, // not JSON: left to the decoder
	} {
		fe := ScreenAdvertisement([]byte(tc.doc))
		if tc.field == "" && fe != nil || tc.field != "" && (fe == nil || fe.Field != tc.field) {
			t.Errorf("ScreenAdvertisement(%s) = %v, want field %q", tc.doc, fe, tc.field)
		}
	}
	if fe := ScreenQuantities([]byte(`{"cpu":"1e-999999999"}`), ""); fe == nil || fe.Field != "cpu" {
		t.Errorf("top-level screening: %v", fe)
	}
	if _, fe := ParseQuantity("q", "NaN"); fe == nil || !strings.Contains(fe.Error(), "a quantity such as") {
		t.Errorf("ParseQuantity(NaN) = %v", fe)
	}
}
