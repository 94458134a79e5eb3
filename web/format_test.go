package web

import (
	"fmt"
	"math"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// Numbers carry their unit: money per hour in the currency, never
// Kubernetes quantity notation, an unpriced cost is "unpriced", the metric
// has the applied policy's unit, a masked group says so.
func TestUnits(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	cases := []struct{ name, got, want string }{
		{"quantity cost", quantityPerHour("EUR", "48m"), "0.0480 EUR/h"},
		{"nano cost", quantityPerHour("USD", "116000000n"), "0.1160 USD/h"},
		{"empty cost", quantityPerHour("EUR", ""), "unpriced"},
		{"loan price", pricePerHour("CHF", f(0.056)), "0.0560 CHF/h"},
		{"free loan", pricePerHour("CHF", f(0)), "0.0000 CHF/h"},
		{"unpriced loan", pricePerHour("CHF", nil), "unpriced"},
		{"growable", groupUse(api.NodeGroupView{CurrentReserved: 1, MaxSize: 4}), "1 of 4 chunks"},
		{"masked", groupUse(api.NodeGroupView{}), "masked by policy"},
		{"masked, held", groupUse(api.NodeGroupView{CurrentReserved: 2, MaxSize: 2}), "2 held · masked by policy"},
		// Used follows the consumer's masked view, not the broker's
		// unmasked list.
		{"masked view: growable", maskedUse(api.NodeGroupView{ID: "a", MaxSize: 4}, []api.NodeGroupView{{ID: "a", MaxSize: 4, CurrentReserved: 1}}), "1 of 4 chunks"},
		{"masked view: masked", maskedUse(api.NodeGroupView{ID: "a", MaxSize: 4, CurrentReserved: 1}, []api.NodeGroupView{{ID: "a", MaxSize: 1, CurrentReserved: 1}}), "1 held · masked by policy"},
		{"masked view: left out", maskedUse(api.NodeGroupView{ID: "a", MaxSize: 4}, []api.NodeGroupView{{ID: "b", MaxSize: 4}}), "masked by policy"},
		{"no masked view", maskedUse(api.NodeGroupView{ID: "a", MaxSize: 4}, nil), "0 of 4 chunks"},
		{"carbon", carbon(f(212.4)), "212 g/kWh"},
		{"rtt", millis(12.34), "12.3 ms"},
	}
	for _, tc := range cases {
		if tc.got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, tc.got, tc.want)
		}
	}
	metrics := []struct {
		policy       api.PlacementType
		v            float64
		header, want string
	}{
		{api.PlacementPrice, 0.116, "Cost per chunk", "0.1160 EUR/h"},
		{api.PlacementEco, 212.4, "Carbon, weighted", "212 g/kWh"},
		{api.PlacementLatency, 125.14, "Distance", "125 km"},
		{api.PlacementWeighted, 0.4567, "Score (lower wins)", "score 0.457"},
		{api.PlacementStandard, 0.8, "Metric", "—"},
	}
	for _, m := range metrics {
		h, render := metricColumn(m.policy, "EUR")
		if h != m.header || render(m.v) != m.want {
			t.Errorf("%s: header %q value %q, want %q %q", m.policy, h, render(m.v), m.header, m.want)
		}
	}
	for _, c := range []struct {
		in, want string
		ok       bool
	}{{"", DefaultCurrency, true}, {"USD", "USD", true}, {"usd", "", false}, {"EURO", "", false}, {"€", "", false}} {
		got, err := checkCurrency(c.in)
		if got != c.want || (err == nil) != c.ok {
			t.Errorf("checkCurrency(%q) = %q, %v", c.in, got, err)
		}
	}
	// The dashboard's price: a provider pricing every resource at 0 is
	// free, one without prices is unpriced.
	sizes := map[api.ChunkType]corev1.ResourceList{api.ChunkStandard: {corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi")}}
	free := api.AdvertisementSnapshot{UnitPrices: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0"), corev1.ResourceMemory: resource.MustParse("0")}}
	if v, ok := chunkCost(free, sizes); !ok || v != 0 {
		t.Errorf("free provider: %v %v", v, ok)
	}
	if _, ok := chunkCost(api.AdvertisementSnapshot{UnitPrices: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}, sizes); ok {
		t.Error("a provider without a memory price is priced")
	}
	if v, ok := chunkCost(api.AdvertisementSnapshot{CostPerChunk: 0.116}, sizes); !ok || v != 0.116 {
		t.Errorf("priced provider: %v %v", v, ok)
	}
}

// A move and the savings read as docs/ui.md says (the uitest demo runs
// without migration, so these fields are checked here and by mocks/demo
// TestMigrationScenario).
func TestMovesAsShown(t *testing.T) {
	since := metav1.NewTime(time.Date(2026, 12, 1, 19, 58, 0, 0, time.UTC))
	if got := savingsLabel("EUR", nil); got != "—" {
		t.Errorf("no move yet: %q, want —", got)
	}
	if got, want := savingsLabel("EUR", &api.MigrationSavings{Moves: 1, Since: since, CostPerHour: 0.034}), "1 move(s) since 2026-12-01 19:58: 0.0340 EUR/h · 0.0 g/h"; got != want {
		t.Errorf("savings %q, want %q", got, want)
	}
	r := migrationRow("EUR", "london", api.Migration{ReservationID: "manual-1", TargetReservationID: "manual-1.m1", From: "sydney", To: "montreal",
		ChunkCount: 1, State: api.MigrationFinished, StartedAt: since, Reason: "the target is Ready"})
	if r.Consumer != "london" || r.Reservation != "manual-1" || r.Target != "manual-1.m1" || r.From != "sydney" || r.To != "montreal" ||
		r.Chunks != "1 × standard" || r.State != api.MigrationFinished || r.StateClass != "ok" || r.Started != "19:58:00" || r.Reason != "the target is Ready" {
		t.Errorf("move row %+v", r)
	}
}

// The hand-written formats the live dashboard uses per row say what the
// fmt and time layouts they replaced said.
func TestFastFormatsMatchTheLayouts(t *testing.T) {
	zone := time.FixedZone("UTC+5:30", 5*3600+1800)
	for _, at := range []time.Time{
		time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 11, 30, 9, 5, 7, 999_999_999, time.UTC),
		time.Date(2026, 11, 30, 23, 59, 59, 0, time.UTC),
		time.Date(2026, 12, 1, 3, 4, 5, 0, zone), // shown in UTC
		time.Date(1969, 12, 31, 23, 59, 58, 0, time.UTC),
	} {
		if got, want := clockTime(at), at.UTC().Format("15:04:05"); got != want {
			t.Errorf("clockTime(%v) = %q, want %q", at, got, want)
		}
	}
	for _, v := range []float64{0, math.Copysign(0, -1), 0.00005, 0.00015, 1.23456789, -2.5, 1e9, 123.45} {
		for _, c := range []struct{ got, want string }{
			{money(v), fmt.Sprintf("%.4f", v)},
			{gramsPerHour(v), fmt.Sprintf("%.1f g/h", v)},
			{carbon(&v), fmt.Sprintf("%.0f g/kWh", v)},
			{millis(math.Abs(v)), fmt.Sprintf("%.1f ms", math.Abs(v))},
		} {
			if c.got != c.want {
				t.Errorf("%v: got %q, want %q", v, c.got, c.want)
			}
		}
	}
}
