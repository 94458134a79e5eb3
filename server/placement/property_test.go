package placement

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// fedGen draws random federations. Values come from small sets so that
// ties (equal prices, carbon, distances, scores) are frequent.
type fedGen struct {
	r         *rand.Rand
	consumers []string
	// large draws continuous coordinates and carbon, and only the Weighted
	// and Latency policies, for big federations.
	large bool
}

func ptr[T any](v T) *T { return &v }

func (g *fedGen) provider(id string) Provider {
	r := g.r
	p := Provider{ID: id, LiqoID: "liqo-" + id, Available: r.IntN(8) != 0, ProbeEndpoint: fmt.Sprintf("10.0.0.%d:30100", r.IntN(200))}
	p.Resources = corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewMilliQuantity(int64(r.IntN(40))*500, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(int64(r.IntN(80))<<30, resource.BinarySI),
	}
	if r.IntN(3) == 0 {
		p.Resources[ResourceGPU] = *resource.NewQuantity(int64(r.IntN(4)), resource.DecimalSI)
	}
	if r.IntN(4) != 0 {
		p.UnitPrices = corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse([]string{"0.02", "0.03", "0.025", "0.1"}[r.IntN(4)]),
			corev1.ResourceMemory: resource.MustParse([]string{"0.003", "0.005", "0.0025"}[r.IntN(3)]),
		}
		if r.IntN(2) == 0 {
			p.UnitPrices[ResourceGPU] = resource.MustParse([]string{"0.5", "1.2"}[r.IntN(2)])
		}
		if r.IntN(15) == 0 {
			p.UnitPrices[corev1.ResourceCPU] = resource.MustParse("-1")
		}
	}
	switch r.IntN(4) {
	case 0:
	case 1:
		p.CarbonIntensity = ptr(float64([]int{20, 50, 300, 700}[r.IntN(4)]))
	default:
		n := r.IntN(24) + 1
		p.CarbonForecast = make([]float64, n)
		for i := range p.CarbonForecast {
			p.CarbonForecast[i] = float64([]int{20, 50, 300, 700}[r.IntN(4)])
		}
	}
	p.Renewable = r.IntN(2) == 0
	if r.IntN(5) != 0 {
		p.Topology = &api.Topology{Region: "r", City: "c"}
		if r.IntN(8) != 0 {
			p.Topology.Latitude = float64(r.IntN(21)*8 - 80)
			p.Topology.Longitude = float64(r.IntN(31)*12 - 180)
			if g.large {
				p.Topology.Latitude, p.Topology.Longitude = r.Float64()*170-85, r.Float64()*360-180
			}
		}
	}
	if r.IntN(3) == 0 {
		s := &api.Sharing{}
		for _, c := range g.consumers {
			switch r.IntN(5) {
			case 0:
				s.AllowedConsumers = append(s.AllowedConsumers, c)
			case 1:
				s.DeniedConsumers = append(s.DeniedConsumers, c)
			}
		}
		if r.IntN(2) == 0 {
			s.MaxChunksPerConsumer = int32(r.IntN(4))
		}
		p.Sharing = s
	}
	return p
}

func (g *fedGen) consumer(id string) Consumer {
	r := g.r
	c := Consumer{ID: id}
	c.Placement.Type = []api.PlacementType{"", api.PlacementStandard, api.PlacementPrice, api.PlacementEco, api.PlacementLatency, api.PlacementWeighted, "Cheapest"}[r.IntN(7)]
	if g.large {
		c.Placement.Type = []api.PlacementType{api.PlacementLatency, api.PlacementWeighted, api.PlacementWeighted}[r.IntN(3)]
	}
	if r.IntN(4) != 0 {
		c.Latitude, c.Longitude = ptr(float64(r.IntN(21)*8-80)), ptr(float64(r.IntN(31)*12-180))
		if g.large {
			c.Latitude, c.Longitude = ptr(r.Float64()*170-85), ptr(r.Float64()*360-180)
		}
	}
	if c.Placement.Type == api.PlacementWeighted && r.IntN(5) != 0 {
		c.Placement.Weights = &api.Weights{Price: float64(r.IntN(3)), Carbon: float64(r.IntN(3)), Distance: float64(r.IntN(3)), FreeCapacity: float64(r.IntN(3))}
		if g.large {
			c.Placement.Weights = &api.Weights{Price: r.Float64(), Carbon: r.Float64(), Distance: r.Float64() * 3, FreeCapacity: r.Float64()}
		}
	}
	if c.Placement.Type == api.PlacementLatency && r.IntN(2) == 0 {
		// Past 16: a record the heartbeat check never saw is capped.
		c.Placement.LatencyCandidates = r.IntN(20)
	}
	return c
}

