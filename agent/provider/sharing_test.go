package provider

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"
)

func rl(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func TestParseSharing(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		wantErr string
		check   func(t *testing.T, c SharingConfig)
	}{
		{name: "empty", in: "", check: func(t *testing.T, c SharingConfig) {
			if c.UnitPrices != nil || c.Capacity != nil || c.Sharing() != nil {
				t.Errorf("want zero config, got %+v", c)
			}
		}},
		{name: "full", in: `
unitPrices: {cpu: "0.020", memory: 0.003}
capacity: {cpu: "80%", memory: "8Gi", pods: 50, nvidia.com/gpu: "1"}
renewable: true
allowedConsumers: [consumer-1, consumer-2]
deniedConsumers: [consumer-3]
maxChunksPerConsumer: 2
`, check: func(t *testing.T, c SharingConfig) {
			if p := c.UnitPrices[corev1.ResourceCPU]; p.String() != "20m" {
				t.Errorf("cpu price %s", p.String())
			}
			if c.Capacity["cpu"].String() != "80%" || c.Capacity["memory"].String() != "8Gi" || c.Capacity["pods"].String() != "50%" || c.Capacity["nvidia.com/gpu"].String() != "1" {
				t.Errorf("caps %v", c.Capacity)
			}
			if !c.Renewable || c.MaxChunksPerConsumer != 2 || !c.Allows("consumer-1") || c.Allows("consumer-3") || c.Allows("other") {
				t.Errorf("rules %+v", c)
			}
		}},
		{name: "unknown field", in: "unitPrice: {cpu: 1}", wantErr: "unknown field"},
		{name: "negative price", in: "unitPrices: {cpu: -1}", wantErr: `unitPrices[cpu] = "-1": must be a price from 0 to 1000000`},
		{name: "huge price", in: "unitPrices: {cpu: 9e307}", wantErr: `unitPrices[cpu] = "90e306": must be a price from 0 to 1000000`},
		{name: "price exponent that takes minutes to parse", in: `unitPrices: {cpu: "1e-999999999"}`, wantErr: "decimal exponent from -999 to 999"},
		{name: "cap exponent that takes minutes to compare", in: `capacity: {cpu: "1e999999999"}`, wantErr: "decimal exponent from -999 to 999"},
		{name: "price .inf", in: "unitPrices: {cpu: .inf}", wantErr: "unsupported value: +Inf"},
		{name: "price .nan", in: "unitPrices: {cpu: .nan}", wantErr: "unsupported value: NaN"},
		{name: "price of a bad resource name", in: `unitPrices: {"../x": 1}`, wantErr: `unitPrices[../x] = "../x": must be a resource name`},
		{name: "percent over 100", in: "capacity: {cpu: 150}", wantErr: "capacity[cpu] = 150: must be a whole percentage from 0 to 100"},
		{name: "negative percent", in: `capacity: {cpu: "-5%"}`, wantErr: "capacity[cpu] = -5: must be a whole percentage from 0 to 100"},
		{name: "negative fixed cap", in: `capacity: {memory: "-1Gi"}`, wantErr: `capacity[memory] = "-1Gi": must be a quantity from 0 to 1E`},
		{name: "huge fixed cap", in: `capacity: {cpu: "1e30"}`, wantErr: `capacity[cpu] = "1e30": must be a quantity from 0 to 1E`},
		{name: "cap of an empty resource name", in: `capacity: {"": 50}`, wantErr: `capacity[] = "": must be a resource name`},
		{name: "fractional percent", in: "capacity: {cpu: 80.5}", wantErr: "integer percentage"},
		{name: "bad quantity", in: "capacity: {cpu: lots}", wantErr: "neither a percentage nor a Quantity"},
		{name: "bad consumer id", in: "deniedConsumers: [Not_An_Id]", wantErr: `deniedConsumers[0] = "Not_An_Id": must be a cluster id`},
		{name: "dotted consumer id (the broker refuses it)", in: "allowedConsumers: [a.b]", wantErr: `allowedConsumers[0] = "a.b": must be a cluster id`},
		{name: "too many consumers", in: "deniedConsumers: [" + strings.Repeat("c,", 1000) + "c]", wantErr: "deniedConsumers = 1001 entries: must be at most 1000 entries"},
		{name: "negative quota", in: "maxChunksPerConsumer: -1", wantErr: "must be 0"},
		{name: "not yaml", in: "{{{", wantErr: "parsing the sharing configuration"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseSharing([]byte(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to mention %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c)
		})
	}
}

