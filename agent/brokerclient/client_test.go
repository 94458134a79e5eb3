package brokerclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/pki"
)

// instantClock fires every After at once and records the waits asked for.
type instantClock struct {
	clock.RealClock
	mu    sync.Mutex
	waits []time.Duration
}

func (c *instantClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	c.waits = append(c.waits, d)
	c.mu.Unlock()
	ch := make(chan time.Time, 1)
	ch <- time.Time{}
	return ch
}

func (c *instantClock) Waits() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.waits...)
}

// mtlsServer starts handler behind real mTLS (a fresh CA, a server
// certificate for 127.0.0.1, client certificates required) and returns a
// client TLS config for cluster cn.
func mtlsServer(t testing.TB, cn string, handler http.Handler) (*httptest.Server, *tls.Config) {
	t.Helper()
	now := time.Now()
	ca, err := pki.NewCA(now)
	if err != nil {
		t.Fatal(err)
	}
	srvCert, srvKey, err := ca.IssueServer([]string{"127.0.0.1"}, now)
	if err != nil {
		t.Fatal(err)
	}
	cliCert, cliKey, err := ca.IssueClient(cn, api.RoleConsumer, now)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM())
	sp, err := tls.X509KeyPair(srvCert, srvKey)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := tls.X509KeyPair(cliCert, cliKey)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(handler)
	srv.TLS = &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{sp}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: pool, Certificates: []tls.Certificate{cp}}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func newTestClient(t *testing.T, url string, tlsCfg *tls.Config, clk clock.Clock) *Client {
	t.Helper()
	c, err := New(Config{BaseURL: url, TLS: tlsCfg, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestRetriesTransientFailuresWithOneRequestID(t *testing.T) {
	tests := []struct {
		name       string
		failures   []int // statuses answered before success; 0 = success
		wantErr    bool
		wantStatus int
		wantCalls  int
		wantWaits  []time.Duration
	}{
		{name: "two 503 then success", failures: []int{503, 503}, wantCalls: 3, wantWaits: []time.Duration{100 * time.Millisecond, 200 * time.Millisecond}},
		{name: "retries exhausted", failures: []int{500, 502, 503, 500, 500}, wantErr: true, wantStatus: 500, wantCalls: 4,
			wantWaits: []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond}},
		{name: "409 not retried", failures: []int{409}, wantErr: true, wantStatus: 409, wantCalls: 1},
		{name: "412 not retried", failures: []int{412}, wantErr: true, wantStatus: 412, wantCalls: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var ids []string
			srv, tlsCfg := mtlsServer(t, "consumer-1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				n := len(ids)
				ids = append(ids, r.Header.Get(api.HeaderRequestID))
				mu.Unlock()
				if r.ProtoMajor != 1 {
					t.Errorf("protocol %s, want HTTP/1.1", r.Proto)
				}
				if n < len(tc.failures) {
					writeJSON(w, tc.failures[n], api.ErrorResponse{Code: "Whatever", Message: "nope", RequestID: r.Header.Get(api.HeaderRequestID)})
					return
				}
				writeJSON(w, 200, api.HeartbeatResponse{})
			}))
			clk := &instantClock{}
			c := newTestClient(t, srv.URL, tlsCfg, clk)
			_, err := c.Heartbeat(context.Background(), api.HeartbeatRequest{ClusterID: "consumer-1", LiqoClusterID: "l"})
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if got := StatusOf(err); got != tc.wantStatus {
				t.Errorf("StatusOf = %d, want %d", got, tc.wantStatus)
			}
			if len(ids) != tc.wantCalls {
				t.Fatalf("calls = %d, want %d", len(ids), tc.wantCalls)
			}
			for _, id := range ids {
				if id == "" || id != ids[0] {
					t.Errorf("request ids %v: want one non-empty id reused across retries", ids)
				}
			}
			if got := clk.Waits(); !equalDurations(got, tc.wantWaits) {
				t.Errorf("waits = %v, want %v", got, tc.wantWaits)
			}
		})
	}
}

func equalDurations(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestTooManyRequestsHonoursRetryAfter(t *testing.T) {
	calls := 0
	srv, tlsCfg := mtlsServer(t, "c", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		if calls == 1 {
			w.Header().Set("Retry-After", "3")
			writeJSON(w, 429, api.ErrorResponse{Code: api.CodeTooManyRequests, Message: "slow down"})
			return
		}
		writeJSON(w, 200, api.NodeGroupListResponse{NodeGroups: []api.NodeGroupView{{ID: "ng-p-standard"}}})
	}))
	clk := &instantClock{}
	c := newTestClient(t, srv.URL, tlsCfg, clk)
	out, err := c.NodeGroups(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(out.NodeGroups) != 1 || calls != 2 {
		t.Fatalf("got %d groups after %d calls", len(out.NodeGroups), calls)
	}
	if w := clk.Waits(); len(w) != 1 || w[0] != 3*time.Second {
		t.Errorf("waits = %v, want [3s]", w)
	}
}

