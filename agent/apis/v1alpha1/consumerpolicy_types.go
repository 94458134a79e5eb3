package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PlacementStrategy is how the broker ranks providers for a consumer.
// +kubebuilder:validation:Enum=Standard;Price;Eco;Latency;Weighted;Choice;ConsumerChoice;Random
type PlacementStrategy string

// Placement strategies. Weighted and Choice are this project's extensions
// of the reference's four; ConsumerChoice is the reference's later
// spelling of Choice, accepted and applied as Choice.
const (
	PlacementStandard PlacementStrategy = "Standard"
	PlacementPrice    PlacementStrategy = "Price"
	PlacementEco      PlacementStrategy = "Eco"
	PlacementLatency  PlacementStrategy = "Latency"
	PlacementWeighted PlacementStrategy = "Weighted"
	PlacementChoice   PlacementStrategy = "Choice"
	// PlacementRandom is the experiments' baseline: uniform among the
	// providers with room (docs/experiments.md).
	PlacementRandom PlacementStrategy = "Random"
)

// PlacementWeights are the Weighted strategy's relative metric weights. Each
// is from 0 to 1000 (api.MaxWeight, the broker's rule) and they need not sum
// to 1; a weight left out counts as 0. They are
// numbers (not Quantities) because they are relative factors that are never
// compared for equality, and they map one to one onto the heartbeat's
// weights.
type PlacementWeights struct {
	// Price weighs the provider's price for one chunk (cheaper is better).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	// +optional
	Price float64 `json:"price,omitempty"`
	// Carbon weighs the provider's carbon intensity (cleaner is better).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	// +optional
	Carbon float64 `json:"carbon,omitempty"`
	// Distance weighs the distance to the provider (closer is better).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	// +optional
	Distance float64 `json:"distance,omitempty"`
	// FreeCapacity weighs the provider's free chunks (more is better).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	// +optional
	FreeCapacity float64 `json:"freeCapacity,omitempty"`
}

// Placement is a consumer's placement policy.
type Placement struct {
	// Type is the strategy the broker applies.
	// +optional
	Type PlacementStrategy `json:"type,omitempty"`
	// Weights is read when Type is Weighted, and under Choice as the
	// fallback's weights.
	// +optional
	Weights *PlacementWeights `json:"weights,omitempty"`
	// LatencyCandidates is read when Type is Latency: how many nearest
	// providers per chunk type the broker shortlists for the agent to
	// measure (providers tied at the last one's distance too, up to 16).
	// The agent sends DefaultLatencyCandidates (8) when it is left out; the
	// broker's own default for agents that do not say is the reference's 3.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=16
	// +optional
	LatencyCandidates *int32 `json:"latencyCandidates,omitempty"`
}

// DefaultLatencyCandidates is the Latency shortlist the consumer agent asks
// for when its ConsumerPolicy does not say: one round of its probes (the
// prober measures 8 endpoints at once). docs/placement.md "Latency" has the
// numbers behind it.
const DefaultLatencyCandidates = 8

// Location is where a consumer says it is.
type Location struct {
	// City is the city's name (shown on the dashboard).
	// +kubebuilder:validation:MaxLength=256
	// +optional
	City string `json:"city,omitempty"`
	// Region is the region code (ISO 3166-2 subdivision, as ip-api reports it).
	// +kubebuilder:validation:MaxLength=256
	// +optional
	Region string `json:"region,omitempty"`
	// Latitude in degrees.
	// +kubebuilder:validation:Minimum=-90
	// +kubebuilder:validation:Maximum=90
	Latitude float64 `json:"latitude"`
	// Longitude in degrees.
	// +kubebuilder:validation:Minimum=-180
	// +kubebuilder:validation:Maximum=180
	Longitude float64 `json:"longitude"`
}

// ModelAPI is the protocol of a model endpoint.
// +kubebuilder:validation:Enum=Ollama;OpenAI
type ModelAPI string

