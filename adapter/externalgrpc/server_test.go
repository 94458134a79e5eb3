package externalgrpc_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/federation-autoscaler/federation-autoscaler/adapter/externalgrpc"
	"github.com/federation-autoscaler/federation-autoscaler/adapter/externalgrpc/protos"
	"github.com/federation-autoscaler/federation-autoscaler/adapter/localapi"
	"github.com/federation-autoscaler/federation-autoscaler/adapter/localapi/localapitest"
	"github.com/federation-autoscaler/federation-autoscaler/deploy/testpoll"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

func TestStaticRPCsNeedNoAgent(t *testing.T) {
	fake := localapitest.New(stdGroup("p1", 4, 0))
	h := newHarness(t, fake)
	if _, err := h.cl.Refresh(ctx(t), &protos.RefreshRequest{}); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	if _, err := h.cl.Cleanup(ctx(t), &protos.CleanupRequest{}); err != nil {
		t.Fatalf("Cleanup: %v", err)
	}
	l, err := h.cl.GPULabel(ctx(t), &protos.GPULabelRequest{})
	if err != nil || l.GetLabel() != "nvidia.com/gpu" {
		t.Fatalf("GPULabel = %q, %v", l.GetLabel(), err)
	}
	if n := fake.Calls(localapitest.RouteNodeGroups); n != 0 {
		t.Fatalf("static RPCs called the agent %d times", n)
	}
}

func TestRefreshSucceedsWhileAgentIsDown(t *testing.T) {
	fake := localapitest.New(stdGroup("p1", 4, 0))
	h := newHarness(t, fake)
	fake.Fail(localapitest.RouteNodeGroups, localapitest.Fault{Status: 503, Code: api.CodeServiceUnavailable, Message: "broker unreachable"})
	if _, err := h.cl.Refresh(ctx(t), &protos.RefreshRequest{}); err != nil {
		t.Fatalf("Refresh must always succeed: %v", err)
	}
	_, err := h.cl.NodeGroups(ctx(t), &protos.NodeGroupsRequest{})
	wantCode(t, err, codes.Unavailable)
	if !strings.Contains(status.Convert(err).Message(), "broker unreachable") {
		t.Fatalf("error does not say why: %v", err)
	}
	// The failure is not cached: the next call succeeds.
	if g := h.groups(t); len(g) != 1 {
		t.Fatalf("groups after recovery: %v", g)
	}
}

func TestNodeGroupsFromView(t *testing.T) {
	fake := localapitest.New(stdGroup("p1", 4, 1), gpuGroup("p2", 2))
	h := newHarness(t, fake)
	got := h.groups(t)
	if len(got) != 2 {
		t.Fatalf("groups = %v", got)
	}
	// p1: 1 chunk held by another consumer (reference semantics), none by us:
	// head-room 3, target 0 → max 3.
	if g := got[g1]; g.GetMinSize() != 0 || g.GetMaxSize() != 3 {
		t.Fatalf("%s = %v, want min 0 max 3", g1, g)
	}
	if g := got[g2]; g.GetMinSize() != 0 || g.GetMaxSize() != 2 {
		t.Fatalf("%s = %v, want min 0 max 2", g2, g)
	}
}

func TestReadCacheOneRoundTripPerTTL(t *testing.T) {
	fake := localapitest.New(stdGroup("p1", 4, 0))
	h := newHarness(t, fake)
	for range 5 {
		h.groups(t)
		h.target(t, g1)
		h.instances(t, g1)
	}
	if n := fake.Calls(localapitest.RouteNodeGroups); n != 1 {
		t.Fatalf("nodegroups fetched %d times within the TTL, want 1", n)
	}
	if n := fake.Calls(localapitest.RouteVirtualNodes); n != 1 {
		t.Fatalf("virtual-nodes fetched %d times within the TTL, want 1", n)
	}
	h.clk.Step(1999 * time.Millisecond)
	h.groups(t)
	if n := fake.Calls(localapitest.RouteNodeGroups); n != 1 {
		t.Fatalf("refetched before the TTL: %d", n)
	}
	h.clk.Step(time.Millisecond)
	h.groups(t)
	if n := fake.Calls(localapitest.RouteNodeGroups); n != 2 {
		t.Fatalf("not refetched after the TTL: %d", n)
	}
}

func TestCacheInvalidatedByMutations(t *testing.T) {
	fake := localapitest.New(stdGroup("p1", 4, 0))
	fake.AutoPeer = localapi.PhaseRunning
	h := newHarness(t, fake)
	h.groups(t)
	if err := h.increase(t, g1, 1); err != nil {
		t.Fatal(err)
	}
	before := fake.Calls(localapitest.RouteNodeGroups)
	h.groups(t)
	if fake.Calls(localapitest.RouteNodeGroups) != before+1 {
		t.Fatal("IncreaseSize did not invalidate the cache")
	}
	inst := h.instances(t, g1)
	before = fake.Calls(localapitest.RouteNodeGroups)
	if _, err := h.cl.NodeGroupDeleteNodes(ctx(t), &protos.NodeGroupDeleteNodesRequest{
		Id: g1, Nodes: []*protos.ExternalGrpcNode{{ProviderID: inst[0].GetId()}},
	}); err != nil {
		t.Fatal(err)
	}
	h.groups(t)
	if fake.Calls(localapitest.RouteNodeGroups) != before+1 {
		t.Fatal("DeleteNodes did not invalidate the cache")
	}
}

