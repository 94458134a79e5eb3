// Package api holds the Broker API v1 wire types: the contract between the
// broker, the agents and the dashboard. Field names, JSON tags and enum values
// are wire-compatible with the reference broker (see docs/broker-api.md); the
// fields marked "extension" are optional additions that old clients never send
// and may ignore.
package api

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ChunkType is the kind of chunk a node group offers.
type ChunkType string

// Chunk types.
const (
	ChunkStandard ChunkType = "standard"
	ChunkGPU      ChunkType = "gpu"
)

// Phase is a reservation's phase (reference §5).
type Phase string

// Reservation phases.
const (
	PhasePending              Phase = "Pending"
	PhaseGeneratingKubeconfig Phase = "GeneratingKubeconfig"
	PhaseKubeconfigReady      Phase = "KubeconfigReady"
	PhasePeering              Phase = "Peering"
	PhasePeered               Phase = "Peered"
	PhaseUnpeering            Phase = "Unpeering"
	PhaseReleased             Phase = "Released"
	PhaseExpired              Phase = "Expired"
	PhaseFailed               Phase = "Failed"
)

// Terminal reports whether no further transition can happen from p.
func (p Phase) Terminal() bool {
	return p == PhaseReleased || p == PhaseExpired || p == PhaseFailed
}

// InstructionKind is the dispatch key of an instruction.
type InstructionKind string

// Instruction kinds. Cleanup and Reconcile exist for both roles; the receiving
// agent tells them apart by its role (provider-flavour items carry consumer*
// fields, consumer-flavour items carry provider* fields).
const (
	KindGenerateKubeconfig InstructionKind = "GenerateKubeconfig"
	KindPeer               InstructionKind = "Peer"
	KindUnpeer             InstructionKind = "Unpeer"
	KindCleanup            InstructionKind = "Cleanup"
	KindReconcile          InstructionKind = "Reconcile"
)

// PlacementType is a consumer's placement policy.
type PlacementType string

// Placement policies.
const (
	PlacementStandard PlacementType = "Standard"
	PlacementPrice    PlacementType = "Price"
	PlacementEco      PlacementType = "Eco"
	PlacementLatency  PlacementType = "Latency"
	PlacementWeighted PlacementType = "Weighted" // extension
	// PlacementChoice lists every provider the consumer may borrow from
	// with room, each scored as under Weighted, and leaves the choice to
	// the consumer agent (a local model ranks them against the consumer's
	// intent; docs/placement.md). Extension.
	PlacementChoice PlacementType = "Choice"
	// PlacementConsumerChoice is the reference's spelling of Choice,
	// accepted and applied (and reported) as Choice.
	PlacementConsumerChoice PlacementType = "ConsumerChoice"
	// PlacementRandom picks uniformly among the providers with room: the
	// experiments' baseline (extension), never a production choice.
	PlacementRandom PlacementType = "Random"
)

// Role is what a member cluster does in the federation; it is recorded in
// the cluster's client certificate.
type Role string

// Roles.
const (
	RoleProvider Role = "provider"
	RoleConsumer Role = "consumer"
)

// Acts reports whether a caller whose certificate records role r may act as
// want. The empty role is a legacy (role-less) certificate, which the broker
// accepts only with --allow-legacy-certs; it acts as both.
func (r Role) Acts(want Role) bool { return r == "" || r == want }

// Result statuses for InstructionResultRequest.Status.
const (
	ResultSucceeded = "Succeeded"
	ResultFailed    = "Failed"
)

// Payload kinds for InstructionPayload.Kind.
const (
	PayloadKubeconfig = "KubeconfigPayload"
	PayloadPeer       = "PeerPayload"
	PayloadUnpeer     = "UnpeerPayload"
	PayloadReconcile  = "ReconcilePayload"
)

