package consumer

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqotech/liqo/apis/authentication/v1beta1"

	fav1alpha1 "github.com/federation-autoscaler/federation-autoscaler/agent/apis/v1alpha1"
	"github.com/federation-autoscaler/federation-autoscaler/agent/brokerclient"
	"github.com/federation-autoscaler/federation-autoscaler/agent/liqo"
	"github.com/federation-autoscaler/federation-autoscaler/deploy/testcluster"
	"github.com/federation-autoscaler/federation-autoscaler/deploy/testpoll"
	simliqo "github.com/federation-autoscaler/federation-autoscaler/mocks/liqo"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// scriptedBroker delivers the instructions a test queues, records results
// and answers reservation reads from a map.
type scriptedBroker struct {
	mu      sync.Mutex
	pending map[string]api.InstructionView
	results map[string]api.InstructionResultRequest
	live    map[string]api.Phase
	wake    chan struct{}
}

func newScriptedBroker() *scriptedBroker {
	return &scriptedBroker{pending: map[string]api.InstructionView{}, results: map[string]api.InstructionResultRequest{},
		live: map[string]api.Phase{}, wake: make(chan struct{}, 1)}
}

func (b *scriptedBroker) queue(in api.InstructionView) {
	b.mu.Lock()
	b.pending[in.ID] = in
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

func (b *scriptedBroker) Instructions(ctx context.Context, wait time.Duration) ([]api.InstructionView, bool, error) {
	b.mu.Lock()
	out := make([]api.InstructionView, 0, len(b.pending))
	for _, in := range b.pending {
		out = append(out, in)
	}
	b.mu.Unlock()
	if len(out) == 0 {
		select {
		case <-ctx.Done():
			return nil, true, ctx.Err()
		case <-b.wake:
		case <-time.After(wait):
		}
	}
	return out, true, nil
}

func (b *scriptedBroker) PostResult(_ context.Context, id string, req api.InstructionResultRequest) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.results[id] = req
	delete(b.pending, id)
	return nil
}

func (b *scriptedBroker) result(id string) (api.InstructionResultRequest, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, ok := b.results[id]
	return r, ok
}

func (b *scriptedBroker) Heartbeat(context.Context, api.HeartbeatRequest) (api.HeartbeatResponse, error) {
	return api.HeartbeatResponse{}, nil
}
func (b *scriptedBroker) NodeGroups(context.Context) (api.NodeGroupListResponse, error) {
	return api.NodeGroupListResponse{}, nil
}
func (b *scriptedBroker) Reserve(context.Context, string, api.ReservationRequest) (api.ReservationResponse, int, error) {
	return api.ReservationResponse{}, 0, &brokerclient.Error{Status: 501, Code: api.CodeNotImplemented, Message: "scripted"}
}
func (b *scriptedBroker) Reservation(_ context.Context, id string) (api.ReservationResponse, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	p, ok := b.live[id]
	if !ok {
		return api.ReservationResponse{}, &brokerclient.Error{Status: http.StatusNotFound, Code: api.CodeNotFound, Message: "no reservation " + id}
	}
	return api.ReservationResponse{ReservationID: id, Status: p}, nil
}
func (b *scriptedBroker) Release(context.Context, string) (api.ReleaseResponse, int, error) {
	return api.ReleaseResponse{}, 202, nil
}

// countingDriver counts Peer calls on top of the simulated driver.
type countingDriver struct {
	*simliqo.Driver
	mu            sync.Mutex
	peers, unpeer int
}

func (d *countingDriver) Peer(ctx context.Context, p, kc string) error {
	d.mu.Lock()
	d.peers++
	d.mu.Unlock()
	return d.Driver.Peer(ctx, p, kc)
}
func (d *countingDriver) Unpeer(ctx context.Context, p, kc string) error {
	d.mu.Lock()
	d.unpeer++
	d.mu.Unlock()
	return d.Driver.Unpeer(ctx, p, kc)
}