func (g *fedGen) usage() Usage {
	u := Usage{Live: int32(g.r.IntN(4))}
	if g.r.IntN(3) == 0 {
		u.InFlight = min(u.Live, int32(g.r.IntN(3)))
	}
	return u
}

// TestIndexMatchesModel drives the Index and the naive model through the
// same random sequences of advertisements, heartbeats, usage changes and
// removals and requires identical views for every consumer after every
// step (which exercises the incremental re-keying of the trees).
func TestIndexMatchesModel(t *testing.T) {
	// Each iteration is one random federation of up to 25 providers and 5
	// consumers driven through 30 mutations, every view compared.
	iterations := 150
	if raceEnabled || testing.Short() {
		iterations = 25
	}
	runModelComparison(t, iterations, 25, 30, false)
}

// TestIndexMatchesModelLarge does the same with a few federations of up
// to 400 providers with continuous coordinates and weights, where the
// Latency walk and the Weighted threshold walk stop early.
func TestIndexMatchesModelLarge(t *testing.T) {
	iterations := 12
	if raceEnabled || testing.Short() {
		iterations = 3
	}
	runModelComparison(t, iterations, 400, 8, true)
}

func runModelComparison(t *testing.T, iterations, maxProviders, steps int, large bool) {
	t.Helper()
	for seed := range iterations {
		r := rand.New(rand.NewPCG(uint64(seed), 7))
		g := &fedGen{r: r, large: large}
		nc := 1 + r.IntN(5)
		for i := range nc {
			g.consumers = append(g.consumers, fmt.Sprintf("c%d", i))
		}
		np := 1 + r.IntN(maxProviders)
		ix := NewIndex(DefaultChunkConfig())
		m := newModel(DefaultChunkConfig())
		for _, c := range g.consumers {
			cc := g.consumer(c)
			ix.UpsertConsumer(cc)
			m.consumers[c] = cc
		}
		pid := func() string { return fmt.Sprintf("p-%02d", r.IntN(np)) }
		for range np {
			p := g.provider(pid())
			ix.UpsertProvider(p)
			m.setProvider(p)
		}
		for step := range steps {
			switch r.IntN(6) {
			case 0:
				p := g.provider(pid())
				ix.UpsertProvider(p)
				m.setProvider(p)
			case 1:
				if r.IntN(4) == 0 {
					id := pid()
					ix.RemoveProvider(id)
					m.removeProvider(id)
				}
			case 2:
				c := g.consumer(g.consumers[r.IntN(nc)])
				ix.UpsertConsumer(c)
				m.consumers[c.ID] = c
			default:
				p, t, c, u := pid(), []api.ChunkType{api.ChunkGPU, api.ChunkStandard}[r.IntN(2)], g.consumers[r.IntN(nc)], g.usage()
				ix.SetUsage(p, t, c, u)
				m.setUsage(p, t, c, u)
			}
			for _, c := range append(g.consumers, "stranger") {
				for _, all := range []bool{false, true} {
					got := ix.View(c, all)
					got.ServedAt = metav1.Time{}
					want := m.view(c, all)
					if !reflect.DeepEqual(got, want) {
						t.Fatalf("seed %d step %d consumer %s all=%v policy %q:\n got %s\nwant %s", seed, step, c, all, m.consumers[c].Placement.Type, dump(got), dump(want))
					}
					checkInvariants(t, m, c, got)
				}
				checkExplainAgrees(t, ix, c)
			}
		}
	}
}

