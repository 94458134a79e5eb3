package api

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PlacementExplanation says why a consumer grows where it does under its
// policy (extension): per chunk type, every provider with its metric value,
// the ones filtered out and why, the winner(s) and the margin to the
// runner-up. The broker computes it with the code that masks the node-group
// view, so it always agrees with GET /api/v1/nodegroups. Answer of GET
// /api/v1/placement/explanation (the caller's own) and rows of the dashboard
// listener's GET /api/v1/placement/explanations.
type PlacementExplanation struct {
	ConsumerClusterID string        `json:"consumerClusterId"`
	AppliedPlacement  PlacementType `json:"appliedPlacement"`
	// Metric names what Candidates[].metric holds (see ExplainMetric).
	Metric ExplainMetric `json:"metric"`
	// HigherIsBetter is true for the Standard score; every other metric
	// ranks lower first.
	HigherIsBetter bool `json:"higherIsBetter,omitempty"`
	// Weights are the weights applied under Weighted (after the defaults:
	// missing or all zero = all 1).
	Weights *Weights `json:"weights,omitempty"`
	// ChunkTypes is one entry per chunk type the federation offers, in
	// wire order (gpu, standard).
	ChunkTypes []ChunkTypeExplanation `json:"chunkTypes"`
	// NotSharing counts providers that do not share with the consumer.
	// The consumer's own route reports only this count; the dashboard
	// listener lists them as candidates filtered "denied"/"notAllowed".
	NotSharing  int32       `json:"notSharing,omitempty"`
	GeneratedAt metav1.Time `json:"generatedAt"`
	// Spend is what the consumer's borrowed chunks cost and emit now and
	// what it spent today and this month, as the overview's spend of the
	// consumer: only in the consumer's own answer (route 11), whose console
	// shows it next to the alternatives (mostExpensive, standardChoice).
	Spend *ConsumerSpend `json:"spend,omitempty"`
}

// ExplainMetric is the unit of a candidate's metric.
type ExplainMetric string

// Metrics per policy.
const (
	// MetricStandardScore is 0.8 × free fraction + 0.2 × renewable (0–1,
	// higher wins): Standard, and Latency without a consumer location.
	MetricStandardScore ExplainMetric = "standardScore"
	// MetricCost is the cost of one chunk per hour (Price).
	MetricCost ExplainMetric = "costPerChunkHour"
	// MetricCarbon is the weighted carbon intensity in gCO2eq/kWh (Eco).
	MetricCarbon ExplainMetric = "carbonGPerKWh"
	// MetricDistance is the great-circle distance in km (Latency).
	MetricDistance ExplainMetric = "distanceKm"
	// MetricWeightedScore is Σ weight × normalised metric (Weighted, lower
	// wins).
	MetricWeightedScore ExplainMetric = "weightedScore"
	// MetricRandomDraw is the provider's seeded draw in [0, 1) for this
	// decision (Random, lowest wins).
	MetricRandomDraw ExplainMetric = "randomDraw"
)

// ChunkTypeExplanation is the decision for one chunk type.
type ChunkTypeExplanation struct {
	ChunkType ChunkType `json:"chunkType"`
	// Winners are the growable providers, best first: one, or up to three
	// under a Latency shortlist (the consumer then picks by RTT). Empty when
	// nothing is growable.
	Winners []string `json:"winners,omitempty"`
	// BlockedBy is the full provider, ranked before any with room, on which
	// this consumer's peering is in flight: the type is masked until it
	// settles.
	BlockedBy string `json:"blockedBy,omitempty"`
	// RunnerUp is the best eligible provider after the (first) winner, and
	// Margin the absolute difference of their metrics (absent when either
	// has no metric value).
	RunnerUp string   `json:"runnerUp,omitempty"`
	Margin   *float64 `json:"margin,omitempty"`
	// Candidates lists every provider offering the type: eligible ones in
	// rank order, then the filtered ones by id.
	Candidates []PlacementCandidate `json:"candidates"`
	// Held is the consumer's live chunks of the type. MostExpensive is the
	// priced provider that may lend to it with the highest cost per chunk
	// (room not considered), StandardChoice the provider the Standard
	// policy would grow it on now; both priced for Held chunks (absent when
	// there is none).
	Held           int32        `json:"held,omitempty"`
	MostExpensive  *Alternative `json:"mostExpensive,omitempty"`
	StandardChoice *Alternative `json:"standardChoice,omitempty"`
}

// CandidateOutcome is what became of a provider in the decision.
type CandidateOutcome string