func TestErrorCarriesStatusCodeMessage(t *testing.T) {
	srv, tlsCfg := mtlsServer(t, "c", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v1/reservations":
			if got := r.Header.Get(api.HeaderReservationID); got != "res-1" {
				t.Errorf("X-Reservation-Id = %q", got)
			}
			w.Header().Set(api.HeaderRequestID, "rid-7")
			writeJSON(w, 409, api.ErrorResponse{Code: api.CodeInsufficientCapacity, Message: "no room", Details: map[string]any{"available": 0}, RequestID: "rid-7"})
		default:
			http.Error(w, "404 page not found", http.StatusNotFound)
		}
	}))
	c := newTestClient(t, srv.URL, tlsCfg, &instantClock{})
	_, _, err := c.Reserve(context.Background(), "res-1", api.ReservationRequest{ProviderClusterID: "p", ChunkCount: 1, ChunkType: api.ChunkStandard})
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("err %v is not *Error", err)
	}
	if e.Status != 409 || e.Code != api.CodeInsufficientCapacity || e.Message != "no room" || e.RequestID != "rid-7" {
		t.Errorf("error = %+v", e)
	}
	if !api.IsCode(err, api.CodeInsufficientCapacity) {
		t.Errorf("api.CodeOf = %s", api.CodeOf(err))
	}
	_, err = c.Reservation(context.Background(), "x")
	if !errors.As(err, &e) || e.Status != 404 || e.Code != api.CodeNotFound || e.Message != "404 page not found" {
		t.Errorf("plain-text 404 = %+v", e)
	}
}

func TestNetworkErrorsAreRetried(t *testing.T) {
	srv, tlsCfg := mtlsServer(t, "c", http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	clk := &instantClock{}
	c := newTestClient(t, url, tlsCfg, clk)
	err := c.Healthz(context.Background())
	if err == nil || StatusOf(err) != 0 {
		t.Fatalf("err = %v, want a transport error", err)
	}
	// 3 retries with backoff, then held for a takeover until the waits
	// reach DefaultTakeoverHold.
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, 1600 * time.Millisecond, 1400 * time.Millisecond}
	if got := clk.Waits(); !equalDurations(got, want) {
		t.Errorf("waits = %v, want %v", got, want)
	}
}

func TestLongPollDetectionAndFallback(t *testing.T) {
	var mu sync.Mutex
	announce := false
	var waits []string
	srv, tlsCfg := mtlsServer(t, "c", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		waits = append(waits, r.URL.Query().Get("wait"))
		if announce {
			w.Header().Set(api.HeaderLongPoll, "true")
		}
		mu.Unlock()
		writeJSON(w, 200, api.InstructionListResponse{Instructions: []api.InstructionView{}})
	}))
	c := newTestClient(t, srv.URL, tlsCfg, &instantClock{})
	ctx := context.Background()
	// A reference broker never announces long polling: plain polls.
	for range 2 {
		if _, long, err := c.Instructions(ctx, 30*time.Second); err != nil || long {
			t.Fatalf("long=%v err=%v, want a plain poll", long, err)
		}
	}
	mu.Lock()
	announce = true
	mu.Unlock()
	if _, long, _ := c.Instructions(ctx, 30*time.Second); long {
		t.Fatal("long poll before the broker announced it")
	}
	if _, long, _ := c.Instructions(ctx, 30*time.Second); !long {
		t.Fatal("no long poll after the announcement")
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"", "", "", "30s"}
	for i := range want {
		if waits[i] != want[i] {
			t.Errorf("wait params = %q, want %q", waits, want)
			break
		}
	}
}

// TestIDsAreEscapedOnce: ids in paths are escaped exactly once on the wire
// (url.PathEscape, then kept as the raw path) and read back unchanged.
func TestIDsAreEscapedOnce(t *testing.T) {
	var mu sync.Mutex
	var rawPath, id string
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/reservations/{id}", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		rawPath, id = r.URL.EscapedPath(), r.PathValue("id")
		mu.Unlock()
		writeJSON(w, http.StatusOK, api.ReservationResponse{ReservationID: r.PathValue("id")})
	})
	srv, tlsCfg := mtlsServer(t, "consumer-1", mux)
	c := newTestClient(t, srv.URL, tlsCfg, &instantClock{})
	for in, wire := range map[string]string{
		"res-1":  "/api/v1/reservations/res-1",
		"a b%":   "/api/v1/reservations/a%20b%25",
		"../x":   "/api/v1/reservations/..%2Fx",
		"r-%2Fx": "/api/v1/reservations/r-%252Fx",
	} {
		if _, err := c.Reservation(context.Background(), in); err != nil {
			t.Fatalf("Reservation(%q): %v", in, err)
		}
		mu.Lock()
		if rawPath != wire || id != in {
			t.Errorf("Reservation(%q): wire path %q read as %q, want %q read as %q", in, rawPath, id, wire, in)
		}
		mu.Unlock()
	}
}
