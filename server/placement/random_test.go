package placement

import (
	"fmt"
	"slices"
	"testing"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// randomWinner is the one growable standard group of a Random view.
func randomWinner(t *testing.T, ix *Index, consumerID string) string {
	t.Helper()
	var won []string
	for _, g := range ix.View(consumerID, false).NodeGroups {
		if g.Type == api.ChunkStandard && g.MaxSize > g.CurrentReserved {
			won = append(won, g.ProviderClusterID)
		}
	}
	if len(won) != 1 {
		t.Fatalf("Random view of %s: growable standard groups %v, want exactly one", consumerID, won)
	}
	return won[0]
}

// drawSequence reserves one chunk n times on the Random winner (each a new
// draw) and returns the winners, releasing each chunk again so that every
// provider keeps its room.
func drawSequence(t *testing.T, seed uint64, n int) []string {
	t.Helper()
	ix := NewIndex(DefaultChunkConfig(), WithRandomSeed(seed))
	for i := range 6 {
		ix.UpsertProvider(prov(fmt.Sprintf("p%d", i), 4))
	}
	ix.UpsertConsumer(consumer("c", api.PlacementRandom))
	out := make([]string, 0, n)
	for range n {
		w := randomWinner(t, ix, "c")
		out = append(out, w)
		ix.SetUsage(w, api.ChunkStandard, "c", Usage{Live: 1})
		ix.SetUsage(w, api.ChunkStandard, "c", Usage{})
	}
	return out
}

func TestRandomIsUniformAmongProvidersWithRoom(t *testing.T) {
	const draws = 6000
	counts := map[string]int{}
	for _, w := range drawSequence(t, 7, draws) {
		counts[w]++
	}
	if len(counts) != 6 {
		t.Fatalf("winners %v: want all 6 providers", counts)
	}
	// Expected 1000 each; the binomial standard deviation is ~29, so ±150
	// is over 5 σ (the draws are deterministic for the seed: no flakes).
	for id, n := range counts {
		if n < 850 || n > 1150 {
			t.Errorf("provider %s won %d of %d draws, want about %d", id, n, draws, draws/6)
		}
	}
}

func TestRandomIsSeeded(t *testing.T) {
	a, b := drawSequence(t, 42, 50), drawSequence(t, 42, 50)
	if !slices.Equal(a, b) {
		t.Fatalf("same seed, different draws:\n%v\n%v", a, b)
	}
	if c := drawSequence(t, 43, 50); slices.Equal(a, c) {
		t.Fatalf("seeds 42 and 43 drew the same 50 providers: %v", a)
	}
}

func TestRandomViewIsStableBetweenReservations(t *testing.T) {
	ix := NewIndex(DefaultChunkConfig(), WithRandomSeed(1))
	for i := range 10 {
		ix.UpsertProvider(prov(fmt.Sprintf("p%d", i), 4))
	}
	ix.UpsertConsumer(consumer("c", api.PlacementRandom))
	first := ix.View("c", false)
	for range 5 {
		if again := ix.View("c", false); again.Generation != first.Generation {
			t.Fatalf("a repeated view changed without a reservation:\n%s\n%s", rows(first), rows(again))
		}
	}
	if first.AppliedPlacement != api.PlacementRandom {
		t.Fatalf("appliedPlacement %q, want Random", first.AppliedPlacement)
	}
}

func TestRandomNeverPicksAProviderWithoutRoom(t *testing.T) {
	for _, tc := range []struct {
		name string
		bad  Provider
		use  *usageSet
	}{
		{"full", prov("bad", 2), &usageSet{"bad", api.ChunkStandard, "other", Usage{Live: 2}}},
		{"stale", prov("bad", 4, unavailable), nil},
		{"denies", prov("bad", 4, sharing(api.Sharing{DeniedConsumers: []string{"c"}})), nil},
		{"allow list without it", prov("bad", 4, sharing(api.Sharing{AllowedConsumers: []string{"x"}})), nil},
		{"quota reached", prov("bad", 4, sharing(api.Sharing{MaxChunksPerConsumer: 1})), &usageSet{"bad", api.ChunkStandard, "c", Usage{Live: 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ix := NewIndex(DefaultChunkConfig())
			ix.UpsertProvider(tc.bad)
			ix.UpsertProvider(prov("good", 4))
			if tc.use != nil {
				ix.SetUsage(tc.use.provider, tc.use.t, tc.use.consumer, tc.use.u)
			}
			ix.UpsertConsumer(consumer("c", api.PlacementRandom))
			for i := range 200 {
				if w := randomWinner(t, ix, "c"); w != "good" {
					t.Fatalf("draw %d picked %s (%s)", i, w, tc.name)
				}
				ix.SetUsage("good", api.ChunkStandard, "c", Usage{Live: 1})
				ix.SetUsage("good", api.ChunkStandard, "c", Usage{})
			}
		})
	}
}

func TestRandomExplanationAgreesWithView(t *testing.T) {
	ix := NewIndex(DefaultChunkConfig(), WithRandomSeed(3))
	for i := range 8 {
		ix.UpsertProvider(prov(fmt.Sprintf("p%d", i), 4))
	}
	ix.UpsertConsumer(consumer("c", api.PlacementRandom))
	for range 20 {
		w := randomWinner(t, ix, "c")
		ex := ix.Explain("c", nil)
		if ex.Metric != api.MetricRandomDraw {
			t.Fatalf("explanation metric %q, want %q", ex.Metric, api.MetricRandomDraw)
		}
		var std *api.ChunkTypeExplanation
		for i := range ex.ChunkTypes {
			if ex.ChunkTypes[i].ChunkType == api.ChunkStandard {
				std = &ex.ChunkTypes[i]
			}
		}
		if std == nil || !slices.Equal(std.Winners, []string{w}) {
			t.Fatalf("explanation %+v, want the view's winner %s", std, w)
		}
		last := -1.0
		for _, c := range std.Candidates {
			if c.Metric == nil || *c.Metric < last || *c.Metric >= 1 {
				t.Fatalf("candidates not in ascending draw order in [0, 1): %+v", std.Candidates)
			}
			last = *c.Metric
		}
		ix.SetUsage(w, api.ChunkStandard, "c", Usage{Live: 1})
		ix.SetUsage(w, api.ChunkStandard, "c", Usage{})
	}
}
