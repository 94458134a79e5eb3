package placement

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// prov builds an available provider with n standard chunks (2n CPU, 4n GiB).
func prov(id string, n int, opts ...func(*Provider)) Provider {
	p := Provider{
		ID: id, LiqoID: "liqo-" + id, Available: true,
		Resources: rl("cpu", fmt.Sprint(2*n), "memory", fmt.Sprintf("%dGi", 4*n)),
	}
	for _, o := range opts {
		o(&p)
	}
	return p
}

func priced(cpu, mem string) func(*Provider) {
	return func(p *Provider) { p.UnitPrices = rl("cpu", cpu, "memory", mem) }
}
func renewable(p *Provider)   { p.Renewable = true }
func unavailable(p *Provider) { p.Available = false }
func carbonNow(v float64) func(*Provider) {
	return func(p *Provider) { p.CarbonIntensity = &v }
}
func forecast(v ...float64) func(*Provider) {
	return func(p *Provider) { p.CarbonForecast = v }
}
func at(lat, lon float64) func(*Provider) {
	return func(p *Provider) { p.Topology = &api.Topology{Latitude: lat, Longitude: lon} }
}
func sharing(s api.Sharing) func(*Provider) {
	return func(p *Provider) { p.Sharing = &s }
}
func withResources(kv ...string) func(*Provider) {
	return func(p *Provider) { p.Resources = rl(kv...) }
}

func consumer(id string, policy api.PlacementType, opts ...func(*Consumer)) Consumer {
	c := Consumer{ID: id, Placement: api.Placement{Type: policy}}
	for _, o := range opts {
		o(&c)
	}
	return c
}

func located(lat, lon float64) func(*Consumer) {
	return func(c *Consumer) { c.Latitude, c.Longitude = &lat, &lon }
}

func candidates(n int) func(*Consumer) {
	return func(c *Consumer) { c.Placement.LatencyCandidates = n }
}

func weights(w api.Weights) func(*Consumer) {
	return func(c *Consumer) { c.Placement.Weights = &w }
}

type usageSet struct {
	provider string
	t        api.ChunkType
	consumer string
	u        Usage
}

// row is the expected rendering of one group: "id max/current[ metric]".
func row(g api.NodeGroupView) string {
	s := fmt.Sprintf("%s %d/%d", g.ID, g.MaxSize, g.CurrentReserved)
	if g.HasMetric {
		s += fmt.Sprintf(" m=%.4f", *g.PlacementMetric)
	}
	return s
}

func rows(v api.NodeGroupListResponse) string {
	var out []string
	for _, g := range v.NodeGroups {
		out = append(out, row(g))
	}
	return strings.Join(out, "; ")
}

