package placement

import (
	"math"
	"testing"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

func TestMayBorrowAndQuota(t *testing.T) {
	tests := []struct {
		name  string
		s     *api.Sharing
		c     string
		want  bool
		quota int32
	}{
		{"no rules", nil, "c1", true, 0},
		{"empty rules", &api.Sharing{}, "c1", true, 0},
		{"allowed", &api.Sharing{AllowedConsumers: []string{"c1"}}, "c1", true, 0},
		{"not on allow list", &api.Sharing{AllowedConsumers: []string{"c1"}}, "c2", false, 0},
		{"denied", &api.Sharing{DeniedConsumers: []string{"c1"}}, "c1", false, 0},
		{"deny wins over allow", &api.Sharing{AllowedConsumers: []string{"c1"}, DeniedConsumers: []string{"c1"}}, "c1", false, 0},
		{"denied other", &api.Sharing{DeniedConsumers: []string{"c2"}, MaxChunksPerConsumer: 3}, "c1", true, 3},
		{"negative quota is none", &api.Sharing{MaxChunksPerConsumer: -2}, "c1", true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := MayBorrow(tt.s, tt.c); got != tt.want {
				t.Errorf("MayBorrow = %v, want %v", got, tt.want)
			}
			if got := Quota(tt.s); got != tt.quota {
				t.Errorf("Quota = %d, want %d", got, tt.quota)
			}
		})
	}
}

func TestNormalizePolicy(t *testing.T) {
	tests := []struct {
		in    api.PlacementType
		want  api.PlacementType
		known bool
	}{
		{"", api.PlacementStandard, true},
		{"Standard", api.PlacementStandard, true},
		{"Price", api.PlacementPrice, true},
		{"Eco", api.PlacementEco, true},
		{"Latency", api.PlacementLatency, true},
		{"Weighted", api.PlacementWeighted, true},
		{"price", api.PlacementStandard, false},
		{"Cheapest", api.PlacementStandard, false},
	}
	for _, tt := range tests {
		got, known := NormalizePolicy(tt.in)
		if got != tt.want || known != tt.known {
			t.Errorf("NormalizePolicy(%q) = %q, %v; want %q, %v", tt.in, got, known, tt.want, tt.known)
		}
	}
}

func TestWeightedCarbon(t *testing.T) {
	tests := []struct {
		name     string
		forecast []float64
		current  *float64
		want     float64
		ok       bool
	}{
		// 0.40·100 + 0.25·200 + 0.15·300 + 0.10·400 + 0.06·500 + 0.04·600 = 229; the 7th value is ignored.
		{"six hours", []float64{100, 200, 300, 400, 500, 600, 700}, nil, 229, true},
		// (0.40·100 + 0.25·200) / 0.65 = 138.4615…
		{"short forecast renormalised", []float64{100, 200}, ptr(999.0), 90 / 0.65, true},
		{"current when no forecast", nil, ptr(55.5), 55.5, true},
		{"zero is a value", nil, ptr(0.0), 0, true},
		{"neither", nil, nil, 0, false},
		{"negative forecast value", []float64{100, -1}, nil, 0, false},
		{"NaN current", nil, ptr(math.NaN()), 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := WeightedCarbon(tt.forecast, tt.current)
			if ok != tt.ok || math.Abs(got-tt.want) > 1e-9 {
				t.Errorf("WeightedCarbon = %v, %v; want %v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestCostPerChunk(t *testing.T) {
	std, gpu := DefaultChunkConfig().Standard, DefaultChunkConfig().GPU
	tests := []struct {
		name   string
		prices []string
		chunk  string
		exact  string // inf.Dec string
		wire   string // canonical Quantity
		ok     bool
	}{
		// 2 cores × 0.02 + 4 GiB × 0.003 = 0.052
		{"standard", []string{"cpu", "0.02", "memory", "0.003"}, "standard", "0.052", "52m", true},
		// 4 × 0.02 + 8 × 0.003 + 1 × 1.2 = 1.304
		{"gpu", []string{"cpu", "0.02", "memory", "0.003", "nvidia.com/gpu", "1.2"}, "gpu", "1.304", "1304m", true},
		{"extra price keys ignored", []string{"cpu", "0.02", "memory", "0.003", "nvidia.com/gpu", "9"}, "standard", "0.052", "52m", true},
		// 1 core × 1n + 1 MiB × 1n/GiB = 0.0000000010009765625: sub-nano
		// precision is kept internally; the wire form rounds to nano.
		{"full precision", []string{"cpu", "1n", "memory", "1n"}, "1cpu1Mi", "0.0000000010009765625", "1n", true},
		{"gpu price missing", []string{"cpu", "0.02", "memory", "0.003"}, "gpu", "", "", false},
		{"negative price", []string{"cpu", "0.02", "memory", "0.003", "ephemeral-storage", "-1"}, "standard", "", "", false},
		{"no prices", nil, "standard", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			chunk := std
			switch tt.chunk {
			case "gpu":
				chunk = gpu
			case "1cpu1Mi":
				chunk = rl("cpu", "1", "memory", "1Mi")
			}
			got, ok := CostPerChunk(rl(tt.prices...), chunk)
			if ok != tt.ok {
				t.Fatalf("ok = %v, want %v", ok, tt.ok)
			}
			if !ok {
				return
			}
			if got.String() != tt.exact && got.Cmp(mustDec(t, tt.exact)) != 0 {
				t.Errorf("cost = %s, want %s", got, tt.exact)
			}
			if w := CostQuantity(got); w.String() != tt.wire {
				t.Errorf("wire cost = %s, want %s", w, tt.wire)
			}
		})
	}
	// Memory in GiB is exact for any byte count: 1 MiB at 1/GiB-hour.
	got, _ := CostPerChunk(rl("memory", "1"), rl("memory", "1Mi"))
	if got.Cmp(mustDec(t, "0.0009765625")) != 0 {
		t.Errorf("1 MiB costs %s, want 0.0009765625", got)
	}
}

func TestDistanceKM(t *testing.T) {
	// Turin → Milan, hand-checked with the haversine formula (R = 6371.0 km).
	if d := DistanceKM(45.07, 7.69, 45.46, 9.19); math.Abs(d-125.1446) > 0.001 {
		t.Errorf("Turin-Milan = %v km, want 125.1446", d)
	}
	if d := DistanceKM(10, 20, 10, 20); d != 0 {
		t.Errorf("same point = %v", d)
	}
	// Antipodes: half the circumference.
	if d := DistanceKM(0, 0, 0, 180); math.Abs(d-math.Pi*6371.0) > 1e-6 {
		t.Errorf("antipodes = %v", d)
	}
}
