package brokerclient

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// burstServer answers POST /api/v1/reservations only once n requests are in
// flight at the same time, so a round of n concurrent calls needs n
// connections (HTTP/1.1), and records the connection (remote address) that
// carried each request.
type burstServer struct {
	n       int
	mu      sync.Mutex
	arrived int
	release chan struct{}
	conns   map[string]int // remote address → round that first used it
	round   int
	fresh   int // connections first seen in the current round
}

func (s *burstServer) startRound(round int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.round, s.arrived, s.fresh = round, 0, 0
	s.release = make(chan struct{})
}

func (s *burstServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	if _, seen := s.conns[r.RemoteAddr]; !seen {
		s.conns[r.RemoteAddr] = s.round
		s.fresh++
	}
	s.arrived++
	if s.arrived == s.n {
		close(s.release)
	}
	release := s.release
	s.mu.Unlock()
	select {
	case <-release:
	case <-r.Context().Done():
		return
	}
	writeJSON(w, http.StatusCreated, api.ReservationResponse{ReservationID: r.Header.Get(api.HeaderReservationID), Status: api.PhasePending})
}

// TestConcurrentBurstReusesConnections checks that the default transport
// keeps a burst's connections: a second burst as wide as the adapter's
// IncreaseSize fan-out (16) reuses them all and performs no new mTLS
// handshake. With a pool of 4 idle connections every burst re-dialled 12.
func TestConcurrentBurstReusesConnections(t *testing.T) {
	const n = 16
	bs := &burstServer{n: n, conns: map[string]int{}}
	srv, tlsCfg := mtlsServer(t, "consumer-1", bs)
	c := newTestClient(t, srv.URL, tlsCfg, nil)

	burst := func(round int) int {
		t.Helper()
		bs.startRound(round)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		errs := make(chan error, n)
		for range n {
			go func() {
				_, _, err := c.Reserve(ctx, "", api.ReservationRequest{ProviderClusterID: "p1", ChunkType: api.ChunkStandard, ChunkCount: 1})
				errs <- err
			}()
		}
		for range n {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: reserve: %v", round, err)
			}
		}
		bs.mu.Lock()
		defer bs.mu.Unlock()
		return bs.fresh
	}
	if got := burst(1); got != n {
		t.Fatalf("first burst used %d connections, want %d (the server holds all %d requests at once)", got, n, n)
	}
	for round := 2; round <= 3; round++ {
		if got := burst(round); got != 0 {
			t.Errorf("burst %d opened %d new connections (each an mTLS handshake), want 0: the transport must keep at least %d idle connections", round, got, n)
		}
	}
}
