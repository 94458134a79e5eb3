package consumer

import (
	"context"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fav1alpha1 "github.com/federation-autoscaler/federation-autoscaler/agent/apis/v1alpha1"
	"github.com/federation-autoscaler/federation-autoscaler/agent/brokerclient"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

func TestHeartbeatCarriesPolicyAndReservations(t *testing.T) {
	pol := func(ns, name string, p fav1alpha1.Placement) *fav1alpha1.ConsumerPolicy {
		return &fav1alpha1.ConsumerPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: fav1alpha1.ConsumerPolicySpec{Placement: p}}
	}
	vns := func(res string) *fav1alpha1.VirtualNodeState {
		return &fav1alpha1.VirtualNodeState{ObjectMeta: metav1.ObjectMeta{Name: "vns-" + res, Namespace: "fa"}, Spec: fav1alpha1.VirtualNodeStateSpec{ReservationID: res}}
	}
	a := newTestAgent(t, &stubBroker{},
		pol("fa", "zeta", fav1alpha1.Placement{Type: fav1alpha1.PlacementPrice}),
		pol("fa", "beta", fav1alpha1.Placement{Type: fav1alpha1.PlacementWeighted, Weights: &fav1alpha1.PlacementWeights{Price: 1, Carbon: 2}}),
		pol("elsewhere", "aaa", fav1alpha1.Placement{Type: fav1alpha1.PlacementEco}), // another namespace: ignored
		vns("res-b"), vns("res-a"))
	req, err := a.heartbeatRequest(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if req.ClusterID != "consumer-1" || req.LiqoClusterID != "consumer-1" {
		t.Errorf("ids %q %q", req.ClusterID, req.LiqoClusterID)
	}
	// The lowest name in the agent's namespace wins, weights included.
	if req.Placement == nil || req.Placement.Type != api.PlacementWeighted || req.Placement.Weights == nil || req.Placement.Weights.Carbon != 2 || req.Placement.Weights.Price != 1 {
		t.Fatalf("placement %+v, want beta's Weighted policy", req.Placement)
	}
	if len(req.Reservations) != 2 || req.Reservations[0] != "res-a" || req.Reservations[1] != "res-b" {
		t.Errorf("reservations %v, want the held ids sorted", req.Reservations)
	}
	if !equalHeartbeat(req, req) {
		t.Error("a heartbeat differs from itself")
	}
	changed := req
	changed.Reservations = []string{"res-a"}
	if equalHeartbeat(req, changed) {
		t.Error("a released chunk does not change the heartbeat")
	}
}

func TestResyncRemovesOrphansAndReportsMissing(t *testing.T) {
	b := &stubBroker{reserveStatus: []int{201}, phases: map[string]api.Phase{"res-live": api.PhasePeered}}
	orphan := &fav1alpha1.VirtualNodeState{ObjectMeta: metav1.ObjectMeta{Name: "vns-res-gone", Namespace: "fa"},
		Spec: fav1alpha1.VirtualNodeStateSpec{ReservationID: "res-gone", ProviderLiqoClusterID: "liqo-p"}}
	live := &fav1alpha1.VirtualNodeState{ObjectMeta: metav1.ObjectMeta{Name: "vns-res-live", Namespace: "fa"},
		Spec: fav1alpha1.VirtualNodeStateSpec{ReservationID: "res-live", ProviderLiqoClusterID: "liqo-p"}}
	a := newTestAgent(t, b, orphan, live)
	// A reservation made through the local API whose chunk vanished locally.
	if rec := do(t, a.LocalAPI(), "POST", "/local/reservations", `{"providerClusterId":"p","chunkCount":1,"chunkType":"standard"}`,
		map[string]string{api.HeaderReservationID: "res-lost"}); rec.Code != 201 {
		t.Fatalf("reserve %d", rec.Code)
	}
	b.mu.Lock()
	b.phases["res-lost"] = api.PhasePeered
	b.mu.Unlock()
	ctx := context.Background()
	if err := a.Resync(ctx); err != nil {
		t.Fatal(err)
	}
	var got fav1alpha1.VirtualNodeStateList
	if err := a.cfg.Client.List(ctx, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Items) != 1 || got.Items[0].Name != "vns-res-live" {
		t.Fatalf("after resync: %v, want only vns-res-live", got.Items)
	}
	if n := a.MissingReports(); n != 1 {
		t.Errorf("missing reports %d, want 1 (res-lost)", n)
	}
	// Once the broker has released it, it is no longer reported.
	b.mu.Lock()
	b.phases["res-lost"] = api.PhaseReleased
	b.mu.Unlock()
	if err := a.Resync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Resync(ctx); err != nil {
		t.Fatal(err)
	}
	if n := a.MissingReports(); n != 1 {
		t.Errorf("missing reports %d after release, want still 1", n)
	}
}

// TestHeartbeatWithoutARefusedPolicy: a ConsumerPolicy whose weights the
// broker refuses (one written before the CRD had its bounds) does not stop
// the heartbeats that renew the leases: they carry no placement, and the
// heartbeat passes the broker's own validation.
func TestHeartbeatWithoutARefusedPolicy(t *testing.T) {
	for _, w := range []float64{1e308, 1001, -1} {
		pol := &fav1alpha1.ConsumerPolicy{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "fa"},
			Spec: fav1alpha1.ConsumerPolicySpec{Placement: fav1alpha1.Placement{Type: fav1alpha1.PlacementWeighted, Weights: &fav1alpha1.PlacementWeights{Price: w}}}}
		a := newTestAgent(t, &stubBroker{}, pol)
		req, err := a.heartbeatRequest(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if req.Placement != nil {
			t.Errorf("weight %v: placement %+v sent, want none", w, req.Placement)
		}
		if err := req.Validate(); err != nil {
			t.Errorf("weight %v: the heartbeat is refused by the broker: %v", w, err)
		}
		if !strings.Contains(a.policyErr, "placement.weights.price") {
			t.Errorf("weight %v: recorded reason %q, want the field", w, a.policyErr)
		}
	}
}

// TestHeartbeatCarriesLifecycleAndLostNodes: the ConsumerPolicy's
// disconnect grace goes into the heartbeat (one the broker would refuse is
// left out, so the leases still renew), and so do the reservations whose
// virtual node was lost: Failed, or Running with Ready False; one still
// coming up is not lost.
func TestHeartbeatCarriesLifecycleAndLostNodes(t *testing.T) {
	vns := func(res string, phase fav1alpha1.VirtualNodeStatePhase, ready metav1.ConditionStatus) *fav1alpha1.VirtualNodeState {
		v := &fav1alpha1.VirtualNodeState{ObjectMeta: metav1.ObjectMeta{Name: "vns-" + res, Namespace: "fa"}, Spec: fav1alpha1.VirtualNodeStateSpec{ReservationID: res}}
		v.Status.Phase = phase
		if ready != "" {
			v.Status.Conditions = []metav1.Condition{{Type: fav1alpha1.VirtualNodeConditionReady, Status: ready, Reason: string(phase), LastTransitionTime: metav1.Now()}}
		}
		return v
	}
	grace := func(s int32) *int32 { return &s }
	for _, tc := range []struct {
		name  string
		grace *int32
		want  *int32
	}{
		{"unset: the broker's", nil, nil},
		{"zero", grace(0), grace(0)},
		{"ten minutes", grace(600), grace(600)},
		{"beyond the broker's limit: left out", grace(api.MaxDisconnectGraceSeconds + 1), nil},
		{"negative: left out", grace(-1), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pol := &fav1alpha1.ConsumerPolicy{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "fa"},
				Spec: fav1alpha1.ConsumerPolicySpec{Lifecycle: &fav1alpha1.Lifecycle{DisconnectGraceSeconds: tc.grace}}}
			a := newTestAgent(t, &stubBroker{}, pol,
				vns("res-ready", fav1alpha1.VirtualNodeRunning, metav1.ConditionTrue),
				vns("res-notready", fav1alpha1.VirtualNodeRunning, metav1.ConditionFalse),
				vns("res-failed", fav1alpha1.VirtualNodeFailed, metav1.ConditionFalse),
				vns("res-creating", fav1alpha1.VirtualNodeCreating, metav1.ConditionFalse),
				vns("res-new", "", ""))
			req, err := a.heartbeatRequest(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			var got *int32
			if req.Lifecycle != nil {
				got = req.Lifecycle.DisconnectGraceSeconds
			}
			if (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want {
				t.Errorf("disconnectGraceSeconds %v, want %v", show(got), show(tc.want))
			}
			if want := []string{"res-failed", "res-notready"}; !slices.Equal(req.NotReadyReservations, want) {
				t.Errorf("notReadyReservations %v, want %v", req.NotReadyReservations, want)
			}
			if err := req.Validate(); err != nil {
				t.Errorf("the broker refuses the heartbeat: %v", err)
			}
			changed := req
			changed.NotReadyReservations = nil
			if equalHeartbeat(req, changed) {
				t.Error("a lost virtual node does not change the heartbeat")
			}
			changed = req
			changed.Lifecycle = &api.Lifecycle{DisconnectGraceSeconds: grace(7)}
			if equalHeartbeat(req, changed) {
				t.Error("another grace does not change the heartbeat")
			}
		})
	}
}

func show(p *int32) string {
	if p == nil {
		return "nil"
	}
	return strconv.Itoa(int(*p))
}

// TestHeartbeatCarriesThresholds: the ConsumerPolicy's re-evaluation
// thresholds go into the heartbeat as they are; a value the broker would
// refuse leaves the lifecycle out and is noted.
func TestHeartbeatCarriesThresholds(t *testing.T) {
	v := func(x float64) *float64 { return &x }
	for _, tc := range []struct {
		name string
		th   *fav1alpha1.Thresholds
		sent bool
	}{
		{"cost and RTT", &fav1alpha1.Thresholds{CostPerHour: v(0.02), RTTMillis: v(5)}, true},
		{"negative carbon", &fav1alpha1.Thresholds{CarbonPerHour: v(-1)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pol := &fav1alpha1.ConsumerPolicy{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "fa"},
				Spec: fav1alpha1.ConsumerPolicySpec{Lifecycle: &fav1alpha1.Lifecycle{Thresholds: tc.th}}}
			a := newTestAgent(t, &stubBroker{}, pol)
			req, err := a.heartbeatRequest(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if !tc.sent {
				if req.Lifecycle != nil || !strings.Contains(a.policyErr, "lifecycle.thresholds.carbonPerHour") {
					t.Fatalf("lifecycle %+v sent, reason %q; want none sent and the field named", req.Lifecycle, a.policyErr)
				}
				return
			}
			got := req.Lifecycle.Thresholds
			if got == nil || *got.CostPerHour != 0.02 || *got.RTTMillis != 5 || got.CarbonPerHour != nil {
				t.Fatalf("thresholds %+v, want cost 0.02, RTT 5, carbon unset", got)
			}
		})
	}
}

// TestReconcileReportsVirtualNodes: a Reconcile is answered with every
// local VirtualNodeState, as the broker's new leader needs it.
func TestReconcileReportsVirtualNodes(t *testing.T) {
	running := &fav1alpha1.VirtualNodeState{ObjectMeta: metav1.ObjectMeta{Name: "vns-r1", Namespace: "fa"},
		Spec:   fav1alpha1.VirtualNodeStateSpec{ReservationID: "r1", NodeGroupID: "p-standard", ResourceSliceName: "rs-r1", ProviderLiqoClusterID: "liqo-p"},
		Status: fav1alpha1.VirtualNodeStateStatus{Phase: fav1alpha1.VirtualNodeRunning, VirtualNodeName: "rs-r1"}}
	creating := &fav1alpha1.VirtualNodeState{ObjectMeta: metav1.ObjectMeta{Name: "vns-r2", Namespace: "fa"},
		Spec:   fav1alpha1.VirtualNodeStateSpec{ReservationID: "r2", NodeGroupID: "p-standard", ProviderLiqoClusterID: "liqo-p"},
		Status: fav1alpha1.VirtualNodeStateStatus{Phase: fav1alpha1.VirtualNodeCreating}}
	a := newTestAgent(t, &stubBroker{}, running, creating)
	p, err := a.handleReconcile(context.Background(), api.InstructionView{ID: "reconcile.consumer-1", Kind: api.KindReconcile})
	if err != nil {
		t.Fatal(err)
	}
	want := []api.VirtualNodeStateReport{
		{ReservationID: "r1", NodeGroupID: "p-standard", ResourceSliceName: "rs-r1", VirtualNodeName: "rs-r1", Phase: api.VirtualNodeRunning},
		{ReservationID: "r2", NodeGroupID: "p-standard", Phase: "Creating"},
	}
	if p == nil || p.Kind != api.PayloadReconcile || !reflect.DeepEqual(p.VirtualNodeStates, want) {
		t.Errorf("payload %+v, want %s with %+v", p, api.PayloadReconcile, want)
	}
	if err := (&api.InstructionResultRequest{Status: api.ResultSucceeded, Payload: p}).Validate(); err != nil {
		t.Errorf("the broker would refuse the answer: %v", err)
	}
}

// TestHeartbeatCarriesBudget: the ConsumerPolicy's budget goes into the
// heartbeat as it is; one the broker would refuse (a policy written before
// the CRD had its bounds) is left out and the field named; a change of the
// budget changes the heartbeat.
func TestHeartbeatCarriesBudget(t *testing.T) {
	q := func(s string) *resource.Quantity { v := resource.MustParse(s); return &v }
	w := func(v int32) *int32 { return &v }
	for _, tc := range []struct {
		name   string
		budget *fav1alpha1.Budget
		want   *api.Budget
		reason string
	}{
		{"none", nil, nil, ""},
		{"only a warning: no budget", &fav1alpha1.Budget{WarnAtPercent: w(90)}, nil, ""},
		{"per hour and month", &fav1alpha1.Budget{PerHour: q("2.50"), PerMonth: q("1500"), WarnAtPercent: w(90)},
			&api.Budget{PerHour: q("2.50"), PerMonth: q("1500"), WarnAtPercent: w(90)}, ""},
		{"negative: left out", &fav1alpha1.Budget{PerHour: q("-1")}, nil, "budget.perHour"},
		{"warning at 0: left out", &fav1alpha1.Budget{PerMonth: q("10"), WarnAtPercent: w(0)}, nil, "budget.warnAtPercent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pol := &fav1alpha1.ConsumerPolicy{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "fa"},
				Spec: fav1alpha1.ConsumerPolicySpec{Budget: tc.budget}}
			a := newTestAgent(t, &stubBroker{}, pol)
			req, err := a.heartbeatRequest(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if !equality.Semantic.DeepEqual(req.Budget, tc.want) {
				t.Fatalf("budget %+v, want %+v", req.Budget, tc.want)
			}
			if tc.reason != "" && !strings.Contains(a.policyErr, tc.reason) || tc.reason == "" && a.policyErr != "" {
				t.Fatalf("policy error %q, want one naming %q", a.policyErr, tc.reason)
			}
			if err := req.Validate(); err != nil {
				t.Errorf("the broker refuses the heartbeat: %v", err)
			}
			changed := req
			changed.Budget = &api.Budget{PerHour: q("99")}
			if equalHeartbeat(req, changed) {
				t.Error("another budget does not change the heartbeat")
			}
		})
	}
}

