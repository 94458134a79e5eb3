package provider

import (
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/api/apitest"
)

// checkBrokerAccepts: an accepted configuration, advertised, is accepted by
// the broker (the same rules on both sides) and holds only finite numbers
// and quantities within the limits.
func checkBrokerAccepts(t *testing.T, data []byte, cfg SharingConfig) {
	t.Helper()
	if err := apitest.WithinLimits(cfg); err != nil {
		t.Fatalf("accepted %q: %v", data, err)
	}
	maxPrice := api.MaxUnitPriceValue()
	for name, p := range cfg.UnitPrices {
		if p.Cmp(maxPrice) > 0 {
			t.Fatalf("accepted price %s = %s", name, p.String())
		}
	}
	free := rl("cpu", "8", "memory", "32Gi", "nvidia.com/gpu", "1")
	for name := range cfg.Capacity {
		free[name] = api.MaxQuantityValue()
	}
	capped := ApplyCaps(free, cfg.Capacity)
	ad := api.AdvertisementRequest{
		ClusterID: "p1", LiqoClusterID: "liqo-p1", Resources: capped.Resources, UnitPrices: cfg.UnitPrices,
		CapacityScalePercent: capped.ScalePercent, CapacityFixed: capped.Fixed, Sharing: cfg.Sharing(),
	}
	if err := ad.Validate(); err != nil {
		t.Fatalf("accepted %q, but the broker refuses its advertisement: %v", data, err)
	}
}

// FuzzParseSharing: the parser never panics; whatever it accepts is valid,
// is accepted by the broker once advertised, and survives a round trip
// through the format it writes (Apply).
func FuzzParseSharing(f *testing.F) {
	f.Add([]byte("unitPrices: {cpu: \"0.02\"}\ncapacity: {cpu: 80%, memory: 8Gi}\nrenewable: true\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := ParseSharing(data)
		if err != nil {
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("accepted an invalid config: %v", err)
		}
		checkBrokerAccepts(t, data, cfg)
		out, err := yaml.Marshal(cfg)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		back, err := ParseSharing(out)
		if err != nil {
			t.Fatalf("round trip of %q refused: %v\n%s", data, err, out)
		}
		if len(back.Capacity) != len(cfg.Capacity) || len(back.UnitPrices) != len(cfg.UnitPrices) || back.Renewable != cfg.Renewable {
			t.Fatalf("round trip changed the config: %+v vs %+v", cfg, back)
		}
		for k, c := range cfg.Capacity {
			if back.Capacity[k].String() != c.String() {
				t.Fatalf("cap %s: %s became %s", k, c, back.Capacity[k])
			}
		}
		for k, p := range cfg.UnitPrices {
			if q := back.UnitPrices[k]; q.Cmp(p) != 0 {
				t.Fatalf("price %s: %s became %s", k, p.String(), q.String())
			}
		}
	})
}

// FuzzParseCapacity: the reference capacity.yaml parser never panics and
// accepts only caps the broker accepts.
func FuzzParseCapacity(f *testing.F) {
	f.Add([]byte("cpu: 80\nmemory: \"8Gi\"\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		caps, err := ParseCapacity(data)
		if err != nil {
			return
		}
		cfg := SharingConfig{Capacity: caps}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("accepted invalid caps: %v", err)
		}
		checkBrokerAccepts(t, data, cfg)
	})
}

// FuzzParsePrices: the reference prices.yaml parser never panics and
// accepts only prices within [0, api.MaxUnitPrice].
func FuzzParsePrices(f *testing.F) {
	f.Add([]byte("cpu: \"0.020\"\nmemory: 0.003\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		prices, err := ParsePrices(data)
		if err != nil {
			return
		}
		checkBrokerAccepts(t, data, SharingConfig{UnitPrices: prices})
	})
}

// FuzzParseRenewable: the reference renewable.yaml parser never panics and
// reads only an explicit boolean.
func FuzzParseRenewable(f *testing.F) {
	f.Add([]byte("renewable: true\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseRenewable(data)
		if err != nil {
			return
		}
		back, err := ParseRenewable([]byte("renewable: " + map[bool]string{true: "true", false: "false"}[r]))
		if err != nil || back != r {
			t.Fatalf("round trip of %v: %v %v", r, back, err)
		}
	})
}
