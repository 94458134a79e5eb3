package provider

import (
	"testing"

	"sigs.k8s.io/yaml"
)

// FuzzParseSharing: the parser never panics; whatever it accepts is valid
// and survives a round trip through the format it writes (Apply).
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
	})
}

// FuzzParseCapacity: the reference capacity.yaml parser never panics and
// accepts only valid caps.
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
	})
}

// FuzzParsePrices: the reference prices.yaml parser never panics and never
// accepts a negative price.
func FuzzParsePrices(f *testing.F) {
	f.Add([]byte("cpu: \"0.020\"\nmemory: 0.003\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		prices, err := ParsePrices(data)
		if err != nil {
			return
		}
		for k, q := range prices {
			if q.Sign() < 0 {
				t.Fatalf("negative price %s=%s accepted", k, q.String())
			}
		}
	})
}