func TestIncreaseSizeFansOutSingleChunkReservations(t *testing.T) {
	fake := localapitest.New(stdGroup("p1", 4, 0), gpuGroup("p2", 2))
	h := newHarness(t, fake)
	if got := h.target(t, g1); got != 0 {
		t.Fatalf("initial target %d", got)
	}
	if err := h.increase(t, g1, 3); err != nil {
		t.Fatalf("IncreaseSize: %v", err)
	}
	res := fake.Reservations()
	if len(res) != 3 {
		t.Fatalf("reservations = %v", res)
	}
	for _, r := range res {
		if !strings.HasPrefix(r.ID, "res-") || len(r.ID) != len("res-")+36 {
			t.Errorf("reservation id %q is not res-<uuid>", r.ID)
		}
		want := api.ReservationRequest{ProviderClusterID: "p1", NodeGroupID: g1, ChunkCount: 1, ChunkType: api.ChunkStandard}
		if r.Request.ProviderClusterID != want.ProviderClusterID || r.Request.NodeGroupID != want.NodeGroupID ||
			r.Request.ChunkCount != 1 || r.Request.ChunkType != want.ChunkType {
			t.Errorf("request = %+v, want %+v", r.Request, want)
		}
	}
	// The target reflects it at once, although nothing has peered yet.
	if got := h.target(t, g1); got != 3 {
		t.Fatalf("target after increase = %d, want 3", got)
	}
	inst := h.instances(t, g1)
	if len(inst) != 3 {
		t.Fatalf("instances = %v", inst)
	}
	for _, in := range inst {
		if in.GetStatus().GetInstanceState() != protos.InstanceStatus_instanceCreating || in.GetStatus().GetErrorInfo() != nil {
			t.Errorf("instance %v: want Creating without error", in)
		}
		if !strings.HasPrefix(in.GetId(), "liqo://p1/res-") {
			t.Errorf("instance id %q is not the providerID its node will carry", in.GetId())
		}
	}
	if got := h.groups(t)[g1].GetMaxSize(); got != 4 {
		t.Fatalf("max after increase = %d, want 4 (3 ours + 1 head-room)", got)
	}
	if got := h.target(t, g2); got != 0 {
		t.Fatalf("other group's target = %d", got)
	}
}

func TestIncreaseSizeBadRequestsReserveNothing(t *testing.T) {
	tests := []struct {
		name  string
		id    string
		delta int32
		code  codes.Code
		msg   string
	}{
		{"zero delta", g1, 0, codes.InvalidArgument, "delta must be positive"},
		{"negative delta", g1, -2, codes.InvalidArgument, "delta must be positive"},
		{"unknown group", "ng-nope-standard", 1, codes.NotFound, "not found"},
		{"empty group id", "", 1, codes.InvalidArgument, "node group id is required"},
		{"above max", g1, 5, codes.InvalidArgument, "exceeds max size 4"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fake := localapitest.New(stdGroup("p1", 4, 0))
			h := newHarness(t, fake)
			err := h.increase(t, tc.id, tc.delta)
			wantCode(t, err, tc.code)
			if !strings.Contains(status.Convert(err).Message(), tc.msg) {
				t.Fatalf("message %q does not contain %q", status.Convert(err).Message(), tc.msg)
			}
			if n := fake.Calls(localapitest.RouteReserve); n != 0 {
				t.Fatalf("%d reservations attempted", n)
			}
		})
	}
}

// TestIncreaseSizeOverBudget: a reservation the broker refuses for the
// consumer's budget fails the scale-up with ResourceExhausted (CA backs
// the group off) and the broker's reason in CA's message.
func TestIncreaseSizeOverBudget(t *testing.T) {
	fake := localapitest.New(stdGroup("p1", 4, 0))
	h := newHarness(t, fake)
	reason := `budget reached: consumer "c1" spends 2 per hour now and this chunk costs 1 per hour more`
	fake.Fail(localapitest.RouteReserve, localapitest.Fault{Status: http.StatusConflict, Code: api.CodeBudgetExceeded, Message: reason})
	err := h.increase(t, g1, 1)
	wantCode(t, err, codes.ResourceExhausted)
	if !strings.Contains(status.Convert(err).Message(), reason) {
		t.Fatalf("message %q does not carry the broker's reason", status.Convert(err).Message())
	}
}

func TestIncreaseSizePartialFailureIsAnError(t *testing.T) {
	fake := localapitest.New(stdGroup("p1", 4, 0))
	h := newHarness(t, fake)
	fake.Fail(localapitest.RouteReserve, localapitest.Fault{Status: http.StatusConflict, Code: api.CodeInsufficientCapacity, Message: "no free chunk"})
	err := h.increase(t, g1, 3)
	wantCode(t, err, codes.ResourceExhausted)
	if !strings.Contains(status.Convert(err).Message(), "reserved 2 of 3") {
		t.Fatalf("message %q does not report the partial result", status.Convert(err).Message())
	}
	if got := h.target(t, g1); got != 2 {
		t.Fatalf("target = %d, want the 2 that succeeded", got)
	}
	if n := fake.Calls(localapitest.RouteRelease); n != 0 {
		t.Fatalf("a definite rejection must not be compensated; %d releases", n)
	}
}

func TestIncreaseSizeUnknownOutcomeIsReleased(t *testing.T) {
	fake := localapitest.New(stdGroup("p1", 4, 0))
	h := newHarness(t, fake)
	fake.Fail(localapitest.RouteReserve, localapitest.Fault{Status: http.StatusInternalServerError, Code: api.CodeInternalError, Message: "broker retries exhausted"})
	err := h.increase(t, g1, 1)
	wantCode(t, err, codes.Internal)
	testpoll.Until(t, 5*time.Second, "the compensating release", func() bool { return fake.Calls(localapitest.RouteRelease) == 1 })
	if got := h.target(t, g1); got != 0 {
		t.Fatalf("target = %d, want 0", got)
	}
}