// Header names.
const (
	HeaderRequestID     = "X-Request-Id"
	HeaderReservationID = "X-Reservation-Id"
	// HeaderLongPoll is set on every broker response; agents that see it may
	// use GET /api/v1/instructions?wait=<duration> (extension).
	HeaderLongPoll = "X-Broker-Long-Poll"
	// HeaderBrokerAPI names the broker implementation and API level (extension).
	HeaderBrokerAPI = "X-Broker-Api"
)

// Topology is a provider's location.
type Topology struct {
	Zone      string  `json:"zone,omitempty"`
	Region    string  `json:"region,omitempty"`
	City      string  `json:"city,omitempty"`
	Latitude  float64 `json:"latitude,omitempty"`
	Longitude float64 `json:"longitude,omitempty"`
}

// HasCoordinates reports whether the topology carries a usable location;
// exactly 0,0 counts as "no coordinates" (reference §2.1).
func (t *Topology) HasCoordinates() bool {
	return t != nil && (t.Latitude != 0 || t.Longitude != 0)
}

// Sharing is a provider's "with whom" rule set (extension, issue #3).
type Sharing struct {
	// AllowedConsumers lists the consumer cluster ids that may borrow; empty
	// means everyone.
	AllowedConsumers []string `json:"allowedConsumers,omitempty"`
	// DeniedConsumers lists consumer cluster ids that may never borrow; it
	// wins over AllowedConsumers.
	DeniedConsumers []string `json:"deniedConsumers,omitempty"`
	// MaxChunksPerConsumer caps the live reservations one consumer may hold
	// on this provider (per chunk type); 0 means no cap.
	MaxChunksPerConsumer int32 `json:"maxChunksPerConsumer,omitempty"`
}

// AdvertisementRequest is the body of POST /api/v1/advertisements.
type AdvertisementRequest struct {
	ClusterID            string              `json:"clusterId"`
	LiqoClusterID        string              `json:"liqoClusterId"`
	Resources            corev1.ResourceList `json:"resources"`
	Topology             *Topology           `json:"topology,omitempty"`
	UnitPrices           corev1.ResourceList `json:"unitPrices,omitempty"`
	CarbonIntensity      *float64            `json:"carbonIntensity,omitempty"`
	CarbonForecast       []float64           `json:"carbonForecast,omitempty"`
	CapacityScalePercent map[string]int32    `json:"capacityScalePercent,omitempty"`
	CapacityFixed        corev1.ResourceList `json:"capacityFixed,omitempty"`
	Renewable            bool                `json:"renewable,omitempty"`
	ProbeEndpoint        string              `json:"probeEndpoint,omitempty"`
	LiqoLabels           map[string]string   `json:"liqoLabels,omitempty"`
	LiqoTaints           []corev1.Taint      `json:"liqoTaints,omitempty"`
	// Sharing is the provider's "with whom" rule set (extension).
	Sharing *Sharing `json:"sharing,omitempty"`
}

// AdvertisementResponse answers POST /api/v1/advertisements.
type AdvertisementResponse struct {
	Accepted       bool                `json:"accepted"`
	ChunkCount     int32               `json:"chunkCount,omitempty"`
	ChunkResources corev1.ResourceList `json:"chunkResources,omitempty"`
	NextReportIn   string              `json:"nextReportIn,omitempty"`
	Instructions   []InstructionView   `json:"instructions,omitempty"`
	// ChunkCounts gives the number of whole chunks per chunk type when a
	// provider offers more than one type (extension).
	ChunkCounts map[ChunkType]int32 `json:"chunkCounts,omitempty"`
}

