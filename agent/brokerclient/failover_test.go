package brokerclient

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// replica is one broker replica of a test: the leader answers, a standby
// answers 503 with Retry-After 1 like the HA broker's standbys, a down
// replica refuses connections.
type replica struct {
	srv *httptest.Server
	mu  sync.Mutex
	// role is "leader", "standby" or "down".
	role string
	ids  []string // request ids received
}

func (r *replica) set(role string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.role = role
}

func (r *replica) calls() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.ids...)
}

func (r *replica) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	role := r.role
	r.ids = append(r.ids, req.Header.Get(api.HeaderRequestID))
	r.mu.Unlock()
	switch role {
	case "leader":
		writeJSON(w, http.StatusOK, api.HeartbeatResponse{})
	case "down":
		// Hang up without an answer, like a replica killed mid-request.
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	default:
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, api.ErrorResponse{Code: api.CodeServiceUnavailable, Message: "standby"})
	}
}

func newReplicas(t *testing.T, roles ...string) []*replica {
	t.Helper()
	var out []*replica
	for _, role := range roles {
		r := &replica{role: role}
		r.srv = httptest.NewServer(r)
		t.Cleanup(r.srv.Close)
		out = append(out, r)
	}
	return out
}

// TestFailoverAcrossReplicas: a call moves on to the next replica at once
// when one is unreachable or a standby, keeps its request id across them,
// stays with the replica that served, and waits (the standby's Retry-After)
// only after a whole round of replicas failed.
func TestFailoverAcrossReplicas(t *testing.T) {
	type step struct {
		roles     []string // the replicas' roles for this call
		wantCalls []int    // requests each replica received in this call
		wantWaits []time.Duration
		wantErr   bool
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"first replica down, second standby, third leader", []step{
			{roles: []string{"down", "standby", "leader"}, wantCalls: []int{1, 1, 1}},
			// The next call goes straight to the replica that served.
			{roles: []string{"down", "standby", "leader"}, wantCalls: []int{0, 0, 1}},
		}},
		{"takeover: the leader dies, a standby takes over", []step{
			{roles: []string{"leader", "standby", "standby"}, wantCalls: []int{1, 0, 0}},
			{roles: []string{"down", "leader", "standby"}, wantCalls: []int{1, 1, 0}},
			{roles: []string{"down", "leader", "standby"}, wantCalls: []int{0, 1, 0}},
		}},
		{"no leader yet: rounds with the standby's Retry-After between them, held for a takeover", []step{
			{roles: []string{"down", "standby", "standby"}, wantCalls: []int{6, 6, 6},
				wantWaits: []time.Duration{time.Second, time.Second, time.Second, time.Second, 500 * time.Millisecond}, wantErr: true},
		}},
		{"one URL: a standby's Retry-After is honoured, held for a takeover", []step{
			{roles: []string{"standby"}, wantCalls: []int{6},
				wantWaits: []time.Duration{time.Second, time.Second, time.Second, time.Second, 500 * time.Millisecond}, wantErr: true},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reps := newReplicas(t, tt.steps[0].roles...)
			var alts []string
			for _, r := range reps[1:] {
				alts = append(alts, r.srv.URL)
			}
			clk := &instantClock{}
			c, err := New(Config{BaseURL: reps[0].srv.URL, AlternateURLs: alts, Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.Close)
			for i, st := range tt.steps {
				before := make([]int, len(reps))
				for j, r := range reps {
					r.set(st.roles[j])
					before[j] = len(r.calls())
				}
				waitsBefore := len(clk.Waits())
				_, err := c.Heartbeat(context.Background(), api.HeartbeatRequest{ClusterID: "c", LiqoClusterID: "l"})
				if (err != nil) != st.wantErr {
					t.Fatalf("step %d: err = %v, wantErr %v", i, err, st.wantErr)
				}
				var ids []string
				for j, r := range reps {
					got := r.calls()[before[j]:]
					if len(got) != st.wantCalls[j] {
						t.Errorf("step %d: replica %d got %d requests, want %d", i, j, len(got), st.wantCalls[j])
					}
					ids = append(ids, got...)
				}
				for _, id := range ids {
					if id == "" || id != ids[0] {
						t.Errorf("step %d: request ids %v: want one id across the replicas (a replayed reservation is recognised by it)", i, ids)
						break
					}
				}
				if got := clk.Waits()[waitsBefore:]; !equalDurations(got, st.wantWaits) {
					t.Errorf("step %d: waits = %v, want %v", i, got, st.wantWaits)
				}
			}
		})
	}
}

// TestFailoverRefusesBadAlternate: every URL is validated.
func TestFailoverRefusesBadAlternate(t *testing.T) {
	if _, err := New(Config{BaseURL: "https://a:8443", AlternateURLs: []string{"b:8443"}}); err == nil {
		t.Fatal("an alternate URL without a scheme was accepted")
	}
}

// TestTakeoverHold: a call made as the leader dies (every replica down or
// a standby) is answered by the new leader within TakeoverHold, past its
// MaxRetries; without the hold it fails after MaxRetries.
func TestTakeoverHold(t *testing.T) {
	tests := []struct {
		name      string
		hold      time.Duration
		wantErr   bool
		wantWaits []time.Duration
	}{
		{"default hold: the new leader answers", 0, false, []time.Duration{time.Second, time.Second, time.Second, time.Second}},
		{"no hold", -1, true, []time.Duration{time.Second, time.Second, time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reps := newReplicas(t, "down", "standby")
			// The standby takes over at its fifth request (4 s into the call).
			var n int
			var mu sync.Mutex
			taking := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
				mu.Lock()
				n++
				if n == 5 {
					reps[1].set("leader")
				}
				mu.Unlock()
				reps[1].ServeHTTP(w, req)
			}))
			t.Cleanup(taking.Close)
			clk := &instantClock{}
			c, err := New(Config{BaseURL: reps[0].srv.URL, AlternateURLs: []string{taking.URL}, Clock: clk, TakeoverHold: tt.hold})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.Close)
			_, err = c.Heartbeat(context.Background(), api.HeartbeatRequest{ClusterID: "c", LiqoClusterID: "l"})
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if got := clk.Waits(); !equalDurations(got, tt.wantWaits) {
				t.Errorf("waits = %v, want %v", got, tt.wantWaits)
			}
		})
	}
}