func TestIncreaseSizeAnswersBeforeCADeadline(t *testing.T) {
	fake := localapitest.New(stdGroup("p1", 4, 0))
	// A wide margin keeps the test meaningful on a loaded machine: the
	// adapter must answer 1.5 s before the client gives up.
	h := newHarness(t, fake, func(c *externalgrpc.Config) { c.ReplyMargin = 1500 * time.Millisecond })
	unblock := fake.Block()
	defer unblock()
	c, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err := h.cl.NodeGroupIncreaseSize(c, &protos.NodeGroupIncreaseSizeRequest{Id: g1, Delta: 2})
	wantCode(t, err, codes.DeadlineExceeded)
	// The answer comes from the adapter (inside CA's deadline), not from the
	// client giving up.
	if !strings.Contains(status.Convert(err).Message(), "reserved 0 of 2") {
		t.Fatalf("answer %q did not come from the adapter", status.Convert(err).Message())
	}
	unblock()
	// A create the adapter gave up on may still land after the first
	// release attempt (404): the adapter releases again later. Step the
	// clock through the retry schedule while waiting.
	testpoll.Until(t, 5*time.Second, "nothing reserved", func() bool {
		h.clk.Step(time.Second)
		return len(fake.Reservations()) == 0 && fake.Calls(localapitest.RouteRelease) >= 2
	})
}

func TestNodeGroupForNode(t *testing.T) {
	fake := localapitest.New(stdGroup("p1", 4, 0), gpuGroup("p2", 2))
	h := newHarness(t, fake)
	if err := h.increase(t, g1, 2); err != nil {
		t.Fatal(err)
	}
	res := fake.Reservations()
	fake.Peer(res[0].ID, localapi.PhaseRunning)
	fake.AddVirtualNode(localapi.VirtualNode{Name: "manual", ReservationID: "mr-abc", NodeGroupID: g1, ProviderClusterID: "p1", ProviderID: "liqo://p1/mr-abc", Phase: localapi.PhaseRunning})
	h.expire()
	running, _ := fake.VirtualNode(res[0].ID)
	pendingID := localapitest.ProviderID("p1", res[1].ID)

	tests := []struct {
		name string
		node *protos.ExternalGrpcNode
		want string
	}{
		{"running node by providerID", &protos.ExternalGrpcNode{ProviderID: running.ProviderID, Name: "whatever"}, g1},
		{"running node by name", &protos.ExternalGrpcNode{Name: running.Name}, g1},
		{"CA fake node of an unregistered instance", &protos.ExternalGrpcNode{ProviderID: pendingID, Name: pendingID}, g1},
		{"control plane", &protos.ExternalGrpcNode{Name: "cp-1", ProviderID: "kind://docker/cp-1"}, ""},
		{"node without providerID", &protos.ExternalGrpcNode{Name: "worker-1"}, ""},
		{"manual reservation is not CA's", &protos.ExternalGrpcNode{Name: "manual", ProviderID: "liqo://p1/mr-abc"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := h.cl.NodeGroupForNode(ctx(t), &protos.NodeGroupForNodeRequest{Node: tc.node})
			if err != nil {
				t.Fatalf("NodeGroupForNode must not fail: %v", err)
			}
			g := r.GetNodeGroup()
			if g.GetId() != tc.want {
				t.Fatalf("group = %q, want %q", g.GetId(), tc.want)
			}
			if tc.want != "" && g.GetMaxSize() != 4 {
				t.Fatalf("group %v is not complete (max)", g)
			}
		})
	}
	_, err := h.cl.NodeGroupForNode(ctx(t), &protos.NodeGroupForNodeRequest{})
	wantCode(t, err, codes.InvalidArgument)
}

func TestNodeGroupNodesStates(t *testing.T) {
	fake := localapitest.New(stdGroup("p1", 5, 0))
	h := newHarness(t, fake)
	if err := h.increase(t, g1, 4); err != nil {
		t.Fatal(err)
	}
	res := fake.Reservations()
	// res[0] not peered yet; res[1] peering; res[2] running; res[3] failed.
	fake.Peer(res[1].ID, localapi.PhaseCreating)
	fake.Peer(res[2].ID, localapi.PhaseRunning)
	fake.FailPeering(res[3].ID, "liqoctl peer: timeout")
	h.expire()
	byID := map[string]*protos.Instance{}
	for _, in := range h.instances(t, g1) {
		byID[in.GetId()] = in
	}
	type want struct {
		state protos.InstanceStatus_InstanceState
		err   string
	}
	wants := map[string]want{
		res[0].ID: {protos.InstanceStatus_instanceCreating, ""},
		res[1].ID: {protos.InstanceStatus_instanceCreating, ""},
		res[2].ID: {protos.InstanceStatus_instanceRunning, ""},
		res[3].ID: {protos.InstanceStatus_instanceCreating, "liqoctl peer: timeout"},
	}
	for id, w := range wants {
		in := byID[localapitest.ProviderID("p1", id)]
		if in == nil {
			t.Fatalf("no instance for %s in %v", id, byID)
		}
		if in.GetStatus().GetInstanceState() != w.state {
			t.Errorf("%s: state %v, want %v", id, in.GetStatus().GetInstanceState(), w.state)
		}
		ei := in.GetStatus().GetErrorInfo()
		if w.err == "" && ei != nil {
			t.Errorf("%s: unexpected error info %v", id, ei)
		}
		if w.err != "" && (ei.GetErrorCode() == "" || ei.GetErrorMessage() != w.err || ei.GetInstanceErrorClass() != 99) {
			t.Errorf("%s: error info %v, want code set, message %q, class 99", id, ei, w.err)
		}
	}
	if got := h.target(t, g1); got != 4 {
		t.Fatalf("target = %d, want 4 (failed instances count until CA deletes them)", got)
	}
	// CA deletes the failed one; it turns Deleting and leaves the target.
	if _, err := h.cl.NodeGroupDeleteNodes(ctx(t), &protos.NodeGroupDeleteNodesRequest{Id: g1, Nodes: []*protos.ExternalGrpcNode{
		{Name: localapitest.ProviderID("p1", res[3].ID), ProviderID: localapitest.ProviderID("p1", res[3].ID)},
	}}); err != nil {
		t.Fatal(err)
	}
	if got := h.target(t, g1); got != 3 {
		t.Fatalf("target after deleting the failed one = %d, want 3", got)
	}
	for _, in := range h.instances(t, g1) {
		if in.GetId() == localapitest.ProviderID("p1", res[3].ID) && in.GetStatus().GetInstanceState() != protos.InstanceStatus_instanceDeleting {
			t.Fatalf("released instance is %v, want Deleting", in.GetStatus())
		}
	}
	// Once the agent has removed it, it disappears.
	fake.Forget(res[3].ID)
	h.expire()
	if n := len(h.instances(t, g1)); n != 3 {
		t.Fatalf("%d instances after the unpeer finished, want 3", n)
	}
}