// AdvertisementSnapshot answers GET /api/v1/advertisements/{clusterId} and is
// the per-provider row of the overview.
type AdvertisementSnapshot struct {
	ClusterID            string              `json:"clusterId"`
	LiqoClusterID        string              `json:"liqoClusterId,omitempty"`
	Resources            corev1.ResourceList `json:"resources,omitempty"`
	Topology             *Topology           `json:"topology,omitempty"`
	UnitPrices           corev1.ResourceList `json:"unitPrices,omitempty"`
	CarbonIntensity      *float64            `json:"carbonIntensity,omitempty"`
	CarbonForecast       []float64           `json:"carbonForecast,omitempty"`
	CarbonWeighted       *float64            `json:"carbonWeighted,omitempty"`
	CapacityScalePercent map[string]int32    `json:"capacityScalePercent,omitempty"`
	CapacityFixed        corev1.ResourceList `json:"capacityFixed,omitempty"`
	Renewable            bool                `json:"renewable,omitempty"`
	ProbeEndpoint        string              `json:"probeEndpoint,omitempty"`
	ChunkCount           int32               `json:"chunkCount,omitempty"`
	ReservedChunks       int32               `json:"reservedChunks,omitempty"`
	AvailableChunks      int32               `json:"availableChunks,omitempty"`
	LastSeen             metav1.Time         `json:"lastSeen"`
	Available            bool                `json:"available,omitempty"`
	CostPerChunk         float64             `json:"costPerChunk,omitempty"`
	LiqoLabels           map[string]string   `json:"liqoLabels,omitempty"`
	LiqoTaints           []corev1.Taint      `json:"liqoTaints,omitempty"`
	// Sharing echoes the provider's rule set (extension).
	Sharing *Sharing `json:"sharing,omitempty"`
	// Chunks breaks capacity down by chunk type (extension).
	Chunks map[ChunkType]ChunkCounts `json:"chunks,omitempty"`
	// DisconnectedAt is when the broker found the provider stale (no
	// advertisement for --provider-stale-after); absent while it is
	// available (extension).
	DisconnectedAt *metav1.Time `json:"disconnectedAt,omitempty"`
	// GraceUntil is when the last disconnect grace of the provider's live
	// reservations ends: they fail then unless the provider advertises
	// again (extension). Absent when the provider is available or holds no
	// reservation in grace.
	GraceUntil *metav1.Time `json:"graceUntil,omitempty"`
	// Loans lists the live reservations the provider serves, oldest first
	// (extension). Only GET /api/v1/advertisements/{clusterId} fills it,
	// and only the provider itself may call that route; the overview
	// leaves it empty (it lists every reservation anyway).
	Loans []ProviderLoan `json:"loans,omitempty"`
}

// ProviderLoan is one live reservation a provider serves (extension).
type ProviderLoan struct {
	ReservationID     string       `json:"reservationId"`
	ConsumerClusterID string       `json:"consumerClusterId"`
	ChunkType         ChunkType    `json:"chunkType"`
	ChunkCount        int32        `json:"chunkCount"`
	Status            Phase        `json:"status"`
	CreatedAt         metav1.Time  `json:"createdAt"`
	ActivatedAt       *metav1.Time `json:"activatedAt,omitempty"`
	// CostPerHour is what the loan earns per hour at the provider's
	// current unit prices (chunkCount × the chunk's cost); absent when a
	// resource of the chunk is unpriced.
	CostPerHour *float64 `json:"costPerHour,omitempty"`
}

// ChunkCounts is a total/reserved/available triple.
type ChunkCounts struct {
	TotalChunks     int32 `json:"totalChunks"`
	ReservedChunks  int32 `json:"reservedChunks"`
	AvailableChunks int32 `json:"availableChunks"`
}

// Weights are the Weighted policy's metric weights (extension). Each weight
// is ≥ 0; they need not sum to 1.
type Weights struct {
	Price        float64 `json:"price,omitempty"`
	Carbon       float64 `json:"carbon,omitempty"`
	Distance     float64 `json:"distance,omitempty"`
	FreeCapacity float64 `json:"freeCapacity,omitempty"`
}

// Placement is a consumer's policy as sent in its heartbeat.
type Placement struct {
	Type PlacementType `json:"type,omitempty"`
	// Weights is read only under the Weighted policy (extension).
	Weights *Weights `json:"weights,omitempty"`
	// LatencyCandidates is how many nearest providers per chunk type the
	// Latency shortlist offers for the consumer to measure (extension): 1
	// to MaxLatencyCandidates; 0 (absent) means DefaultLatencyCandidates,
	// the reference's three. Providers tied at the last one's distance stay
	// too, up to MaxLatencyCandidates.
	LatencyCandidates int `json:"latencyCandidates,omitempty"`
}

