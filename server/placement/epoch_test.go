package placement

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// TestEpochMovesOnlyOnChange: re-sending what the Index knows leaves the
// epoch alone; every change a decision reads moves it.
func TestEpochMovesOnlyOnChange(t *testing.T) {
	base := func() *Index {
		ix := NewIndex(DefaultChunkConfig())
		ix.UpsertProvider(prov("p1", 4, priced("0.02", "0.005"), at(45, 9), forecast(100, 200)))
		ix.UpsertConsumer(consumer("c1", api.PlacementPrice, located(45, 9)))
		ix.SetUsage("p1", api.ChunkStandard, "c1", Usage{Live: 1})
		return ix
	}
	tests := []struct {
		name  string
		do    func(ix *Index)
		moves bool
	}{
		{"same advertisement", func(ix *Index) {
			ix.UpsertProvider(prov("p1", 4, priced("0.02", "0.005"), at(45, 9), forecast(100, 200)))
		}, false},
		{"same prices written differently", func(ix *Index) {
			p := prov("p1", 4, priced("0.02", "0.005"), at(45, 9), forecast(100, 200))
			p.UnitPrices["cpu"] = resource.MustParse("20m")
			ix.UpsertProvider(p)
		}, false},
		{"same heartbeat", func(ix *Index) { ix.UpsertConsumer(consumer("c1", api.PlacementPrice, located(45, 9))) }, false},
		{"same usage", func(ix *Index) { ix.SetUsage("p1", api.ChunkStandard, "c1", Usage{Live: 1}) }, false},
		{"unknown consumer removed", func(ix *Index) { ix.RemoveConsumer("nobody") }, false},
		{"unknown provider removed", func(ix *Index) { ix.RemoveProvider("nobody") }, false},
		{"new price", func(ix *Index) {
			ix.UpsertProvider(prov("p1", 4, priced("0.03", "0.005"), at(45, 9), forecast(100, 200)))
		}, true},
		{"new forecast", func(ix *Index) {
			ix.UpsertProvider(prov("p1", 4, priced("0.02", "0.005"), at(45, 9), forecast(100, 300)))
		}, true},
		{"more capacity", func(ix *Index) {
			ix.UpsertProvider(prov("p1", 5, priced("0.02", "0.005"), at(45, 9), forecast(100, 200)))
		}, true},
		{"goes stale", func(ix *Index) {
			ix.UpsertProvider(prov("p1", 4, priced("0.02", "0.005"), at(45, 9), forecast(100, 200), unavailable))
		}, true},
		{"new sharing rule", func(ix *Index) {
			ix.UpsertProvider(prov("p1", 4, priced("0.02", "0.005"), at(45, 9), forecast(100, 200), sharing(api.Sharing{DeniedConsumers: []string{"c1"}})))
		}, true},
		{"another provider", func(ix *Index) { ix.UpsertProvider(prov("p2", 1)) }, true},
		{"provider removed", func(ix *Index) { ix.RemoveProvider("p1") }, true},
		{"policy switch", func(ix *Index) { ix.UpsertConsumer(consumer("c1", api.PlacementEco, located(45, 9))) }, true},
		{"consumer moved", func(ix *Index) { ix.UpsertConsumer(consumer("c1", api.PlacementPrice, located(46, 9))) }, true},
		{"consumer removed", func(ix *Index) { ix.RemoveConsumer("c1") }, true},
		{"usage grows", func(ix *Index) { ix.SetUsage("p1", api.ChunkStandard, "c1", Usage{Live: 2}) }, true},
		{"usage in flight", func(ix *Index) { ix.SetUsage("p1", api.ChunkStandard, "c1", Usage{Live: 1, InFlight: 1}) }, true},
		{"usage released", func(ix *Index) { ix.SetUsage("p1", api.ChunkStandard, "c1", Usage{}) }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ix := base()
			before := ix.Epoch()
			tt.do(ix)
			if moved := ix.Epoch() != before; moved != tt.moves {
				t.Errorf("epoch moved = %v, want %v", moved, tt.moves)
			}
		})
	}
}

// TestUnchangedReadvertisementKeepsDecisions: skipping the re-index of an
// identical advertisement changes no decision.
func TestUnchangedReadvertisementKeepsDecisions(t *testing.T) {
	ix := NewIndex(DefaultChunkConfig())
	ix.UpsertProvider(prov("cheap", 2, priced("0.01", "0.001")))
	ix.UpsertProvider(prov("dear", 2, priced("0.05", "0.005")))
	ix.UpsertConsumer(consumer("c1", api.PlacementPrice))
	ix.SetUsage("cheap", api.ChunkStandard, "c1", Usage{Live: 1})
	before := ix.View("c1", false)
	ix.UpsertProvider(prov("cheap", 2, priced("0.01", "0.001")))
	after := ix.View("c1", false)
	if len(before.NodeGroups) != len(after.NodeGroups) {
		t.Fatalf("node groups %d → %d", len(before.NodeGroups), len(after.NodeGroups))
	}
	for i := range before.NodeGroups {
		if before.NodeGroups[i].ID != after.NodeGroups[i].ID || before.NodeGroups[i].MaxSize != after.NodeGroups[i].MaxSize {
			t.Errorf("group %d: %+v → %+v", i, before.NodeGroups[i], after.NodeGroups[i])
		}
	}
}
