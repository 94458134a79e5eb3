// Package store defines how the broker's domain (server/reservations) keeps
// its state durable: a small Store interface, the records it holds and the
// mutations that change them. The domain keeps the authoritative state in
// memory, loads a Snapshot once at start and hands every change to Apply,
// which must make it durable (fsync) before returning nil.
//
// Counters are never stored: reserved chunks are recomputed from the live
// reservations at load, so a crash can never leave counter drift.
//
// Implementations: server/store/bolt (an embedded bbolt file, the default)
// and server/store/kube (custom resources and Secrets on a Kubernetes API
// server, for a broker whose state must outlive its machine).
package store

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// Store persists the broker's records.
//
// Apply writes a batch of mutations atomically and durably: when it returns
// nil every mutation of the batch is on stable storage, when it returns an
// error none of them is. Mutations of one batch are applied in order, so a
// later mutation of the same record wins. Callers that need ordering across
// batches must not run Apply calls for dependent batches concurrently.
//
// Load returns every record; it is called once at start (and again to roll
// the in-memory state back after a failed Apply).
type Store interface {
	Load(ctx context.Context) (Snapshot, error)
	Apply(ctx context.Context, batch []Mutation) error
	Close() error
}

// Follower is a Store that a standby replica can keep warm: while Follow
// runs (until ctx ends) it keeps a copy of the records current, and a Load
// during that time reads from the copy whatever it can prove current
// instead of reading it again. Load's result is the same either way; only
// its cost differs. server/store/kube implements it; the bbolt store, read
// by one process, does not.
type Follower interface {
	Store
	Follow(ctx context.Context) error
}

// Kind names a record collection.
type Kind uint8

// Record collections.
const (
	KindReservation Kind = iota + 1
	KindInstruction
	KindCredential
	KindAdvertisement
	KindConsumer
)

// String returns the collection name (also the bbolt bucket name).
func (k Kind) String() string {
	switch k {
	case KindReservation:
		return "reservations"
	case KindInstruction:
		return "instructions"
	case KindCredential:
		return "credentials"
	case KindAdvertisement:
		return "advertisements"
	case KindConsumer:
		return "consumers"
	default:
		return fmt.Sprintf("kind(%d)", uint8(k))
	}
}

// Kinds returns every collection, in load order.
func Kinds() []Kind {
	return []Kind{KindReservation, KindInstruction, KindCredential, KindAdvertisement, KindConsumer}
}

// Mutation puts or deletes one record. Exactly one of the record pointers is
// set for a put; none for a delete (Delete true).
type Mutation struct {
	Kind   Kind
	Key    string
	Delete bool

	Reservation   *Reservation
	Instruction   *Instruction
	Credential    *Credential
	Advertisement *Advertisement
	Consumer      *Consumer
}

// PutReservation returns a mutation storing a copy of r.
func PutReservation(r Reservation) Mutation {
	return Mutation{Kind: KindReservation, Key: r.ID, Reservation: &r}
}

// PutInstruction returns a mutation storing a copy of in.
func PutInstruction(in Instruction) Mutation {
	return Mutation{Kind: KindInstruction, Key: in.ID, Instruction: &in}
}

// PutCredential returns a mutation storing a copy of c.
func PutCredential(c Credential) Mutation {
	return Mutation{Kind: KindCredential, Key: c.Key(), Credential: &c}
}

// PutAdvertisement returns a mutation storing a copy of a.
func PutAdvertisement(a Advertisement) Mutation {
	return Mutation{Kind: KindAdvertisement, Key: a.Request.ClusterID, Advertisement: &a}
}

// PutConsumer returns a mutation storing a copy of c.
func PutConsumer(c Consumer) Mutation {
	return Mutation{Kind: KindConsumer, Key: c.Heartbeat.ClusterID, Consumer: &c}
}

// Delete returns a mutation deleting record key of kind k (a no-op when it
// does not exist).
func Delete(k Kind, key string) Mutation { return Mutation{Kind: k, Key: key, Delete: true} }