// HeartbeatRequest is the body of POST /api/v1/heartbeat.
type HeartbeatRequest struct {
	ClusterID         string             `json:"clusterId"`
	LiqoClusterID     string             `json:"liqoClusterId"`
	Placement         *Placement         `json:"placement,omitempty"`
	Region            string             `json:"region,omitempty"`
	City              string             `json:"city,omitempty"`
	Latitude          *float64           `json:"latitude,omitempty"`
	Longitude         *float64           `json:"longitude,omitempty"`
	MeasuredLatencies map[string]float64 `json:"measuredLatencies,omitempty"`
	ChosenProvider    string             `json:"chosenProvider,omitempty"`
	// Reservations lists the reservation ids the consumer holds; listing
	// them renews their lease (extension). Every heartbeat renews all of the
	// consumer's live reservations whether or not it lists them. At most
	// MaxHeartbeatReservations ids.
	Reservations []string `json:"reservations,omitempty"`
	// Lifecycle carries the consumer's lifecycle settings (extension); nil
	// means the broker's defaults.
	Lifecycle *Lifecycle `json:"lifecycle,omitempty"`
	// NotReadyReservations lists the reservations whose virtual node was
	// Ready and is not any more, or was lost (extension): Liqo lost the
	// provider. While the provider is disconnected this ends the
	// reservation's disconnect grace at once. At most
	// MaxHeartbeatReservations ids.
	NotReadyReservations []string `json:"notReadyReservations,omitempty"`
	// StartingReservations lists the reservations whose virtual node
	// exists but is not Ready yet (extension): a migration waits until its
	// target is listed in Reservations and in neither this list nor
	// NotReadyReservations. At most MaxHeartbeatReservations ids.
	StartingReservations []string `json:"startingReservations,omitempty"`
	// Budget is the consumer's spend budget (extension), from its
	// ConsumerPolicy; nil: no budget.
	Budget *Budget `json:"budget,omitempty"`
	// Consolidations lists the consolidations of autoscaled capacity the
	// consumer agent started and still runs (extension, optional): the
	// broker charges each to the consumer's disruption budget once, the
	// first time it is listed. At most MaxHeartbeatConsolidations.
	Consolidations []Consolidation `json:"consolidations,omitempty"`
}

// Budget is a consumer's spend budget in the providers' currency
// (extension): the broker refuses a reservation that would take the
// consumer's spend per hour above PerHour, or its projected month above
// PerMonth (docs/placement.md, Budgets). A nil limit is none.
type Budget struct {
	// PerHour caps the spend per hour at the providers' current prices
	// (0 to MaxBudget).
	PerHour *resource.Quantity `json:"perHour,omitempty"`
	// PerMonth caps what was spent this UTC month plus the spend per hour
	// until the month ends (0 to MaxBudget).
	PerMonth *resource.Quantity `json:"perMonth,omitempty"`
	// WarnAtPercent is the share of a limit at which the budget is shown as
	// nearly used (1 to 100; nil: DefaultBudgetWarnAtPercent).
	WarnAtPercent *int32 `json:"warnAtPercent,omitempty"`
}

// DefaultBudgetWarnAtPercent is Budget.WarnAtPercent when unset.
const DefaultBudgetWarnAtPercent = 80

// BudgetState is where a consumer's spend stands against its budget.
type BudgetState string

// Budget states.
const (
	// BudgetOK: below the warning threshold.
	BudgetOK BudgetState = "ok"
	// BudgetWarning: at or above warnAtPercent of a limit.
	BudgetWarning BudgetState = "warning"
	// BudgetReached: a limit is used up, or a scale-up was refused for the
	// budget and the spend has not gone down since.
	BudgetReached BudgetState = "reached"
)