func TestDeleteNodes(t *testing.T) {
	fake := localapitest.New(stdGroup("p1", 4, 0), gpuGroup("p2", 2))
	fake.AutoPeer = localapi.PhaseRunning
	h := newHarness(t, fake)
	if err := h.increase(t, g1, 2); err != nil {
		t.Fatal(err)
	}
	if err := h.increase(t, g2, 1); err != nil {
		t.Fatal(err)
	}
	i1, i2 := h.instances(t, g1), h.instances(t, g2)
	node := func(in *protos.Instance) *protos.ExternalGrpcNode {
		return &protos.ExternalGrpcNode{ProviderID: in.GetId(), Name: "node-" + in.GetId()}
	}

	tests := []struct {
		name  string
		id    string
		nodes []*protos.ExternalGrpcNode
		code  codes.Code
		msg   string
	}{
		{"node of another group", g1, []*protos.ExternalGrpcNode{node(i1[0]), node(i2[0])}, codes.InvalidArgument, "belongs to node group ng-p2-gpu"},
		{"foreign node", g1, []*protos.ExternalGrpcNode{{Name: "cp-1"}}, codes.InvalidArgument, "not a federation virtual node"},
		{"unlisted node of another provider", g1, []*protos.ExternalGrpcNode{{ProviderID: "liqo://p2/res-gone", Name: "liqo-p2-res-gone"}}, codes.InvalidArgument, "not a federation virtual node"},
		{"a manual reservation's node", g1, []*protos.ExternalGrpcNode{{ProviderID: "liqo://p1/manual-abc", Name: "liqo-p1-manual-abc"}}, codes.InvalidArgument, "not a federation virtual node"},
		{"no nodes", g1, nil, codes.InvalidArgument, "no nodes"},
		{"unknown group", "ng-x-standard", []*protos.ExternalGrpcNode{node(i1[0])}, codes.NotFound, "not found"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.cl.NodeGroupDeleteNodes(ctx(t), &protos.NodeGroupDeleteNodesRequest{Id: tc.id, Nodes: tc.nodes})
			wantCode(t, err, tc.code)
			if !strings.Contains(status.Convert(err).Message(), tc.msg) {
				t.Fatalf("message %q does not contain %q", status.Convert(err).Message(), tc.msg)
			}
			if n := fake.Calls(localapitest.RouteRelease); n != 0 {
				t.Fatalf("%d releases after a rejected request", n)
			}
		})
	}

	// A registered node, found by its real name.
	vn, _ := fake.VirtualNode(strings.TrimPrefix(i1[0].GetId(), "liqo://p1/"))
	if _, err := h.cl.NodeGroupDeleteNodes(ctx(t), &protos.NodeGroupDeleteNodesRequest{Id: g1, Nodes: []*protos.ExternalGrpcNode{{Name: vn.Name}}}); err != nil {
		t.Fatalf("DeleteNodes: %v", err)
	}
	if got := h.target(t, g1); got != 1 {
		t.Fatalf("target = %d, want 1", got)
	}
	if n := len(fake.Reservations()); n != 2 {
		t.Fatalf("%d live reservations, want 2", n)
	}
	// Deleting the same node again is a no-op, not an error.
	if _, err := h.cl.NodeGroupDeleteNodes(ctx(t), &protos.NodeGroupDeleteNodesRequest{Id: g1, Nodes: []*protos.ExternalGrpcNode{{Name: vn.Name}}}); err != nil {
		t.Fatalf("repeated DeleteNodes: %v", err)
	}
	if n := fake.Calls(localapitest.RouteRelease); n != 1 {
		t.Fatalf("%d releases, want 1", n)
	}
	// A reservation the broker already forgot (404) counts as released.
	fake.Fail(localapitest.RouteRelease, localapitest.Fault{Status: 404, Code: api.CodeNotFound, Message: "gone"})
	if _, err := h.cl.NodeGroupDeleteNodes(ctx(t), &protos.NodeGroupDeleteNodesRequest{Id: g1, Nodes: []*protos.ExternalGrpcNode{node(i1[1])}}); err != nil {
		t.Fatalf("DeleteNodes of a forgotten reservation: %v", err)
	}
	if got := h.target(t, g1); got != 0 {
		t.Fatalf("target = %d, want 0", got)
	}
	// A node of the group's provider that the agent does not list (its
	// reservation ended or failed over after CA's last read) is released by
	// the reservation its providerID names; an ended one's 404 is a release.
	releases := fake.Calls(localapitest.RouteRelease)
	unlistedNode := &protos.ExternalGrpcNode{ProviderID: "liqo://p1/res-failed-over", Name: "liqo-p1-res-failed-over"}
	if _, err := h.cl.NodeGroupDeleteNodes(ctx(t), &protos.NodeGroupDeleteNodesRequest{Id: g1, Nodes: []*protos.ExternalGrpcNode{unlistedNode}}); err != nil {
		t.Fatalf("DeleteNodes of a node the agent no longer lists: %v", err)
	}
	if n := fake.Calls(localapitest.RouteRelease); n != releases+1 {
		t.Fatalf("%d releases after deleting an unlisted node, want %d", n, releases+1)
	}
	// A failing release is an error.
	fake.Fail(localapitest.RouteRelease, localapitest.Fault{Status: 503, Code: api.CodeServiceUnavailable, Message: "broker down"})
	_, err := h.cl.NodeGroupDeleteNodes(ctx(t), &protos.NodeGroupDeleteNodesRequest{Id: g2, Nodes: []*protos.ExternalGrpcNode{node(i2[0])}})
	wantCode(t, err, codes.Unavailable)
	if got := h.target(t, g2); got != 1 {
		t.Fatalf("target after a failed release = %d, want 1", got)
	}
}

