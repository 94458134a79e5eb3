package console

import (
	"strings"
	"time"

	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/federation-autoscaler/federation-autoscaler/adapter/localapi"
	fav1alpha1 "github.com/federation-autoscaler/federation-autoscaler/agent/apis/v1alpha1"
	"github.com/federation-autoscaler/federation-autoscaler/agent/brokerclient"
	"github.com/federation-autoscaler/federation-autoscaler/agent/choice"
	"github.com/federation-autoscaler/federation-autoscaler/agent/consumer"
	"github.com/federation-autoscaler/federation-autoscaler/agent/provider"
	"github.com/federation-autoscaler/federation-autoscaler/internal/signal"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/web"
)

type providerAgent struct {
	store   *provider.Store
	req     *api.AdvertisementRequest
	resp    api.AdvertisementResponse
	view    *api.AdvertisementSnapshot
	viewErr string
	sig     signal.Signal
}

func (p *providerAgent) Subscribe(ctx context.Context) <-chan struct{} { return p.sig.Subscribe(ctx) }

func (p *providerAgent) BrokerView() (*api.AdvertisementSnapshot, string) { return p.view, p.viewErr }

func (p *providerAgent) Sharing() *provider.Store { return p.store }
func (p *providerAgent) LastAdvertisement() (*api.AdvertisementRequest, api.AdvertisementResponse) {
	return p.req, p.resp
}

func TestProviderSharingRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sharing.yaml")
	if err := os.WriteFile(path, []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	store, err := provider.NewStore(provider.Sources{SharingFile: path}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	p := &Provider{ClusterID: "paris", Agent: &providerAgent{store: store}}
	in := web.SharingConfig{
		UnitPrices:           corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0.05")},
		CapacityScalePercent: map[string]int32{"cpu": 50},
		CapacityFixed:        corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("8Gi")},
		Renewable:            true,
		Sharing:              api.Sharing{DeniedConsumers: []string{"london"}, MaxChunksPerConsumer: 2},
	}
	if err := p.ApplySharing(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	c := store.Config()
	if c.Allows("london") || c.MaxChunksPerConsumer != 2 || !c.Renewable || *c.Capacity["cpu"].Percent != 50 || c.Capacity["memory"].Fixed.String() != "8Gi" {
		t.Fatalf("store holds %+v", c)
	}
	out, err := p.SharingConfig(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if out.CapacityScalePercent["cpu"] != 50 || out.CapacityFixed.Memory().String() != "8Gi" || out.UnitPrices.Cpu().String() != "50m" || out.Sharing.DeniedConsumers[0] != "london" {
		t.Errorf("SharingConfig = %+v", out)
	}
	// A bad configuration is refused and the one in force stays.
	bad := in
	bad.CapacityScalePercent = map[string]int32{"cpu": 150}
	if err := p.ApplySharing(context.Background(), bad); err == nil {
		t.Error("a 150 % cap was accepted")
	}
	st, _ := p.Status(context.Background())
	if st.BrokerError == "" {
		t.Error("no advertisement yet, but no notice")
	}
}

// consumerAgent is the consumer agent as the console reads it in process:
// policies from the fake client, the node groups and virtual nodes it
// holds, and the reservations it was asked for.
type consumerAgent struct {
	cl       client.Client
	groups   []api.NodeGroupView
	vns      []localapi.VirtualNode
	reserved []api.ReservationRequest
	loc      *consumer.Location
	locSet   bool
	err      error // Reserve's answer
	sig      signal.Signal
	intent   string
	log      []choice.Decision
	refusal  string
	refused  time.Time
	rtts     map[string]float64
}

func (a *consumerAgent) MeasuredLatencies() map[string]float64 { return a.rtts }

func (a *consumerAgent) Intent() string               { return a.intent }
func (a *consumerAgent) Decisions() []choice.Decision { return a.log }
func (a *consumerAgent) Moves() consumer.Moves        { return consumer.Moves{} }
func (a *consumerAgent) LastBudgetRefusal() (string, time.Time) {
	return a.refusal, a.refused
}

func (a *consumerAgent) Policy(ctx context.Context) (*api.Placement, error) {
	if a.cl == nil {
		return nil, nil
	}
	var list fav1alpha1.ConsumerPolicyList
	if err := a.cl.List(ctx, &list); err != nil || len(list.Items) == 0 {
		return nil, err
	}
	return &api.Placement{Type: api.PlacementType(list.Items[0].Spec.Placement.Type)}, nil
}
func (*consumerAgent) BeatNow()                                        {}
func (*consumerAgent) LastHeartbeat() time.Time                        { return time.Time{} }
func (a *consumerAgent) Location() (*consumer.Location, bool)          { return a.loc, a.locSet }
func (a *consumerAgent) Subscribe(ctx context.Context) <-chan struct{} { return a.sig.Subscribe(ctx) }
func (a *consumerAgent) NodeGroups(context.Context) (api.NodeGroupListResponse, error) {
	return api.NodeGroupListResponse{NodeGroups: a.groups}, nil
}
func (a *consumerAgent) VirtualNodes(context.Context) ([]localapi.VirtualNode, error) {
	return a.vns, nil
}
func (a *consumerAgent) Reserve(_ context.Context, _ string, r api.ReservationRequest) (api.ReservationResponse, int, error) {
	if a.err != nil {
		return api.ReservationResponse{}, 0, a.err
	}
	a.reserved = append(a.reserved, r)
	return api.ReservationResponse{}, 201, nil
}
func (*consumerAgent) Release(context.Context, string) (api.ReleaseResponse, int, error) {
	return api.ReleaseResponse{}, 202, nil
}

type broker struct{ all []api.NodeGroupView }

func (b broker) Reservation(_ context.Context, id string) (api.ReservationResponse, error) {
	if id == "gone" {
		return api.ReservationResponse{}, errors.New("not found")
	}
	return api.ReservationResponse{ReservationID: id, Status: api.PhasePeered, ProviderClusterID: "sydney", ChunkCount: 1}, nil
}
func (b broker) AllNodeGroups(context.Context) (api.NodeGroupListResponse, error) {
	return api.NodeGroupListResponse{NodeGroups: b.all}, nil
}
func (b broker) Explanation(context.Context) (api.PlacementExplanation, error) {
	return api.PlacementExplanation{ConsumerClusterID: "london", ChunkTypes: []api.ChunkTypeExplanation{{ChunkType: api.ChunkStandard, Winners: []string{"sydney"}}}}, nil
}

func TestConsumer(t *testing.T) {
	sch := runtime.NewScheme()
	if err := fav1alpha1.AddToScheme(sch); err != nil {
		t.Fatal(err)
	}
	cl := fake.NewClientBuilder().WithScheme(sch).Build()
	ctx := context.Background()
	// A growable GPU group listed first: the console names the standard
	// one, as the broker's overview does.
	masked := []api.NodeGroupView{
		{ID: "ng-milan-gpu", ProviderClusterID: "milan", Type: api.ChunkGPU, MaxSize: 2},
		{ID: "ng-paris-standard", ProviderClusterID: "paris", Type: api.ChunkStandard, MaxSize: 0},
		{ID: "ng-sydney-standard", ProviderClusterID: "sydney", Type: api.ChunkStandard, MaxSize: 4, CurrentReserved: 1},
	}
	all := append(masked, api.NodeGroupView{ID: "ng-montreal-standard", ProviderClusterID: "montreal", Type: api.ChunkStandard, MaxSize: 4})
	l := &consumerAgent{cl: cl, groups: masked, vns: []localapi.VirtualNode{{Name: "vn-1", ReservationID: "r1", ProviderClusterID: "sydney", Phase: localapi.PhaseRunning}},
		rtts: map[string]float64{"sydney": 120.5, "paris": 4.2}}
	c := &Consumer{ClusterID: "london", Namespace: "fa", Agent: l, Broker: broker{all: all}, Client: cl}

	// SetPolicy creates the policy, then updates the one in force.
	for _, p := range []api.PlacementType{api.PlacementPrice, api.PlacementEco} {
		if err := c.SetPolicy(ctx, api.Placement{Type: p}); err != nil {
			t.Fatal(err)
		}
		var cp fav1alpha1.ConsumerPolicy
		if err := cl.Get(ctx, client.ObjectKey{Namespace: "fa", Name: PolicyName}, &cp); err != nil {
			t.Fatal(err)
		}
		if string(cp.Spec.Placement.Type) != string(p) {
			t.Fatalf("policy %s, want %s", cp.Spec.Placement.Type, p)
		}
	}
	// An older policy with a lower name is the one the agent reads: updated.
	if err := cl.Create(ctx, &fav1alpha1.ConsumerPolicy{ObjectMeta: metav1.ObjectMeta{Name: "aaa", Namespace: "fa"}}); err != nil {
		t.Fatal(err)
	}
	if err := c.SetPolicy(ctx, api.Placement{Type: api.PlacementLatency}); err != nil {
		t.Fatal(err)
	}
	var cp fav1alpha1.ConsumerPolicy
	_ = cl.Get(ctx, client.ObjectKey{Namespace: "fa", Name: "aaa"}, &cp)
	if cp.Spec.Placement.Type != fav1alpha1.PlacementStrategy(api.PlacementLatency) {
		t.Errorf("the lowest-named policy holds %q", cp.Spec.Placement.Type)
	}
	// The form carries no Latency shortlist size: the operator's is kept.
	five := int32(5)
	cp.Spec.Placement.LatencyCandidates = &five
	if err := cl.Update(ctx, &cp); err != nil {
		t.Fatal(err)
	}
	if err := c.SetPolicy(ctx, api.Placement{Type: api.PlacementLatency}); err != nil {
		t.Fatal(err)
	}
	_ = cl.Get(ctx, client.ObjectKey{Namespace: "fa", Name: "aaa"}, &cp)
	if n := cp.Spec.Placement.LatencyCandidates; n == nil || *n != 5 {
		t.Errorf("a policy change from the console dropped the shortlist size: %v, want 5", n)
	}

	id, err := c.CreateReservation(ctx, web.ReservationSpec{ProviderClusterID: "montreal"})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.reserved) != 1 || l.reserved[0].NodeGroupID != "ng-montreal-standard" || l.reserved[0].ChunkCount != 1 {
		t.Fatalf("reserved %+v", l.reserved)
	}
	st, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.ChosenProvider != "sydney" {
		t.Errorf("chosen %q, want sydney (the growable standard group of the masked view, not milan's GPU group)", st.ChosenProvider)
	}
	// The RTTs are the agent's, the ones its heartbeats report, and Used
	// follows the masked view the Cluster Autoscaler sees.
	if len(st.RTTs) != 2 || st.RTTs["sydney"] != 120.5 || st.RTTs["paris"] != 4.2 {
		t.Errorf("RTTs %v, want the agent's measured ones", st.RTTs)
	}
	if len(st.MaskedNodeGroups) != len(masked) {
		t.Errorf("masked view %+v, want the agent's %d groups", st.MaskedNodeGroups, len(masked))
	}
	if st.Explanation == nil || st.Explanation.ChunkTypes[0].Winners[0] != "sydney" {
		t.Errorf("explanation %+v, want the broker's (sydney wins)", st.Explanation)
	}
	if len(st.NodeGroups) != 4 {
		t.Errorf("%d node groups, want every group (4)", len(st.NodeGroups))
	}
	if len(st.VirtualNodes) != 1 || st.VirtualNodes[0].State != "Ready" {
		t.Errorf("virtual nodes %+v", st.VirtualNodes)
	}
	manual := 0
	for _, r := range st.Reservations {
		if r.Manual {
			manual++
			if r.ID != id {
				t.Errorf("manual reservation %s, want %s", r.ID, id)
			}
		}
	}
	if len(st.Reservations) != 2 || manual != 1 {
		t.Errorf("reservations %+v", st.Reservations)
	}
	if _, err := c.CreateReservation(ctx, web.ReservationSpec{}); err == nil {
		t.Error("a reservation without a provider was accepted")
	}

	// The intent goes into the policy in force, beside its placement; a
	// bad one is refused before anything is written.
	if err := c.SetIntent(ctx, "the greenest, please"); err != nil {
		t.Fatal(err)
	}
	_ = cl.Get(ctx, client.ObjectKey{Namespace: "fa", Name: "aaa"}, &cp)
	if cp.Spec.Intent != "the greenest, please" || cp.Spec.Placement.Type != fav1alpha1.PlacementStrategy(api.PlacementLatency) {
		t.Errorf("policy after SetIntent = %+v", cp.Spec)
	}
	if err := c.SetIntent(ctx, strings.Repeat("x", choice.MaxIntentLength+1)); !errors.Is(err, web.ErrInvalid) {
		t.Errorf("a 1001-byte intent: %v, want ErrInvalid", err)
	}
	// The Choice audit log reaches the console, the picks and rejections
	// spelled out.
	l.intent = "the greenest, please"
	l.log = []choice.Decision{{Fallback: true, Why: "no model endpoint is configured",
		Picks: []choice.Pick{{Type: api.ChunkStandard, Provider: "sydney"}}, Rejected: []choice.Rejection{{Entry: "x", Reason: choice.RejectUnknown}}}}
	st, err = c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Intent != l.intent || len(st.Decisions) != 1 || !st.Decisions[0].Fallback || st.Decisions[0].Picks[0].Provider != "sydney" ||
		st.Decisions[0].Rejected[0] != "x: not in the broker's list" {
		t.Errorf("status intent %q decisions %+v", st.Intent, st.Decisions)
	}
}

// The provider console shows the broker's view: when it last accepted an
// advertisement, the chunks per type with reserved and free, and the loans.
func TestProviderStatusFromBrokerView(t *testing.T) {
	seen := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	active := metav1.NewTime(seen.Add(-time.Minute))
	cost := 0.056
	agent := &providerAgent{
		req:  &api.AdvertisementRequest{ClusterID: "paris"},
		resp: api.AdvertisementResponse{Accepted: true, ChunkCounts: map[api.ChunkType]int32{api.ChunkStandard: 4}},
	}
	p := &Provider{ClusterID: "paris", Agent: agent}
	st, err := p.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// Before the first read of the view: the advertisement's totals.
	if st.Chunks[api.ChunkStandard].TotalChunks != 4 || len(st.Loans) != 0 || !st.LastAdvertised.IsZero() {
		t.Errorf("before a view: %+v", st)
	}
	agent.view = &api.AdvertisementSnapshot{
		ClusterID: "paris", LastSeen: metav1.NewTime(seen),
		Chunks: map[api.ChunkType]api.ChunkCounts{api.ChunkStandard: {TotalChunks: 4, ReservedChunks: 2, AvailableChunks: 2}},
		Loans: []api.ProviderLoan{
			{ReservationID: "r1", ConsumerClusterID: "london", ChunkType: api.ChunkStandard, ChunkCount: 2, Status: api.PhasePeered,
				CreatedAt: metav1.NewTime(seen.Add(-2 * time.Minute)), ActivatedAt: &active, CostPerHour: &cost},
			{ReservationID: "r2", ConsumerClusterID: "rome", ChunkType: api.ChunkStandard, ChunkCount: 1, Status: api.PhasePending,
				CreatedAt: metav1.NewTime(seen)},
		},
	}
	agent.viewErr = "broker unreachable: connection refused"
	st, err = p.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !st.LastAdvertised.Equal(seen) || st.BrokerError != agent.viewErr {
		t.Errorf("last advertised %v, error %q", st.LastAdvertised, st.BrokerError)
	}
	if got := st.Chunks[api.ChunkStandard]; got != (api.ChunkCounts{TotalChunks: 4, ReservedChunks: 2, AvailableChunks: 2}) {
		t.Errorf("chunks = %+v", got)
	}
	want := []web.Loan{
		{ReservationID: "r1", ConsumerClusterID: "london", ChunkType: api.ChunkStandard, ChunkCount: 2, Phase: api.PhasePeered, Since: active.Time, CostPerHour: &cost},
		{ReservationID: "r2", ConsumerClusterID: "rome", ChunkType: api.ChunkStandard, ChunkCount: 1, Phase: api.PhasePending, Since: seen},
	}
	if len(st.Loans) != len(want) {
		t.Fatalf("loans = %+v", st.Loans)
	}
	for i, w := range want {
		g := st.Loans[i]
		if g.ReservationID != w.ReservationID || g.ConsumerClusterID != w.ConsumerClusterID || g.ChunkCount != w.ChunkCount ||
			g.Phase != w.Phase || !g.Since.Equal(w.Since) || (g.CostPerHour == nil) != (w.CostPerHour == nil) {
			t.Errorf("loan %d = %+v, want %+v", i, g, w)
		}
	}
}

// phaseBroker answers reservations with a settable phase and counts reads.
type phaseBroker struct {
	broker
	mu    sync.Mutex
	phase map[string]api.Phase
	reads map[string]int
}

func (b *phaseBroker) Reservation(_ context.Context, id string) (api.ReservationResponse, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reads[id]++
	return api.ReservationResponse{ReservationID: id, Status: b.phase[id], ProviderClusterID: "paris", ChunkCount: 1}, nil
}

func (b *phaseBroker) set(id string, p api.Phase) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.phase[id] = p
}