// Validate reports whether m is well formed.
func (m Mutation) Validate() error {
	if m.Key == "" {
		return fmt.Errorf("mutation of %s has an empty key", m.Kind)
	}
	set := 0
	for _, p := range []bool{m.Reservation != nil, m.Instruction != nil, m.Credential != nil, m.Advertisement != nil, m.Consumer != nil} {
		if p {
			set++
		}
	}
	switch {
	case m.Delete && set != 0:
		return fmt.Errorf("delete mutation of %s %q also carries a record", m.Kind, m.Key)
	case !m.Delete && set != 1:
		return fmt.Errorf("put mutation of %s %q must carry exactly one record, has %d", m.Kind, m.Key, set)
	}
	if m.Delete {
		return nil
	}
	ok := (m.Kind == KindReservation && m.Reservation != nil) ||
		(m.Kind == KindInstruction && m.Instruction != nil) ||
		(m.Kind == KindCredential && m.Credential != nil) ||
		(m.Kind == KindAdvertisement && m.Advertisement != nil) ||
		(m.Kind == KindConsumer && m.Consumer != nil)
	if !ok {
		return fmt.Errorf("put mutation of %s %q carries a record of another kind", m.Kind, m.Key)
	}
	return nil
}

// Snapshot is every stored record.
type Snapshot struct {
	Reservations   []Reservation
	Instructions   []Instruction
	Credentials    []Credential
	Advertisements []Advertisement
	Consumers      []Consumer
}

// Transition is one step of a reservation's phase timeline.
type Transition struct {
	Phase   api.Phase `json:"phase"`
	At      time.Time `json:"at"`
	Message string    `json:"message,omitempty"`
}

// Reservation is one chunk borrowed by a consumer from a provider.
type Reservation struct {
	ID             string              `json:"id"`
	ConsumerID     string              `json:"consumerId"`
	ConsumerLiqoID string              `json:"consumerLiqoId,omitempty"`
	ProviderID     string              `json:"providerId"`
	ProviderLiqoID string              `json:"providerLiqoId,omitempty"`
	ChunkType      api.ChunkType       `json:"chunkType"`
	ChunkCount     int32               `json:"chunkCount"`
	Resources      corev1.ResourceList `json:"resources,omitempty"`
	Namespaces     []string            `json:"namespaces,omitempty"`

	Phase   api.Phase `json:"phase"`
	Message string    `json:"message,omitempty"`
	// PeeringStarted is set once a Peer instruction was issued; a failure or
	// expiry after that point needs a consumer-side Cleanup.
	PeeringStarted   bool         `json:"peeringStarted,omitempty"`
	VirtualNodeNames []string     `json:"virtualNodeNames,omitempty"`
	CreatedAt        time.Time    `json:"createdAt"`
	ActivatedAt      *time.Time   `json:"activatedAt,omitempty"`
	TerminatedAt     *time.Time   `json:"terminatedAt,omitempty"`
	History          []Transition `json:"history,omitempty"`
	// Migration is the last move of this reservation to a better provider
	// (nil: never moved); MigratedFrom, on a move's target, the
	// reservation it replaces.
	Migration    *Migration `json:"migration,omitempty"`
	MigratedFrom string     `json:"migratedFrom,omitempty"`
}

// Migration is the durable state of one move of a manual reservation: the
// target reserved on the better provider, kept on the moved reservation so
// that a broker restart mid-move carries on (api.Migration* states).
type Migration struct {
	Target  string `json:"target"`
	To      string `json:"to"`
	Attempt int32  `json:"attempt"`
	State   string `json:"state"`
	Reason  string `json:"reason,omitempty"`
	// Saving is what the move saves per hour, as seen when it started.
	CostSaving   *float64   `json:"costSaving,omitempty"`
	CarbonSaving *float64   `json:"carbonSaving,omitempty"`
	StartedAt    time.Time  `json:"startedAt"`
	Deadline     time.Time  `json:"deadline"`
	EndedAt      *time.Time `json:"endedAt,omitempty"`
}

// Flavour tells provider-side instructions from reservation-side ones.
type Flavour string

// Instruction flavours.
const (
	FlavourProvider    Flavour = "provider"
	FlavourReservation Flavour = "reservation"
)

