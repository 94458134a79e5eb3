package choice

import (
	"context"
	"fmt"
	"testing"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// BenchmarkSelectCached is the Choice selector's cost on the Cluster
// Autoscaler's path once the model has answered: building the candidates
// from a view of n providers, the cache lookup, the picks and the mask.
func BenchmarkSelectCached(b *testing.B) {
	for _, n := range []int{9, 32, 256} {
		b.Run(fmt.Sprintf("providers=%d", n), func(b *testing.B) {
			var groups []api.NodeGroupView
			for i := range n {
				groups = append(groups, group(fmt.Sprintf("p%03d", i), 4, float64(i%7)))
			}
			v := view(groups...)
			s, err := New(Config{HTTP: textDoer(`{"ranking": ["p001", "p000"]}`), MaxCandidates: n})
			if err != nil {
				b.Fatal(err)
			}
			in := Input{Intent: "green", View: v, Endpoint: Endpoint{API: APIOllama, URL: "http://model.invalid", Model: "m"}}
			s.Select(context.Background(), in) // the one model call
			b.ReportAllocs()
			for b.Loop() {
				d := s.Select(context.Background(), in)
				masked := v
				masked.NodeGroups = append([]api.NodeGroupView(nil), v.NodeGroups...)
				Mask(&masked, d)
			}
		})
	}
}