// TestViewPolicies checks each policy against hand-computed winners,
// metrics and masking. Rows read "group maxSize/currentReserved m=metric".
func TestViewPolicies(t *testing.T) {
	const c1, c2 = "c1", "c2"
	// Price: 2 cores × cpu + 4 GiB × memory.
	cheap := priced("0.02", "0.003") // 0.052
	mid := priced("0.03", "0.005")   // 0.08
	tests := []struct {
		name      string
		providers []Provider
		consumer  Consumer
		usage     []usageSet
		all       bool
		want      string
		applied   api.PlacementType
		shortlist bool
	}{
		// Standard: score 0.8·free + 0.2·renewable, metric not stamped.
		// a: 0.8·1 = 0.8; b: 0.8·(2/4) + 0.2 = 0.6; c: 0.8·1 + 0.2 = 1.0 → c.
		{
			name:      "standard picks the highest score",
			providers: []Provider{prov("a", 4), prov("b", 4, renewable), prov("c", 10, renewable)},
			consumer:  consumer(c1, ""),
			usage:     []usageSet{{"b", api.ChunkStandard, c2, Usage{Live: 2}}},
			want:      "ng-c-standard 10/0",
			applied:   api.PlacementStandard,
		},
		// c fully held by c1 (score 0.2); a 0.8 beats b 0.6 → spill to a;
		// c1's own group stays listed, masked.
		{
			name:      "standard spills when the winner is full for the consumer",
			providers: []Provider{prov("a", 4), prov("b", 4, renewable), prov("c", 10, renewable)},
			consumer:  consumer(c1, api.PlacementStandard),
			usage:     []usageSet{{"b", api.ChunkStandard, c2, Usage{Live: 2}}, {"c", api.ChunkStandard, c1, Usage{Live: 10}}},
			want:      "ng-a-standard 4/0; ng-c-standard 10/10",
			applied:   api.PlacementStandard,
		},
		{
			name:      "standard tie breaks by provider id",
			providers: []Provider{prov("p-b", 4), prov("p-a", 4), prov("p-c", 4)},
			consumer:  consumer(c1, ""),
			want:      "ng-p-a-standard 4/0",
			applied:   api.PlacementStandard,
		},
		{
			name:      "unavailable providers are never growable",
			providers: []Provider{prov("a", 4), prov("b", 8, renewable, unavailable)},
			consumer:  consumer(c1, ""),
			usage:     []usageSet{{"b", api.ChunkStandard, c1, Usage{Live: 1}}},
			want:      "ng-a-standard 4/0; ng-b-standard 1/1",
			applied:   api.PlacementStandard,
		},
		// currentReserved is this consumer's: c2 holds 3 of a's 4 chunks.
		{
			name:      "current reserved counts only this consumer",
			providers: []Provider{prov("a", 4)},
			consumer:  consumer(c1, ""),
			usage:     []usageSet{{"a", api.ChunkStandard, c2, Usage{Live: 3}}, {"a", api.ChunkStandard, c1, Usage{Live: 1}}},
			want:      "ng-a-standard 1/1", // a is full: masked
			applied:   api.PlacementStandard,
		},
		{
			name:      "unknown policy is applied and reported as Standard",
			providers: []Provider{prov("a", 4, cheap), prov("b", 4, renewable, mid)},
			consumer:  consumer(c1, "Cheapest"),
			want:      "ng-b-standard 4/0",
			applied:   api.PlacementStandard,
		},
		// Price: cheapest priced first, unpriced (missing or negative
		// prices) after, by id.
		{
			name:      "price picks the cheapest and stamps every listed cost",
			providers: []Provider{prov("mid", 4, mid), prov("cheap", 4, cheap), prov("free", 4)},
			consumer:  consumer(c1, api.PlacementPrice),
			all:       true,
			want:      "ng-cheap-standard 4/0 m=0.0520; ng-free-standard 0/0; ng-mid-standard 0/0 m=0.0800",
			applied:   api.PlacementPrice,
		},
		{
			name:      "price spills to the next cheapest",
			providers: []Provider{prov("mid", 4, mid), prov("cheap", 4, cheap), prov("free", 4)},
			consumer:  consumer(c1, api.PlacementPrice),
			usage:     []usageSet{{"cheap", api.ChunkStandard, c2, Usage{Live: 4}}},
			want:      "ng-mid-standard 4/0 m=0.0800",
			applied:   api.PlacementPrice,
		},
		{
			name:      "unpriced providers are the last resort, by id",
			providers: []Provider{prov("cheap", 4, cheap), prov("z-unpriced", 4), prov("neg", 4, priced("-1", "0.003"))},
			consumer:  consumer(c1, api.PlacementPrice),
			usage:     []usageSet{{"cheap", api.ChunkStandard, c2, Usage{Live: 4}}},
			want:      "ng-neg-standard 4/0",
			applied:   api.PlacementPrice,
		},
		{
			name:      "price tie breaks by id",
			providers: []Provider{prov("y", 4, cheap), prov("x", 4, cheap)},
			consumer:  consumer(c1, api.PlacementPrice),
			want:      "ng-x-standard 4/0 m=0.0520",
			applied:   api.PlacementPrice,
		},
		// c1's peering on cheap is in flight and cheap is now full: mask
		// the type so CA waits (reference §6.2).
		{
			name:      "in-flight on a full better provider masks the type",
			providers: []Provider{prov("mid", 4, mid), prov("cheap", 4, cheap)},
			consumer:  consumer(c1, api.PlacementPrice),
			usage:     []usageSet{{"cheap", api.ChunkStandard, c1, Usage{Live: 4, InFlight: 1}}},
			want:      "ng-cheap-standard 4/4 m=0.0520",
			applied:   api.PlacementPrice,
		},
		{
			name:      "settled peerings let the view spill",
			providers: []Provider{prov("mid", 4, mid), prov("cheap", 4, cheap)},
			consumer:  consumer(c1, api.PlacementPrice),
			usage:     []usageSet{{"cheap", api.ChunkStandard, c1, Usage{Live: 4}}},
			want:      "ng-cheap-standard 4/4 m=0.0520; ng-mid-standard 4/0 m=0.0800",
			applied:   api.PlacementPrice,
		},
		{
			name:      "in-flight on a worse full provider does not block",
			providers: []Provider{prov("mid", 2, mid), prov("cheap", 4, cheap)},
			consumer:  consumer(c1, api.PlacementPrice),
			usage:     []usageSet{{"mid", api.ChunkStandard, c1, Usage{Live: 2, InFlight: 2}}},
			want:      "ng-cheap-standard 4/0 m=0.0520; ng-mid-standard 2/2 m=0.0800",
			applied:   api.PlacementPrice,
		},
		// Eco: green 10; now50 = 50; mixed (0.4·100 + 0.25·200)/0.65 =
		// 138.4615; carbon-less last.
		{
			name: "eco picks the greenest",
			providers: []Provider{
				prov("mixed", 4, forecast(100, 200)), prov("now50", 4, carbonNow(50)),
				prov("green", 4, forecast(10, 10, 10, 10, 10, 10, 900)), prov("none", 4),
			},
			consumer: consumer(c1, api.PlacementEco),
			all:      true,
			want:     "ng-green-standard 4/0 m=10.0000; ng-mixed-standard 0/0 m=138.4615; ng-none-standard 0/0; ng-now50-standard 0/0 m=50.0000",
			applied:  api.PlacementEco,
		},
		{
			name: "eco spills past full providers to the next greenest",
			providers: []Provider{
				prov("mixed", 4, forecast(100, 200)), prov("now50", 4, carbonNow(50)),
				prov("green", 4, forecast(10)), prov("none", 4),
			},
			consumer: consumer(c1, api.PlacementEco),
			usage:    []usageSet{{"green", api.ChunkStandard, c2, Usage{Live: 4}}, {"now50", api.ChunkStandard, c2, Usage{Live: 4}}},
			want:     "ng-mixed-standard 4/0 m=138.4615",
			applied:  api.PlacementEco,
		},
		{
			name:      "carbon-less providers are the last resort",
			providers: []Provider{prov("green", 4, forecast(10)), prov("b-none", 4), prov("a-none", 4)},
			consumer:  consumer(c1, api.PlacementEco),
			usage:     []usageSet{{"green", api.ChunkStandard, c2, Usage{Live: 4}}},
			want:      "ng-a-none-standard 4/0",
			applied:   api.PlacementEco,
		},
		// Latency from Turin (45.07, 7.69): Milan 125.1446 km, Frankfurt
		// 565.3043, Paris 584.3614, Madrid 1062.7467. Shortlist of three.
		{
			name: "latency shortlists the three nearest",
			providers: []Provider{
				prov("paris", 4, at(48.86, 2.35)), prov("milan", 4, at(45.46, 9.19)),
				prov("frankfurt", 4, at(50.11, 8.68)), prov("madrid", 4, at(40.42, -3.70)), prov("nowhere", 4),
			},
			consumer:  consumer(c1, api.PlacementLatency, located(45.07, 7.69)),
			want:      "ng-frankfurt-standard 4/0 m=565.3043; ng-milan-standard 4/0 m=125.1446; ng-paris-standard 4/0 m=584.3614",
			applied:   api.PlacementLatency,
			shortlist: true,
		},
		{
			name: "latency skips full providers",
			providers: []Provider{
				prov("paris", 4, at(48.86, 2.35)), prov("milan", 4, at(45.46, 9.19)),
				prov("frankfurt", 4, at(50.11, 8.68)), prov("madrid", 4, at(40.42, -3.70)),
			},
			consumer:  consumer(c1, api.PlacementLatency, located(45.07, 7.69)),
			usage:     []usageSet{{"milan", api.ChunkStandard, c2, Usage{Live: 4}}},
			want:      "ng-frankfurt-standard 4/0 m=565.3043; ng-madrid-standard 4/0 m=1062.7467; ng-paris-standard 4/0 m=584.3614",
			applied:   api.PlacementLatency,
			shortlist: true,
		},
		// The consumer's own shortlist size (placement.latencyCandidates).
		{
			name: "latency shortlists the consumer's four nearest",
			providers: []Provider{
				prov("paris", 4, at(48.86, 2.35)), prov("milan", 4, at(45.46, 9.19)),
				prov("frankfurt", 4, at(50.11, 8.68)), prov("madrid", 4, at(40.42, -3.70)), prov("nowhere", 4),
			},
			consumer:  consumer(c1, api.PlacementLatency, located(45.07, 7.69), candidates(4)),
			want:      "ng-frankfurt-standard 4/0 m=565.3043; ng-madrid-standard 4/0 m=1062.7467; ng-milan-standard 4/0 m=125.1446; ng-paris-standard 4/0 m=584.3614",
			applied:   api.PlacementLatency,
			shortlist: true,
		},
		{
			name: "latency with one candidate is no shortlist: the nearest alone",
			providers: []Provider{
				prov("paris", 4, at(48.86, 2.35)), prov("milan", 4, at(45.46, 9.19)),
				prov("frankfurt", 4, at(50.11, 8.68)), prov("madrid", 4, at(40.42, -3.70)),
			},
			consumer: consumer(c1, api.PlacementLatency, located(45.07, 7.69), candidates(1)),
			want:     "ng-milan-standard 4/0 m=125.1446",
			applied:  api.PlacementLatency,
		},
		{
			name: "latency with two candidates keeps the ties at the second's distance",
			providers: []Provider{
				prov("paris-a", 4, at(48.86, 2.35)), prov("milan", 4, at(45.46, 9.19)), prov("paris-b", 4, at(48.86, 2.35)),
				prov("madrid", 4, at(40.42, -3.70)),
			},
			consumer:  consumer(c1, api.PlacementLatency, located(45.07, 7.69), candidates(2)),
			want:      "ng-milan-standard 4/0 m=125.1446; ng-paris-a-standard 4/0 m=584.3614; ng-paris-b-standard 4/0 m=584.3614",
			applied:   api.PlacementLatency,
			shortlist: true,
		},
		// Distance ties (one city) at the third's distance stay on the
		// shortlist: the consumer's measured RTT decides among them, not
		// the id.
		{
			name: "latency keeps the providers tied with the third",
			providers: []Provider{
				prov("paris-c", 4, at(48.86, 2.35)), prov("milan", 4, at(45.46, 9.19)), prov("paris-a", 4, at(48.86, 2.35)),
				prov("frankfurt", 4, at(50.11, 8.68)), prov("madrid", 4, at(40.42, -3.70)), prov("paris-b", 4, at(48.86, 2.35)),
			},
			consumer:  consumer(c1, api.PlacementLatency, located(45.07, 7.69)),
			want:      "ng-frankfurt-standard 4/0 m=565.3043; ng-milan-standard 4/0 m=125.1446; ng-paris-a-standard 4/0 m=584.3614; ng-paris-b-standard 4/0 m=584.3614; ng-paris-c-standard 4/0 m=584.3614",
			applied:   api.PlacementLatency,
			shortlist: true,
		},
		{
			name: "latency keeps every provider of the nearest city, and no farther one",
			providers: []Provider{
				prov("m4", 4, at(45.46, 9.19)), prov("m2", 4, at(45.46, 9.19)), prov("m1", 4, at(45.46, 9.19)),
				prov("m3", 4, at(45.46, 9.19)), prov("frankfurt", 4, at(50.11, 8.68)),
			},
			consumer:  consumer(c1, api.PlacementLatency, located(45.07, 7.69)),
			want:      "ng-m1-standard 4/0 m=125.1446; ng-m2-standard 4/0 m=125.1446; ng-m3-standard 4/0 m=125.1446; ng-m4-standard 4/0 m=125.1446",
			applied:   api.PlacementLatency,
			shortlist: true,
		},
		{
			name: "latency ties behind a full provider: the full one is skipped, the ties kept",
			providers: []Provider{
				prov("milan", 4, at(45.46, 9.19)), prov("paris-a", 4, at(48.86, 2.35)), prov("paris-b", 4, at(48.86, 2.35)),
				prov("frankfurt", 4, at(50.11, 8.68)), prov("madrid", 4, at(40.42, -3.70)),
			},
			consumer:  consumer(c1, api.PlacementLatency, located(45.07, 7.69)),
			usage:     []usageSet{{"frankfurt", api.ChunkStandard, c2, Usage{Live: 4}}},
			want:      "ng-milan-standard 4/0 m=125.1446; ng-paris-a-standard 4/0 m=584.3614; ng-paris-b-standard 4/0 m=584.3614",
			applied:   api.PlacementLatency,
			shortlist: true,
		},
		// Bug #12 fixed: one candidate is no shortlist.
		{
			name:      "a single latency candidate is not a shortlist",
			providers: []Provider{prov("milan", 4, at(45.46, 9.19)), prov("paris", 4, at(48.86, 2.35))},
			consumer:  consumer(c1, api.PlacementLatency, located(45.07, 7.69)),
			usage:     []usageSet{{"paris", api.ChunkStandard, c2, Usage{Live: 4}}},
			want:      "ng-milan-standard 4/0 m=125.1446",
			applied:   api.PlacementLatency,
		},
		{
			name:      "latency without a consumer location has no preference (Standard order)",
			providers: []Provider{prov("milan", 4, at(45.46, 9.19)), prov("paris", 4, renewable, at(48.86, 2.35))},
			consumer:  consumer(c1, api.PlacementLatency),
			want:      "ng-paris-standard 4/0",
			applied:   api.PlacementLatency,
		},
		{
			name:      "providers without coordinates are the last resort",
			providers: []Provider{prov("milan", 4, at(45.46, 9.19)), prov("b-nowhere", 4), prov("a-nowhere", 4)},
			consumer:  consumer(c1, api.PlacementLatency, located(45.07, 7.69)),
			usage:     []usageSet{{"milan", api.ChunkStandard, c2, Usage{Live: 4}}},
			want:      "ng-a-nowhere-standard 4/0",
			applied:   api.PlacementLatency,
		},
		{
			name:      "latency in-flight on the nearest full provider masks the type",
			providers: []Provider{prov("milan", 4, at(45.46, 9.19)), prov("paris", 4, at(48.86, 2.35))},
			consumer:  consumer(c1, api.PlacementLatency, located(45.07, 7.69)),
			usage:     []usageSet{{"milan", api.ChunkStandard, c1, Usage{Live: 4, InFlight: 4}}},
			want:      "ng-milan-standard 4/4 m=125.1446",
			applied:   api.PlacementLatency,
		},
		// Weighted, price 2, carbon 1, free 1 (no location, distance
		// ignored). x: cost .052, carbon 300, free 4/4; y: .08, 50, 2/4;
		// z: unpriced, 10, 4/4. Normalised price x 0, y 1, z 1 (missing);
		// carbon x 1, y 40/290, z 0; 1−free x 0, y 1, z 0.
		// x = 0+1+0 = 1; y = 2+0.1379+1 = 3.1379; z = 2+0+0 = 2 → x.
		{
			name: "weighted picks the lowest weighted score",
			providers: []Provider{
				prov("x", 4, cheap, carbonNow(300)), prov("y", 4, mid, carbonNow(50)), prov("z", 4, carbonNow(10)),
			},
			consumer: consumer(c1, api.PlacementWeighted, weights(api.Weights{Price: 2, Carbon: 1, FreeCapacity: 1})),
			usage:    []usageSet{{"y", api.ChunkStandard, c2, Usage{Live: 2}}},
			all:      true,
			want:     "ng-x-standard 4/0 m=1.0000; ng-y-standard 0/0 m=3.1379; ng-z-standard 0/0 m=2.0000",
			applied:  api.PlacementWeighted,
		},
		// Price weight 0.5: x = 1, y = 0.5+0.1379+1 = 1.6379, z = 0.5 → z.
		{
			name: "weighted follows the weights",
			providers: []Provider{
				prov("x", 4, cheap, carbonNow(300)), prov("y", 4, mid, carbonNow(50)), prov("z", 4, carbonNow(10)),
			},
			consumer: consumer(c1, api.PlacementWeighted, weights(api.Weights{Price: 0.5, Carbon: 1, FreeCapacity: 1})),
			usage:    []usageSet{{"y", api.ChunkStandard, c2, Usage{Live: 2}}},
			want:     "ng-z-standard 4/0 m=0.5000",
			applied:  api.PlacementWeighted,
		},
		// Distance only, from Turin: Milan 0, Paris (584.36−125.14)/(1062.75−125.14)
		// = 0.4898, Madrid 1, nowhere missing = 1.
		{
			name: "weighted by distance",
			providers: []Provider{
				prov("paris", 4, at(48.86, 2.35)), prov("milan", 4, at(45.46, 9.19)), prov("madrid", 4, at(40.42, -3.70)), prov("nowhere", 4),
			},
			consumer: consumer(c1, api.PlacementWeighted, located(45.07, 7.69), weights(api.Weights{Distance: 1})),
			all:      true,
			want:     "ng-madrid-standard 0/0 m=1.0000; ng-milan-standard 4/0 m=0.0000; ng-nowhere-standard 0/0 m=1.0000; ng-paris-standard 0/0 m=0.4898",
			applied:  api.PlacementWeighted,
		},
		// No weights: equal weights; identical providers tie → lowest id.
		// Carbon and distance are missing everywhere (1 each): score 2.
		{
			name:      "weighted ties break by id",
			providers: []Provider{prov("q", 4, cheap), prov("p", 4, cheap)},
			consumer:  consumer(c1, api.PlacementWeighted),
			want:      "ng-p-standard 4/0 m=2.0000",
			applied:   api.PlacementWeighted,
		},
		// Choice: every provider with head-room is growable, each with
		// its Weighted score (same numbers as "weighted picks the lowest
		// weighted score": y has 2 of 4 free).
		{
			name: "choice lists every provider with room, scored",
			providers: []Provider{
				prov("x", 4, cheap, carbonNow(300)), prov("y", 4, mid, carbonNow(50)), prov("z", 4, carbonNow(10)),
			},
			consumer: consumer(c1, api.PlacementChoice, weights(api.Weights{Price: 2, Carbon: 1, FreeCapacity: 1})),
			usage:    []usageSet{{"y", api.ChunkStandard, c2, Usage{Live: 2}}},
			want:     "ng-x-standard 4/0 m=1.0000; ng-y-standard 2/0 m=3.1379; ng-z-standard 4/0 m=2.0000",
			applied:  api.PlacementChoice,
		},
		// The reference's spelling is applied as Choice. A full provider
		// (another consumer holds it), a denying one and a stale one are
		// left out; the consumer's own full group stays listed, masked,
		// and its in-flight peering does not block the others. Equal
		// weights; price, carbon and distance are missing everywhere (1
		// each); 1 − free: a 0 (the only candidate), own and q 1 → 3, 4, 4.
		{
			name: "consumerChoice filters by sharing, room and availability",
			providers: []Provider{
				prov("a", 2), prov("b", 2), prov("den", 2, sharing(api.Sharing{DeniedConsumers: []string{c1}})),
				prov("old", 2, unavailable), prov("own", 2), prov("q", 4, sharing(api.Sharing{MaxChunksPerConsumer: 1})),
			},
			consumer: consumer(c1, api.PlacementConsumerChoice),
			usage: []usageSet{
				{"b", api.ChunkStandard, c2, Usage{Live: 2}},
				{"own", api.ChunkStandard, c1, Usage{Live: 2, InFlight: 2}},
				{"q", api.ChunkStandard, c1, Usage{Live: 1}},
			},
			want:    "ng-a-standard 2/0 m=3.0000; ng-own-standard 2/2 m=4.0000; ng-q-standard 1/1 m=4.0000",
			applied: api.PlacementChoice,
		},
		// Sharing.
		{
			name:      "denied providers never appear, even with all",
			providers: []Provider{prov("cheap", 4, cheap, sharing(api.Sharing{DeniedConsumers: []string{c1}})), prov("mid", 4, mid)},
			consumer:  consumer(c1, api.PlacementPrice),
			usage:     []usageSet{{"cheap", api.ChunkStandard, c1, Usage{Live: 1}}},
			all:       true,
			want:      "ng-mid-standard 4/0 m=0.0800",
			applied:   api.PlacementPrice,
		},
		{
			name:      "allow lists hide the provider from others",
			providers: []Provider{prov("cheap", 4, cheap, sharing(api.Sharing{AllowedConsumers: []string{c2}})), prov("mid", 4, mid)},
			consumer:  consumer(c1, api.PlacementPrice),
			all:       true,
			want:      "ng-mid-standard 4/0 m=0.0800",
			applied:   api.PlacementPrice,
		},
		{
			name:      "allowed consumers see it",
			providers: []Provider{prov("cheap", 4, cheap, sharing(api.Sharing{AllowedConsumers: []string{c1}})), prov("mid", 4, mid)},
			consumer:  consumer(c1, api.PlacementPrice),
			want:      "ng-cheap-standard 4/0 m=0.0520",
			applied:   api.PlacementPrice,
		},
		// Quota 3, c1 holds 1: head-room min(free 3, 3−1) = 2 → max 3.
		{
			name:      "quota caps head-room",
			providers: []Provider{prov("cheap", 4, cheap, sharing(api.Sharing{MaxChunksPerConsumer: 3}))},
			consumer:  consumer(c1, api.PlacementPrice),
			usage:     []usageSet{{"cheap", api.ChunkStandard, c1, Usage{Live: 1}}},
			want:      "ng-cheap-standard 3/1 m=0.0520",
			applied:   api.PlacementPrice,
		},
		{
			name:      "a reached quota spills to the next provider",
			providers: []Provider{prov("cheap", 8, cheap, sharing(api.Sharing{MaxChunksPerConsumer: 2})), prov("mid", 4, mid)},
			consumer:  consumer(c1, api.PlacementPrice),
			usage:     []usageSet{{"cheap", api.ChunkStandard, c1, Usage{Live: 2}}},
			want:      "ng-cheap-standard 2/2 m=0.0520; ng-mid-standard 4/0 m=0.0800",
			applied:   api.PlacementPrice,
		},
		// GPU + standard: 16 CPU / 64 GiB / 2 GPU = 2 gpu + 4 standard chunks;
		// one growable group per type.
		{
			name: "gpu and standard groups of one provider",
			providers: []Provider{
				prov("gpu1", 0, withResources("cpu", "16", "memory", "64Gi", "nvidia.com/gpu", "2")),
				prov("std", 2),
			},
			consumer: consumer(c1, ""),
			want:     "ng-gpu1-gpu 2/0; ng-gpu1-standard 4/0",
			applied:  api.PlacementStandard,
		},
		{
			name:      "a consumer without a heartbeat gets the Standard view",
			providers: []Provider{prov("b", 8), prov("a", 4, renewable)},
			consumer:  Consumer{ID: "someone-else"},
			want:      "ng-a-standard 4/0",
			applied:   api.PlacementStandard,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ix := NewIndex(DefaultChunkConfig())
			for _, p := range tt.providers {
				ix.UpsertProvider(p)
			}
			ix.UpsertConsumer(tt.consumer)
			for _, u := range tt.usage {
				ix.SetUsage(u.provider, u.t, u.consumer, u.u)
			}
			got := ix.View(c1, tt.all)
			if rows(got) != tt.want {
				t.Errorf("view:\n got %s\nwant %s", rows(got), tt.want)
			}
			if got.AppliedPlacement != tt.applied {
				t.Errorf("appliedPlacement = %q, want %q", got.AppliedPlacement, tt.applied)
			}
			if got.LatencyShortlist != tt.shortlist {
				t.Errorf("latencyShortlist = %v, want %v", got.LatencyShortlist, tt.shortlist)
			}
			if got.NodeGroups == nil {
				t.Error("nodeGroups is nil; it must serialise as []")
			}
		})
	}
}