// Instruction is work for one agent. Its delivery time is not stored (no
// write per poll).
type Instruction struct {
	ID      string              `json:"id"`
	Kind    api.InstructionKind `json:"kind"`
	Flavour Flavour             `json:"flavour"`
	// Seq orders instructions by issue; it grows with every issue or re-arm.
	Seq            uint64   `json:"seq"`
	TargetID       string   `json:"targetId"`
	ReservationID  string   `json:"reservationId"`
	ReservationIDs []string `json:"reservationIds,omitempty"`

	ConsumerID     string              `json:"consumerId,omitempty"`
	ConsumerLiqoID string              `json:"consumerLiqoId,omitempty"`
	ProviderID     string              `json:"providerId,omitempty"`
	ProviderLiqoID string              `json:"providerLiqoId,omitempty"`
	ChunkCount     int32               `json:"chunkCount,omitempty"`
	LastChunk      bool                `json:"lastChunk,omitempty"`
	ChunkType      api.ChunkType       `json:"chunkType,omitempty"`
	NodeGroupID    string              `json:"nodeGroupId,omitempty"`
	Resources      corev1.ResourceList `json:"resources,omitempty"`
	Namespaces     []string            `json:"namespaces,omitempty"`

	Enforced   bool      `json:"enforced,omitempty"`
	Attempts   int32     `json:"attempts,omitempty"`
	Message    string    `json:"message,omitempty"`
	IssuedAt   time.Time `json:"issuedAt"`
	LastUpdate time.Time `json:"lastUpdate"`
}

// Credential is a staged peering-user kubeconfig for one (consumer,
// provider) pair. It is a secret: never log it.
type Credential struct {
	ConsumerID string    `json:"consumerId"`
	ProviderID string    `json:"providerId"`
	Kubeconfig string    `json:"kubeconfig"`
	CreatedAt  time.Time `json:"createdAt"`
}

// Key is the credential's record key. Cluster ids are DNS-1123 labels, so
// they cannot contain the "." separator and keys cannot collide.
func (c Credential) Key() string { return PairKey(c.ConsumerID, c.ProviderID) }

// PairKey is the key of a (consumer, provider) pair.
func PairKey(consumer, provider string) string { return consumer + "." + provider }

// Advertisement is a provider's latest advertisement.
type Advertisement struct {
	Request  api.AdvertisementRequest `json:"request"`
	LastSeen time.Time                `json:"lastSeen"`
}

// Consumer is a consumer's latest heartbeat (the consumer registry).
type Consumer struct {
	Heartbeat api.HeartbeatRequest `json:"heartbeat"`
	LastSeen  time.Time            `json:"lastSeen"`
	// Moves is the consumer's migration ledger (nil before its first move).
	Moves *MoveLedger `json:"moves,omitempty"`
}

// MoveLedger is what a consumer's moves used of its one disruption budget
// (the broker's migrations and its agent's consolidations), the slots held
// for the moves its last heartbeat answer handed out, and what its
// migrations saved.
type MoveLedger struct {
	// Starts are when its recent migrations started (those inside the
	// budget window; older ones are dropped).
	Starts []time.Time `json:"starts,omitempty"`
	// Consolidations are the consolidations its agent reported, charged
	// once each (inside the budget window, or still reported; older ones
	// are dropped).
	Consolidations []ConsolidationCharge `json:"consolidations,omitempty"`
	// Held are the node groups whose move the last heartbeat answer handed
	// out, each holding one slot of the budget until the consumer's next
	// heartbeat (which releases it, or converts it into a charge when it
	// reports the consolidation).
	Held []string `json:"held,omitempty"`
	// Moves counts its finished moves; CostPerHour and CarbonPerHour sum
	// what they saved per hour, since Since (its first finished move).
	Moves         int32     `json:"moves,omitempty"`
	CostPerHour   float64   `json:"costPerHour,omitempty"`
	CarbonPerHour float64   `json:"carbonPerHour,omitempty"`
	Since         time.Time `json:"since"`
}

// ConsolidationCharge is one consolidation counted against the budget:
// NodeGroupID and StartedAt (the agent's clock) identify it across
// heartbeats; At is when the broker first saw it (its clock: what the
// window counts).
type ConsolidationCharge struct {
	NodeGroupID string    `json:"nodeGroupId"`
	StartedAt   time.Time `json:"startedAt"`
	At          time.Time `json:"at"`
}