// BudgetStatus is a consumer's spend against its budget (extension: in the
// overview per consumer and in the consumer's node-group list).
type BudgetStatus struct {
	PerHour       *float64 `json:"perHour,omitempty"`
	PerMonth      *float64 `json:"perMonth,omitempty"`
	WarnAtPercent int32    `json:"warnAtPercent"`
	// CostPerHour is the consumer's spend per hour now; SpentThisMonth what
	// it spent this UTC month; ProjectedMonth SpentThisMonth plus
	// CostPerHour until the month ends.
	CostPerHour    float64 `json:"costPerHour"`
	SpentThisMonth float64 `json:"spentThisMonth"`
	ProjectedMonth float64 `json:"projectedMonth"`
	// UsedPercent is the larger share of the two limits used
	// (CostPerHour of PerHour, ProjectedMonth of PerMonth); UsedOf names it
	// ("perHour" or "perMonth").
	UsedPercent float64     `json:"usedPercent"`
	UsedOf      string      `json:"usedOf,omitempty"`
	State       BudgetState `json:"state"`
	// LastRefusal is the message of the last reservation refused for the
	// budget (since the broker started), and when.
	LastRefusal   string       `json:"lastRefusal,omitempty"`
	LastRefusalAt *metav1.Time `json:"lastRefusalAt,omitempty"`
}

// Lifecycle is a consumer's lifecycle settings (extension), from its
// ConsumerPolicy.
type Lifecycle struct {
	// DisconnectGraceSeconds is how long the broker keeps the consumer's
	// live reservations on a provider that stopped advertising before it
	// fails them (0: fail them as soon as the provider is stale; nil: the
	// broker's --disconnect-grace). At most MaxDisconnectGraceSeconds.
	DisconnectGraceSeconds *int32 `json:"disconnectGraceSeconds,omitempty"`
	// Thresholds are the consumer's re-evaluation thresholds (nil fields:
	// the broker's defaults).
	Thresholds *Thresholds `json:"thresholds,omitempty"`
	// Migrations is the consumer's one disruption budget of moves to a
	// better provider: the broker's migrations of its manual reservations
	// and its agent's consolidations of autoscaled capacity together (nil
	// fields: the deprecated aliases below, else the broker's).
	Migrations *MigrationBudget `json:"migrations,omitempty"`
	// MaxMovesPerWindow is a deprecated alias of Migrations.MaxPerWindow,
	// used when that is unset. At most MaxMovesPerWindow.
	MaxMovesPerWindow *int32 `json:"maxMovesPerWindow,omitempty"`
	// MoveWindowSeconds is a deprecated alias of Migrations.WindowSeconds,
	// used when that is unset; from 1 to MaxMoveWindowSeconds.
	MoveWindowSeconds *int32 `json:"moveWindowSeconds,omitempty"`
}

// MaxHeartbeatReservations caps HeartbeatRequest.Reservations; a longer
// list is refused with 400 InvalidRequest. A consumer holds one reservation
// per borrowed node, and Kubernetes supports clusters of up to 5 000 nodes,
// so a real consumer lists at most half of this.
const MaxHeartbeatReservations = 10000

// HeartbeatResponse answers POST /api/v1/heartbeat.
type HeartbeatResponse struct {
	AckAt metav1.Time `json:"ackAt"`
	// UnknownReservations lists ids from HeartbeatRequest.Reservations that the
	// broker holds no live reservation for (extension): the consumer should
	// clean them up.
	UnknownReservations []string `json:"unknownReservations,omitempty"`
	// Migrations are the consumer's moves of manual reservations the
	// broker still shows, and Savings what its finished moves saved
	// (extension; absent before its first move).
	Migrations []Migration       `json:"migrations,omitempty"`
	Savings    *MigrationSavings `json:"savings,omitempty"`
	// Moves lists the broker's latest re-evaluation decisions "move" for
	// the consumer's held groups, sorted by node-group id (extension): the
	// consumer agent consolidates its autoscaled capacity through the
	// Cluster Autoscaler from them (docs/placement.md, Consolidation). Only
	// as many as the consumer's disruption budget has room for, each
	// holding a slot until its next heartbeat; only groups holding
	// autoscaled reservations and not in a listed consolidation.
	Moves []Reevaluation `json:"moves,omitempty"`
	// MoveBudget is the consumer's disruption budget of moves (extension;
	// absent when the budget is 0 and nothing was ever counted).
	MoveBudget *MoveBudgetStatus `json:"moveBudget,omitempty"`
}

