package autoscaler

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/federation-autoscaler/federation-autoscaler/adapter/externalgrpc/protos"
)

// replica is a Running, Ready pod of the "web" ReplicaSet on node.
func replica(name, node, cpu string) *corev1.Pod {
	p := boundPod(node, cpu)
	p.Name, p.Labels = name, map[string]string{"app": "web"}
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "u1", Controller: new(true)}}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	return p
}

func pdb(minAvailable, maxUnavailable *intstr.IntOrString) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "demo"}, Spec: policyv1.PodDisruptionBudgetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, MinAvailable: minAvailable, MaxUnavailable: maxUnavailable,
	}}
}

// TestScaleDownFollowsOptionsAndBudgets: node "a" holds one replica (half
// its CPU), node "b" has room. The group's NodeGroupGetOptions decides
// whether "a" is underutilized; the pods on it, their controller and
// PodDisruptionBudgets, and the room elsewhere whether it is removable; a
// removable one is tainted, drained and deleted after the unneeded time.
func TestScaleDownFollowsOptionsAndBudgets(t *testing.T) {
	drainAll := &protos.NodeGroupAutoscalingOptions{ScaleDownUtilizationThreshold: 1.01, ScaleDownUnneededDuration: durationpb.New(0)}
	one, three := intstr.FromInt32(1), intstr.FromInt32(3)
	bare := boundPod("a", "1")
	expendableBare := boundPod("a", "1")
	expendableBare.Spec.Priority = new(int32(-20))
	tests := []struct {
		name    string
		opts    *protos.NodeGroupAutoscalingOptions
		objs    []runtime.Object
		deleted bool
	}{
		{"CA's defaults (no options): a half-used node is needed", nil, []runtime.Object{replica("w1", "a", "1")}, false},
		{"threshold 1.01: drained", drainAll, []runtime.Object{replica("w1", "a", "1")}, true},
		{"a full node under threshold 1: needed", &protos.NodeGroupAutoscalingOptions{ScaleDownUtilizationThreshold: 1}, []runtime.Object{replica("w1", "a", "2")}, false},
		{"threshold 0.4: needed", &protos.NodeGroupAutoscalingOptions{ScaleDownUtilizationThreshold: 0.4}, []runtime.Object{replica("w1", "a", "1")}, false},
		{"a pod without a controller blocks", drainAll, []runtime.Object{bare}, false},
		{"an expendable pod does not block", drainAll, []runtime.Object{expendableBare}, true},
		{"PDB minAvailable 1 of 1 blocks", drainAll, []runtime.Object{replica("w1", "a", "1"), pdb(&one, nil)}, false},
		{"PDB minAvailable 1 of 2 allows", drainAll, []runtime.Object{replica("w1", "a", "1"), replica("w2", "b", "500m"), pdb(&one, nil)}, true},
		{"PDB maxUnavailable 1 allows", drainAll, []runtime.Object{replica("w1", "a", "1"), pdb(nil, &one)}, true},
		{"PDB minAvailable 3 of 3 blocks", drainAll, []runtime.Object{replica("w1", "a", "500m"), replica("w2", "a", "500m"), replica("w3", "b", "500m"), pdb(&three, nil)}, false},
		{"no room elsewhere blocks", drainAll, []runtime.Object{replica("w1", "a", "1"), replica("w2", "b", "1500m")}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Unix(1_000_000, 0)
			objs := append([]runtime.Object{roomyNode("a"), roomyNode("b")}, tc.objs...)
			kube := kubefake.NewClientset(objs...)
			c := &cloud{max: 4, target: 2, instances: []string{"liqo://p/a", "liqo://p/b"}, opts: tc.opts}
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
			gotA := false
			for _, d := range c.deleted {
				gotA = gotA || d == "a"
			}
			if gotA != tc.deleted {
				t.Fatalf("deleted %v; want a deleted: %v", c.deleted, tc.deleted)
			}
			pods, err := kube.CoreV1().Pods("demo").List(context.Background(), metav1.ListOptions{FieldSelector: "spec.nodeName=a"})
			if err != nil {
				t.Fatal(err)
			}
			left := 0
			for _, p := range pods.Items {
				if p.Spec.NodeName == "a" && !expendable(&p, DefaultExpendablePodsPriorityCutoff) {
					left++
				}
			}
			node, err := kube.CoreV1().Nodes().Get(context.Background(), "a", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if tc.deleted && (left != 0 || !hasTaint(node, ToBeDeletedTaint)) {
				t.Errorf("deleted node a: %d pods left that must move, tainted %v", left, hasTaint(node, ToBeDeletedTaint))
			}
			if !tc.deleted && hasTaint(node, ToBeDeletedTaint) {
				t.Error("a kept node was tainted")
			}
		})
	}
}

