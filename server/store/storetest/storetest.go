// Package storetest is the conformance suite every store.Store
// implementation must pass (the bbolt store now, a CRD backend later).
package storetest

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/store"
)

// Opener opens the store under test. Every call for the same test must
// open the same underlying storage (so a reopen sees what was applied
// before); the suite closes what it opens.
type Opener func(t *testing.T) store.Store

// Run runs the suite. newStorage returns a fresh Opener per subtest.
func Run(t *testing.T, newStorage func(t *testing.T) Opener) {
	tests := []struct {
		name string
		fn   func(t *testing.T, open Opener)
	}{
		{"EmptyLoad", testEmptyLoad},
		{"RoundTripAcrossReopen", testRoundTrip},
		{"LastWriteInBatchWins", testLastWriteWins},
		{"DeleteMissingIsNoop", testDeleteMissing},
		{"InvalidBatchWritesNothing", testInvalidBatch},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStorage(t)) })
	}
}

var at = time.Date(2026, 7, 22, 10, 0, 0, 0, time.UTC)

func sample() store.Snapshot {
	return store.Snapshot{
		Reservations: []store.Reservation{{
			ID: "r1", ConsumerID: "c1", ProviderID: "p1", ChunkType: api.ChunkStandard, ChunkCount: 1,
			Phase: api.PhasePeered, CreatedAt: at, Namespaces: []string{"a"},
			History: []store.Transition{{Phase: api.PhasePending, At: at, Message: "created"}},
		}},
		Instructions: []store.Instruction{{
			ID: "gk.c1.p1", Kind: api.KindGenerateKubeconfig, Flavour: store.FlavourProvider, Seq: 3,
			TargetID: "p1", ReservationID: "r1", ReservationIDs: []string{"r1"}, IssuedAt: at, LastUpdate: at,
		}},
		Credentials:    []store.Credential{{ConsumerID: "c1", ProviderID: "p1", Kubeconfig: "K", CreatedAt: at}},
		Advertisements: []store.Advertisement{{Request: api.AdvertisementRequest{ClusterID: "p1", LiqoClusterID: "l"}, LastSeen: at}},
		Consumers: []store.Consumer{{Heartbeat: api.HeartbeatRequest{ClusterID: "c1", LiqoClusterID: "l"}, LastSeen: at, Moves: &store.MoveLedger{
			Starts:         []time.Time{at.Add(-time.Minute)},
			Consolidations: []store.ConsolidationCharge{{NodeGroupID: "ng-p1-standard", StartedAt: at.Add(-2 * time.Minute), At: at.Add(-time.Minute)}},
			Held:           []string{"ng-p2-standard"},
			Moves:          1, CostPerHour: 0.5, Since: at.Add(-time.Hour),
		}}},
	}
}

func load(t *testing.T, s store.Store) store.Snapshot {
	t.Helper()
	snap, err := s.Load(context.Background())
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	slices.SortFunc(snap.Reservations, func(a, b store.Reservation) int { return strings.Compare(a.ID, b.ID) })
	return snap
}

func openClose(t *testing.T, open Opener) store.Store {
	t.Helper()
	s := open(t)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func testEmptyLoad(t *testing.T, open Opener) {
	s := openClose(t, open)
	if snap := load(t, s); !reflect.DeepEqual(snap, store.Snapshot{}) {
		t.Fatalf("fresh store holds %+v", snap)
	}
}

func testRoundTrip(t *testing.T, open Opener) {
	s := open(t)
	if err := s.Apply(context.Background(), sample().Puts()); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openClose(t, open)
	if got := load(t, s); !reflect.DeepEqual(got, sample()) {
		t.Fatalf("after reopen:\n got %+v\nwant %+v", got, sample())
	}
}

func testLastWriteWins(t *testing.T, open Opener) {
	s := openClose(t, open)
	r := sample().Reservations[0]
	r2 := r
	r2.Phase = api.PhaseUnpeering
	gone := store.Reservation{ID: "r0", ConsumerID: "c1", ProviderID: "p1"}
	batch := []store.Mutation{store.PutReservation(r), store.PutReservation(gone), store.PutReservation(r2), store.Delete(store.KindReservation, "r0")}
	if err := s.Apply(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	got := load(t, s).Reservations
	if len(got) != 1 || got[0].Phase != api.PhaseUnpeering {
		t.Fatalf("reservations = %+v", got)
	}
}

func testDeleteMissing(t *testing.T, open Opener) {
	s := openClose(t, open)
	for _, k := range store.Kinds() {
		if err := s.Apply(context.Background(), []store.Mutation{store.Delete(k, "nope")}); err != nil {
			t.Fatalf("delete of a missing %s: %v", k, err)
		}
	}
}

func testInvalidBatch(t *testing.T, open Opener) {
	s := openClose(t, open)
	batch := append(sample().Puts(), store.Mutation{Kind: store.KindReservation, Key: "x"})
	if err := s.Apply(context.Background(), batch); err == nil {
		t.Fatal("a batch with a malformed mutation was accepted")
	}
	if snap := load(t, s); !reflect.DeepEqual(snap, store.Snapshot{}) {
		t.Fatalf("a rejected batch was partly written: %+v", snap)
	}
}