// NodeGroupView is one provider × chunk type as the consumer sees it.
type NodeGroupView struct {
	ID                    string              `json:"id"`
	ProviderClusterID     string              `json:"providerClusterId"`
	ProviderLiqoClusterID string              `json:"providerLiqoClusterId,omitempty"`
	Type                  ChunkType           `json:"type"`
	MinSize               int32               `json:"minSize"`
	MaxSize               int32               `json:"maxSize"`
	CurrentReserved       int32               `json:"currentReserved"`
	ChunkResources        corev1.ResourceList `json:"chunkResources,omitempty"`
	Cost                  string              `json:"cost,omitempty"`
	Topology              *Topology           `json:"topology,omitempty"`
	ProbeEndpoint         string              `json:"probeEndpoint,omitempty"`
	// PlacementMetric is always serialised when HasMetric is true (the
	// reference drops a 0 metric; see docs/broker-api.md).
	PlacementMetric *float64          `json:"placementMetric,omitempty"`
	HasMetric       bool              `json:"hasMetric,omitempty"`
	Labels          map[string]string `json:"labels,omitempty"`
	Taints          []corev1.Taint    `json:"taints,omitempty"`
	// CarbonIntensity is the provider's weighted carbon intensity in
	// gCO2eq/kWh (the Eco metric) and Renewable its renewable flag, sent
	// only under the Choice policy, whose consumer ranks the providers
	// itself (extension).
	CarbonIntensity *float64 `json:"carbonIntensity,omitempty"`
	Renewable       bool     `json:"renewable,omitempty"`
}

// NodeGroupListResponse answers GET /api/v1/nodegroups.
type NodeGroupListResponse struct {
	NodeGroups       []NodeGroupView `json:"nodeGroups"`
	LatencyShortlist bool            `json:"latencyShortlist,omitempty"`
	AppliedPlacement PlacementType   `json:"appliedPlacement,omitempty"`
	Generation       int64           `json:"generation,omitempty"`
	ServedAt         metav1.Time     `json:"servedAt"`
	CacheAgeSeconds  int32           `json:"cacheAgeSeconds,omitempty"`
	// Consolidation is the role of node groups in a consolidation under
	// way, by node-group id (local API only: the consumer agent sets it on
	// GET /local/nodegroups, the broker never does). The adapter answers
	// NodeGroupGetOptions from it (docs/adapter.md).
	Consolidation map[string]ConsolidationRole `json:"consolidation,omitempty"`
	// Budget is the consumer's spend against its budget (extension; only
	// when its ConsumerPolicy sets one). A group whose next chunk would
	// break the budget has maxSize = currentReserved.
	Budget *BudgetStatus `json:"budget,omitempty"`
}

// ConsolidationRole is a node group's part in a consolidation of
// autoscaled capacity (docs/placement.md, Consolidation).
type ConsolidationRole string

// Consolidation roles.
const (
	// RoleDrain marks the worse group whose nodes the Cluster Autoscaler
	// should find unneeded and remove once the better group has room.
	RoleDrain ConsolidationRole = "drain"
	// RoleKeep marks the better group that just grew: none of its nodes is
	// unneeded until the move ends.
	RoleKeep ConsolidationRole = "keep"
)

// ReservationRequest is the body of POST /api/v1/reservations.
type ReservationRequest struct {
	ProviderClusterID string    `json:"providerClusterId"`
	NodeGroupID       string    `json:"nodeGroupId,omitempty"`
	ChunkCount        int32     `json:"chunkCount"`
	ChunkType         ChunkType `json:"chunkType"`
	Namespaces        []string  `json:"namespaces,omitempty"`
}