func TestDecreaseTargetSize(t *testing.T) {
	fake := localapitest.New(stdGroup("p1", 6, 0))
	h := newHarness(t, fake)
	if err := h.increase(t, g1, 4); err != nil {
		t.Fatal(err)
	}
	res := fake.Reservations()
	fake.Peer(res[0].ID, localapi.PhaseRunning)
	fake.Peer(res[1].ID, localapi.PhaseRunning)
	fake.Peer(res[2].ID, localapi.PhaseCreating)
	// res[3] has no virtual node yet.
	h.expire()

	for _, d := range []int32{0, 1} {
		_, err := h.cl.NodeGroupDecreaseTargetSize(ctx(t), &protos.NodeGroupDecreaseTargetSizeRequest{Id: g1, Delta: d})
		wantCode(t, err, codes.InvalidArgument)
	}
	_, err := h.cl.NodeGroupDecreaseTargetSize(ctx(t), &protos.NodeGroupDecreaseTargetSizeRequest{Id: "ng-x-gpu", Delta: -1})
	wantCode(t, err, codes.NotFound)
	_, err = h.cl.NodeGroupDecreaseTargetSize(ctx(t), &protos.NodeGroupDecreaseTargetSizeRequest{Id: g1, Delta: -3})
	wantCode(t, err, codes.InvalidArgument)
	if !strings.Contains(status.Convert(err).Message(), "only 2 not registered") {
		t.Fatalf("message: %v", err)
	}
	if n := fake.Calls(localapitest.RouteRelease); n != 0 {
		t.Fatalf("%d releases after rejected decreases", n)
	}

	// -1 drops the reservation that has not even peered.
	if _, err := h.cl.NodeGroupDecreaseTargetSize(ctx(t), &protos.NodeGroupDecreaseTargetSizeRequest{Id: g1, Delta: -1}); err != nil {
		t.Fatal(err)
	}
	live := map[string]bool{}
	for _, r := range fake.Reservations() {
		live[r.ID] = true
	}
	if live[res[3].ID] || !live[res[0].ID] || !live[res[1].ID] || !live[res[2].ID] {
		t.Fatalf("wrong reservation dropped; live = %v", live)
	}
	// -1 again drops the peering one; running nodes are never touched.
	if _, err := h.cl.NodeGroupDecreaseTargetSize(ctx(t), &protos.NodeGroupDecreaseTargetSizeRequest{Id: g1, Delta: -1}); err != nil {
		t.Fatal(err)
	}
	if got := h.target(t, g1); got != 2 {
		t.Fatalf("target = %d, want 2", got)
	}
	_, err = h.cl.NodeGroupDecreaseTargetSize(ctx(t), &protos.NodeGroupDecreaseTargetSizeRequest{Id: g1, Delta: -1})
	wantCode(t, err, codes.InvalidArgument)
}

func TestTemplateNodeInfo(t *testing.T) {
	fake := localapitest.New(stdGroup("p1", 4, 0), gpuGroup("p2", 2))
	h := newHarness(t, fake)
	for _, tc := range []struct {
		id     string
		cpu    string
		gpu    bool
		region string
	}{{g1, "2", false, "eu-west"}, {g2, "4", true, ""}} {
		t.Run(tc.id, func(t *testing.T) {
			r, err := h.cl.NodeGroupTemplateNodeInfo(ctx(t), &protos.NodeGroupTemplateNodeInfoRequest{Id: tc.id})
			if err != nil {
				t.Fatal(err)
			}
			if len(r.GetNodeInfo()) == 0 || string(r.GetNodeInfo()) != string(r.GetNodeBytes()) {
				t.Fatal("template must be in field 1 and field 2, identical")
			}
			var n corev1.Node
			if err := n.Unmarshal(r.GetNodeBytes()); err != nil {
				t.Fatal(err)
			}
			checkTemplate(t, &n, tc.cpu, tc.gpu, tc.region)
		})
	}
	_, err := h.cl.NodeGroupTemplateNodeInfo(ctx(t), &protos.NodeGroupTemplateNodeInfoRequest{Id: "ng-nope-gpu"})
	wantCode(t, err, codes.NotFound)
}

func checkTemplate(t *testing.T, n *corev1.Node, cpu string, gpu bool, region string) {
	t.Helper()
	for _, rl := range []corev1.ResourceList{n.Status.Capacity, n.Status.Allocatable} {
		if q := rl[corev1.ResourceCPU]; q.String() != cpu {
			t.Errorf("cpu = %s, want %s", q.String(), cpu)
		}
		if q := rl[corev1.ResourcePods]; q.Value() != 110 {
			t.Errorf("pods = %s, want 110", q.String())
		}
		if _, ok := rl[corev1.ResourceMemory]; !ok {
			t.Error("no memory")
		}
		if q, ok := rl["nvidia.com/gpu"]; ok != gpu || (gpu && q.Value() != 1) {
			t.Errorf("gpu = %v (%s), want %v", ok, q.String(), gpu)
		}
	}
	wantLabels := map[string]string{
		"liqo.io/type":              "virtual-node",
		"liqo.io/remote-cluster-id": "",
		"kubernetes.io/os":          "linux",
		"kubernetes.io/arch":        "amd64",
		"kubernetes.io/hostname":    n.Name,
	}
	if region != "" {
		wantLabels["topology.kubernetes.io/region"] = region
	}
	for k, v := range wantLabels {
		got, ok := n.Labels[k]
		if !ok || (v != "" && got != v) {
			t.Errorf("label %s = %q (present %v), want %q", k, got, ok, v)
		}
	}
	found := false
	for _, tt := range n.Spec.Taints {
		if tt.Key == "virtual-node.liqo.io/not-allowed" && tt.Value == "true" && tt.Effect == corev1.TaintEffectNoExecute {
			found = true
		}
	}
	if !found {
		t.Errorf("taints %v lack Liqo's", n.Spec.Taints)
	}
	if !strings.HasPrefix(n.Spec.ProviderID, "liqo://") {
		t.Errorf("providerID %q", n.Spec.ProviderID)
	}
	ready := false
	for _, c := range n.Status.Conditions {
		ready = ready || (c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue)
	}
	if !ready {
		t.Error("template is not Ready")
	}
}

