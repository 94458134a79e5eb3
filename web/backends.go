// Package web serves Federation Autoscaler's browser UIs: the broker's
// read-only live dashboard and the provider and consumer consoles. Pages are
// templ components served by Fiber; live state is pushed as re-rendered HTML
// fragments over a websocket (see web/live). The backends are small
// interfaces declared here and implemented by the broker and the agents.
package web

import (
	"context"
	"errors"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// OverviewSource feeds the broker dashboard. server/reservations implements
// it.
type OverviewSource interface {
	// Overview returns the federation's current state. It never carries a
	// credential.
	Overview(ctx context.Context) (api.Overview, error)
	// Subscribe returns a coalescing change signal: one value after any
	// number of changes. The channel closes when ctx is done.
	Subscribe(ctx context.Context) <-chan struct{}
}

// SharingConfig is what a provider's owner decides: prices, caps, renewable
// energy and with whom to share. It maps 1:1 onto the advertisement fields
// of the same names.
type SharingConfig struct {
	// UnitPrices per hour: cpu per core, memory per GiB, nvidia.com/gpu per
	// GPU. Missing keys are unpriced.
	UnitPrices corev1.ResourceList
	// CapacityScalePercent caps a resource to a percentage (1–100) of its
	// allocatable amount.
	CapacityScalePercent map[string]int32
	// CapacityFixed caps a resource to a fixed amount; a resource has at most
	// one of the two caps.
	CapacityFixed corev1.ResourceList
	Renewable     bool
	Sharing       api.Sharing
	// Location, when set, is where the provider says it is instead of its
	// address's geo lookup (the console's location picker).
	Location *api.Topology
}

// Loan is one reservation a provider currently serves.
type Loan struct {
	ReservationID     string
	ConsumerClusterID string
	ChunkType         api.ChunkType
	ChunkCount        int32
	Phase             api.Phase
	// Since is when the loan became active (Peered), else when it was
	// reserved.
	Since time.Time
	// CostPerHour is what the loan earns per hour at the current prices
	// (nil: unpriced).
	CostPerHour *float64
}

// ProviderStatus is what the provider console shows besides the form.
type ProviderStatus struct {
	ClusterID string
	// Topology is the location of the last accepted advertisement (nil when
	// unknown); LocationSet says the console set it (SharingConfig.Location)
	// rather than the geo service.
	Topology    *api.Topology
	LocationSet bool
	// CarbonIntensity is the current grid intensity in gCO2eq/kWh (nil when
	// unknown); CarbonWeighted is the broker's 6-hour weighted score.
	CarbonIntensity *float64
	CarbonWeighted  *float64
	// Resources is the allocatable capacity before caps.
	Resources corev1.ResourceList
	// Chunks per type as the broker counted them at the last advertisement.
	Chunks map[api.ChunkType]api.ChunkCounts
	Loans  []Loan
	// LastAdvertised is the last accepted advertisement (zero: none yet).
	LastAdvertised time.Time
	// BrokerError is the last error talking to the broker ("" when fine).
	BrokerError string
}

// ProviderBackend is the provider agent as its console needs it.
type ProviderBackend interface {
	Status(ctx context.Context) (ProviderStatus, error)
	// SharingConfig returns the configuration in force.
	SharingConfig(ctx context.Context) (SharingConfig, error)
	// ApplySharing stores cfg and re-advertises at once. The console has
	// validated cfg; an error is shown to the operator as is.
	ApplySharing(ctx context.Context, cfg SharingConfig) error
	// Subscribe is a coalescing change signal (see OverviewSource).
	Subscribe(ctx context.Context) <-chan struct{}
}

// ConsumerReservation is a reservation the consumer holds.
type ConsumerReservation struct {
	ID                string
	ProviderClusterID string
	ChunkType         api.ChunkType
	ChunkCount        int32
	Phase             api.Phase
	// Manual is true for reservations made from the console (as opposed to
	// the Cluster Autoscaler).
	Manual    bool
	CreatedAt time.Time
	Message   string
	// GraceUntil is set while the reservation's provider is disconnected
	// and the broker keeps the reservation in its disconnect grace.
	GraceUntil *time.Time
}

// VirtualNode is a virtual node of the consumer cluster.
type VirtualNode struct {
	Name              string
	ReservationID     string
	ProviderClusterID string
	// State is Pending, Ready, NotReady or Terminating (a node's words: a
	// virtual node is Ready, not Running).
	State string
	Since time.Time
}

// ConsumerStatus is what the consumer console shows besides the forms.
type ConsumerStatus struct {
	ClusterID string
	// Region and City are where the consumer's heartbeats say it is;
	// LocationSet says its console (ConsumerPolicy) set them rather than
	// the geo service.
	Region      string
	City        string
	LocationSet bool
	// Placement is the configured policy; AppliedPlacement is what the
	// broker applied (it falls back for unknown policies).
	Placement        api.Placement
	AppliedPlacement api.PlacementType
	ChosenProvider   string
	// RTTs are measured round-trip times in milliseconds per provider.
	RTTs map[string]float64
	// NodeGroups is every group the broker offers, masked or not (a manual
	// reservation may go anywhere); MaskedNodeGroups is the agent's
	// policy-masked view, what the Cluster Autoscaler sees (nil: the
	// groups' own sizes are shown).
	NodeGroups       []api.NodeGroupView
	MaskedNodeGroups []api.NodeGroupView
	Reservations     []ConsumerReservation
	VirtualNodes     []VirtualNode
	LastHeartbeat    time.Time
	// Explanation is the broker's explanation of the placement (nil when
	// it could not be read).
	Explanation *api.PlacementExplanation
	// UnfitPods are the pending pods no offered chunk can fit;
	// UnfitPodsError says why they could not be read ("" when fine or not
	// looked for).
	UnfitPods      []UnfitPod
	UnfitPodsError string
	// Intent is what the consumer wants in plain words (its
	// ConsumerPolicy's spec.intent, read by the Choice policy); Decisions
	// is the Choice selector's audit log, newest first.
	Intent    string
	Decisions []ChoiceDecision
	// Migrations are the broker's moves of the consumer's manual
	// reservations to a better provider, and Savings what the finished
	// ones saved (nil before the first).
	Migrations []api.Migration
	Savings    *api.MigrationSavings
	// Budget is the consumer's spend against its budget (the broker's
	// node-group list; nil without one); BudgetRefusal is the agent's last
	// reservation the broker refused for it, and when ("" when none).
	Budget          *api.BudgetStatus
	BudgetRefusal   string
	BudgetRefusalAt time.Time
}

// ChoiceDecision is one decision of the consumer agent's Choice selector
// (docs/placement.md): what it asked, what the model answered, what was
// used and why.
type ChoiceDecision struct {
	At time.Time
	// Model names the endpoint (never its API key); "" when none is set.
	Model string
	Picks []ChoicePick
	// Fallback is true when the model's answer was not used at all; Why
	// says why.
	Fallback bool
	Why      string
	// Reason is the model's own account of its ranking, not proof.
	Reason   string
	Ranking  []string
	Rejected []string
	// Cached is true for a decision taken from an earlier answer.
	Cached            bool
	Latency           time.Duration
	Prompt, RawAnswer string
}

// ChoicePick is the provider a decision chose for one chunk type, by the
// model's ranking or by the fallback order.
type ChoicePick struct {
	ChunkType api.ChunkType
	Provider  string
	ByModel   bool
}

// IntentSetter is an optional capability of a ConsumerBackend: the
// consumer console shows its intent box when its backend has it.
type IntentSetter interface {
	// SetIntent writes what the consumer wants in plain words ("" clears
	// it); the Choice policy's next selection reads it.
	SetIntent(ctx context.Context, intent string) error
}

// UnfitPod is a pending pod whose requests fit no chunk type's shape.
type UnfitPod struct {
	Namespace, Name string
	Requests        corev1.ResourceList
}

// LocationSetter is an optional capability of a ConsumerBackend: the
// consumer console shows its location picker when its backend has it (and
// ConsoleOptions.Places offers cities).
type LocationSetter interface {
	// SetLocation sets where the consumer says it is (nil: back to its
	// address's geo lookup); the broker sees it with the next heartbeat.
	SetLocation(ctx context.Context, loc *api.Topology) error
}

// ReservationSpec is a manual reservation request.
type ReservationSpec struct {
	ProviderClusterID string
	ChunkType         api.ChunkType
	ChunkCount        int32
}

// Errors a backend wraps (with %w) when it refuses a request itself rather
// than failing to reach its agent: the consoles then answer 400, 404 or 409
// instead of 502.
var (
	ErrInvalid  = errors.New("invalid request")
	ErrNotFound = errors.New("not found")
	ErrConflict = errors.New("conflict")
)

// Classify marks err with one of the classes above; its message stays
// err's own. It returns nil for a nil err.
func Classify(class, err error) error {
	if err == nil {
		return nil
	}
	return classified{class: class, err: err}
}

type classified struct{ class, err error }

func (c classified) Error() string   { return c.err.Error() }
func (c classified) Unwrap() []error { return []error{c.class, c.err} }

// backendStatus is the console's status for a backend error: 400, 404 or
// 409 for the classified refusals above, 502 for anything else (the agent
// or the broker behind it failed).
func backendStatus(err error) int {
	switch {
	case errors.Is(err, ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(err, ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, ErrConflict):
		return http.StatusConflict
	}
	return http.StatusBadGateway
}

// ConsumerBackend is the consumer agent as its console needs it.
type ConsumerBackend interface {
	Status(ctx context.Context) (ConsumerStatus, error)
	// SetPolicy changes the placement policy (sent with the next heartbeat,
	// which the agent sends at once).
	SetPolicy(ctx context.Context, p api.Placement) error
	// CreateReservation creates a manual reservation (through the local API,
	// as the adapter does) and returns its id.
	CreateReservation(ctx context.Context, spec ReservationSpec) (string, error)
	// ReleaseReservation releases a reservation the consumer holds.
	ReleaseReservation(ctx context.Context, id string) error
	Subscribe(ctx context.Context) <-chan struct{}
}

// Workload is the demo's simulated workload.
type Workload struct {
	Enabled   bool
	Replicas  int32
	PodCPU    resource.Quantity
	PodMemory resource.Quantity
	// Running and Pending count the workload's pods (read-only).
	Running int32
	Pending int32
}

// WorkloadBackend is an optional capability of a ConsumerBackend: only the
// demo's simulated cluster has a workload switch. The console shows the
// switch when its backend also implements this interface.
type WorkloadBackend interface {
	Workload(ctx context.Context) (Workload, error)
	SetWorkload(ctx context.Context, w Workload) error
}
