package externalgrpc_test

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/federation-autoscaler/federation-autoscaler/adapter/externalgrpc"
	"github.com/federation-autoscaler/federation-autoscaler/adapter/externalgrpc/protos"
	"github.com/federation-autoscaler/federation-autoscaler/adapter/localapi"
	"github.com/federation-autoscaler/federation-autoscaler/adapter/localapi/localapitest"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

var epoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// Groups of the fixtures.
const (
	g1 = "ng-p1-standard"
	g2 = "ng-p2-gpu"
)

func stdGroup(provider string, maxSize, reserved int32) api.NodeGroupView {
	return api.NodeGroupView{
		ID:                    api.NodeGroupID(provider, api.ChunkStandard),
		ProviderClusterID:     provider,
		ProviderLiqoClusterID: "liqo-" + provider,
		Type:                  api.ChunkStandard,
		MaxSize:               maxSize,
		CurrentReserved:       reserved,
		ChunkResources: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("2"),
			corev1.ResourceMemory: resource.MustParse("4Gi"),
		},
		Cost:     "52m",
		Topology: &api.Topology{Region: "eu-west", Zone: "eu-west-1a", City: "Paris"},
	}
}

func gpuGroup(provider string, maxSize int32) api.NodeGroupView {
	return api.NodeGroupView{
		ID:                    api.NodeGroupID(provider, api.ChunkGPU),
		ProviderClusterID:     provider,
		ProviderLiqoClusterID: "liqo-" + provider,
		Type:                  api.ChunkGPU,
		MaxSize:               maxSize,
		ChunkResources: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("4"),
			corev1.ResourceMemory: resource.MustParse("8Gi"),
			"nvidia.com/gpu":      resource.MustParse("1"),
		},
		Cost: "2",
	}
}

type harness struct {
	fake *localapitest.Agent
	clk  *clocktesting.FakeClock
	srv  *externalgrpc.Server
	cl   protos.CloudProviderClient
	conn *grpc.ClientConn
}

type harnessOpt func(*externalgrpc.Config)

// newHarness serves the adapter over real gRPC on loopback, backed by the
// fake agent over real HTTP.
func newHarness(t testing.TB, fake *localapitest.Agent, opts ...harnessOpt) *harness {
	t.Helper()
	agentURL := fake.Start(t)
	ac, err := localapi.NewClient(agentURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(epoch)
	cfg := externalgrpc.Config{Agent: ac, Clock: clk}
	for _, o := range opts {
		o(&cfg)
	}
	srv, err := externalgrpc.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	srv.Register(gs)
	go func() { _ = gs.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		gs.Stop()
		srv.Close()
	})
	return &harness{fake: fake, clk: clk, srv: srv, cl: protos.NewCloudProviderClient(conn), conn: conn}
}

// ctx is a CA-like call context: 5 s deadline.
// ctx is a call's context. Its deadline only ends a test that hangs: a
// starved -race run (the concurrency test hammers the adapter from five
// goroutines) has needed more than CA's 5 s for one call. Tests of the
// adapter's own deadline handling set their deadline explicitly.
func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

func wantCode(t testing.TB, err error, want codes.Code) {
	t.Helper()
	if got := status.Code(err); got != want {
		t.Fatalf("got code %v (%v), want %v", got, err, want)
	}
}

func (h *harness) target(t testing.TB, id string) int32 {
	t.Helper()
	r, err := h.cl.NodeGroupTargetSize(ctx(t), &protos.NodeGroupTargetSizeRequest{Id: id})
	if err != nil {
		t.Fatalf("TargetSize(%s): %v", id, err)
	}
	return r.GetTargetSize()
}

func (h *harness) instances(t testing.TB, id string) []*protos.Instance {
	t.Helper()
	r, err := h.cl.NodeGroupNodes(ctx(t), &protos.NodeGroupNodesRequest{Id: id})
	if err != nil {
		t.Fatalf("NodeGroupNodes(%s): %v", id, err)
	}
	return r.GetInstances()
}

func (h *harness) groups(t testing.TB) map[string]*protos.NodeGroup {
	t.Helper()
	r, err := h.cl.NodeGroups(ctx(t), &protos.NodeGroupsRequest{})
	if err != nil {
		t.Fatalf("NodeGroups: %v", err)
	}
	out := map[string]*protos.NodeGroup{}
	for _, g := range r.GetNodeGroups() {
		out[g.GetId()] = g
	}
	return out
}

func (h *harness) increase(t testing.TB, id string, delta int32) error {
	t.Helper()
	_, err := h.cl.NodeGroupIncreaseSize(ctx(t), &protos.NodeGroupIncreaseSizeRequest{Id: id, Delta: delta})
	return err
}

// expire moves the fake clock past the cache TTL.
func (h *harness) expire() { h.clk.Step(2 * time.Second) }