func TestProviderLostMidway(t *testing.T) {
	fake := localapitest.New(stdGroup("p1", 4, 0), stdGroup("p2", 4, 0))
	fake.AutoPeer = localapi.PhaseRunning
	h := newHarness(t, fake)
	if err := h.increase(t, "ng-p2-standard", 2); err != nil {
		t.Fatal(err)
	}
	fake.RemoveProvider("p2")
	h.expire()
	gs := h.groups(t)
	g, ok := gs["ng-p2-standard"]
	if !ok {
		t.Fatalf("the group we still hold nodes in must stay listed: %v", gs)
	}
	if g.GetMaxSize() != 2 {
		t.Fatalf("max = %d, want 2 (can shrink, cannot grow)", g.GetMaxSize())
	}
	err := h.increase(t, "ng-p2-standard", 1)
	wantCode(t, err, codes.FailedPrecondition)
	// Its template falls back to what the nodes report.
	r, err := h.cl.NodeGroupTemplateNodeInfo(ctx(t), &protos.NodeGroupTemplateNodeInfoRequest{Id: "ng-p2-standard"})
	if err != nil || len(r.GetNodeBytes()) == 0 {
		t.Fatalf("template of a lost provider's group: %v", err)
	}
	inst := h.instances(t, "ng-p2-standard")
	if _, err := h.cl.NodeGroupDeleteNodes(ctx(t), &protos.NodeGroupDeleteNodesRequest{Id: "ng-p2-standard", Nodes: []*protos.ExternalGrpcNode{
		{ProviderID: inst[0].GetId()}, {ProviderID: inst[1].GetId()},
	}}); err != nil {
		t.Fatal(err)
	}
	if got := h.target(t, "ng-p2-standard"); got != 0 {
		t.Fatalf("target = %d", got)
	}
}

func TestGetOptionsEchoesDefaultsInBothShapes(t *testing.T) {
	fake := localapitest.New(stdGroup("p1", 4, 0))
	h := newHarness(t, fake)
	old := &protos.NodeGroupAutoscalingOptions{
		ScaleDownUtilizationThreshold: 0.5, ScaleDownGpuUtilizationThreshold: 0.4,
		ScaleDownUnneededTime: &protos.K8SDuration{Duration: int64(10 * time.Minute)},
		ScaleDownUnreadyTime:  &protos.K8SDuration{Duration: int64(20 * time.Minute)},
		MaxNodeProvisionTime:  &protos.K8SDuration{Duration: int64(15 * time.Minute)},
	}
	cur := &protos.NodeGroupAutoscalingOptions{
		ScaleDownUtilizationThreshold: 0.5, ScaleDownGpuUtilizationThreshold: 0.4,
		ZeroOrMaxNodeScaling: true, IgnoreDaemonSetsUtilization: true,
		ScaleDownUnneededDuration: durationpb.New(10 * time.Minute),
		ScaleDownUnreadyDuration:  durationpb.New(20 * time.Minute),
		MaxNodeProvisionDuration:  durationpb.New(15 * time.Minute),
	}
	for name, d := range map[string]*protos.NodeGroupAutoscalingOptions{"CA 1.32 defaults": old, "CA 1.35 defaults": cur} {
		t.Run(name, func(t *testing.T) {
			r, err := h.cl.NodeGroupGetOptions(ctx(t), &protos.NodeGroupAutoscalingOptionsRequest{Id: g1, Defaults: d})
			if err != nil {
				t.Fatal(err)
			}
			o := r.GetNodeGroupAutoscalingOptions()
			if o.GetScaleDownUtilizationThreshold() != 0.5 || o.GetScaleDownGpuUtilizationThreshold() != 0.4 {
				t.Errorf("thresholds %v", o)
			}
			for i, p := range []struct {
				old  *protos.K8SDuration
				cur  *durationpb.Duration
				want time.Duration
			}{
				{o.GetScaleDownUnneededTime(), o.GetScaleDownUnneededDuration(), 10 * time.Minute},
				{o.GetScaleDownUnreadyTime(), o.GetScaleDownUnreadyDuration(), 20 * time.Minute},
				{o.GetMaxNodeProvisionTime(), o.GetMaxNodeProvisionDuration(), 15 * time.Minute},
			} {
				if p.old == nil || p.cur == nil || time.Duration(p.old.GetDuration()) != p.want || p.cur.AsDuration() != p.want {
					t.Errorf("duration %d: old %v new %v, want %v in both", i, p.old, p.cur, p.want)
				}
			}
		})
	}
	_, err := h.cl.NodeGroupGetOptions(ctx(t), &protos.NodeGroupAutoscalingOptionsRequest{Id: g1})
	wantCode(t, err, codes.Unimplemented)
	partial := &protos.NodeGroupAutoscalingOptions{ScaleDownUnneededDuration: durationpb.New(time.Minute)}
	_, err = h.cl.NodeGroupGetOptions(ctx(t), &protos.NodeGroupAutoscalingOptionsRequest{Id: g1, Defaults: partial})
	wantCode(t, err, codes.Unimplemented)
	_, err = h.cl.NodeGroupGetOptions(ctx(t), &protos.NodeGroupAutoscalingOptionsRequest{Id: "ng-x-gpu", Defaults: cur})
	wantCode(t, err, codes.NotFound)
}

