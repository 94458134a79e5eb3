package placement

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// nearGen draws locations that stress the distance index: a coarse grid
// (duplicates, the poles, lon ±180), the consumer's own spot, its
// antipode, points a hair away from either, any lon at a pole, and
// continuous ones.
type nearGen struct {
	r          *rand.Rand
	clat, clon float64
}

func (g *nearGen) coord() (lat, lon float64) {
	r := g.r
	hair := func() float64 { return r.NormFloat64() * 1e-9 }
	antiLon := g.clon + 180
	if antiLon > 180 {
		antiLon -= 360
	}
	switch r.IntN(9) {
	case 0, 1:
		return float64(r.IntN(5)*45 - 90), float64(r.IntN(9)*45 - 180)
	case 2:
		return g.clat, g.clon
	case 3:
		return -g.clat, antiLon
	case 4:
		return math.Max(-90, math.Min(90, g.clat+hair())), math.Max(-180, math.Min(180, g.clon+hair()))
	case 5:
		return math.Max(-90, math.Min(90, -g.clat+hair())), math.Max(-180, math.Min(180, antiLon+hair()))
	case 6:
		return float64(r.IntN(2)*180 - 90), r.Float64()*360 - 180
	case 7:
		return r.Float64()*180 - 90, float64(r.IntN(2)*360 - 180)
	}
	return r.Float64()*180 - 90, r.Float64()*360 - 180
}

// nearPlace is one entry of the old definition of the walk.
type nearPlace struct {
	id   string
	dist float64
}

// sortedNear is the old definition: every provider with coordinates and
// chunks of type ti that is open for it, sorted by (DistanceKM, id),
// reversed for farthest first.
func sortedNear(ix *Index, clat, clon float64, ti int, rev bool) []nearPlace {
	var out []nearPlace
	for id, ps := range ix.providers {
		if ps.hasCoords && ps.total[ti] > 0 && ps.indexed[ti] {
			out = append(out, nearPlace{id, DistanceKM(clat, clon, ps.lat, ps.lon)})
		}
	}
	slices.SortFunc(out, func(a, b nearPlace) int {
		if c := cmp.Compare(a.dist, b.dist); c != 0 {
			return c
		}
		return strings.Compare(a.id, b.id)
	})
	if rev {
		slices.Reverse(out)
	}
	return out
}

// walkNear reads at most limit providers (all with limit < 0) from
// consumer c's walk of type ti.
func walkNear(ix *Index, c string, ti int, rev bool, limit int) []nearPlace {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	v := ix.newViewCtx(c, nil, nil)
	var out []nearPlace
	for it := v.newNearIter(ti, rev); len(out) != limit; {
		ps, d, ok := it.next()
		if !ok {
			break
		}
		out = append(out, nearPlace{ps.p.ID, d})
	}
	return out
}

// TestNearIterMatchesSort checks the k-d tree walk against the sorted list
// it replaces, on random federations: the same providers in the same order
// with the same distance (bit for bit), nearest and farthest first, whole
// and cut short, across provider moves, departures and capacity changes.
func TestNearIterMatchesSort(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 2026))
	iterations := 300
	if testing.Short() {
		iterations = 60
	}
	for iter := range iterations {
		g := &nearGen{r: r}
		for g.clat == 0 && g.clon == 0 {
			g.clat, g.clon = r.Float64()*180-90, r.Float64()*360-180
			if r.IntN(2) == 0 {
				g.clat, g.clon = g.coord()
			}
		}
		ix := NewIndex(DefaultChunkConfig())
		ix.UpsertConsumer(consumer("c", api.PlacementLatency, located(g.clat, g.clon)))
		n := []int{0, 1, 2, 9, 17, 60, 250}[iter%7]
		upsert := func() {
			id := fmt.Sprintf("p%03d", r.IntN(2*n+1))
			var opts []func(*Provider)
			if r.IntN(10) != 0 {
				opts = append(opts, at(g.coord()))
			}
			if r.IntN(6) == 0 {
				opts = append(opts, unavailable)
			}
			if r.IntN(3) == 0 {
				opts = append(opts, withResources("cpu", "8", "memory", "16Gi", "nvidia.com/gpu", "1"))
			}
			ix.UpsertProvider(prov(id, 1+r.IntN(3), opts...))
			if r.IntN(5) == 0 { // full: not open for the type
				ix.SetUsage(id, chunkTypes[r.IntN(numTypes)], "other", Usage{Live: 8})
			}
		}
		for range n {
			upsert()
		}
		for round := range 4 {
			for ti := range chunkTypes {
				for _, rev := range []bool{false, true} {
					want := sortedNear(ix, g.clat, g.clon, ti, rev)
					for _, limit := range []int{-1, 0, 1, 3, r.IntN(len(want) + 2)} {
						got := walkNear(ix, "c", ti, rev, limit)
						w := want
						if limit >= 0 && limit < len(w) {
							w = w[:limit]
						}
						if !slices.Equal(got, w) {
							t.Fatalf("iteration %d round %d, consumer at %v,%v, type %s, farthest first %v, limit %d:\n got %v\nwant %v",
								iter, round, g.clat, g.clon, chunkTypes[ti], rev, limit, got, w)
						}
					}
				}
			}
			for range 1 + n/4 { // moves, arrivals, departures, capacity
				switch r.IntN(3) {
				case 0:
					ix.RemoveProvider(fmt.Sprintf("p%03d", r.IntN(2*n+1)))
				case 1:
					ix.SetUsage(fmt.Sprintf("p%03d", r.IntN(2*n+1)), api.ChunkStandard, "other", Usage{Live: int32(r.IntN(3))})
				default:
					upsert()
				}
			}
		}
	}
}