func TestParseReferenceFiles(t *testing.T) {
	prices, err := ParsePrices([]byte("cpu: \"0.020\"\nmemory: 0.003\n"))
	if err != nil || prices.Cpu().String() != "20m" || prices.Memory().String() != "3m" {
		t.Fatalf("prices %v %v", prices, err)
	}
	caps, err := ParseCapacity([]byte("cpu: 80\nmemory: \"50\"\npods: \"90%\"\nephemeral-storage: \"8Gi\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if caps["cpu"].String() != "80%" || caps["memory"].String() != "50%" || caps["pods"].String() != "90%" || caps["ephemeral-storage"].String() != "8Gi" {
		t.Errorf("legacy caps %v", caps)
	}
	if _, err := ParseCapacity([]byte("cpu: 80.5")); err == nil {
		t.Error("non-integer percent accepted")
	}
	if r, err := ParseRenewable([]byte("renewable: true")); err != nil || !r {
		t.Errorf("renewable %v %v", r, err)
	}
	if _, err := ParseRenewable([]byte("renewable: maybe")); err == nil {
		t.Error("bad renewable accepted")
	}
}

func TestApplyCaps(t *testing.T) {
	p := func(n int32) *int32 { return &n }
	q := func(s string) *resource.Quantity { v := resource.MustParse(s); return &v }
	free := rl("cpu", "7500m", "memory", "16Gi", "pods", "110")
	got := ApplyCaps(free, map[corev1.ResourceName]Cap{
		"cpu":            {Percent: p(50)},
		"memory":         {Fixed: q("8Gi")},
		"pods":           {Percent: p(100)},
		"nvidia.com/gpu": {Fixed: q("1")}, // not free: ignored
	})
	if c := got.Resources[corev1.ResourceCPU]; c.MilliValue() != 3750 {
		t.Errorf("cpu %s", c.String())
	}
	if m := got.Resources[corev1.ResourceMemory]; m.String() != "8Gi" {
		t.Errorf("memory %s", m.String())
	}
	if pods := got.Resources[corev1.ResourcePods]; pods.Value() != 110 {
		t.Errorf("pods %s", pods.String())
	}
	if got.ScalePercent["cpu"] != 50 || len(got.ScalePercent) != 1 {
		t.Errorf("scale %v", got.ScalePercent)
	}
	if _, ok := got.Fixed[corev1.ResourceMemory]; !ok || len(got.Fixed) != 1 {
		t.Errorf("fixed %v", got.Fixed)
	}
	// A fixed cap above the free amount is not recorded.
	if got := ApplyCaps(free, map[corev1.ResourceName]Cap{"memory": {Fixed: q("64Gi")}}); got.Fixed != nil {
		t.Errorf("non-lowering fixed cap recorded: %v", got.Fixed)
	}
	if free.Cpu().MilliValue() != 7500 {
		t.Error("ApplyCaps modified its input")
	}
	// Percentages are exact at any size: milli-value × percent overflows
	// int64 above ~92 TB.
	huge := ApplyCaps(rl("memory", "1P", "cpu", "1E", "pods", "3"), map[corev1.ResourceName]Cap{
		"memory": {Percent: p(50)}, "cpu": {Percent: p(99)}, "pods": {Percent: p(50)},
	})
	for name, want := range map[corev1.ResourceName]string{"memory": "500T", "cpu": "990P", "pods": "1500m"} {
		if q := huge.Resources[name]; q.String() != want {
			t.Errorf("%s capped to %s, want %s", name, q.String(), want)
		}
	}
}

func TestStoreKeepsLastGoodConfig(t *testing.T) {
	dir := t.TempDir()
	sharing := filepath.Join(dir, "sharing.yaml")
	prices := filepath.Join(dir, "prices.yaml")
	write := func(p, s string) {
		t.Helper()
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(sharing, "unitPrices: {cpu: 1}\nrenewable: true\n")
	write(prices, "memory: \"0.5\"\n")
	s, err := NewStore(Sources{SharingFile: sharing, PriceFile: prices}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := s.Config()
	if !c.Renewable || c.UnitPrices.Memory().String() != "500m" || len(c.UnitPrices) != 1 {
		t.Fatalf("merged config %+v", c)
	}
	<-s.Changed()
	if changed, err := s.Reload(); changed || err != nil {
		t.Fatalf("unchanged files: changed=%v err=%v", changed, err)
	}
	write(sharing, "renewable: yes please\n")
	if _, err := s.Reload(); err == nil || !strings.Contains(err.Error(), sharing) {
		t.Fatalf("bad file: err = %v, want one naming the file", err)
	}
	if !s.Config().Renewable || s.LastError() == nil {
		t.Fatal("bad file replaced the last good config")
	}
	write(sharing, "renewable: false\ncapacity: {cpu: 50%}\n")
	if changed, err := s.Reload(); !changed || err != nil {
		t.Fatalf("fixed file: changed=%v err=%v", changed, err)
	}
	if s.Config().Renewable || s.LastError() != nil {
		t.Fatal("fixed file not in force")
	}
	// The console's Apply persists to the sharing file.
	next := s.Config()
	next.DeniedConsumers = []string{"consumer-9"}
	if err := s.Apply(next); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(sharing)
	var onDisk SharingConfig
	if err := yaml.UnmarshalStrict(data, &onDisk); err != nil || len(onDisk.DeniedConsumers) != 1 || onDisk.Capacity["cpu"].String() != "50%" {
		t.Fatalf("persisted %s (%v)", data, err)
	}
	bad := next
	bad.MaxChunksPerConsumer = -3
	if err := s.Apply(bad); err == nil {
		t.Fatal("Apply accepted an invalid config")
	}
	if _, err := NewStore(Sources{SharingFile: filepath.Join(dir, "missing.yaml")}, nil); err == nil {
		t.Fatal("missing file at start accepted")
	}
}
