package kube

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
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

// testStalledWriterNeverRecreates: a broker that committed and stalled
// (SIGSTOP, a partition) before writing its commit's records resumes after
// a new leader has completed that commit and deleted its records: what it
// re-creates is removed again and it is fenced. A create that preceded the
// new leader's completion is the new leader's record too and stays.
func testStalledWriterNeverRecreates(t *testing.T, c *cluster) {
	cred := store.Credential{ConsumerID: "c1", ProviderID: "p1", Kubeconfig: "K"}
	batch := []store.Mutation{store.PutReservation(res("r-x", api.PhasePending)), store.PutCredential(cred)}
	cases := []struct {
		name string
		// meanwhile runs as the new leader b while the stalled a has not
		// yet written (before) or has written but not checked (during)
		// its records.
		before, during func(t *testing.T, b *Store)
		want           bool // the records exist afterwards
	}{
		{name: "deleted by the new leader", want: false, before: func(t *testing.T, b *Store) {
			mustApply(t, b, store.Delete(store.KindReservation, "r-x"), store.Delete(store.KindCredential, cred.Key()))
		}},
		{name: "created before the new leader completed the commit", want: true, during: func(t *testing.T, b *Store) {
			mustApply(t, b, store.PutReservation(res("r-other", api.PhasePending)))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := c.namespace(t)
			a := c.open(t, ns)
			mustLoad(t, a)
			a.opts.crash = func(step string) error {
				if step == "committed" {
					return errCrash // stalls right after the commit point
				}
				return nil
			}
			if err := a.Apply(context.Background(), batch); !errors.Is(err, errCrash) {
				t.Fatal(err)
			}
			b := c.open(t, ns)
			mustLoad(t, b)
			if tc.before != nil {
				tc.before(t, b)
			}
			var once sync.Once
			a.opts.crash = func(step string) error {
				if tc.during != nil && strings.HasPrefix(step, "record") {
					once.Do(func() { tc.during(t, b) })
				}
				return nil
			}
			// a resumes writing its commit's records.
			entries, err := encodeBatch(batch, DefaultPartBytes)
			if err != nil {
				t.Fatal(err)
			}
			if err := a.writeRecords(context.Background(), a.head.Journal.Seq, entries); !errors.Is(err, errSuperseded) {
				t.Fatalf("the stalled writer: %v, want errSuperseded", err)
			}
			if err := a.Apply(context.Background(), batch); !errors.Is(err, ErrFenced) {
				t.Errorf("the stalled writer's next Apply: %v, want ErrFenced", err)
			}
			for k, key := range map[store.Kind]string{store.KindReservation: "r-x", store.KindCredential: cred.Key()} {
				be := a.backends[k]
				_, err := be.get(context.Background(), be.name(key))
				if exists := err == nil; exists != tc.want {
					t.Errorf("%s %s exists: %v, want %v (%v)", k, key, exists, tc.want, err)
				}
			}
			snap := mustLoad(t, c.open(t, ns))
			if _, has := phases(snap)["r-x"]; has != tc.want || (len(snap.Credentials) == 1) != tc.want {
				t.Errorf("a cold load: %v and %d credentials, want r-x and the credential: %v", phases(snap), len(snap.Credentials), tc.want)
			}
		})
	}
}