// TestLatencyShortlistMax: ties past LatencyShortlistMax are broken by
// id (the consumer agent probes every provider on the shortlist).
func TestLatencyShortlistMax(t *testing.T) {
	ix := NewIndex(DefaultChunkConfig())
	for i := range LatencyShortlistMax + 4 {
		ix.UpsertProvider(prov(fmt.Sprintf("milan-%02d", i), 4, at(45.46, 9.19)))
	}
	ix.UpsertConsumer(consumer("c1", api.PlacementLatency, located(45.07, 7.69)))
	got := ix.View("c1", false)
	if len(got.NodeGroups) != LatencyShortlistMax || !got.LatencyShortlist {
		t.Fatalf("%d growable groups (shortlist %v), want %d", len(got.NodeGroups), got.LatencyShortlist, LatencyShortlistMax)
	}
	if last := got.NodeGroups[LatencyShortlistMax-1].ProviderClusterID; last != fmt.Sprintf("milan-%02d", LatencyShortlistMax-1) {
		t.Errorf("last kept %s, want the first %d by id", last, LatencyShortlistMax)
	}
}

func TestViewGroupFields(t *testing.T) {
	now := time.Date(2026, 7, 22, 10, 30, 0, 0, time.UTC)
	ix := NewIndex(DefaultChunkConfig(), WithClock(func() time.Time { return now }))
	p := prov("gpu1", 0, withResources("cpu", "16", "memory", "64Gi", "nvidia.com/gpu", "2"), at(45.46, 9.19))
	p.UnitPrices = rl("cpu", "0.02", "memory", "0.003", "nvidia.com/gpu", "1.2")
	p.ProbeEndpoint = "10.0.0.1:30100"
	ix.UpsertProvider(p)
	ix.UpsertConsumer(consumer("c1", api.PlacementPrice))
	v := ix.View("c1", false)
	if len(v.NodeGroups) != 2 {
		t.Fatalf("groups = %s", rows(v))
	}
	g := v.NodeGroups[0]
	if g.ID != "ng-gpu1-gpu" || g.Type != api.ChunkGPU || g.ProviderClusterID != "gpu1" || g.ProviderLiqoClusterID != "liqo-gpu1" ||
		g.Cost != "1304m" || g.ProbeEndpoint != "10.0.0.1:30100" || g.Topology == nil || g.Topology.Latitude != 45.46 ||
		!equalLists(g.ChunkResources, DefaultChunkConfig().GPU) || !g.HasMetric || math.Abs(*g.PlacementMetric-1.304) > 1e-12 {
		t.Errorf("gpu group = %+v", g)
	}
	if s := v.NodeGroups[1]; s.Cost != "52m" || !equalLists(s.ChunkResources, DefaultChunkConfig().Standard) {
		t.Errorf("standard group = %+v", s)
	}
	if !v.ServedAt.Time.Equal(now) {
		t.Errorf("servedAt = %v, want %v", v.ServedAt, now)
	}
	// The view is the caller's to modify.
	v.NodeGroups[0].ChunkResources[corev1.ResourceCPU] = rl("cpu", "99")["cpu"]
	if q := ix.ChunkConfig().GPU[corev1.ResourceCPU]; q.String() != "4" {
		t.Errorf("chunk config was modified through a view: %s", q.String())
	}
}

