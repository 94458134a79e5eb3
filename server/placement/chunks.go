package placement

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"gopkg.in/inf.v0"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// ResourceGPU is the accelerator resource of the default GPU chunk.
const ResourceGPU corev1.ResourceName = "nvidia.com/gpu"

// DefaultChunkConfig returns the default chunk shapes: a standard chunk of
// 2 CPU / 4 GiB and a GPU chunk of 4 CPU / 8 GiB / 1 nvidia.com/gpu.
func DefaultChunkConfig() ChunkConfig {
	return ChunkConfig{
		Standard: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("2"),
			corev1.ResourceMemory: resource.MustParse("4Gi"),
		},
		GPU: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("4"),
			corev1.ResourceMemory: resource.MustParse("8Gi"),
			ResourceGPU:           resource.MustParse("1"),
		},
	}
}

// Validate reports what is wrong with c: the standard chunk must name at
// least one resource and every quantity of both shapes must be positive and
// at most api.MaxQuantity (so a chunk's cost stays within float64). An
// empty GPU shape disables GPU chunks; a non-empty one must name at least one
// resource other than cpu and memory (the accelerator that tells a GPU
// provider apart).
func (c ChunkConfig) Validate() error {
	var errs []error
	if len(c.Standard) == 0 {
		errs = append(errs, errors.New("standard chunk: no resources; give at least cpu and memory, e.g. cpu: \"2\", memory: 4Gi"))
	}
	for _, name := range sortedNames(c.Standard) {
		if err := checkShape(c.Standard[name], name); err != nil {
			errs = append(errs, fmt.Errorf("standard chunk: %w", err))
		}
	}
	if len(c.GPU) > 0 {
		if len(acceleratorNames(c.GPU)) == 0 {
			errs = append(errs, fmt.Errorf("gpu chunk: no accelerator resource (only cpu/memory); add e.g. %s: \"1\" or leave the gpu shape empty to disable GPU chunks", ResourceGPU))
		}
		for _, name := range sortedNames(c.GPU) {
			if err := checkShape(c.GPU[name], name); err != nil {
				errs = append(errs, fmt.Errorf("gpu chunk: %w", err))
			}
		}
	}
	return errors.Join(errs...)
}

// checkShape checks one amount of a chunk shape: a resource name, positive
// and within api.MaxQuantity.
func checkShape(q resource.Quantity, name corev1.ResourceName) error {
	if err := api.CheckResourceName(string(name), name); err != nil {
		return err
	}
	if q.Sign() <= 0 {
		return fmt.Errorf("%s is %s; it must be positive", name, q.String())
	}
	if err := api.CheckQuantity(string(name), q); err != nil {
		return err
	}
	return nil
}

// chunkConfigFile is the on-disk shape read by LoadChunkConfig.
type chunkConfigFile struct {
	Standard *corev1.ResourceList `json:"standard,omitempty"`
	GPU      *corev1.ResourceList `json:"gpu,omitempty"`
}

// LoadChunkConfig reads the chunk shapes from a YAML or JSON file:
//
//	standard: {cpu: "2", memory: 4Gi}
//	gpu: {cpu: "4", memory: 8Gi, nvidia.com/gpu: "1"}
//
// A shape left out keeps its default; "gpu: {}" disables GPU chunks. Unknown
// keys are rejected. The result is validated.
func LoadChunkConfig(path string) (ChunkConfig, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return ChunkConfig{}, fmt.Errorf("reading chunk config: %w", err)
	}
	return ParseChunkConfig(raw, path)
}

// ParseChunkConfig parses and validates the chunk shapes of LoadChunkConfig
// from raw; source names the file in errors.
func ParseChunkConfig(raw []byte, source string) (ChunkConfig, error) {
	var f chunkConfigFile
	if doc, err := yaml.YAMLToJSON(raw); err == nil {
		if fe := api.ScreenQuantities(doc, "standard", "gpu"); fe != nil {
			return ChunkConfig{}, fmt.Errorf("invalid chunk config %s: %w", source, fe)
		}
	}
	if err := yaml.UnmarshalStrict(raw, &f); err != nil {
		return ChunkConfig{}, fmt.Errorf("parsing chunk config %s (expected YAML or JSON with keys standard and gpu): %w", source, err)
	}
	cfg := DefaultChunkConfig()
	if f.Standard != nil {
		cfg.Standard = *f.Standard
	}
	if f.GPU != nil {
		cfg.GPU = *f.GPU
	}
	if err := cfg.Validate(); err != nil {
		return ChunkConfig{}, fmt.Errorf("invalid chunk config %s: %w", source, err)
	}
	return cfg, nil
}