func dump(r api.NodeGroupListResponse) string {
	s := fmt.Sprintf("applied=%s shortlist=%v gen=%d", r.AppliedPlacement, r.LatencyShortlist, r.Generation)
	for _, g := range r.NodeGroups {
		m := "-"
		if g.HasMetric {
			m = fmt.Sprint(*g.PlacementMetric)
		}
		s += fmt.Sprintf("\n  %s max=%d cur=%d cost=%s metric=%s", g.ID, g.MaxSize, g.CurrentReserved, g.Cost, m)
	}
	return s
}

// checkInvariants asserts the properties directly, independently of
// the model's masking logic: head-room within free chunks and quota, no
// denied provider, at most one growable group per type (three under
// Latency), and under Price the growable provider is a cheapest one with
// room for the consumer.
func checkInvariants(t *testing.T, m *model, consumerID string, v api.NodeGroupListResponse) {
	t.Helper()
	growable := map[api.ChunkType]int{}
	for _, g := range v.NodeGroups {
		p, ok := m.providers[g.ProviderClusterID]
		if !ok {
			t.Fatalf("view shows unknown provider %s", g.ProviderClusterID)
		}
		if !MayBorrow(p.Sharing, consumerID) {
			t.Fatalf("provider %s denies %s but is shown", p.ID, consumerID)
		}
		room := g.MaxSize - g.CurrentReserved
		if room < 0 || g.MinSize != 0 {
			t.Fatalf("group %s: min %d max %d current %d", g.ID, g.MinSize, g.MaxSize, g.CurrentReserved)
		}
		if room == 0 {
			continue
		}
		growable[g.Type]++
		if !p.Available {
			t.Fatalf("unavailable provider %s is growable", p.ID)
		}
		live := int32(0)
		for _, u := range m.usage[p.ID][g.Type] {
			live += u.Live
		}
		if free := m.chunks[p.ID][g.Type] - live; room > free {
			t.Fatalf("group %s offers %d chunks, only %d free", g.ID, room, free)
		}
		if q := Quota(p.Sharing); q > 0 && g.MaxSize > q {
			t.Fatalf("group %s lets %s hold %d chunks, quota %d", g.ID, consumerID, g.MaxSize, q)
		}
		if v.AppliedPlacement == api.PlacementPrice {
			mine, ok := m.costs[p.ID][g.Type]
			for _, o := range m.providers {
				if o.ID == p.ID || !o.Available || !MayBorrow(o.Sharing, consumerID) {
					continue
				}
				oc, ook := m.costs[o.ID][g.Type]
				if !ook || modelRoom(m, o, g.Type, consumerID) == 0 {
					continue
				}
				if !ok || oc.Cmp(mine) < 0 {
					t.Fatalf("Price: growable %s costs %v but %s with room costs %v", p.ID, mine, o.ID, oc)
				}
			}
		}
	}
	for typ, n := range growable {
		limit := 1
		if v.AppliedPlacement == api.PlacementLatency {
			limit = LatencyShortlistMax // three, more when tied at the third's distance
		}
		if n > limit {
			t.Fatalf("%d growable %s groups under %s", n, typ, v.AppliedPlacement)
		}
	}
}

func modelRoom(m *model, p Provider, t api.ChunkType, consumerID string) int32 {
	live, mine := int32(0), int32(0)
	for c, u := range m.usage[p.ID][t] {
		live += u.Live
		if c == consumerID {
			mine = u.Live
		}
	}
	room := max(m.chunks[p.ID][t]-live, 0)
	if q := Quota(p.Sharing); q > 0 {
		room = min(room, q-mine)
	}
	return max(room, 0)
}