// ReservationResponse answers reservation create and GET.
type ReservationResponse struct {
	ReservationID         string              `json:"reservationId"`
	Status                Phase               `json:"status"`
	ProviderClusterID     string              `json:"providerClusterId,omitempty"`
	ProviderLiqoClusterID string              `json:"providerLiqoClusterId,omitempty"`
	ConsumerClusterID     string              `json:"consumerClusterId,omitempty"`
	ConsumerLiqoClusterID string              `json:"consumerLiqoClusterId,omitempty"`
	ChunkCount            int32               `json:"chunkCount"`
	ChunkType             ChunkType           `json:"chunkType,omitempty"`
	Resources             corev1.ResourceList `json:"resources,omitempty"`
	VirtualNodeNames      []string            `json:"virtualNodeNames,omitempty"`
	CreatedAt             metav1.Time         `json:"createdAt"`
	ActivatedAt           *metav1.Time        `json:"activatedAt,omitempty"`
	ExpiresAt             metav1.Time         `json:"expiresAt"`
	Message               string              `json:"message,omitempty"`
	// NodeGroupID names the group the reservation belongs to (extension).
	NodeGroupID string `json:"nodeGroupId,omitempty"`
	// GraceUntil is set while the reservation's provider is disconnected:
	// the reservation fails then unless the provider advertises again
	// first, or sooner if the consumer reports its virtual node NotReady
	// (extension).
	GraceUntil *metav1.Time `json:"graceUntil,omitempty"`
	// MigratedFrom is set on a reservation the broker made to move a
	// manual reservation to a better provider: the one it replaces
	// (extension; docs/placement.md, Migration).
	MigratedFrom string `json:"migratedFrom,omitempty"`
}

// ReleaseResponse answers DELETE /api/v1/reservations/{id}.
type ReleaseResponse struct {
	ReservationID       string `json:"reservationId"`
	Status              Phase  `json:"status"`
	RemainingChunkCount int32  `json:"remainingChunkCount"`
}

// InstructionView is one instruction as delivered to its target.
type InstructionView struct {
	ID                     string              `json:"id"`
	Kind                   InstructionKind     `json:"kind"`
	ReservationID          string              `json:"reservationId"`
	ChunkCount             int32               `json:"chunkCount,omitempty"`
	LastChunk              bool                `json:"lastChunk,omitempty"`
	ConsumerClusterID      string              `json:"consumerClusterId,omitempty"`
	ConsumerLiqoClusterID  string              `json:"consumerLiqoClusterId,omitempty"`
	ProviderClusterID      string              `json:"providerClusterId,omitempty"`
	ProviderLiqoClusterID  string              `json:"providerLiqoClusterId,omitempty"`
	Kubeconfig             string              `json:"kubeconfig,omitempty"`
	ResourceSliceResources corev1.ResourceList `json:"resourceSliceResources,omitempty"`
	ResourceSliceNames     []string            `json:"resourceSliceNames,omitempty"`
	Namespaces             []string            `json:"namespaces,omitempty"`
	IssuedAt               metav1.Time         `json:"issuedAt"`
	ExpiresAt              metav1.Time         `json:"expiresAt"`
	// ChunkType and NodeGroupID tell the consumer which group the chunk
	// belongs to (extension).
	ChunkType   ChunkType `json:"chunkType,omitempty"`
	NodeGroupID string    `json:"nodeGroupId,omitempty"`
	// ReservationIDs lists every reservation a shared GenerateKubeconfig
	// serves (extension; ReservationID stays the one that armed it).
	ReservationIDs []string `json:"reservationIds,omitempty"`
}

// InstructionListResponse answers GET /api/v1/instructions.
type InstructionListResponse struct {
	Instructions []InstructionView `json:"instructions"`
}

// ErrorEnvelope is the error of a failed instruction result.
type ErrorEnvelope struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// VirtualNodeRunning is the VirtualNodeStateReport.Phase of a virtual node
// that exists and is ready (the reference's VirtualNodeStatePhase
// Running).
const VirtualNodeRunning = "Running"