// Shape returns the resources of one chunk of type t (nil for an unknown
// type). The caller must not modify the result.
func (c ChunkConfig) Shape(t api.ChunkType) corev1.ResourceList {
	switch t {
	case api.ChunkStandard:
		return c.Standard
	case api.ChunkGPU:
		return c.GPU
	}
	return nil
}

// Chunks cuts advertised resources into whole chunks. A provider that has
// every accelerator of the GPU shape (a positive amount) offers GPU chunks
// (floor over every resource of the GPU shape) and offers what remains of its
// resources as standard chunks (floor over every resource of the standard
// shape). Leftovers are not offered. Only types with at least one chunk are
// present in the result; it is never nil.
func Chunks(cfg ChunkConfig, resources corev1.ResourceList) map[api.ChunkType]int32 {
	out := make(map[api.ChunkType]int32, 2)
	remaining := make(map[corev1.ResourceName]*inf.Dec, len(resources))
	for name, q := range resources {
		remaining[name] = q.AsDec()
	}
	if accel := acceleratorNames(cfg.GPU); len(accel) > 0 {
		hasAll := true
		for _, name := range accel {
			if d, ok := remaining[name]; !ok || d.Sign() <= 0 {
				hasAll = false
				break
			}
		}
		if hasAll {
			if n := fit(remaining, cfg.GPU); n > 0 {
				out[api.ChunkGPU] = clampInt32(n)
				for name, q := range cfg.GPU {
					used := new(inf.Dec).Mul(q.AsDec(), inf.NewDec(n, 0))
					remaining[name] = new(inf.Dec).Sub(remaining[name], used)
				}
			}
		}
	}
	if n := fit(remaining, cfg.Standard); n > 0 {
		out[api.ChunkStandard] = clampInt32(n)
	}
	return out
}

// fit returns how many whole shapes fit into remaining (0 for an empty shape).
func fit(remaining map[corev1.ResourceName]*inf.Dec, shape corev1.ResourceList) int64 {
	if len(shape) == 0 {
		return 0
	}
	best := int64(-1)
	for name, q := range shape {
		have, ok := remaining[name]
		if !ok || have.Sign() <= 0 {
			return 0
		}
		quo := new(inf.Dec).QuoRound(have, q.AsDec(), 0, inf.RoundDown)
		n, ok := quo.Unscaled()
		if !ok || quo.Scale() != 0 {
			n = 1<<31 - 1
		}
		if best < 0 || n < best {
			best = n
		}
	}
	return max(best, 0)
}

// AddChunks adds two chunk counts, saturating at the int32 maximum (the wire
// type): totals over providers that each advertise the maximum never wrap.
func AddChunks(a, b int32) int32 { return clampInt32(int64(a) + int64(b)) }

func clampInt32(n int64) int32 {
	if n > 1<<31-1 {
		return 1<<31 - 1
	}
	return int32(n)
}

// acceleratorNames returns the resources of a GPU shape other than cpu and
// memory, sorted.
func acceleratorNames(shape corev1.ResourceList) []corev1.ResourceName {
	var out []corev1.ResourceName
	for _, name := range sortedNames(shape) {
		if name != corev1.ResourceCPU && name != corev1.ResourceMemory {
			out = append(out, name)
		}
	}
	return out
}

func sortedNames(l corev1.ResourceList) []corev1.ResourceName {
	out := make([]corev1.ResourceName, 0, len(l))
	for name := range l {
		out = append(out, name)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Fits reports whether a pod requesting requests fits on one chunk of
// shape: every requested amount of cpu, memory and of any extended
// resource (a name with a domain, such as nvidia.com/gpu) is at most the
// chunk's. Other requests (ephemeral-storage, pods) are not part of a
// chunk's shape and do not count. An empty shape fits nothing.
func Fits(shape, requests corev1.ResourceList) bool {
	if len(shape) == 0 {
		return false
	}
	for name, q := range requests {
		if name != corev1.ResourceCPU && name != corev1.ResourceMemory && !strings.Contains(string(name), "/") {
			continue
		}
		if q.Sign() <= 0 {
			continue
		}
		have, ok := shape[name]
		if !ok || q.Cmp(have) > 0 {
			return false
		}
	}
	return true
}
