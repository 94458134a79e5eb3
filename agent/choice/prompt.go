package choice

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/placement"
)

// MaxIntentLength bounds the consumer's intent in bytes (the ConsumerPolicy
// CRD and the consumer console enforce the same).
const MaxIntentLength = 1000

// CheckIntent checks an intent: at most MaxIntentLength bytes of valid
// UTF-8 without control characters other than new lines and tabs.
func CheckIntent(s string) error {
	switch {
	case len(s) > MaxIntentLength:
		return fmt.Errorf("the intent is %d bytes long, at most %d", len(s), MaxIntentLength)
	case !utf8.ValidString(s):
		return fmt.Errorf("the intent is not valid UTF-8")
	case strings.ContainsFunc(s, func(r rune) bool { return unicode.IsControl(r) && r != '\n' && r != '\t' }):
		return fmt.Errorf("the intent contains control characters; write plain text")
	}
	return nil
}

// Location is where the consumer is, as the prompt states it.
type Location struct {
	City                string
	Latitude, Longitude float64
}

// Candidate is one provider as the model sees it: the broker's data for
// this consumer, plus the RTT the agent measured where it has one.
type Candidate struct {
	ID            string   `json:"id"`
	City          string   `json:"city,omitempty"`
	Region        string   `json:"region,omitempty"`
	DistanceKM    *float64 `json:"distanceKm,omitempty"`
	RTTMs         *float64 `json:"measuredRttMs,omitempty"`
	CarbonGPerKWh *float64 `json:"carbonGCO2PerKWh,omitempty"`
	Renewable     bool     `json:"renewable"`
	// Chunks offers the chunk types the provider has for this consumer.
	Chunks map[api.ChunkType]Offer `json:"chunks"`
}

// Offer is one chunk type of a candidate.
type Offer struct {
	FreeChunks   int32    `json:"freeChunks"`
	PricePerHour *float64 `json:"pricePerChunkHour,omitempty"`
	// score is the broker's Weighted score (the fallback order).
	score    float64
	hasScore bool
}

// candidates turns a Choice view into one candidate per provider, by id;
// rtts are the measured RTTs in ms by provider (may be nil).
func candidates(view api.NodeGroupListResponse, loc *Location, rtts map[string]float64) []Candidate {
	byID := map[string]*Candidate{}
	var ids []string
	for _, g := range view.NodeGroups {
		c := byID[g.ProviderClusterID]
		if c == nil {
			c = &Candidate{ID: g.ProviderClusterID, Chunks: map[api.ChunkType]Offer{}, Renewable: g.Renewable}
			if g.CarbonIntensity != nil {
				v := round(*g.CarbonIntensity, 1)
				c.CarbonGPerKWh = &v
			}
			if t := g.Topology; t != nil {
				c.City, c.Region = t.City, t.Region
				if loc != nil && t.HasCoordinates() {
					d := round(placement.DistanceKM(loc.Latitude, loc.Longitude, t.Latitude, t.Longitude), 0)
					c.DistanceKM = &d
				}
			}
			if r, ok := rtts[g.ProviderClusterID]; ok {
				r = round(r, 1)
				c.RTTMs = &r
			}
			byID[g.ProviderClusterID] = c
			ids = append(ids, g.ProviderClusterID)
		}
		o := Offer{FreeChunks: max(g.MaxSize-g.CurrentReserved, 0)}
		if q, err := resource.ParseQuantity(g.Cost); err == nil && g.Cost != "" {
			p := round(q.AsApproximateFloat64(), 4)
			o.PricePerHour = &p
		}
		if g.HasMetric && g.PlacementMetric != nil {
			o.score, o.hasScore = *g.PlacementMetric, true
		}
		c.Chunks[g.Type] = o
	}
	slices.Sort(ids)
	out := make([]Candidate, 0, len(ids))
	for _, id := range ids {
		out = append(out, *byID[id])
	}
	return out
}

// round keeps digits decimals (the prompt shows no false precision).
func round(v float64, digits int) float64 {
	p := math.Pow10(digits)
	return math.Round(v*p) / p
}

// BuildPrompt is the prompt the model gets (docs/placement.md shows it):
// the intent (quoted as JSON, so it cannot close the instructions), the
// consumer's location, the candidates as JSON by id, and the answer format.
func BuildPrompt(intent string, loc *Location, cands []Candidate) string {
	var b strings.Builder
	b.WriteString("A Kubernetes cluster borrows capacity, in chunks, from the providers listed below. ")
	b.WriteString("Rank the providers for the operator's request, best first.\n\n")
	q, _ := json.Marshal(intent)
	fmt.Fprintf(&b, "Operator's request: %s\n", q)
	if loc != nil {
		city, _ := json.Marshal(loc.City)
		fmt.Fprintf(&b, "The cluster is at latitude %.2f, longitude %.2f (city %s).\n", loc.Latitude, loc.Longitude, city)
	} else {
		b.WriteString("The cluster's location is unknown.\n")
	}
	b.WriteString("Fields: distanceKm from the cluster; measuredRttMs round trip measured by the cluster; ")
	b.WriteString("carbonGCO2PerKWh grid carbon intensity (lower is greener); renewable; per chunk type freeChunks and pricePerChunkHour (lower is cheaper). A missing field is unknown.\n")
	list, _ := json.Marshal(cands)
	fmt.Fprintf(&b, "Providers: %s\n\n", list)
	b.WriteString(`Answer with exactly one JSON object and nothing else: {"ranking": ["<id>", ...], "reason": "<one sentence>"}. `)
	b.WriteString("Use only ids from the list above, each at most once.")
	return b.String()
}
