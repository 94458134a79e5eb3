package reservations

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/store"
)

// checkInvariants verifies the ledger, the indexes and the phase machine's
// bookkeeping against the records.
func checkInvariants(t *testing.T, s *Service) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.st
	live := map[ptKey]int32{}
	for id, r := range st.reservations {
		if st.byPair[store.PairKey(r.ConsumerID, r.ProviderID)][id] != r {
			t.Fatalf("%s missing from the pair index", id)
		}
		pending := func(name string) bool {
			in := st.instructions[name]
			return in != nil && !in.Enforced && st.pending[in.TargetID][name] == in
		}
		switch r.Phase {
		case api.PhaseGeneratingKubeconfig:
			gk := st.instructions[gkName(r.ConsumerID, r.ProviderID)]
			if !pending(gkName(r.ConsumerID, r.ProviderID)) || !strings.Contains(strings.Join(gk.ReservationIDs, ","), id) {
				t.Fatalf("%s GeneratingKubeconfig without a pending gk serving it", id)
			}
		case api.PhasePeering:
			if !pending(peerName(id)) {
				t.Fatalf("%s Peering without a pending Peer", id)
			}
			if _, ok := st.credentials[store.PairKey(r.ConsumerID, r.ProviderID)]; !ok {
				t.Fatalf("%s Peering without a credential", id)
			}
		case api.PhaseUnpeering:
			if !pending(unpeerName(id)) {
				t.Fatalf("%s Unpeering without a pending Unpeer", id)
			}
		case api.PhasePending, api.PhaseKubeconfigReady:
			t.Fatalf("%s rests in transient phase %s", id, r.Phase)
		}
		if r.Phase.Terminal() {
			if r.TerminatedAt == nil || pending(peerName(id)) || pending(unpeerName(id)) {
				t.Fatalf("terminal %s has pending work or no terminatedAt", id)
			}
			continue
		}
		live[ptKey{r.ProviderID, r.ChunkType}] += r.ChunkCount
	}
	for k, n := range live {
		if st.reserved[k] != n {
			t.Fatalf("reserved[%v] = %d, live = %d", k, st.reserved[k], n)
		}
		if p := st.providers[k.provider]; p == nil || n > p.chunks[k.typ] {
			t.Fatalf("%v oversubscribed: %d live", k, n)
		}
	}
	for k, n := range st.reserved {
		if live[k] != n {
			t.Fatalf("reserved[%v] = %d without live reservations", k, n)
		}
	}
	for key := range st.credentials {
		hasLive := false
		for _, r := range st.byPair[key] {
			if !r.Phase.Terminal() {
				hasLive = true
			}
		}
		if !hasLive {
			t.Fatalf("credential %s kept without a live reservation", key)
		}
	}
	n := 0
	for cn, m := range st.pending {
		for id, in := range m {
			n++
			if in.Enforced || in.TargetID != cn || st.instructions[id] != in {
				t.Fatalf("pending index wrong for %s", id)
			}
		}
	}
	for _, in := range st.instructions {
		if !in.Enforced {
			n--
		}
	}
	if n != 0 {
		t.Fatal("pending index and instructions disagree")
	}
}

