// Package choiceeval evaluates a model endpoint as the Choice policy's
// ranker: it runs intent scenarios against a nine-provider catalogue
// (Milan, Zurich, Paris, Frankfurt, Vienna, London, Helsinki, Mumbai,
// Montreal) through the broker's own placement code (the Choice view) and
// the consumer agent's selector, and scores each answer by measurable
// criteria computed from the providers' properties, never by the model's
// own account. It needs a reachable model; nothing here fakes one.
package choiceeval

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"

	"k8s.io/apimachinery/pkg/api/resource"

	corev1 "k8s.io/api/core/v1"

	"github.com/federation-autoscaler/federation-autoscaler/agent/choice"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/placement"
)

// Site is one provider of the catalogue.
type Site struct {
	ID       string
	City     string
	Lat, Lon float64
	// Carbon is the grid's carbon intensity (gCO2eq/kWh); CPUPrice and
	// MemoryPrice the unit prices per core-hour and GiB-hour; Chunks the
	// free standard chunks (2 CPU / 4 GiB).
	Carbon                float64
	CPUPrice, MemoryPrice string
	Chunks                int
}

// Catalogue is the evaluation's nine providers. The reference's exact
// figures were not available to this repository: carbon intensities are
// rounded yearly grid averages of each country (Quebec for Montreal),
// prices and chunk counts are this repository's choice, spread so that no
// single provider wins every criterion (docs/placement.md).
func Catalogue() []Site {
	return []Site{
		{"milan", "Milan", 45.4642, 9.1900, 330, "0.021", "0.0028", 6},
		{"zurich", "Zurich", 47.3769, 8.5417, 40, "0.034", "0.0045", 3},
		{"paris", "Paris", 48.8566, 2.3522, 55, "0.027", "0.0036", 5},
		{"frankfurt", "Frankfurt", 50.1109, 8.6821, 380, "0.019", "0.0025", 8},
		{"vienna", "Vienna", 48.2082, 16.3738, 110, "0.025", "0.0033", 4},
		{"london", "London", 51.5074, -0.1278, 200, "0.029", "0.0039", 6},
		{"helsinki", "Helsinki", 60.1699, 24.9384, 80, "0.023", "0.0030", 4},
		{"mumbai", "Mumbai", 19.0760, 72.8777, 630, "0.011", "0.0014", 10},
		{"montreal", "Montreal", 45.5019, -73.5674, 2, "0.024", "0.0032", 7},
	}
}

// Consumer is where the evaluated consumer sits (Turin, as in
// docs/placement.md's examples).
var Consumer = choice.Location{City: "Turin", Latitude: 45.0703, Longitude: 7.6869}

// Scenario is one intent and the rule that says whether a pick passes.
type Scenario struct {
	Name   string
	Intent string
	// Criterion describes Pass in words (reported).
	Criterion string
	Pass      func(m Metrics, id string) bool
}

// Metrics are the catalogue's measurable properties, ranked (1 = best).
type Metrics struct {
	CarbonRank, PriceRank, DistanceRank map[string]int
	// WorstCarbon and WorstPrice are the worst quartile (the
	// ⌈n/4⌉ worst providers) of each.
	WorstCarbon, WorstPrice map[string]bool
}

// Scenarios are the four evaluated intents. The first three and their
// passing sets follow the reference's ConsumerChoice evaluation; the
// fourth (cheapest) is this repository's addition.
func Scenarios() []Scenario {
	return []Scenario{
		{"greenest", "Prioritise the greenest provider; latency is secondary.", "carbon rank ≤ 2",
			func(m Metrics, id string) bool { return m.CarbonRank[id] <= 2 }},
		{"close-low-emissions", "Close to me, preferably with low emissions.", "distance rank ≤ 3 and not a worst-quartile carbon choice",
			func(m Metrics, id string) bool { return m.DistanceRank[id] <= 3 && !m.WorstCarbon[id] }},
		{"balanced", "A balanced choice: reasonable price and reasonable emissions.", "neither worst-quartile carbon nor worst-quartile price",
			func(m Metrics, id string) bool { return !m.WorstCarbon[id] && !m.WorstPrice[id] }},
		{"cheapest", "Cheapest capacity, whatever the emissions.", "price rank ≤ 2",
			func(m Metrics, id string) bool { return m.PriceRank[id] <= 2 }},
	}
}