// Outcomes.
const (
	OutcomeWinner   CandidateOutcome = "winner"   // growable
	OutcomeEligible CandidateOutcome = "eligible" // had room, ranked lower
	OutcomeBlocking CandidateOutcome = "blocking" // full, this consumer's peering in flight
	OutcomeFiltered CandidateOutcome = "filtered" // see Filter
)

// CandidateFilter says why a provider could not be chosen.
type CandidateFilter string

// Filters.
const (
	FilterDenied     CandidateFilter = "denied"     // in the provider's deniedConsumers
	FilterNotAllowed CandidateFilter = "notAllowed" // outside its allowedConsumers
	FilterQuota      CandidateFilter = "quota"      // the consumer holds maxChunksPerConsumer there
	FilterFull       CandidateFilter = "full"       // no free chunk of the type
	FilterStale      CandidateFilter = "stale"      // its advertisement is too old
)

// PlacementCandidate is one provider in an explanation.
type PlacementCandidate struct {
	ProviderClusterID string `json:"providerClusterId"`
	// Rank is the position among eligible providers (1 = best); 0 when
	// filtered.
	Rank    int32            `json:"rank,omitempty"`
	Outcome CandidateOutcome `json:"outcome"`
	Filter  CandidateFilter  `json:"filter,omitempty"`
	// Metric is the policy's metric (unit: PlacementExplanation.Metric);
	// absent when the provider lacks it (unpriced, no carbon data, no
	// coordinates), which ranks it after every provider that has it.
	Metric *float64 `json:"metric,omitempty"`
	// FreeChunks, TotalChunks and HeadRoom (what this consumer may still
	// take there) in chunks of the type.
	FreeChunks  int32 `json:"freeChunks"`
	TotalChunks int32 `json:"totalChunks"`
	HeadRoom    int32 `json:"headRoom"`
}

// ForConsumer returns the explanation as the consumer itself may read it:
// providers that do not share with it are left out of the candidates (they
// never appear in its node-group view either) and only counted in
// NotSharing, so a consumer does not learn another provider's rules. The
// receiver is not modified.
func (e PlacementExplanation) ForConsumer() PlacementExplanation {
	out := e
	out.ChunkTypes = make([]ChunkTypeExplanation, len(e.ChunkTypes))
	for i, te := range e.ChunkTypes {
		te.Candidates = slices.DeleteFunc(slices.Clone(te.Candidates), func(c PlacementCandidate) bool {
			return c.Filter == FilterDenied || c.Filter == FilterNotAllowed
		})
		out.ChunkTypes[i] = te
	}
	return out
}

// PlacementExplanationList answers the dashboard listener's GET
// /api/v1/placement/explanations: every consumer's explanation, by
// consumer id, with the providers that do not share with each listed.
type PlacementExplanationList struct {
	Explanations []PlacementExplanation `json:"explanations"`
}

// ConsumerSpend is what a consumer's borrowed capacity costs and emits now
// (extension, per consumer of the overview).
type ConsumerSpend struct {
	// Chunks counts the live chunks borrowed per type.
	Chunks map[ChunkType]int32 `json:"chunks,omitempty"`
	// CostPerHour is Σ chunks × cost per chunk at each provider's current
	// prices; UnpricedChunks are left out of it (their provider has no
	// price for a resource of the chunk).
	CostPerHour    float64 `json:"costPerHour"`
	UnpricedChunks int32   `json:"unpricedChunks,omitempty"`
	// CarbonPerHour is Σ chunks × chunk power (kW, the broker's
	// --chunk-watts-*) × the provider's grid intensity now (gCO2eq/kWh;
	// the 6-hour weighted value when it sends no current one), in
	// gCO2eq/h; NoCarbonChunks are on providers without carbon data.
	CarbonPerHour  float64 `json:"carbonPerHour"`
	NoCarbonChunks int32   `json:"noCarbonChunks,omitempty"`
	// SpentToday and SpentThisMonth are what the consumer spent this UTC
	// day and month (the broker's spend book: CostPerHour integrated over
	// time, kept across restarts).
	SpentToday     float64 `json:"spentToday,omitempty"`
	SpentThisMonth float64 `json:"spentThisMonth,omitempty"`
}

// Alternative is what a consumer's borrowed chunks of one type would cost
// and emit per hour on another provider (extension of an explanation).
type Alternative struct {
	ProviderClusterID string `json:"providerClusterId"`
	// CostPerHour is held chunks × the provider's cost per chunk (absent:
	// unpriced); CarbonPerHour held chunks × chunk power × its intensity
	// (absent: no carbon data).
	CostPerHour   *float64 `json:"costPerHour,omitempty"`
	CarbonPerHour *float64 `json:"carbonPerHour,omitempty"`
}
