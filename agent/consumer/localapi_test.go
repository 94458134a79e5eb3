package consumer

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	authv1beta1 "github.com/liqotech/liqo/apis/authentication/v1beta1"
	offloadingv1beta1 "github.com/liqotech/liqo/apis/offloading/v1beta1"

	"github.com/federation-autoscaler/federation-autoscaler/adapter/localapi"
	fav1alpha1 "github.com/federation-autoscaler/federation-autoscaler/agent/apis/v1alpha1"
	"github.com/federation-autoscaler/federation-autoscaler/agent/brokerclient"
	"github.com/federation-autoscaler/federation-autoscaler/agent/probe"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// stubBroker answers the local API's broker calls from fields.
type stubBroker struct {
	mu            sync.Mutex
	reserveStatus []int // statuses returned by successive Reserve calls
	reserveErr    []error
	reserveIDs    []string
	releaseStatus int
	releaseErr    error
	view          api.NodeGroupListResponse
	viewErr       error
	heartbeats    int
	phases        map[string]api.Phase // Reservation answers; absent ids are 404
	moves         []api.Reevaluation   // the heartbeat's answer
	last          api.HeartbeatRequest // the last heartbeat
}

func (s *stubBroker) Instructions(ctx context.Context, _ time.Duration) ([]api.InstructionView, bool, error) {
	<-ctx.Done()
	return nil, false, ctx.Err()
}
func (s *stubBroker) PostResult(context.Context, string, api.InstructionResultRequest) error {
	return nil
}
func (s *stubBroker) Heartbeat(_ context.Context, req api.HeartbeatRequest) (api.HeartbeatResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.heartbeats++
	s.last = req
	return api.HeartbeatResponse{Moves: s.moves}, nil
}
func (s *stubBroker) NodeGroups(context.Context) (api.NodeGroupListResponse, error) {
	v := s.view // a fresh copy per call, as decoding the broker's answer gives
	v.NodeGroups = slices.Clone(v.NodeGroups)
	return v, s.viewErr
}
func (s *stubBroker) Reserve(_ context.Context, id string, req api.ReservationRequest) (api.ReservationResponse, int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reserveIDs = append(s.reserveIDs, id)
	n := len(s.reserveIDs) - 1
	if n < len(s.reserveErr) && s.reserveErr[n] != nil {
		return api.ReservationResponse{}, 0, s.reserveErr[n]
	}
	return api.ReservationResponse{ReservationID: id, Status: api.PhasePending, ProviderClusterID: req.ProviderClusterID, ChunkCount: 1}, s.reserveStatus[n], nil
}
func (s *stubBroker) Reservation(_ context.Context, id string) (api.ReservationResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.phases[id]
	if !ok {
		return api.ReservationResponse{}, &brokerclient.Error{Status: 404, Code: api.CodeNotFound, Message: "no reservation " + id}
	}
	return api.ReservationResponse{ReservationID: id, Status: p}, nil
}
func (s *stubBroker) Release(_ context.Context, id string) (api.ReleaseResponse, int, error) {
	return api.ReleaseResponse{ReservationID: id, Status: api.PhaseUnpeering}, s.releaseStatus, s.releaseErr
}

type nopDriver struct{}

func (nopDriver) Peer(context.Context, string, string) error   { return nil }
func (nopDriver) Unpeer(context.Context, string, string) error { return nil }