// VirtualNodeStateReport is one entry of a ReconcilePayload.
type VirtualNodeStateReport struct {
	ReservationID      string       `json:"reservationId"`
	ChunkIndex         int32        `json:"chunkIndex,omitempty"`
	NodeGroupID        string       `json:"nodeGroupId,omitempty"`
	VirtualNodeName    string       `json:"virtualNodeName,omitempty"`
	ResourceSliceName  string       `json:"resourceSliceName,omitempty"`
	Phase              string       `json:"phase,omitempty"`
	LastTransitionTime *metav1.Time `json:"lastTransitionTime,omitempty"`
}

// InstructionPayload is the flat payload of a result.
type InstructionPayload struct {
	Kind               string                   `json:"kind,omitempty"`
	Kubeconfig         string                   `json:"kubeconfig,omitempty"`
	ExpiresAt          *metav1.Time             `json:"expiresAt,omitempty"`
	VirtualNodeNames   []string                 `json:"virtualNodeNames,omitempty"`
	ResourceSliceNames []string                 `json:"resourceSliceNames,omitempty"`
	ReleasedChunks     int32                    `json:"releasedChunks,omitempty"`
	TunnelDropped      bool                     `json:"tunnelDropped,omitempty"`
	Advertisement      *AdvertisementRequest    `json:"advertisement,omitempty"`
	VirtualNodeStates  []VirtualNodeStateReport `json:"virtualNodeStates,omitempty"`
}

// InstructionResultRequest is the body of POST /api/v1/instructions/{id}/result.
type InstructionResultRequest struct {
	Status  string              `json:"status"`
	Error   *ErrorEnvelope      `json:"error,omitempty"`
	Payload *InstructionPayload `json:"payload,omitempty"`
}

// InstructionResultResponse answers a result post.
type InstructionResultResponse struct {
	Accepted bool `json:"accepted"`
}

// ErrorResponse is the body of every broker error.
type ErrorResponse struct {
	Code      string         `json:"code"`
	Message   string         `json:"message"`
	Details   map[string]any `json:"details,omitempty"`
	RequestID string         `json:"requestId,omitempty"`
}

// Error codes.
const (
	CodeInvalidRequest       = "InvalidRequest"
	CodeUnauthenticated      = "Unauthenticated"
	CodeForbidden            = "Forbidden"
	CodeNotFound             = "NotFound"
	CodeConflict             = "Conflict"
	CodeInsufficientCapacity = "InsufficientCapacity"
	// CodeBudgetExceeded answers 409 (extension): the reservation would
	// break the consumer's spend budget.
	CodeBudgetExceeded     = "BudgetExceeded"
	CodeTooManyRequests    = "TooManyRequests"
	CodeInternalError      = "InternalError"
	CodeServiceUnavailable = "ServiceUnavailable"
	CodeReservationExpired = "ReservationExpired"
	CodeUpstreamError      = "UpstreamError"
	CodeTimeout            = "Timeout"
	// CodePreconditionFailed answers 412 (no heartbeat yet); the reference
	// sends ServiceUnavailable there (bug #27).
	CodePreconditionFailed = "PreconditionFailed"
	// CodeNotImplemented answers 501 (partial release); the reference sends
	// InternalError there (bug #27).
	CodeNotImplemented = "NotImplemented"
	// CodePayloadTooLarge answers 413 (body over the limit).
	CodePayloadTooLarge = "PayloadTooLarge"
	// CodeMethodNotAllowed answers 405.
	CodeMethodNotAllowed = "MethodNotAllowed"
	// CodeRequestTimeout answers 408: the request did not arrive within the
	// server's read timeout.
	CodeRequestTimeout = "RequestTimeout"
	// CodeRequestHeadersTooLarge answers 431: the request line and headers
	// do not fit the server's read buffer.
	CodeRequestHeadersTooLarge = "RequestHeadersTooLarge"
)

// HealthResponse is the body of GET /healthz on the API listener.
type HealthResponse struct {
	Status string `json:"status"`
}
