package rest

import (
	"context"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// Broker is what the HTTP layer needs from the broker's domain
// (server/reservations implements it). Every method takes the caller's
// identity (the certificate CN; where a route serves both roles, also the
// certificate's role, "" for a legacy certificate that acts as both) and
// returns *api.Error for anything the caller did wrong; any other error is
// an internal error.
type Broker interface {
	// Advertise upserts a provider's advertisement. The request was decoded
	// and its clusterId checked against cn by the caller of this method.
	// Advertise and Heartbeat must not modify what req references (maps,
	// slices, pointers): a body that repeats the caller's last one is
	// handed over as the same decoded value again.
	Advertise(ctx context.Context, cn string, req api.AdvertisementRequest) (api.AdvertisementResponse, error)
	// Advertisement returns the broker's view of provider id (NotFound).
	Advertisement(ctx context.Context, id string) (api.AdvertisementSnapshot, error)
	// Heartbeat registers a consumer's state and renews its reservations' leases.
	Heartbeat(ctx context.Context, cn string, req api.HeartbeatRequest) (api.HeartbeatResponse, error)
	// NodeGroupsBody returns cn's policy-masked view (an
	// api.NodeGroupListResponse, nodeGroups never null) encoded as JSON;
	// all=true returns every group (debugging). The view is asked for every
	// few seconds by every consumer and changes far less often: the domain
	// keeps its encoding while nothing the view reads changed.
	NodeGroupsBody(ctx context.Context, cn string, all bool) ([]byte, error)
	// Reserve creates reservation id for consumer cn. created is false for a
	// replay of the same id and spec (200 instead of 201). Errors:
	// InvalidRequest, PreconditionFailed (no heartbeat), NotFound,
	// ServiceUnavailable (provider stale), InsufficientCapacity, Forbidden
	// (sharing rules), Conflict (same id, other spec).
	Reserve(ctx context.Context, cn, id string, req api.ReservationRequest) (resp api.ReservationResponse, created bool, err error)
	// Reservation returns reservation id if cn acting as role is its
	// consumer or its provider (Forbidden otherwise, NotFound when missing).
	Reservation(ctx context.Context, cn string, role api.Role, id string) (api.ReservationResponse, error)
	// Release moves reservation id of consumer cn towards Released. chunks is
	// the ?chunks query (0 = all).
	Release(ctx context.Context, cn, id string, chunks int) (api.ReleaseResponse, error)
	// Instructions returns the un-enforced instructions targeting cn in
	// role (provider instructions to a provider, reservation instructions
	// to a consumer). With wait > 0 it blocks until one exists, wait
	// elapses or ctx ends.
	Instructions(ctx context.Context, cn string, role api.Role, wait time.Duration) ([]api.InstructionView, error)
	// PostResult records the outcome of instruction id reported by cn in
	// role; only the instruction's target in its role may (Forbidden).
	PostResult(ctx context.Context, cn string, role api.Role, id string, req api.InstructionResultRequest) error
	// Explanation says why consumer cn grows where it does under its
	// policy, as cn may read it (PlacementExplanation.ForConsumer).
	Explanation(ctx context.Context, cn string) (api.PlacementExplanation, error)
	// Overview is the dashboard's read-only snapshot (no credentials).
	Overview(ctx context.Context) (api.Overview, error)
}
