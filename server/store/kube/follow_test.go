package kube

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/store"
)

// follow runs s.Follow until the test ends.
func follow(t *testing.T, s *Store) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := s.Follow(ctx); !errors.Is(err, context.Canceled) {
			t.Errorf("Follow: %v", err)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// waitWarm polls until the warm copy of s is current with the journal head
// for every kind of want (the watches deliver within milliseconds).
func waitWarm(t *testing.T, s *Store, want ...store.Kind) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		h, err := s.journal.readHead(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		_, used, err := s.warm(h.ResourceVersion)
		if err != nil {
			t.Fatal(err)
		}
		missing := slices.DeleteFunc(slices.Clone(want), func(k store.Kind) bool { return slices.Contains(used, k) })
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the warm copy never caught up with the head for %v", missing)
		}
		time.Sleep(10 * time.Millisecond) // polling the watches' progress
	}
}

func everyKind(seq string) []store.Mutation {
	return []store.Mutation{
		store.PutReservation(res("r-"+seq, api.PhasePeered)),
		store.PutInstruction(store.Instruction{ID: "peer-r-" + seq, Kind: api.KindPeer, TargetID: "c1", ReservationID: "r-" + seq}),
		store.PutCredential(store.Credential{ConsumerID: "c1", ProviderID: "p1", Kubeconfig: "K" + seq}),
		store.PutAdvertisement(store.Advertisement{Request: api.AdvertisementRequest{ClusterID: "p1", LiqoClusterID: "liqo-" + seq}}),
		store.PutConsumer(store.Consumer{Heartbeat: api.HeartbeatRequest{ClusterID: "c1", LiqoClusterID: "liqo-" + seq}}),
	}
}

// testWarmStandby: a standby that follows the store loads the same state
// as a cold Load, from its warm copy for every collection whose watch has
// seen the head, by listing the others (a crash left the head's records
// unwritten), and then commits as the leader.
func testWarmStandby(t *testing.T, c *cluster) {
	ns := c.namespace(t)
	leader := c.open(t, ns)
	mustLoad(t, leader)
	standby := c.open(t, ns)
	follow(t, standby)
	for _, seq := range []string{"1", "2", "3"} {
		mustApply(t, leader, everyKind(seq)...)
	}
	mustApply(t, leader, store.Delete(store.KindReservation, "r-1"), store.Delete(store.KindInstruction, "peer-r-1"))
	mustApply(t, leader, everyKind("4")...)
	all := store.Kinds()
	waitWarm(t, standby, all...)
	warm := mustLoad(t, standby)
	if got := standby.lastLoad; !reflect.DeepEqual(got.Warm, all) || len(got.Listed) != 0 {
		t.Errorf("load: warm %v, listed %v; want every kind warm", got.Warm, got.Listed)
	}
	if cold := mustLoad(t, c.open(t, ns)); !reflect.DeepEqual(warm, cold) {
		t.Fatalf("the warm load differs from a cold one:\nwarm %+v\ncold %+v", warm, cold)
	}
	if got, want := phases(warm), map[string]api.Phase{"r-2": api.PhasePeered, "r-3": api.PhasePeered, "r-4": api.PhasePeered}; !reflect.DeepEqual(got, want) {
		t.Fatalf("warm load: %v, want %v", got, want)
	}

	// The standby leads: its object versions from the watch are right.
	mustApply(t, standby, store.PutReservation(res("r-2", api.PhaseReleased)), store.Delete(store.KindReservation, "r-3"))

	// The new leader dies right after a commit point: the head's records
	// are not written, so no watch has seen the head; Load lists those
	// collections and replays the head.
	crashing := c.open(t, ns, func(o *Options) {
		o.crash = func(step string) error {
			if step == "committed" {
				return errCrash
			}
			return nil
		}
	})
	mustLoad(t, crashing)
	next := c.open(t, ns)
	follow(t, next)
	waitWarm(t, next, store.KindReservation) // the standby's own commit
	if err := crashing.Apply(context.Background(), []store.Mutation{store.PutReservation(res("r-5", api.PhasePending))}); !errors.Is(err, errCrash) {
		t.Fatalf("crashing Apply: %v", err)
	}
	snap := mustLoad(t, next)
	if got, want := phases(snap), map[string]api.Phase{"r-2": api.PhaseReleased, "r-4": api.PhasePeered, "r-5": api.PhasePending}; !reflect.DeepEqual(got, want) {
		t.Fatalf("after the crash: %v, want %v (load warm %v, listed %v)", got, want, next.lastLoad.Warm, next.lastLoad.Listed)
	}
	if !slices.Contains(next.lastLoad.Listed, store.KindReservation) {
		t.Errorf("the reservations' watch had not seen the head, yet they were not listed: warm %v", next.lastLoad.Warm)
	}
	if cold := mustLoad(t, c.open(t, ns)); !reflect.DeepEqual(snap, cold) {
		t.Fatalf("after the crash, the load differs from a cold one:\n%+v\n%+v", snap, cold)
	}
}