func TestViewGeneration(t *testing.T) {
	ix := NewIndex(DefaultChunkConfig())
	ix.UpsertProvider(prov("cheap", 4, priced("0.02", "0.003")))
	ix.UpsertProvider(prov("mid", 4, priced("0.03", "0.005")))
	ix.UpsertProvider(prov("dear", 4, priced("0.1", "0.005")))
	ix.UpsertConsumer(consumer("c1", api.PlacementPrice))
	g0 := ix.View("c1", false).Generation
	if g0 == 0 {
		t.Fatal("generation is 0")
	}
	if g := ix.View("c1", false).Generation; g != g0 {
		t.Fatalf("generation changed without a change: %d → %d", g0, g)
	}
	// Another consumer's usage of a provider c1 does not see: unchanged.
	ix.SetUsage("dear", api.ChunkStandard, "c2", Usage{Live: 2})
	if g := ix.View("c1", false).Generation; g != g0 {
		t.Fatalf("generation changed for an invisible change: %d → %d", g0, g)
	}
	// Less head-room on the winner: changed.
	ix.SetUsage("cheap", api.ChunkStandard, "c2", Usage{Live: 1})
	g1 := ix.View("c1", false).Generation
	if g1 == g0 {
		t.Fatal("generation did not change when maxSize changed")
	}
	// Policy switch: changed.
	ix.UpsertConsumer(consumer("c1", api.PlacementEco))
	if g := ix.View("c1", false).Generation; g == g1 {
		t.Fatal("generation did not change with the policy")
	}
}