// SecretKeyRef names one key of a Secret in the ConsumerPolicy's namespace.
type SecretKeyRef struct {
	// Name is the Secret's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Key is the data key (default "apiKey").
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Key string `json:"key,omitempty"`
}

// ModelSettings is the model endpoint the consumer agent asks under the
// Choice policy. Fields left out take the agent's flags (--model-*).
type ModelSettings struct {
	// API is Ollama (POST /api/generate, JSON mode) or OpenAI (the
	// OpenAI-compatible POST /v1/chat/completions of llama.cpp server,
	// vLLM, LM Studio).
	// +optional
	API ModelAPI `json:"api,omitempty"`
	// URL is the endpoint's base URL, e.g. http://127.0.0.1:11434 (the
	// API's path is appended).
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^https?://`
	// +optional
	URL string `json:"url,omitempty"`
	// Name is the model, e.g. llama3.2:3b.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	Name string `json:"name,omitempty"`
	// TimeoutSeconds bounds one model call; a slower answer falls back.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=120
	// +optional
	TimeoutSeconds int32 `json:"timeoutSeconds,omitempty"`
	// APIKeySecretRef names the Secret key holding the endpoint's API key
	// (sent as a Bearer token; never logged or shown).
	// +optional
	APIKeySecretRef *SecretKeyRef `json:"apiKeySecretRef,omitempty"`
}

// ConsumerPolicySpec is a consumer's placement policy.
type ConsumerPolicySpec struct {
	// Placement is sent in every heartbeat.
	// +optional
	Placement Placement `json:"placement,omitempty"`
	// Location, when set, is sent in the heartbeats instead of what the
	// geo service finds for the cluster's address (the consumer console's
	// location picker writes it).
	// +optional
	Location *Location `json:"location,omitempty"`
	// Lifecycle holds what the broker does with borrowed capacity over
	// time (sent in every heartbeat).
	// +optional
	Lifecycle *Lifecycle `json:"lifecycle,omitempty"`
	// Budget caps what this consumer spends on borrowed capacity, in the
	// providers' currency (sent in every heartbeat): the broker refuses a
	// reservation that would take the spend per hour above perHour or the
	// projected month above perMonth.
	// +optional
	Budget *Budget `json:"budget,omitempty"`
	// Intent is what the consumer wants, in plain words ("prioritise the
	// greenest provider; latency is secondary"). Under the Choice policy
	// a local model ranks the providers against it.
	// +kubebuilder:validation:MaxLength=1000
	// +optional
	Intent string `json:"intent,omitempty"`
	// Model is the model endpoint for Choice (default: the agent's flags).
	// +optional
	Model *ModelSettings `json:"model,omitempty"`
}

// Lifecycle is what the broker does with a consumer's borrowed capacity
// over time.
type Lifecycle struct {
	// DisconnectGraceSeconds is how long the broker keeps this consumer's
	// reservations on a provider that stopped advertising (after the
	// broker's --provider-stale-after) before it fails them and the
	// capacity fails over; 0 fails them at once. Unset: the broker's
	// --disconnect-grace (default 5 minutes). A virtual node that goes
	// NotReady ends the grace at once.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=86400
	// +optional
	DisconnectGraceSeconds *int32 `json:"disconnectGraceSeconds,omitempty"`
	// Thresholds are how much better per chunk another provider must be
	// before the broker finds a held chunk worth moving (unset fields: the
	// broker's --reevaluate-*-threshold).
	// +optional
	Thresholds *Thresholds `json:"thresholds,omitempty"`
	// MaxMovesPerWindow is deprecated: an alias of
	// migrations.maxPerWindow, used when that is unset (the one disruption
	// budget counts the broker's migrations and the agent's
	// consolidations together). The agent's --consolidation-max-moves is
	// a local cap on top.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	// +optional
	MaxMovesPerWindow *int32 `json:"maxMovesPerWindow,omitempty"`
	// MoveWindowSeconds is deprecated: an alias of
	// migrations.windowSeconds, used when that is unset.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=604800
	// +optional
	MoveWindowSeconds *int32 `json:"moveWindowSeconds,omitempty"`
	// Migrations is this consumer's one disruption budget of moves to a
	// better provider: the broker's migrations of its manual reservations
	// and its agent's consolidations of autoscaled capacity, counted
	// together by the broker (unset fields: the deprecated aliases
	// maxMovesPerWindow / moveWindowSeconds, else the broker's
	// --migration-budget and --migration-window; maxPerWindow 0: no move).
	// +optional
	Migrations *MigrationBudget `json:"migrations,omitempty"`
}

