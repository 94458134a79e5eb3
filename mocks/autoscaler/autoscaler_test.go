package autoscaler

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/federation-autoscaler/federation-autoscaler/adapter/externalgrpc/protos"
)

// cloud is one node group as the adapter would answer it; it records the
// mutations.
type cloud struct {
	protos.CloudProviderClient // unused methods panic
	max, target                int32
	instances                  []string
	increased                  int32
	deleted                    []string
	// opts answers NodeGroupGetOptions (nil: UNIMPLEMENTED).
	opts *protos.NodeGroupAutoscalingOptions
}

func (c *cloud) NodeGroupGetOptions(context.Context, *protos.NodeGroupAutoscalingOptionsRequest, ...grpc.CallOption) (*protos.NodeGroupAutoscalingOptionsResponse, error) {
	if c.opts == nil {
		return nil, status.Error(codes.Unimplemented, "no options")
	}
	return &protos.NodeGroupAutoscalingOptionsResponse{NodeGroupAutoscalingOptions: c.opts}, nil
}

func (c *cloud) Refresh(context.Context, *protos.RefreshRequest, ...grpc.CallOption) (*protos.RefreshResponse, error) {
	return &protos.RefreshResponse{}, nil
}

func (c *cloud) NodeGroups(context.Context, *protos.NodeGroupsRequest, ...grpc.CallOption) (*protos.NodeGroupsResponse, error) {
	return &protos.NodeGroupsResponse{NodeGroups: []*protos.NodeGroup{{Id: "ng-p-standard", MaxSize: c.max}}}, nil
}

func (c *cloud) NodeGroupTargetSize(context.Context, *protos.NodeGroupTargetSizeRequest, ...grpc.CallOption) (*protos.NodeGroupTargetSizeResponse, error) {
	return &protos.NodeGroupTargetSizeResponse{TargetSize: c.target}, nil
}

func (c *cloud) NodeGroupNodes(context.Context, *protos.NodeGroupNodesRequest, ...grpc.CallOption) (*protos.NodeGroupNodesResponse, error) {
	out := &protos.NodeGroupNodesResponse{}
	for _, id := range c.instances {
		out.Instances = append(out.Instances, &protos.Instance{Id: id, Status: &protos.InstanceStatus{InstanceState: protos.InstanceStatus_instanceRunning}})
	}
	return out, nil
}

func (c *cloud) NodeGroupForNode(_ context.Context, r *protos.NodeGroupForNodeRequest, _ ...grpc.CallOption) (*protos.NodeGroupForNodeResponse, error) {
	for _, id := range c.instances {
		if id == r.GetNode().GetProviderID() {
			return &protos.NodeGroupForNodeResponse{NodeGroup: &protos.NodeGroup{Id: "ng-p-standard", MaxSize: c.max}}, nil
		}
	}
	return &protos.NodeGroupForNodeResponse{NodeGroup: &protos.NodeGroup{}}, nil
}

func (c *cloud) NodeGroupTemplateNodeInfo(context.Context, *protos.NodeGroupTemplateNodeInfoRequest, ...grpc.CallOption) (*protos.NodeGroupTemplateNodeInfoResponse, error) {
	n := corev1.Node{Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi"), corev1.ResourcePods: resource.MustParse("110"),
	}}}
	b, err := n.Marshal()
	return &protos.NodeGroupTemplateNodeInfoResponse{NodeBytes: b}, err
}

func (c *cloud) NodeGroupIncreaseSize(_ context.Context, r *protos.NodeGroupIncreaseSizeRequest, _ ...grpc.CallOption) (*protos.NodeGroupIncreaseSizeResponse, error) {
	c.increased += r.GetDelta()
	c.target += r.GetDelta()
	return &protos.NodeGroupIncreaseSizeResponse{}, nil
}

func (c *cloud) NodeGroupDeleteNodes(_ context.Context, r *protos.NodeGroupDeleteNodesRequest, _ ...grpc.CallOption) (*protos.NodeGroupDeleteNodesResponse, error) {
	for _, n := range r.GetNodes() {
		c.deleted = append(c.deleted, n.GetName())
	}
	c.target -= int32(len(r.GetNodes()))
	return &protos.NodeGroupDeleteNodesResponse{}, nil
}

func pendingPod(name, cpu string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "demo"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("1Gi"),
		}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}},
	}
}

func borrowedNode(name string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.NodeSpec{ProviderID: "liqo://p/" + name},
		Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
}

// roomyNode is a ready borrowed node with a chunk's allocatable.
func roomyNode(name string) *corev1.Node {
	n := borrowedNode(name)
	n.Status.Allocatable = corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi"), corev1.ResourcePods: resource.MustParse("110"),
	}
	return n
}

// boundPod is a running pod on node requesting cpu.
func boundPod(node, cpu string) *corev1.Pod {
	p := pendingPod("on-"+node, cpu)
	p.Spec.NodeName, p.Status = node, corev1.PodStatus{Phase: corev1.PodRunning}
	return p
}