// TestViewStaysSmall: with many providers, the default view lists only
// the groups the consumer holds and the growable one.
func TestViewStaysSmall(t *testing.T) {
	ix := NewIndex(DefaultChunkConfig())
	for i := range 200 {
		ix.UpsertProvider(prov(fmt.Sprintf("p%03d", i), 4, priced(fmt.Sprintf("0.%03d", 10+i), "0.003")))
	}
	ix.UpsertConsumer(consumer("c1", api.PlacementPrice))
	ix.SetUsage("p000", api.ChunkStandard, "c1", Usage{Live: 4})
	ix.SetUsage("p150", api.ChunkStandard, "c1", Usage{Live: 1})
	if got, want := rows(ix.View("c1", false)), "ng-p000-standard 4/4 m=0.0320; ng-p001-standard 4/0 m=0.0340; ng-p150-standard 1/1 m=0.3320"; got != want {
		t.Errorf("view:\n got %s\nwant %s", got, want)
	}
	if n := len(ix.View("c1", true).NodeGroups); n != 200 {
		t.Errorf("all=true lists %d groups, want 200", n)
	}
}

// TestIndexMaintenance: usage survives a provider's removal and
// re-advertisement, availability flips re-key the trees, and a zero Usage
// forgets the group.
func TestIndexMaintenance(t *testing.T) {
	ix := NewIndex(DefaultChunkConfig())
	ix.UpsertConsumer(consumer("c1", api.PlacementPrice))
	ix.UpsertProvider(prov("cheap", 4, priced("0.02", "0.003")))
	ix.UpsertProvider(prov("mid", 4, priced("0.03", "0.005")))
	ix.SetUsage("cheap", api.ChunkStandard, "c1", Usage{Live: 1})
	steps := []struct {
		do   func()
		want string
	}{
		{func() {}, "ng-cheap-standard 4/1 m=0.0520"},
		{func() { ix.RemoveProvider("cheap") }, "ng-mid-standard 4/0 m=0.0800"},
		{func() { ix.UpsertProvider(prov("cheap", 4, priced("0.02", "0.003"))) }, "ng-cheap-standard 4/1 m=0.0520"},
		{func() { ix.UpsertProvider(prov("cheap", 4, priced("0.02", "0.003"), unavailable)) }, "ng-cheap-standard 1/1 m=0.0520; ng-mid-standard 4/0 m=0.0800"},
		{func() { ix.UpsertProvider(prov("cheap", 4, priced("0.02", "0.003"))) }, "ng-cheap-standard 4/1 m=0.0520"},
		{func() { ix.SetUsage("cheap", api.ChunkStandard, "c2", Usage{Live: 3}) }, "ng-cheap-standard 1/1 m=0.0520; ng-mid-standard 4/0 m=0.0800"},
		{func() { ix.SetUsage("cheap", api.ChunkStandard, "c2", Usage{}) }, "ng-cheap-standard 4/1 m=0.0520"},
		{func() { ix.SetUsage("cheap", api.ChunkStandard, "c1", Usage{}) }, "ng-cheap-standard 4/0 m=0.0520"},
		// A price rise re-keys the price tree.
		{func() { ix.UpsertProvider(prov("cheap", 4, priced("0.05", "0.003"))) }, "ng-mid-standard 4/0 m=0.0800"},
	}
	for i, s := range steps {
		s.do()
		if got := rows(ix.View("c1", false)); got != s.want {
			t.Fatalf("step %d:\n got %s\nwant %s", i, got, s.want)
		}
	}
}