// TestGetOptionsUnderConsolidation: the group the agent drains answers the
// drain threshold (CPU and GPU) and at most the drain unneeded time; the
// group that grew for the move answers thresholds 0; every other group
// echoes CA's defaults; every answer carries every duration in both shapes,
// and a drained group without defaults is still UNIMPLEMENTED.
func TestGetOptionsUnderConsolidation(t *testing.T) {
	fake := localapitest.New(stdGroup("p1", 4, 0), stdGroup("p2", 4, 0), stdGroup("p3", 4, 0))
	fake.SetConsolidation(map[string]api.ConsolidationRole{"ng-p1-standard": api.RoleDrain, "ng-p2-standard": api.RoleKeep})
	h := newHarness(t, fake)
	defaults := func(unneeded time.Duration) *protos.NodeGroupAutoscalingOptions {
		return &protos.NodeGroupAutoscalingOptions{
			ScaleDownUtilizationThreshold: 0.5, ScaleDownGpuUtilizationThreshold: 0.4,
			ScaleDownUnneededDuration: durationpb.New(unneeded),
			ScaleDownUnreadyDuration:  durationpb.New(20 * time.Minute),
			MaxNodeProvisionDuration:  durationpb.New(15 * time.Minute),
		}
	}
	tests := []struct {
		name, group string
		caUnneeded  time.Duration
		util, gpu   float64
		unneeded    time.Duration
	}{
		{"drained: threshold 1.01 (a full node too), unneeded capped at 1 min", "ng-p1-standard", 10 * time.Minute, 1.01, 1.01, time.Minute},
		{"drained: CA's shorter unneeded time kept", "ng-p1-standard", 20 * time.Second, 1.01, 1.01, 20 * time.Second},
		{"grown for the move: thresholds 0", "ng-p2-standard", 10 * time.Minute, 0, 0, 10 * time.Minute},
		{"not in a move: CA's defaults", "ng-p3-standard", 10 * time.Minute, 0.5, 0.4, 10 * time.Minute},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := h.cl.NodeGroupGetOptions(ctx(t), &protos.NodeGroupAutoscalingOptionsRequest{Id: tc.group, Defaults: defaults(tc.caUnneeded)})
			if err != nil {
				t.Fatal(err)
			}
			o := r.GetNodeGroupAutoscalingOptions()
			if o.GetScaleDownUtilizationThreshold() != tc.util || o.GetScaleDownGpuUtilizationThreshold() != tc.gpu {
				t.Errorf("thresholds %v / %v, want %v / %v", o.GetScaleDownUtilizationThreshold(), o.GetScaleDownGpuUtilizationThreshold(), tc.util, tc.gpu)
			}
			if o.GetScaleDownUnneededTime() == nil || time.Duration(o.GetScaleDownUnneededTime().GetDuration()) != tc.unneeded || o.GetScaleDownUnneededDuration().AsDuration() != tc.unneeded {
				t.Errorf("unneeded %v / %v, want %v in both shapes", o.GetScaleDownUnneededTime(), o.GetScaleDownUnneededDuration(), tc.unneeded)
			}
			if o.GetScaleDownUnreadyTime() == nil || o.GetMaxNodeProvisionTime() == nil || o.GetScaleDownUnreadyDuration() == nil || o.GetMaxNodeProvisionDuration() == nil {
				t.Errorf("a duration is missing: %v", o)
			}
		})
	}
	_, err := h.cl.NodeGroupGetOptions(ctx(t), &protos.NodeGroupAutoscalingOptionsRequest{Id: "ng-p1-standard"})
	wantCode(t, err, codes.Unimplemented)
}

func TestGPUTypesAndPricing(t *testing.T) {
	gv := gpuGroup("p2", 2)
	gv.Labels = map[string]string{"nvidia.com/gpu": "a100"}
	fake := localapitest.New(stdGroup("p1", 4, 0), gv, gpuGroup("p3", 1))
	h := newHarness(t, fake)
	r, err := h.cl.GetAvailableGPUTypes(ctx(t), &protos.GetAvailableGPUTypesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := r.GetGpuTypes()["a100"]; !ok || len(r.GetGpuTypes()) != 2 {
		t.Fatalf("gpu types = %v, want a100 and the default", r.GetGpuTypes())
	}

	// Price of a template node (found by Liqo's label) for 2 hours.
	tpl, err := h.cl.NodeGroupTemplateNodeInfo(ctx(t), &protos.NodeGroupTemplateNodeInfoRequest{Id: g1})
	if err != nil {
		t.Fatal(err)
	}
	var n corev1.Node
	if err := n.Unmarshal(tpl.GetNodeBytes()); err != nil {
		t.Fatal(err)
	}
	start := timestamppb.New(epoch)
	end := timestamppb.New(epoch.Add(2 * time.Hour))
	node := &protos.ExternalGrpcNode{Name: "template-node-for-" + g1 + "-123", Labels: n.Labels}
	for name, req := range map[string]*protos.PricingNodePriceRequest{
		"CA 1.32 times": {Node: node, StartTime: start, EndTime: end},
		"CA 1.35 times": {Node: node, StartTimestamp: start, EndTimestamp: end},
	} {
		t.Run(name, func(t *testing.T) {
			p, err := h.cl.PricingNodePrice(ctx(t), req)
			if err != nil {
				t.Fatal(err)
			}
			if p.GetPrice() < 0.1039 || p.GetPrice() > 0.1041 {
				t.Fatalf("price = %v, want 0.052 × 2 h", p.GetPrice())
			}
		})
	}
	_, err = h.cl.PricingNodePrice(ctx(t), &protos.PricingNodePriceRequest{Node: node, StartTimestamp: end, EndTimestamp: start})
	wantCode(t, err, codes.InvalidArgument)
	_, err = h.cl.PricingNodePrice(ctx(t), &protos.PricingNodePriceRequest{Node: &protos.ExternalGrpcNode{Name: "cp-1"}, StartTimestamp: start, EndTimestamp: end})
	wantCode(t, err, codes.NotFound)

	pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
		Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}},
	}}}}
	raw, err := pod.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for name, req := range map[string]*protos.PricingPodPriceRequest{
		"CA 1.32 pod (field 1)": {Pod: raw, StartTime: start, EndTime: end},
		"CA 1.35 pod (field 4)": {PodBytes: raw, StartTimestamp: start, EndTimestamp: end},
	} {
		t.Run(name, func(t *testing.T) {
			p, err := h.cl.PricingPodPrice(ctx(t), req)
			if err != nil || p.GetPrice() != 0 {
				t.Fatalf("pod price = %v, %v; want 0", p.GetPrice(), err)
			}
		})
	}
	_, err = h.cl.PricingPodPrice(ctx(t), &protos.PricingPodPriceRequest{})
	wantCode(t, err, codes.InvalidArgument)
	_, err = h.cl.PricingPodPrice(ctx(t), &protos.PricingPodPriceRequest{PodBytes: []byte{0xff, 0xff}})
	wantCode(t, err, codes.InvalidArgument)
}

