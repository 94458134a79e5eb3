package placement

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/inf.v0"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// rl builds a ResourceList from name/quantity pairs.
func rl(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func TestChunks(t *testing.T) {
	noGPU := ChunkConfig{Standard: DefaultChunkConfig().Standard}
	tests := []struct {
		name string
		cfg  ChunkConfig
		res  corev1.ResourceList
		want map[api.ChunkType]int32
	}{
		{"cpu and memory balanced", DefaultChunkConfig(), rl("cpu", "8", "memory", "16Gi"), map[api.ChunkType]int32{api.ChunkStandard: 4}},
		{"memory bound", DefaultChunkConfig(), rl("cpu", "8", "memory", "10Gi"), map[api.ChunkType]int32{api.ChunkStandard: 2}},
		{"leftovers dropped", DefaultChunkConfig(), rl("cpu", "4500m", "memory", "9Gi", "pods", "110"), map[api.ChunkType]int32{api.ChunkStandard: 2}},
		{"too small", DefaultChunkConfig(), rl("cpu", "1500m", "memory", "64Gi"), map[api.ChunkType]int32{}},
		{"memory missing", DefaultChunkConfig(), rl("cpu", "8"), map[api.ChunkType]int32{}},
		{"empty", DefaultChunkConfig(), nil, map[api.ChunkType]int32{}},
		// 2 GPU chunks take 8 CPU / 16 GiB; the remaining 8 CPU / 48 GiB
		// are 4 standard chunks (the reference offers only the 2 GPU chunks).
		{"gpu and standard split", DefaultChunkConfig(), rl("cpu", "16", "memory", "64Gi", "nvidia.com/gpu", "2"), map[api.ChunkType]int32{api.ChunkGPU: 2, api.ChunkStandard: 4}},
		// GPUs outnumber what cpu allows: 1 GPU chunk (cpu bound), then 1 standard.
		{"gpu chunk cpu bound", DefaultChunkConfig(), rl("cpu", "6", "memory", "64Gi", "nvidia.com/gpu", "4"), map[api.ChunkType]int32{api.ChunkGPU: 1, api.ChunkStandard: 1}},
		{"gpu present but too little cpu", DefaultChunkConfig(), rl("cpu", "3", "memory", "64Gi", "nvidia.com/gpu", "1"), map[api.ChunkType]int32{api.ChunkStandard: 1}},
		{"zero gpus", DefaultChunkConfig(), rl("cpu", "4", "memory", "8Gi", "nvidia.com/gpu", "0"), map[api.ChunkType]int32{api.ChunkStandard: 2}},
		{"gpu chunks disabled", noGPU, rl("cpu", "16", "memory", "64Gi", "nvidia.com/gpu", "2"), map[api.ChunkType]int32{api.ChunkStandard: 8}},
		{"custom shape", ChunkConfig{Standard: rl("cpu", "500m", "memory", "1Gi")}, rl("cpu", "2", "memory", "3500Mi"), map[api.ChunkType]int32{api.ChunkStandard: 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Chunks(tt.cfg, tt.res); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Chunks = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestChunkConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     ChunkConfig
		wantErr string
	}{
		{"default", DefaultChunkConfig(), ""},
		{"gpu disabled", ChunkConfig{Standard: rl("cpu", "1", "memory", "2Gi")}, ""},
		{"no standard", ChunkConfig{GPU: DefaultChunkConfig().GPU}, "standard chunk: no resources"},
		{"zero cpu", ChunkConfig{Standard: rl("cpu", "0", "memory", "2Gi")}, "standard chunk: cpu is 0"},
		{"negative gpu memory", ChunkConfig{Standard: rl("cpu", "1"), GPU: rl("cpu", "1", "memory", "-1Gi", "nvidia.com/gpu", "1")}, "gpu chunk: memory is -1Gi"},
		{"gpu without accelerator", ChunkConfig{Standard: rl("cpu", "1"), GPU: rl("cpu", "4", "memory", "8Gi")}, "no accelerator resource"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("Validate() = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestLoadChunkConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name    string
		path    string
		want    ChunkConfig
		wantErr string
	}{
		{"yaml both", write("a.yaml", "standard: {cpu: \"1\", memory: 2Gi}\ngpu:\n  cpu: 8\n  memory: 32Gi\n  nvidia.com/gpu: 2\n"),
			ChunkConfig{Standard: rl("cpu", "1", "memory", "2Gi"), GPU: rl("cpu", "8", "memory", "32Gi", "nvidia.com/gpu", "2")}, ""},
		{"json standard only keeps default gpu", write("b.json", `{"standard":{"cpu":"4","memory":"8Gi"}}`),
			ChunkConfig{Standard: rl("cpu", "4", "memory", "8Gi"), GPU: DefaultChunkConfig().GPU}, ""},
		{"gpu disabled", write("c.yaml", "gpu: {}\n"), ChunkConfig{Standard: DefaultChunkConfig().Standard, GPU: corev1.ResourceList{}}, ""},
		{"unknown key", write("d.yaml", "standrd: {cpu: 1}\n"), ChunkConfig{}, "unknown field"},
		{"invalid value", write("e.yaml", "standard: {cpu: \"0\", memory: 1Gi}\n"), ChunkConfig{}, "standard chunk: cpu is 0"},
		{"bad quantity", write("f.yaml", "standard: {cpu: lots}\n"), ChunkConfig{}, `standard[cpu] = "lots": must be a quantity`},
		{"missing file", filepath.Join(dir, "nope.yaml"), ChunkConfig{}, "reading chunk config"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := LoadChunkConfig(tt.path)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("LoadChunkConfig() error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !equalLists(got.Standard, tt.want.Standard) || !equalLists(got.GPU, tt.want.GPU) {
				t.Fatalf("LoadChunkConfig() = %v, want %v", got, tt.want)
			}
		})
	}
}

func equalLists(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || v.Cmp(w) != 0 {
			return false
		}
	}
	return true
}

func mustDec(t *testing.T, s string) *inf.Dec {
	t.Helper()
	d, ok := new(inf.Dec).SetString(s)
	if !ok {
		t.Fatalf("bad decimal %q", s)
	}
	return d
}

func TestFits(t *testing.T) {
	std := DefaultChunkConfig().Standard
	gpu := DefaultChunkConfig().GPU
	for _, tc := range []struct {
		name  string
		shape corev1.ResourceList
		req   corev1.ResourceList
		want  bool
	}{
		{"exactly the chunk", std, rl("cpu", "2", "memory", "4Gi"), true},
		{"a little more cpu", std, rl("cpu", "2001m", "memory", "1Gi"), false},
		{"a little more memory", std, rl("cpu", "1", "memory", "4097Mi"), false},
		{"storage is not part of a chunk", std, rl("cpu", "1", "ephemeral-storage", "100Gi"), true},
		{"a GPU on a standard chunk", std, rl("cpu", "1", "nvidia.com/gpu", "1"), false},
		{"a GPU on a GPU chunk", gpu, rl("cpu", "3", "memory", "8Gi", "nvidia.com/gpu", "1"), true},
		{"no requests", std, nil, true},
		{"no shape", nil, rl("cpu", "1"), false},
	} {
		if got := Fits(tc.shape, tc.req); got != tc.want {
			t.Errorf("%s: Fits = %v, want %v", tc.name, got, tc.want)
		}
	}
}