// MigrationBudget is the consumer's one disruption budget of moves: at most
// MaxPerWindow moves (the broker's migrations of manual reservations and
// the agent's consolidations of autoscaled capacity together) start in any
// WindowSeconds.
type MigrationBudget struct {
	// MaxPerWindow is how many moves may start per window; 0 turns every
	// move off for this consumer.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	// +optional
	MaxPerWindow *int32 `json:"maxPerWindow,omitempty"`
	// WindowSeconds is the window's length.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=604800
	// +optional
	WindowSeconds *int32 `json:"windowSeconds,omitempty"`
}

// Budget is a consumer's spend budget. Amounts are quantities in the
// providers' currency, like their unitPrices ("2.50", "500", "1500m").
// +kubebuilder:validation:XValidation:rule="!has(self.perHour) || (!string(self.perHour).startsWith('-') && quantity(string(self.perHour)).compareTo(quantity('1G')) <= 0)",message="perHour must be an amount from 0 to 1000000000"
// +kubebuilder:validation:XValidation:rule="!has(self.perMonth) || (!string(self.perMonth).startsWith('-') && quantity(string(self.perMonth)).compareTo(quantity('1G')) <= 0)",message="perMonth must be an amount from 0 to 1000000000"
type Budget struct {
	// PerHour caps the spend per hour at the providers' current prices
	// (0 to 1000000000).
	// +optional
	PerHour *resource.Quantity `json:"perHour,omitempty"`
	// PerMonth caps what was spent this UTC month plus the spend per hour
	// held until the month ends (0 to 1000000000).
	// +optional
	PerMonth *resource.Quantity `json:"perMonth,omitempty"`
	// WarnAtPercent is the share of a limit from which the consoles show
	// the budget as nearly used. Default 80.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	WarnAtPercent *int32 `json:"warnAtPercent,omitempty"`
}

// Thresholds are per-chunk re-evaluation thresholds: a move must save MORE
// than the threshold of the policy's metric. Numbers (not Quantities),
// because they are compared, never stored as amounts, and map one to one
// onto the heartbeat's.
type Thresholds struct {
	// CostPerHour is in the federation's currency per hour (Price).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000
	// +optional
	CostPerHour *float64 `json:"costPerHour,omitempty"`
	// CarbonPerHour is in gCO2eq per hour (Eco).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000
	// +optional
	CarbonPerHour *float64 `json:"carbonPerHour,omitempty"`
	// RTTMillis is in milliseconds of measured round trip (Latency).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000
	// +optional
	RTTMillis *float64 `json:"rttMillis,omitempty"`
}

// ConsumerPolicy tells the broker how to choose providers for this consumer.
// The consumer agent reads the policies of its own namespace; when there are
// several the lowest name wins, when there is none the heartbeat carries no
// placement. It has no status.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=cpolicy,categories=federation-autoscaler
// +kubebuilder:printcolumn:name="Placement",type=string,JSONPath=`.spec.placement.type`
// +kubebuilder:printcolumn:name="Intent",type=string,JSONPath=`.spec.intent`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ConsumerPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ConsumerPolicySpec `json:"spec,omitempty"`
}

// ConsumerPolicyList is a list of ConsumerPolicy.
//
// +kubebuilder:object:root=true
type ConsumerPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ConsumerPolicy `json:"items"`
}