func newTestAgent(t *testing.T, b Broker, objs ...runtime.Object) *Agent {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := fav1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := authv1beta1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := offloadingv1beta1.AddToScheme(s); err != nil { // as agentcmd.Scheme
		t.Fatal(err)
	}
	cl := fake.NewClientBuilder().WithScheme(s).WithRuntimeObjects(objs...).Build()
	a, err := New(Config{ClusterID: "consumer-1", Namespace: "fa", Kube: kubefake.NewClientset(), Client: cl, Broker: b, Driver: nopDriver{},
		Prober: probe.NewProber(probe.ProberConfig{Timeout: 50 * time.Millisecond})})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func do(t *testing.T, h http.Handler, method, path, body string, hdr map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	// What the adapter's client sends (localguard refuses anything else).
	req.Host = "127.0.0.1:9090"
	if hasBody(req) {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestLocalAPIPassesBrokerStatusesThrough(t *testing.T) {
	brokerErr := &brokerclient.Error{Status: 409, Code: api.CodeInsufficientCapacity, Message: "no room on p", RequestID: "rid-1", Details: map[string]any{"available": float64(0)}}
	tests := []struct {
		name       string
		broker     *stubBroker
		method     string
		path       string
		body       string
		header     map[string]string
		wantStatus int
		wantCode   string
		wantCalls  int
	}{
		{name: "new reservation 201", broker: &stubBroker{reserveStatus: []int{201}}, method: "POST", path: "/local/reservations",
			body: `{"providerClusterId":"p","chunkCount":1,"chunkType":"standard","unknown":true}`, header: map[string]string{api.HeaderReservationID: "res-a"}, wantStatus: 201, wantCalls: 1},
		{name: "replay 200 stays 200", broker: &stubBroker{reserveStatus: []int{200}}, method: "POST", path: "/local/reservations",
			body: `{"providerClusterId":"p","chunkCount":1,"chunkType":"standard"}`, header: map[string]string{api.HeaderReservationID: "res-a"}, wantStatus: 200, wantCalls: 1},
		{name: "broker 409 passed through", broker: &stubBroker{reserveErr: []error{brokerErr}}, method: "POST", path: "/local/reservations",
			body: `{"providerClusterId":"p","chunkCount":1,"chunkType":"standard"}`, wantStatus: 409, wantCode: api.CodeInsufficientCapacity, wantCalls: 1},
		{name: "412 heartbeats and retries once", broker: &stubBroker{reserveStatus: []int{0, 201},
			reserveErr: []error{&brokerclient.Error{Status: 412, Code: api.CodePreconditionFailed, Message: "send a heartbeat first"}}},
			method: "POST", path: "/local/reservations", body: `{"providerClusterId":"p","chunkCount":1,"chunkType":"standard"}`, wantStatus: 201, wantCalls: 2},
		{name: "unreachable broker 502", broker: &stubBroker{reserveErr: []error{errors.New("dial tcp: connection refused")}}, method: "POST", path: "/local/reservations",
			body: `{"providerClusterId":"p","chunkCount":1,"chunkType":"standard"}`, wantStatus: 502, wantCode: api.CodeUpstreamError, wantCalls: 1},
		{name: "bad body 400", broker: &stubBroker{}, method: "POST", path: "/local/reservations", body: `{`, wantStatus: 400, wantCode: api.CodeInvalidRequest},
		{name: "bad reservation id 400", broker: &stubBroker{}, method: "POST", path: "/local/reservations", body: `{}`,
			header: map[string]string{api.HeaderReservationID: "Not_Valid"}, wantStatus: 400, wantCode: api.CodeInvalidRequest},
		{name: "release 202 stays 202", broker: &stubBroker{releaseStatus: 202}, method: "DELETE", path: "/local/reservations/res-a", wantStatus: 202},
		{name: "release 403 passed through", broker: &stubBroker{releaseErr: &brokerclient.Error{Status: 403, Code: api.CodeForbidden, Message: "not yours"}},
			method: "DELETE", path: "/local/reservations/res-a", wantStatus: 403, wantCode: api.CodeForbidden},
		{name: "nodegroups 200", broker: &stubBroker{view: api.NodeGroupListResponse{NodeGroups: []api.NodeGroupView{{ID: "ng-p-standard"}}}}, method: "GET", path: "/local/nodegroups", wantStatus: 200},
		{name: "healthz", broker: &stubBroker{}, method: "GET", path: "/healthz", wantStatus: 200},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := newTestAgent(t, tc.broker)
			rec := do(t, a.LocalAPI(), tc.method, tc.path, tc.body, tc.header)
			if rec.Code != tc.wantStatus {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.wantStatus, rec.Body)
			}
			if tc.wantCode != "" {
				var e api.ErrorResponse
				if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Code != tc.wantCode || e.Message == "" {
					t.Fatalf("error body %s (%v), want code %s", rec.Body, err, tc.wantCode)
				}
				if tc.wantCode == api.CodeInsufficientCapacity && (e.RequestID != "rid-1" || e.Message != "no room on p" || e.Details["available"] != float64(0)) {
					t.Errorf("not passed through faithfully: %+v", e)
				}
			}
			if len(tc.broker.reserveIDs) != tc.wantCalls {
				t.Errorf("broker reserve calls %d, want %d", len(tc.broker.reserveIDs), tc.wantCalls)
			}
			if tc.wantStatus == 201 {
				id := rec.Header().Get(api.HeaderReservationID)
				if id == "" || tc.broker.reserveIDs[0] != id {
					t.Errorf("X-Reservation-Id %q, broker saw %v", id, tc.broker.reserveIDs)
				}
				for _, seen := range tc.broker.reserveIDs {
					if seen != id {
						t.Errorf("retry used another id: %v", tc.broker.reserveIDs)
					}
				}
			}
		})
	}
}

