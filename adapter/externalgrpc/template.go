package externalgrpc

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// Labels and taint every Liqo virtual node carries (Liqo v1.1.2).
const (
	LabelLiqoType        = "liqo.io/type"
	LiqoTypeVirtualNode  = "virtual-node"
	LabelRemoteClusterID = "liqo.io/remote-cluster-id"
	TaintNotAllowedKey   = "virtual-node.liqo.io/not-allowed"
)

// DefaultPodsPerNode is the pod capacity of a template node when the chunk
// shape does not say.
const DefaultPodsPerNode = 110

// defaultChunk is the reference's compile-time chunk shape (§6.6), used for
// groups whose provider left the view and whose nodes report nothing.
func defaultChunk(t api.ChunkType) corev1.ResourceList {
	if t == api.ChunkGPU {
		return corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("4"),
			corev1.ResourceMemory: resource.MustParse("8Gi"),
			GPULabel:              resource.MustParse("1"),
		}
	}
	return corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("2"),
		corev1.ResourceMemory: resource.MustParse("4Gi"),
	}
}

// templateBytes returns the group's template node, serialized once.
func (g *group) templateBytes() ([]byte, error) {
	g.templateOnce.Do(func() {
		n := g.templateNode()
		g.template, g.templateErr = n.Marshal()
		if g.templateErr == nil && len(g.template) == 0 {
			g.templateErr = fmt.Errorf("template node of %s serialized to nothing", g.id)
		}
	})
	return g.template, g.templateErr
}

// templateNode builds a complete Node shaped like the virtual nodes the
// group adds: one chunk of capacity (plus pods), Liqo's labels and taint,
// the provider's topology, and a providerID in the liqo:// scheme.
func (g *group) templateNode() *corev1.Node {
	var res corev1.ResourceList
	switch {
	case g.view != nil && len(g.view.ChunkResources) > 0:
		res = g.view.ChunkResources.DeepCopy()
	default:
		for _, in := range g.instances {
			if len(in.allocatable) > 0 {
				res = in.allocatable.DeepCopy()
				break
			}
		}
		if res == nil {
			res = defaultChunk(g.typ)
		}
	}
	if _, ok := res[corev1.ResourcePods]; !ok {
		res[corev1.ResourcePods] = *resource.NewQuantity(DefaultPodsPerNode, resource.DecimalSI)
	}

	name := "template-" + g.id
	labels := map[string]string{}
	if g.view != nil {
		for k, v := range g.view.Labels {
			labels[k] = v
		}
		if t := g.view.Topology; t != nil {
			if t.Region != "" {
				labels[corev1.LabelTopologyRegion] = t.Region
			}
			if t.Zone != "" {
				labels[corev1.LabelTopologyZone] = t.Zone
			}
		}
	}
	labels[corev1.LabelHostname] = name
	labels[corev1.LabelOSStable] = "linux"
	labels[corev1.LabelArchStable] = "amd64"
	labels[LabelLiqoType] = LiqoTypeVirtualNode
	if g.liqoID != "" {
		labels[LabelRemoteClusterID] = g.liqoID
	}

	taints := []corev1.Taint{{Key: TaintNotAllowedKey, Value: "true", Effect: corev1.TaintEffectNoExecute}}
	if g.view != nil {
		for _, t := range g.view.Taints {
			if t.Key == TaintNotAllowedKey && t.Effect == corev1.TaintEffectNoExecute {
				continue
			}
			taints = append(taints, t)
		}
	}

	return &corev1.Node{
		TypeMeta:   metav1.TypeMeta{Kind: "Node", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: corev1.NodeSpec{
			ProviderID: api.ProviderID(g.provider, "template-"+string(g.typ)),
			Taints:     taints,
		},
		Status: corev1.NodeStatus{
			Capacity:    res,
			Allocatable: res.DeepCopy(),
			Phase:       corev1.NodeRunning,
			Conditions: []corev1.NodeCondition{
				{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "template of a Liqo virtual node"},
				{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
				{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse},
				{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse},
			},
			NodeInfo: corev1.NodeSystemInfo{OperatingSystem: "linux", Architecture: "amd64"},
		},
	}
}