// TestWeightedInFlightBlocks: a full provider where the consumer's peering
// is in flight and that would score better than the winner masks the type.
func TestWeightedInFlightBlocks(t *testing.T) {
	ix := NewIndex(DefaultChunkConfig())
	ix.UpsertConsumer(consumer("c1", api.PlacementWeighted, weights(api.Weights{Price: 1})))
	ix.UpsertProvider(prov("cheap", 2, priced("0.02", "0.003")))
	ix.UpsertProvider(prov("mid", 4, priced("0.03", "0.005")))
	ix.UpsertProvider(prov("dear", 4, priced("0.1", "0.005")))
	ix.SetUsage("cheap", api.ChunkStandard, "c1", Usage{Live: 2, InFlight: 1})
	// Candidates mid (0) and dear (1); cheap scores below the range: 0.
	if got, want := rows(ix.View("c1", false)), "ng-cheap-standard 2/2 m=0.0000"; got != want {
		t.Fatalf("in flight:\n got %s\nwant %s", got, want)
	}
	ix.SetUsage("cheap", api.ChunkStandard, "c1", Usage{Live: 2})
	if got, want := rows(ix.View("c1", false)), "ng-cheap-standard 2/2 m=0.0000; ng-mid-standard 4/0 m=0.0000"; got != want {
		t.Fatalf("settled:\n got %s\nwant %s", got, want)
	}
}