// TestChurnKeepsInvariants drives random operations through the service
// and checks every invariant after each one, then across a restart.
func TestChurnKeepsInvariants(t *testing.T) {
	e := newEnv(t)
	rng := rand.New(rand.NewPCG(1, 2))
	providers := []string{"p1", "p2", "p-3"}
	consumers := []string{"c1", "c-2", "c3"}
	for _, p := range providers {
		e.advertise(p, 3)
	}
	for _, c := range consumers {
		e.heartbeat(c)
	}
	next := 0
	for step := range 800 {
		switch op := rng.IntN(100); {
		case op < 30:
			next++
			_, _, err := e.s.Reserve(e.ctx, consumers[rng.IntN(3)], fmt.Sprintf("r%d", next), stdReq(providers[rng.IntN(3)]))
			if err != nil && !api.IsCode(err, api.CodeInsufficientCapacity) && !api.IsCode(err, api.CodeServiceUnavailable) {
				t.Fatalf("step %d reserve: %v", step, err)
			}
		case op < 40:
			id := fmt.Sprintf("r%d", rng.IntN(next+1))
			e.s.mu.Lock()
			r := e.s.st.reservations[id]
			e.s.mu.Unlock()
			if r != nil {
				if _, err := e.s.Release(e.ctx, r.ConsumerID, id, 0); err != nil {
					t.Fatalf("step %d release: %v", step, err)
				}
			}
		case op < 85:
			cn := append(providers, consumers...)[rng.IntN(6)]
			vs := e.instructions(cn)
			if len(vs) == 0 {
				continue
			}
			v := vs[rng.IntN(len(vs))]
			req := ok()
			switch {
			case rng.IntN(5) == 0:
				req = failed("random failure")
			case v.Kind == api.KindGenerateKubeconfig:
				req = kubeconfig("K-" + v.ID)
			case v.Kind == api.KindPeer:
				req = peered("vn-" + v.ReservationID)
			}
			if err := e.s.PostResult(e.ctx, cn, e.role(cn), v.ID, req); err != nil {
				t.Fatalf("step %d result %s: %v", step, v.ID, err)
			}
		case op < 93:
			e.clk.Step(time.Duration(rng.IntN(60)) * time.Second)
			for _, p := range providers {
				if rng.IntN(4) != 0 {
					e.advertise(p, 3)
				}
			}
			for _, c := range consumers {
				if rng.IntN(4) != 0 {
					e.heartbeat(c)
				}
			}
			e.s.sweep(e.ctx)
		default:
			e.clk.Step(time.Duration(rng.IntN(20)) * time.Minute)
			e.s.sweep(e.ctx)
			for _, p := range providers {
				e.advertise(p, 3)
			}
			for _, c := range consumers {
				e.heartbeat(c)
			}
		}
		checkInvariants(t, e.s)
	}
	// The re-evaluation decisions the overview shows are derived, kept in
	// memory and recomputed at the first sweep after a start: a sweep on
	// each side (the clock does not move) compares like with like.
	e.s.sweep(e.ctx)
	before := overviewJSON(t, e.s)
	e.restart()
	checkInvariants(t, e.s)
	e.s.sweep(e.ctx)
	if after := overviewJSON(t, e.s); after != before {
		t.Fatalf("state changed across restart:\nbefore %s\nafter  %s", before, after)
	}
}

// TestConcurrentChurn runs reservations, results and releases from many
// goroutines at once (for the race detector and the ledger invariants).
func TestConcurrentChurn(t *testing.T) {
	e := newEnv(t)
	for _, p := range []string{"p1", "p2"} {
		e.advertise(p, 5)
	}
	consumers := []string{"c1", "c2", "c3", "c4"}
	for _, c := range consumers {
		e.heartbeat(c)
	}
	done := make(chan struct{})
	errs := make(chan error, 64)
	for w := range 8 {
		go func() {
			defer func() { done <- struct{}{} }()
			c := consumers[w%len(consumers)]
			p := []string{"p1", "p2"}[w%2]
			for i := range 40 {
				id := fmt.Sprintf("w%d-%d", w, i)
				if _, _, err := e.s.Reserve(e.ctx, c, id, stdReq(p)); err != nil {
					if !api.IsCode(err, api.CodeInsufficientCapacity) {
						errs <- err
					}
					continue
				}
				for _, cn := range []string{p, c, c} {
					vs, err := e.s.Instructions(e.ctx, cn, e.role(cn), 0)
					if err != nil {
						errs <- err
						return
					}
					for _, v := range vs {
						req := ok()
						switch v.Kind {
						case api.KindGenerateKubeconfig:
							req = kubeconfig("K")
						case api.KindPeer:
							req = peered("vn")
						}
						// Another worker may post the same result: replays are fine.
						if err := e.s.PostResult(e.ctx, cn, e.role(cn), v.ID, req); err != nil && !api.IsCode(err, api.CodeNotFound) {
							errs <- err
						}
					}
				}
				if _, err := e.s.Release(e.ctx, c, id, 0); err != nil {
					errs <- err
				}
			}
		}()
	}
	for range 8 {
		<-done
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	checkInvariants(t, e.s)
}