func TestNewRequiresAgent(t *testing.T) {
	if _, err := externalgrpc.New(externalgrpc.Config{}); err == nil {
		t.Fatal("New without an agent must fail")
	}
}

func TestLatePeerOfReleasedReservationIsNotCapacity(t *testing.T) {
	fake := localapitest.New(stdGroup("p1", 4, 0))
	h := newHarness(t, fake)
	if err := h.increase(t, g1, 1); err != nil {
		t.Fatal(err)
	}
	id := fake.Reservations()[0].ID
	if _, err := h.cl.NodeGroupDecreaseTargetSize(ctx(t), &protos.NodeGroupDecreaseTargetSizeRequest{Id: g1, Delta: -1}); err != nil {
		t.Fatal(err)
	}
	h.expire()
	if n := len(h.instances(t, g1)); n != 0 {
		t.Fatalf("%d instances after the release, want 0", n)
	}
	// A Peer that raced the release lands afterwards.
	fake.Peer(id, localapi.PhaseRunning)
	h.expire()
	inst := h.instances(t, g1)
	if len(inst) != 1 || inst[0].GetStatus().GetInstanceState() != protos.InstanceStatus_instanceDeleting {
		t.Fatalf("late virtual node of a released reservation = %v, want one Deleting instance", inst)
	}
	if got := h.target(t, g1); got != 0 {
		t.Fatalf("target = %d, want 0", got)
	}
}

func TestVanishedGroupAnswersByIDForAWhile(t *testing.T) {
	fake := localapitest.New(stdGroup("p1", 4, 0), stdGroup("p2", 4, 0))
	h := newHarness(t, fake)
	if _, ok := h.groups(t)["ng-p2-standard"]; !ok {
		t.Fatal("p2 not listed")
	}
	// p2 leaves the view between CA's NodeGroups and its per-group calls.
	fake.RemoveProvider("p2")
	h.expire()
	if _, ok := h.groups(t)["ng-p2-standard"]; ok {
		t.Fatal("a vanished group is still listed")
	}
	if got := h.target(t, "ng-p2-standard"); got != 0 {
		t.Fatalf("target of a vanished group = %d", got)
	}
	if n := len(h.instances(t, "ng-p2-standard")); n != 0 {
		t.Fatalf("%d instances", n)
	}
	wantCode(t, h.increase(t, "ng-p2-standard", 1), codes.FailedPrecondition)
	// Long after, it is unknown.
	h.clk.Step(2 * time.Minute)
	_, err := h.cl.NodeGroupTargetSize(ctx(t), &protos.NodeGroupTargetSizeRequest{Id: "ng-p2-standard"})
	wantCode(t, err, codes.NotFound)
}

func TestReservationEndedBeforePeeringIsReportedFailed(t *testing.T) {
	fake := localapitest.New(stdGroup("p1", 4, 0))
	h := newHarness(t, fake)
	if err := h.increase(t, g1, 2); err != nil {
		t.Fatal(err)
	}
	// Before the broker has seen anything end, both are simply Creating.
	for _, in := range h.instances(t, g1) {
		if in.GetStatus().GetErrorInfo() != nil {
			t.Fatalf("instance %v marked failed too early", in)
		}
	}
	res := fake.Reservations()
	fake.Abort(res[0].ID) // its peering failed before any virtual node existed
	h.expire()
	var failed []*protos.Instance
	for _, in := range h.instances(t, g1) {
		if in.GetStatus().GetErrorInfo().GetErrorCode() != "" {
			failed = append(failed, in)
		}
	}
	if len(failed) != 1 {
		t.Fatalf("%d failed instances, want exactly 1", len(failed))
	}
	if !strings.Contains(failed[0].GetStatus().GetErrorInfo().GetErrorMessage(), "no longer live") {
		t.Fatalf("error info %v", failed[0].GetStatus().GetErrorInfo())
	}
	// CA deletes it through its fake node; the target drops.
	if _, err := h.cl.NodeGroupDeleteNodes(ctx(t), &protos.NodeGroupDeleteNodesRequest{Id: g1, Nodes: []*protos.ExternalGrpcNode{
		{Name: failed[0].GetId(), ProviderID: failed[0].GetId()},
	}}); err != nil {
		t.Fatal(err)
	}
	if got := h.target(t, g1); got != 1 {
		t.Fatalf("target = %d, want 1", got)
	}
}