// TestBudgetRefusalNoted: a reservation the broker refuses for the budget
// is passed through to the adapter as the broker's 409 BudgetExceeded and
// its reason kept for the console; other refusals are not kept.
func TestBudgetRefusalNoted(t *testing.T) {
	reason := `budget reached: consumer "consumer-1" spends 2 per hour now`
	b := &stubBroker{reserveErr: []error{
		&brokerclient.Error{Status: 409, Code: api.CodeInsufficientCapacity, Message: "no free chunk"},
		&brokerclient.Error{Status: 409, Code: api.CodeBudgetExceeded, Message: reason},
	}}
	a := newTestAgent(t, b)
	req := api.ReservationRequest{ProviderClusterID: "p1", ChunkCount: 1, ChunkType: api.ChunkStandard}
	if _, _, err := a.Reserve(context.Background(), "res-1", req); err == nil {
		t.Fatal("the first reserve succeeded")
	}
	if msg, _ := a.LastBudgetRefusal(); msg != "" {
		t.Fatalf("a capacity refusal kept as a budget refusal: %q", msg)
	}
	rec := do(t, a.LocalAPI(), "POST", "/local/reservations", `{"providerClusterId":"p1","chunkCount":1,"chunkType":"standard"}`, nil)
	if rec.Code != 409 || !strings.Contains(rec.Body.String(), api.CodeBudgetExceeded) || !strings.Contains(rec.Body.String(), "budget reached") {
		t.Fatalf("local API answered %d %s, want the broker's 409 BudgetExceeded", rec.Code, rec.Body.String())
	}
	if msg, at := a.LastBudgetRefusal(); msg != reason || at.IsZero() {
		t.Fatalf("last refusal %q at %v, want %q", msg, at, reason)
	}
}