func (b *phaseBroker) readsOf(id string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.reads[id]
}

// The console's manual reservations do not grow for ever: an ended one is
// read from the broker once, shown from memory for ManualRetention, then
// dropped.
func TestManualReservationsEndAndAreDropped(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	b := &phaseBroker{phase: map[string]api.Phase{}, reads: map[string]int{}}
	c := &Consumer{ClusterID: "london", Agent: &consumerAgent{cl: fake.NewClientBuilder().Build()}, Broker: b, Now: func() time.Time { return now }}
	ctx := context.Background()
	id, err := c.CreateReservation(ctx, web.ReservationSpec{ProviderClusterID: "paris", ChunkCount: 1})
	if err != nil {
		t.Fatal(err)
	}
	manualIDs := func() []string {
		t.Helper()
		rs := c.reservations(ctx, nil)
		var out []string
		for _, r := range rs {
			if r.Manual {
				out = append(out, r.ID+"="+string(r.Phase))
			}
		}
		return out
	}
	b.set(id, api.PhasePeered)
	if got := manualIDs(); len(got) != 1 || got[0] != id+"=Peered" {
		t.Fatalf("live: %v", got)
	}
	b.set(id, api.PhaseReleased)
	if got := manualIDs(); len(got) != 1 || got[0] != id+"=Released" {
		t.Fatalf("ended: %v", got)
	}
	reads := b.readsOf(id)
	now = now.Add(ManualRetention - time.Second)
	if got := manualIDs(); len(got) != 1 || got[0] != id+"=Released" {
		t.Fatalf("within the retention: %v", got)
	}
	if b.readsOf(id) != reads {
		t.Errorf("an ended reservation was read again from the broker (%d reads, want %d)", b.readsOf(id), reads)
	}
	now = now.Add(time.Second)
	if got := manualIDs(); len(got) != 0 {
		t.Fatalf("after the retention: %v, want none", got)
	}
	c.mu.Lock()
	left := len(c.manual)
	c.mu.Unlock()
	if left != 0 {
		t.Errorf("%d manual reservations still tracked", left)
	}
}