// View is the broker's Choice view of the catalogue for the consumer,
// built by the broker's placement index (weights: the fallback's equal
// weights).
func View(sites []Site) api.NodeGroupListResponse {
	ix := placement.NewIndex(placement.DefaultChunkConfig())
	for _, s := range sites {
		c := s.Carbon
		ix.UpsertProvider(placement.Provider{
			ID: s.ID, LiqoID: "liqo-" + s.ID, Available: true, CarbonIntensity: &c,
			Topology: &api.Topology{City: s.City, Latitude: s.Lat, Longitude: s.Lon},
			Resources: corev1.ResourceList{
				corev1.ResourceCPU:    *resource.NewQuantity(int64(2*s.Chunks), resource.DecimalSI),
				corev1.ResourceMemory: resource.MustParse(strconv.Itoa(4*s.Chunks) + "Gi"),
			},
			UnitPrices: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(s.CPUPrice), corev1.ResourceMemory: resource.MustParse(s.MemoryPrice)},
		})
	}
	lat, lon := Consumer.Latitude, Consumer.Longitude
	ix.UpsertConsumer(placement.Consumer{ID: "evaluator", Placement: api.Placement{Type: api.PlacementChoice}, Latitude: &lat, Longitude: &lon})
	return ix.View("evaluator", false)
}

// Measure ranks the catalogue (ties share the better rank's order by id).
func Measure(sites []Site) Metrics {
	chunk := placement.DefaultChunkConfig().Standard
	price := map[string]float64{}
	dist := map[string]float64{}
	carbon := map[string]float64{}
	for _, s := range sites {
		cost, _ := placement.CostPerChunk(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(s.CPUPrice), corev1.ResourceMemory: resource.MustParse(s.MemoryPrice)}, chunk)
		f, _ := strconv.ParseFloat(cost.String(), 64)
		price[s.ID] = f
		dist[s.ID] = placement.DistanceKM(Consumer.Latitude, Consumer.Longitude, s.Lat, s.Lon)
		carbon[s.ID] = s.Carbon
	}
	m := Metrics{CarbonRank: ranks(carbon), PriceRank: ranks(price), DistanceRank: ranks(dist)}
	q := int(math.Ceil(float64(len(sites)) / 4))
	m.WorstCarbon, m.WorstPrice = worst(m.CarbonRank, q), worst(m.PriceRank, q)
	return m
}

func ranks(v map[string]float64) map[string]int {
	ids := make([]string, 0, len(v))
	for id := range v {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b string) int {
		if c := cmp.Compare(v[a], v[b]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	out := map[string]int{}
	for i, id := range ids {
		out[id] = i + 1
	}
	return out
}

func worst(r map[string]int, q int) map[string]bool {
	out := map[string]bool{}
	for id, rank := range r {
		if rank > len(r)-q {
			out[id] = true
		}
	}
	return out
}

// Outcome is one scenario run.
type Outcome struct {
	Scenario string
	Pick     string
	// ByModel is false when the fallback chose (the model failed).
	ByModel bool
	Pass    bool
	Why     string
	Reason  string
	Latency float64 // seconds
}

// Report is the evaluation: every run and the pass rates.
type Report struct {
	Model    string
	Outcomes []Outcome
}

// Rate is a scenario's (or the total's) passes, model failures and runs.
type Rate struct {
	Name                  string
	Passed, Fallback, Run int
}

// Rates are the pass rates per scenario, then the total.
func (r Report) Rates() []Rate {
	var out []Rate
	total := Rate{Name: "all"}
	idx := map[string]int{}
	for _, o := range r.Outcomes {
		i, ok := idx[o.Scenario]
		if !ok {
			i = len(out)
			idx[o.Scenario] = i
			out = append(out, Rate{Name: o.Scenario})
		}
		for _, rt := range []*Rate{&out[i], &total} {
			rt.Run++
			if o.Pass {
				rt.Passed++
			}
			if !o.ByModel {
				rt.Fallback++
			}
		}
	}
	return append(out, total)
}

// Run asks the endpoint runs times per scenario (a fresh selector each
// time: no cache) and scores the standard chunk's pick. A pick made by the
// fallback never passes: the model is what is evaluated. It stops early
// when ctx ends.
func Run(ctx context.Context, ep choice.Endpoint, hc choice.Doer, runs int) (Report, error) {
	if !ep.Configured() {
		return Report{}, fmt.Errorf("no model endpoint: give --model-url (the evaluation needs a model to ask)")
	}
	if err := ep.Validate(); err != nil {
		return Report{}, err
	}
	sites := Catalogue()
	view, metrics := View(sites), Measure(sites)
	rep := Report{Model: fmt.Sprintf("%s %s at %s", ep.API, ep.Model, ep.URL)}
	for _, sc := range Scenarios() {
		for range runs {
			if err := ctx.Err(); err != nil {
				return rep, err
			}
			sel, err := choice.New(choice.Config{HTTP: hc})
			if err != nil {
				return rep, err
			}
			d := sel.Select(ctx, choice.Input{Intent: sc.Intent, Location: &Consumer, View: view, Endpoint: ep})
			o := Outcome{Scenario: sc.Name, Why: d.Why, Reason: d.Reason, Latency: d.Latency.Seconds()}
			if p, ok := d.Chosen(api.ChunkStandard); ok {
				o.Pick, o.ByModel = p.Provider, p.ByModel
				o.Pass = p.ByModel && sc.Pass(metrics, p.Provider)
			}
			rep.Outcomes = append(rep.Outcomes, o)
		}
	}
	return rep, nil
}
