package api

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Re-evaluation of borrowed capacity (extension): whether another provider
// is now better for a consumer's held chunks, under its policy, by more
// than its threshold (docs/placement.md, Re-evaluation).

// Re-evaluation metrics besides MetricCost (cost of one chunk per hour,
// Price): what a decision compares, per chunk.
const (
	// MetricCarbonPerHour is one chunk's power (kW) × the weighted carbon
	// intensity, in gCO2eq per hour (Eco).
	MetricCarbonPerHour ExplainMetric = "carbonPerChunkHour"
	// MetricRTT is the consumer's measured round trip in ms (Latency).
	MetricRTT ExplainMetric = "rttMs"
)

// Re-evaluation decisions.
const (
	DecisionMove = "move"
	DecisionKeep = "keep"
)

// Thresholds are how much better, per chunk, another provider must be
// before a held chunk is worth moving (extension): a move must save MORE
// than the threshold of the policy's metric. Each is ≥ 0; nil fields take
// the broker's defaults.
type Thresholds struct {
	// CostPerHour, in the federation's currency per hour (Price).
	CostPerHour *float64 `json:"costPerHour,omitempty"`
	// CarbonPerHour, in gCO2eq per hour (Eco).
	CarbonPerHour *float64 `json:"carbonPerHour,omitempty"`
	// RTTMillis, in milliseconds of measured round trip (Latency).
	RTTMillis *float64 `json:"rttMillis,omitempty"`
}

// Reevaluation is one decision for a consumer's held chunks of one
// provider × chunk type.
type Reevaluation struct {
	NodeGroupID       string    `json:"nodeGroupId"`
	ProviderClusterID string    `json:"providerClusterId"`
	ChunkType         ChunkType `json:"chunkType"`
	// Chunks is how many chunks the consumer holds there.
	Chunks int32 `json:"chunks"`
	// Decision is "move" (Target is better by more than Threshold) or
	// "keep".
	Decision string `json:"decision"`
	// Metric is what was compared ("" when the policy compares nothing).
	Metric ExplainMetric `json:"metric,omitempty"`
	// Current and Best are the metric per chunk on the held provider and
	// on the best other one with room (absent when unknown).
	Current *float64 `json:"current,omitempty"`
	Best    *float64 `json:"best,omitempty"`
	// Target is the best other provider with room ("" when none).
	Target string `json:"target,omitempty"`
	// SavingPerChunk is Current − Best (absent when either is unknown).
	SavingPerChunk *float64 `json:"savingPerChunk,omitempty"`
	Threshold      float64  `json:"threshold"`
	// Reason says why, in words.
	Reason string `json:"reason"`
	// DecidedAt is when the broker first reached this outcome with this
	// target (the decision is re-evaluated often; this moves only when it
	// changes).
	DecidedAt metav1.Time `json:"decidedAt"`
}
