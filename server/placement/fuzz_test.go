package placement

import (
	"encoding/json"
	"math"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/api/apitest"
)

// FuzzChunksAndCost: for any advertised amounts and prices (also those the
// broker refuses at ingest, as records stored before the limits may hold),
// cutting chunks and pricing them never panics, counts are never negative
// and the float cost the index ranks by is finite. For values within the
// limits, a consumer's view of the provider encodes as JSON with finite
// metrics under every policy.
func FuzzChunksAndCost(f *testing.F) {
	f.Add("8", "32Gi", "1", "0.02", "0.003")
	f.Add("1e30", "1E", "0", "9e307", "9e307")
	f.Add("1E", "1E", "1E", "1M", "1M")
	f.Add("-4", "0", "1e100", "1e100000", "-1")
	f.Fuzz(func(t *testing.T, cpu, mem, gpu, priceCPU, priceMem string) {
		qs := make([]resource.Quantity, 5)
		for i, s := range []string{cpu, mem, gpu, priceCPU, priceMem} {
			q, fe := api.ParseQuantity("q", s)
			if fe != nil {
				return // not a quantity, or text the broker refuses before parsing
			}
			qs[i] = q
		}
		res := corev1.ResourceList{corev1.ResourceCPU: qs[0], corev1.ResourceMemory: qs[1], ResourceGPU: qs[2]}
		prices := corev1.ResourceList{corev1.ResourceCPU: qs[3], corev1.ResourceMemory: qs[4], ResourceGPU: qs[3]}
		cfg := DefaultChunkConfig()
		for typ, n := range Chunks(cfg, res) {
			if n <= 0 {
				t.Fatalf("%s chunks = %d for %v", typ, n, res)
			}
		}
		for _, typ := range []api.ChunkType{api.ChunkStandard, api.ChunkGPU} {
			if cost, ok := CostPerChunk(prices, cfg.Shape(typ)); ok {
				if v, _ := strconvDec(cost); math.IsNaN(v) || math.IsInf(v, 0) {
					t.Fatalf("cost %s of a %s chunk ranks as %v", cost, typ, v)
				}
			}
		}
		ad := api.AdvertisementRequest{ClusterID: "p1", LiqoClusterID: "liqo-p1", Resources: res, UnitPrices: prices}
		if ad.Validate() != nil {
			return
		}
		ix := NewIndex(cfg)
		ix.UpsertProvider(Provider{ID: "p1", LiqoID: "liqo-p1", Available: true, Resources: res, UnitPrices: prices})
		ix.UpsertProvider(prov("p2", 2, priced("0.01", "0.001")))
		for _, pt := range []api.PlacementType{api.PlacementPrice, api.PlacementWeighted, api.PlacementStandard} {
			ix.UpsertConsumer(consumer("c1", pt, weights(api.Weights{Price: api.MaxWeight, FreeCapacity: api.MaxWeight})))
			v := ix.View("c1", true)
			if err := apitest.WithinLimits(v.NodeGroups); err != nil {
				t.Fatalf("%s view: %v", pt, err)
			}
			if _, err := json.Marshal(v); err != nil {
				t.Fatalf("%s view does not encode: %v", pt, err)
			}
		}
	})
}

// FuzzParseChunkConfig: the --chunk-config parser never panics; what it
// accepts is valid, within the limits, and cuts any advertisement into a
// non-negative number of chunks.
func FuzzParseChunkConfig(f *testing.F) {
	f.Add([]byte("standard: {cpu: \"2\", memory: 4Gi}\ngpu: {cpu: \"4\", memory: 8Gi, nvidia.com/gpu: \"1\"}\n"))
	f.Add([]byte("gpu: {}\n"))
	f.Add([]byte("standard: {cpu: 1e30}\n"))
	f.Add([]byte("standard: {\"../x\": 1}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := ParseChunkConfig(data, "fuzz")
		if err != nil {
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("accepted an invalid config: %v", err)
		}
		if err := apitest.WithinLimits(cfg); err != nil {
			t.Fatalf("accepted %q: %v", data, err)
		}
		maxQ := api.MaxQuantityValue()
		huge := corev1.ResourceList{}
		for _, shape := range []corev1.ResourceList{cfg.Standard, cfg.GPU} {
			for name := range shape {
				huge[name] = maxQ
			}
		}
		for typ, n := range Chunks(cfg, huge) {
			if n <= 0 {
				t.Fatalf("%s: %d chunks", typ, n)
			}
		}
	})
}
