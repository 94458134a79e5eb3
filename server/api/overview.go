package api

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Overview answers GET /api/v1/overview on the dashboard listener. It never
// carries a credential.
type Overview struct {
	GeneratedAt             metav1.Time             `json:"generatedAt"`
	Namespace               string                  `json:"namespace,omitempty"`
	Capacity                CapacitySummary         `json:"capacity"`
	Advertisements          []AdvertisementSnapshot `json:"advertisements"`
	Reservations            []OverviewReservation   `json:"reservations"`
	ProviderInstructions    []OverviewInstruction   `json:"providerInstructions"`
	ReservationInstructions []OverviewInstruction   `json:"reservationInstructions"`
	Consumers               []OverviewConsumer      `json:"consumers"`
	// Warnings lists operator-facing notes such as unknown placement
	// policies (extension).
	Warnings []string `json:"warnings,omitempty"`
}

// CapacitySummary totals the federation's chunks.
type CapacitySummary struct {
	TotalChunks            int32                             `json:"totalChunks"`
	ReservedChunks         int32                             `json:"reservedChunks"`
	AvailableChunks        int32                             `json:"availableChunks"`
	ProviderCount          int32                             `json:"providerCount"`
	AvailableProviderCount int32                             `json:"availableProviderCount"`
	ByChunkType            map[ChunkType]ChunkCounts         `json:"byChunkType"`
	ChunkSizes             map[ChunkType]corev1.ResourceList `json:"chunkSizes"`
}

// OverviewReservation is a reservation row of the overview.
type OverviewReservation struct {
	ReservationResponse `json:",inline"`
	TerminatedAt        *metav1.Time `json:"terminatedAt,omitempty"`
	// History is the reservation's phase timeline (extension).
	History []PhaseTransition `json:"history,omitempty"`
}

// PhaseTransition is one step of a reservation's timeline.
type PhaseTransition struct {
	Phase   Phase       `json:"phase"`
	At      metav1.Time `json:"at"`
	Message string      `json:"message,omitempty"`
}

// OverviewInstruction is an instruction row of the overview (never with its
// kubeconfig).
type OverviewInstruction struct {
	ID                    string          `json:"id"`
	Kind                  InstructionKind `json:"kind"`
	ReservationID         string          `json:"reservationId"`
	TargetClusterID       string          `json:"targetClusterId"`
	ChunkCount            int32           `json:"chunkCount,omitempty"`
	LastChunk             bool            `json:"lastChunk,omitempty"`
	Enforced              bool            `json:"enforced"`
	Attempts              int32           `json:"attempts,omitempty"`
	IssuedAt              *metav1.Time    `json:"issuedAt,omitempty"`
	LastDeliveredAt       *metav1.Time    `json:"lastDeliveredAt,omitempty"`
	LastUpdateTime        *metav1.Time    `json:"lastUpdateTime,omitempty"`
	ExpiresAt             *metav1.Time    `json:"expiresAt,omitempty"`
	Message               string          `json:"message,omitempty"`
	ConsumerClusterID     string          `json:"consumerClusterId,omitempty"`
	ConsumerLiqoClusterID string          `json:"consumerLiqoClusterId,omitempty"`
	ProviderClusterID     string          `json:"providerClusterId,omitempty"`
	ResourceSliceNames    []string        `json:"resourceSliceNames,omitempty"`
}

// OverviewConsumer is a consumer row of the overview.
type OverviewConsumer struct {
	ClusterID      string        `json:"clusterId"`
	LiqoClusterID  string        `json:"liqoClusterId,omitempty"`
	Placement      PlacementType `json:"placement,omitempty"`
	Region         string        `json:"region,omitempty"`
	City           string        `json:"city,omitempty"`
	ChosenProvider string        `json:"chosenProvider,omitempty"`
	MeasuredRTT    *float64      `json:"measuredRtt,omitempty"`
	LastSeen       metav1.Time   `json:"lastSeen"`
	// Extensions: the applied policy, the weights, all measured RTTs.
	AppliedPlacement  PlacementType      `json:"appliedPlacement,omitempty"`
	Weights           *Weights           `json:"weights,omitempty"`
	MeasuredLatencies map[string]float64 `json:"measuredLatencies,omitempty"`
	Latitude          *float64           `json:"latitude,omitempty"`
	Longitude         *float64           `json:"longitude,omitempty"`
	// Spend is what the consumer's borrowed chunks cost and emit per hour
	// now (extension).
	Spend *ConsumerSpend `json:"spend,omitempty"`
	// Budget is the consumer's spend against its budget (extension; only
	// when it has one).
	Budget *BudgetStatus `json:"budget,omitempty"`
	// Reevaluations are the broker's latest re-evaluation decisions for
	// the groups the consumer holds chunks in, by node-group id
	// (extension).
	Reevaluations []Reevaluation `json:"reevaluations,omitempty"`
	// Migrations are the moves of the consumer's manual reservations
	// (moving, and ended ones until their reservation is forgotten; kept
	// ones while the decision stands), and Savings what its finished
	// moves saved (extension).
	Migrations []Migration       `json:"migrations,omitempty"`
	Savings    *MigrationSavings `json:"savings,omitempty"`
	// MoveBudget is the consumer's disruption budget of moves, both kinds
	// counted (absent when it is 0 and nothing was ever counted).
	MoveBudget *MoveBudgetStatus `json:"moveBudget,omitempty"`
}