func TestScaleUp(t *testing.T) {
	pods := func(n int, cpu string) []runtime.Object {
		var out []runtime.Object
		for i := range n {
			out = append(out, pendingPod(fmt.Sprintf("p%d", i), cpu))
		}
		return out
	}
	for _, tc := range []struct {
		name          string
		objs          []runtime.Object
		max, target   int32
		instances     []string
		wantIncreased int32
	}{
		{name: "5 pods of 1 CPU need 3 chunks of 2 CPU", objs: pods(5, "1"), max: 4, wantIncreased: 3},
		{name: "bounded by the group's max", objs: pods(10, "1"), max: 4, wantIncreased: 4},
		{name: "nodes on their way are counted", objs: pods(4, "1"), max: 4, target: 2, instances: []string{"liqo://p/a", "liqo://p/b"}, wantIncreased: 0},
		{name: "only the shortfall beyond the nodes on their way", objs: pods(6, "1"), max: 4, target: 2, instances: []string{"liqo://p/a", "liqo://p/b"}, wantIncreased: 1},
		{name: "a pod bigger than a chunk fits nowhere", objs: pods(1, "3"), max: 4, wantIncreased: 0},
		// The scheduler has not yet placed pods on a node that just became
		// ready: they need no new node (CA's filter-out-schedulable).
		{name: "pods that fit a ready borrowed node's room need no node", objs: append(pods(2, "1"), roomyNode("a")), max: 4, target: 1, instances: []string{"liqo://p/a"}, wantIncreased: 0},
		{name: "only the pods beyond a ready node's room count", objs: append(pods(3, "1"), roomyNode("a"), boundPod("a", "1")), max: 4, target: 1, instances: []string{"liqo://p/a"}, wantIncreased: 1},
		{name: "nothing pending", max: 4, wantIncreased: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &cloud{max: tc.max, target: tc.target, instances: tc.instances}
			a, err := New(Config{Client: c, Kube: kubefake.NewClientset(tc.objs...)})
			if err != nil {
				t.Fatal(err)
			}
			if err := a.RunOnce(context.Background()); err != nil {
				t.Fatal(err)
			}
			if c.increased != tc.wantIncreased {
				t.Errorf("IncreaseSize by %d, want %d", c.increased, tc.wantIncreased)
			}
			if len(c.deleted) != 0 {
				t.Errorf("deleted %v, want none", c.deleted)
			}
		})
	}
}

func TestScaleDownAfterUnneededTime(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	busyPod := pendingPod("busy", "1")
	busyPod.Spec.NodeName, busyPod.Status = "busy", corev1.PodStatus{Phase: corev1.PodRunning}
	kube := kubefake.NewClientset(borrowedNode("idle"), borrowedNode("busy"), busyPod)
	c := &cloud{max: 4, target: 2, instances: []string{"liqo://p/idle", "liqo://p/busy"}}
	a, err := New(Config{Client: c, Kube: kube, ScaleDownUnneededTime: 10 * time.Second, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		advance time.Duration
		want    int
	}{{0, 0}, {9 * time.Second, 0}, {time.Second, 1}} {
		now = now.Add(step.advance)
		if err := a.RunOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		if len(c.deleted) != step.want {
			t.Fatalf("after %s: deleted %v, want %d node(s)", step.advance, c.deleted, step.want)
		}
	}
	if c.deleted[0] != "idle" {
		t.Errorf("deleted %v, want the idle node", c.deleted)
	}
}

func TestNoScaleDownWhilePodsPend(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	kube := kubefake.NewClientset(borrowedNode("idle"), pendingPod("big", "3"))
	c := &cloud{max: 4, target: 1, instances: []string{"liqo://p/idle"}}
	a, err := New(Config{Client: c, Kube: kube, ScaleDownUnneededTime: time.Second, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := a.RunOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		now = now.Add(time.Second)
	}
	if len(c.deleted) != 0 {
		t.Errorf("deleted %v while a pod was pending", c.deleted)
	}
}

// TestLoopSteady: a loop is steady at n when n nodes are registered, the
// targets sum to n and no instance is unregistered, failed or deleting.
func TestLoopSteady(t *testing.T) {
	two := func(mod func(g *Group)) *Loop {
		g := &Group{ID: "g", Target: 2, Registered: []Node{{}, {}}}
		if mod != nil {
			mod(g)
		}
		return &Loop{Groups: map[string]*Group{"g": g}}
	}
	for _, tc := range []struct {
		name string
		l    *Loop
		n    int
		want bool
	}{
		{"two registered, target two", two(nil), 2, true},
		{"another n", two(nil), 3, false},
		{"target above the nodes", two(func(g *Group) { g.Target = 3 }), 2, false},
		{"an unregistered instance", two(func(g *Group) { g.Unregistered = []string{"i"} }), 2, false},
		{"a failed instance", two(func(g *Group) { g.Failed = []string{"i"} }), 2, false},
		{"an instance deleting", two(func(g *Group) { g.Deleting = []string{"i"} }), 2, false},
		{"no group at zero", &Loop{}, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.l.Steady(tc.n); got != tc.want {
				t.Fatalf("Steady(%d) = %v, want %v", tc.n, got, tc.want)
			}
		})
	}
}