// TestConcurrentUse runs views (which rebuild the shared distance index
// under the read lock) against mutations; run with -race.
func TestConcurrentUse(t *testing.T) {
	ix := NewIndex(DefaultChunkConfig())
	for i := range 50 {
		ix.UpsertProvider(prov(fmt.Sprintf("p%02d", i), 4, at(float64(i-25), float64(2*i)), priced("0.02", "0.003")))
	}
	for i := range 4 {
		ix.UpsertConsumer(consumer(fmt.Sprintf("c%d", i), []api.PlacementType{api.PlacementLatency, api.PlacementWeighted}[i%2], located(10, float64(i))))
	}
	done := make(chan struct{})
	for w := range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range 200 {
				v := ix.View(fmt.Sprintf("c%d", (w+i)%4), i%7 == 0)
				if v.AppliedPlacement == "" {
					t.Error("empty applied placement")
					return
				}
			}
		}()
	}
	for i := range 200 {
		p := fmt.Sprintf("p%02d", i%50)
		ix.SetUsage(p, api.ChunkStandard, fmt.Sprintf("c%d", i%4), Usage{Live: int32(i % 3)})
		if i%10 == 0 {
			ix.UpsertProvider(prov(p, 4, at(float64(i%50-25), float64(i%90))))
		}
	}
	for range 4 {
		<-done
	}
}