// TestPeerUnpeerResyncOnRealAPIServer: Peer with the simulated Liqo creates
// exactly one ResourceSlice, the sim builds the VirtualNode and Node, the
// projector reaches Running with the providerID set; Unpeer removes
// everything; Resync deletes a planted orphan.
func TestPeerUnpeerResyncOnRealAPIServer(t *testing.T) {
	env := testcluster.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kube, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	c := env.Client
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fa"}}); err != nil {
		t.Fatal(err)
	}
	sim, err := simliqo.NewController(env.Config, simliqo.ControllerOptions{NodeDelay: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	simDone := make(chan error, 1)
	go func() { simDone <- sim.Run(ctx) }()
	providerSide := simliqo.NewDriver(c, simliqo.DriverOptions{LocalClusterID: "liqo-provider-1"})
	kubeconfig, err := providerSide.GeneratePeeringUser(ctx, "liqo-consumer-1")
	if err != nil {
		t.Fatal(err)
	}
	drv := &countingDriver{Driver: simliqo.NewDriver(c, simliqo.DriverOptions{LocalClusterID: "liqo-consumer-1"})}
	b := newScriptedBroker()
	a, err := New(Config{ClusterID: "consumer-1", LiqoClusterID: "liqo-consumer-1", Namespace: "fa", Kube: kube, Client: c, Broker: b, Driver: drv,
		Resync: time.Second, NodeWait: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	runDone := make(chan error, 1)
	go func() { runDone <- a.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-runDone; err != nil {
			t.Error(err)
		}
		t.Logf("simulated Liqo stopped: %v", <-simDone)
	}()

	chunk := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi")}
	peer := api.InstructionView{ID: "peer-res-1", Kind: api.KindPeer, ReservationID: "res-1", ChunkCount: 1,
		ProviderClusterID: "provider-1", ProviderLiqoClusterID: "liqo-provider-1", Kubeconfig: kubeconfig,
		ResourceSliceResources: chunk, IssuedAt: metav1.Now()}
	b.live["res-1"] = api.PhasePeering
	b.queue(peer)
	testpoll.Until(t, 30*time.Second, "Peer result", func() bool { _, ok := b.result("peer-res-1"); return ok })
	r, _ := b.result("peer-res-1")
	if r.Status != api.ResultSucceeded || r.Payload == nil || len(r.Payload.VirtualNodeNames) != 1 || r.Payload.VirtualNodeNames[0] != "rs-res-1" {
		t.Fatalf("Peer result %+v (%+v)", r, r.Error)
	}
	// Exactly one slice, sized to the chunk, in the tenant namespace.
	var slices authv1beta1.ResourceSliceList
	if err := c.List(ctx, &slices, client.InNamespace(liqo.TenantNamespace("liqo-provider-1"))); err != nil {
		t.Fatal(err)
	}
	if len(slices.Items) != 1 || slices.Items[0].Name != "rs-res-1" || slices.Items[0].Spec.Resources.Cpu().Cmp(resource.MustParse("2")) != 0 {
		t.Fatalf("slices %+v", slices.Items)
	}
	var vns fav1alpha1.VirtualNodeState
	testpoll.Until(t, 30*time.Second, "VirtualNodeState Running", func() bool {
		err := c.Get(ctx, client.ObjectKey{Namespace: "fa", Name: "vns-res-1"}, &vns)
		return err == nil && vns.Status.Phase == fav1alpha1.VirtualNodeRunning
	})
	if vns.Status.ProviderID != "liqo://provider-1/res-1" || vns.Status.VirtualNodeName != "rs-res-1" || vns.Spec.NodeGroupID != "ng-provider-1-standard" {
		t.Errorf("VNS status %+v spec %+v", vns.Status, vns.Spec)
	}
	node, err := kube.CoreV1().Nodes().Get(ctx, "rs-res-1", metav1.GetOptions{})
	if err != nil || node.Spec.ProviderID != "liqo://provider-1/res-1" {
		t.Fatalf("node %v: %v", node, err)
	}

	// A redelivered Peer (agent restart, lost result) converges without a
	// second slice.
	b.queue(api.InstructionView{ID: "peer-res-1", Kind: api.KindPeer, ReservationID: "res-1", ProviderClusterID: "provider-1",
		ProviderLiqoClusterID: "liqo-provider-1", Kubeconfig: kubeconfig, ResourceSliceResources: chunk, IssuedAt: metav1.NewTime(time.Now().Add(time.Second))})
	testpoll.Until(t, 30*time.Second, "redelivered Peer result", func() bool { b.mu.Lock(); defer b.mu.Unlock(); return len(b.pending) == 0 })
	if err := c.List(ctx, &slices, client.InNamespace(liqo.TenantNamespace("liqo-provider-1"))); err != nil || len(slices.Items) != 1 {
		t.Fatalf("after redelivery: %d slices (%v)", len(slices.Items), err)
	}

	// Unpeer of the last chunk removes everything.
	b.queue(api.InstructionView{ID: "unpeer-res-1", Kind: api.KindUnpeer, ReservationID: "res-1", ChunkCount: 1, LastChunk: true,
		ProviderClusterID: "provider-1", ProviderLiqoClusterID: "liqo-provider-1", IssuedAt: metav1.Now()})
	testpoll.Until(t, 30*time.Second, "Unpeer result", func() bool { _, ok := b.result("unpeer-res-1"); return ok })
	if r, _ := b.result("unpeer-res-1"); r.Status != api.ResultSucceeded || r.Payload == nil || r.Payload.Kind != api.PayloadUnpeer || !r.Payload.TunnelDropped {
		t.Fatalf("Unpeer result %+v", r)
	}
	gone := func(obj client.Object, key client.ObjectKey) func() bool {
		return func() bool { return apierrors.IsNotFound(c.Get(ctx, key, obj)) }
	}
	testpoll.Until(t, 30*time.Second, "VNS gone", gone(&fav1alpha1.VirtualNodeState{}, client.ObjectKey{Namespace: "fa", Name: "vns-res-1"}))
	testpoll.Until(t, 30*time.Second, "slice gone", gone(&authv1beta1.ResourceSlice{}, client.ObjectKey{Namespace: liqo.TenantNamespace("liqo-provider-1"), Name: "rs-res-1"}))
	testpoll.Until(t, 30*time.Second, "node gone", gone(&corev1.Node{}, client.ObjectKey{Name: "rs-res-1"}))
	testpoll.Until(t, 30*time.Second, "secret gone", gone(&corev1.Secret{}, client.ObjectKey{Namespace: "fa", Name: "kubeconfig-res-1"}))
	drv.mu.Lock()
	if drv.unpeer != 1 {
		t.Errorf("Unpeer calls %d, want 1", drv.unpeer)
	}
	drv.mu.Unlock()

	// Resync removes a VirtualNodeState the broker does not know.
	orphan := &fav1alpha1.VirtualNodeState{
		ObjectMeta: metav1.ObjectMeta{Name: "vns-ghost", Namespace: "fa", Labels: map[string]string{fav1alpha1.ReservationLabel: "ghost"}},
		Spec: fav1alpha1.VirtualNodeStateSpec{ProviderClusterID: "provider-1", ProviderLiqoClusterID: "liqo-provider-1", NodeGroupID: "ng-provider-1-standard",
			ReservationID: "ghost", ResourceSliceName: "rs-ghost", Resources: chunk},
	}
	keep := orphan.DeepCopy()
	keep.Name, keep.Labels[fav1alpha1.ReservationLabel], keep.Spec.ReservationID, keep.Spec.ResourceSliceName = "vns-kept", "kept", "kept", "rs-kept"
	for _, o := range []*fav1alpha1.VirtualNodeState{orphan, keep} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	b.mu.Lock()
	b.live["kept"] = api.PhasePeered
	b.mu.Unlock()
	if err := a.Resync(ctx); err != nil {
		t.Fatal(err)
	}
	if !gone(&fav1alpha1.VirtualNodeState{}, client.ObjectKey{Namespace: "fa", Name: "vns-ghost"})() {
		t.Error("orphan vns-ghost survived the resync")
	}
	if gone(&fav1alpha1.VirtualNodeState{}, client.ObjectKey{Namespace: "fa", Name: "vns-kept"})() {
		t.Error("resync deleted a live reservation's VirtualNodeState")
	}
	drv.mu.Lock()
	defer drv.mu.Unlock()
	if drv.peers != 2 {
		t.Errorf("Peer calls %d, want 2 (one per delivery; the driver converges)", drv.peers)
	}
}