func TestLocalAPIGeneratesReservationID(t *testing.T) {
	b := &stubBroker{reserveStatus: []int{201}}
	a := newTestAgent(t, b)
	rec := do(t, a.LocalAPI(), "POST", "/local/reservations", `{"providerClusterId":"p","chunkCount":1,"chunkType":"standard"}`, nil)
	if rec.Code != 201 || !strings.HasPrefix(rec.Header().Get(api.HeaderReservationID), "res-") {
		t.Fatalf("%d %q", rec.Code, rec.Header().Get(api.HeaderReservationID))
	}
}

func TestLocalAPIListsVirtualNodes(t *testing.T) {
	now := metav1.Now()
	v := &fav1alpha1.VirtualNodeState{
		ObjectMeta: metav1.ObjectMeta{Name: "vns-res-b", Namespace: "fa"},
		Spec:       fav1alpha1.VirtualNodeStateSpec{ProviderClusterID: "p", ProviderLiqoClusterID: "lp", NodeGroupID: "ng-p-standard", ReservationID: "res-b"},
		Status:     fav1alpha1.VirtualNodeStateStatus{Phase: fav1alpha1.VirtualNodeRunning, VirtualNodeName: "rs-res-b", ProviderID: "liqo://p/res-b", LastTransitionTime: &now},
	}
	other := v.DeepCopy()
	other.Name, other.Namespace = "vns-x", "elsewhere"
	a := newTestAgent(t, &stubBroker{}, v, other)
	rec := do(t, a.LocalAPI(), "GET", "/local/virtual-nodes", "", nil)
	var out localapi.VirtualNodeList
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || rec.Code != 200 {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	if len(out.VirtualNodes) != 1 {
		t.Fatalf("got %+v, want only the agent namespace's", out.VirtualNodes)
	}
	got := out.VirtualNodes[0]
	if got.Name != "rs-res-b" || got.ProviderID != "liqo://p/res-b" || got.Phase != localapi.PhaseRunning || got.NodeGroupID != "ng-p-standard" {
		t.Errorf("view %+v", got)
	}
}

func TestLatencyRemaskKeepsLowestRTT(t *testing.T) {
	r, err := probe.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = r.Serve(ctx) }()
	silent, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	view := api.NodeGroupListResponse{LatencyShortlist: true, NodeGroups: []api.NodeGroupView{
		{ID: "ng-near-standard", ProviderClusterID: "near", MaxSize: 4, CurrentReserved: 1, ProbeEndpoint: r.Addr().String()},
		{ID: "ng-mute-standard", ProviderClusterID: "mute", MaxSize: 4, CurrentReserved: 0, ProbeEndpoint: silent.LocalAddr().String()},
		{ID: "ng-noprobe-standard", ProviderClusterID: "noprobe", MaxSize: 2, CurrentReserved: 0},
	}}
	a := newTestAgent(t, &stubBroker{view: view})
	rec := do(t, a.LocalAPI(), "GET", "/local/nodegroups", "", nil)
	var out api.NodeGroupListResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	want := map[string]int32{"near": 4, "mute": 0, "noprobe": 0}
	for _, g := range out.NodeGroups {
		if g.MaxSize != want[g.ProviderClusterID] {
			t.Errorf("%s maxSize %d, want %d", g.ProviderClusterID, g.MaxSize, want[g.ProviderClusterID])
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.chosen != "near" || len(a.rtts) != 1 {
		t.Errorf("chosen %q rtts %v", a.chosen, a.rtts)
	}
}