// groups is a cloud of two empty groups with labelled templates.
type groups struct {
	cloud
	increased map[string]int32
}

func (g *groups) NodeGroups(context.Context, *protos.NodeGroupsRequest, ...grpc.CallOption) (*protos.NodeGroupsResponse, error) {
	return &protos.NodeGroupsResponse{NodeGroups: []*protos.NodeGroup{{Id: "ng-dear-standard", MaxSize: 4}, {Id: "ng-cheap-standard", MaxSize: 4}}}, nil
}

func (g *groups) NodeGroupTargetSize(_ context.Context, r *protos.NodeGroupTargetSizeRequest, _ ...grpc.CallOption) (*protos.NodeGroupTargetSizeResponse, error) {
	return &protos.NodeGroupTargetSizeResponse{TargetSize: g.increased[r.GetId()]}, nil
}

func (g *groups) NodeGroupTemplateNodeInfo(ctx context.Context, r *protos.NodeGroupTemplateNodeInfoRequest, o ...grpc.CallOption) (*protos.NodeGroupTemplateNodeInfoResponse, error) {
	n := roomyNode("template")
	n.Labels = map[string]string{"liqo.io/remote-cluster-id": "liqo-" + r.GetId()}
	b, err := n.Marshal()
	return &protos.NodeGroupTemplateNodeInfoResponse{NodeBytes: b}, err
}

func (g *groups) NodeGroupIncreaseSize(_ context.Context, r *protos.NodeGroupIncreaseSizeRequest, _ ...grpc.CallOption) (*protos.NodeGroupIncreaseSizeResponse, error) {
	g.increased[r.GetId()] += r.GetDelta()
	return &protos.NodeGroupIncreaseSizeResponse{}, nil
}

// TestScaleUpFollowsSelectorsAndPriority: a pending pod without a selector
// grows the first group; one selecting the second group's template labels
// grows that one; an expendable pod grows nothing.
func TestScaleUpFollowsSelectorsAndPriority(t *testing.T) {
	selecting := pendingPod("placeholder", "1")
	selecting.Spec.NodeSelector = map[string]string{"liqo.io/remote-cluster-id": "liqo-ng-cheap-standard"}
	nowhere := pendingPod("nowhere", "1")
	nowhere.Spec.NodeSelector = map[string]string{"liqo.io/remote-cluster-id": "liqo-gone"}
	expendablePod := pendingPod("filler", "1")
	expendablePod.Spec.Priority = new(int32(-11))
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want map[string]int32
	}{
		{"no selector: the first group", pendingPod("p", "1"), map[string]int32{"ng-dear-standard": 1}},
		{"a selector: the group it selects", selecting, map[string]int32{"ng-cheap-standard": 1}},
		{"a selector no group matches: none", nowhere, map[string]int32{}},
		{"expendable: none", expendablePod, map[string]int32{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &groups{increased: map[string]int32{}}
			a, err := New(Config{Client: g, Kube: kubefake.NewClientset(tc.pod)})
			if err != nil {
				t.Fatal(err)
			}
			if err := a.RunOnce(context.Background()); err != nil {
				t.Fatal(err)
			}
			for id, n := range g.increased {
				if tc.want[id] != n {
					t.Errorf("IncreaseSize %s by %d, want %v", id, n, tc.want)
				}
			}
			if len(g.increased) != len(tc.want) {
				t.Errorf("increased %v, want %v", g.increased, tc.want)
			}
		})
	}
}