// A refused manual reservation is explained in plain words, without ids or
// status codes, and keeps its class for the console's status.
func TestReserveRefusalInPlainWords(t *testing.T) {
	cases := []struct {
		err   error
		want  string
		class error
	}{
		{&brokerclient.Error{Status: 404, Code: api.CodeNotFound, Message: `node group "paris-gpu" not found`}, "paris offers no gpu chunks", web.ErrNotFound},
		{&brokerclient.Error{Status: 409, Code: api.CodeInsufficientCapacity, Message: "no capacity on ng-paris-gpu"}, "paris has no free gpu chunk left", web.ErrConflict},
		{&brokerclient.Error{Status: 403, Code: api.CodeForbidden, Message: "sharing"}, "paris does not lend more gpu chunks to this cluster (its sharing rules or its per-consumer quota)", web.ErrInvalid},
		{&brokerclient.Error{Status: 503, Code: api.CodeServiceUnavailable, Message: "stale"}, "paris has stopped advertising; try again when it is back", nil},
		{errors.New("dial tcp 10.0.0.1:8443: connection refused"), "the broker could not be reached; try again in a moment", nil},
	}
	for _, tc := range cases {
		c := &Consumer{ClusterID: "london", Agent: &consumerAgent{err: tc.err}}
		_, err := c.CreateReservation(context.Background(), web.ReservationSpec{ProviderClusterID: "paris", ChunkType: api.ChunkGPU, ChunkCount: 1})
		if err == nil || err.Error() != tc.want {
			t.Errorf("%v: message %q, want %q", tc.err, err, tc.want)
		}
		if tc.class != nil && !errors.Is(err, tc.class) {
			t.Errorf("%v: not classified as %v", tc.err, tc.class)
		}
		if !errors.Is(err, tc.err) {
			t.Errorf("%v: the original error left the chain", tc.err)
		}
		if len(c.manual) != 0 {
			t.Errorf("%v: the refused reservation is still tracked", tc.err)
		}
	}
}
