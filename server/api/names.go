package api

import (
	"strings"

	"github.com/google/uuid"
)

// NodeGroupID is the id of the node group of provider × chunk type:
// ng-<providerClusterId>-<type> (reference §6.1).
func NodeGroupID(providerClusterID string, t ChunkType) string {
	return "ng-" + providerClusterID + "-" + strings.ToLower(string(t))
}

// ParseNodeGroupID splits a node-group id into provider and chunk type. The
// chunk type is the last dash-separated element, so provider ids may contain
// dashes.
func ParseNodeGroupID(id string) (provider string, t ChunkType, ok bool) {
	rest, found := strings.CutPrefix(id, "ng-")
	if !found {
		return "", "", false
	}
	i := strings.LastIndexByte(rest, '-')
	if i <= 0 {
		return "", "", false
	}
	t = ChunkType(rest[i+1:])
	if t != ChunkStandard && t != ChunkGPU {
		return "", "", false
	}
	return rest[:i], t, true
}

// ReservationIDPrefix starts the ids the broker, the consumer agent's local
// API and the adapter generate (res-<uuid>). The adapter manages only the
// reservations whose id has it: other ids (the consoles' manual-…) are not
// the Cluster Autoscaler's.
const ReservationIDPrefix = "res-"

// NewReservationID is a fresh generated reservation id: res-<uuid>.
func NewReservationID() string { return ReservationIDPrefix + uuid.NewString() }

// ReservationIDOr returns id, or a generated ReservationIDPrefix+newID()
// when id is empty (the X-Reservation-Id header was left out: the call is
// then not idempotent), after checking it with CheckReservationID.
func ReservationIDOr(id string, newID func() string) (string, error) {
	if id == "" {
		id = ReservationIDPrefix + newID()
	}
	if fe := CheckReservationID(HeaderReservationID, id); fe != nil {
		return "", fe.APIError()
	}
	return id, nil
}

// providerIDScheme starts the providerID of every virtual node.
const providerIDScheme = "liqo://"

// ProviderID is the spec.providerID of the virtual node of reservation
// reservationID on provider providerClusterID:
// liqo://<providerClusterId>/<reservationId>. The consumer agent sets it and
// the adapter (the Cluster Autoscaler) matches instances by it.
func ProviderID(providerClusterID, reservationID string) string {
	return providerIDScheme + providerClusterID + "/" + reservationID
}

// ParseProviderID splits a ProviderID into provider and reservation; ok is
// false for any other providerID.
func ParseProviderID(id string) (provider, reservation string, ok bool) {
	rest, found := strings.CutPrefix(id, providerIDScheme)
	if !found {
		return "", "", false
	}
	provider, reservation, ok = strings.Cut(rest, "/")
	return provider, reservation, ok && provider != "" && reservation != ""
}
