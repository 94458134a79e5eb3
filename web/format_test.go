package web

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

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
