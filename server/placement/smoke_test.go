package placement

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

func TestSmokeView(t *testing.T) {
	ix := NewIndex(DefaultChunkConfig())
	ix.UpsertProvider(Provider{ID: "p1", Available: true, Resources: corev1.ResourceList{"cpu": resource.MustParse("8"), "memory": resource.MustParse("16Gi")}})
	ix.UpsertProvider(Provider{ID: "p2", Available: true, Resources: corev1.ResourceList{"cpu": resource.MustParse("4"), "memory": resource.MustParse("16Gi")}})
	v := ix.View("c1", false)
	if len(v.NodeGroups) != 1 || v.NodeGroups[0].ProviderClusterID != "p1" || v.NodeGroups[0].MaxSize != 4 {
		t.Fatalf("view = %+v", v)
	}
	ix.SetUsage("p1", api.ChunkStandard, "c2", Usage{Live: 4})
	v = ix.View("c1", false)
	if len(v.NodeGroups) != 1 || v.NodeGroups[0].ProviderClusterID != "p2" || v.NodeGroups[0].MaxSize != 2 {
		t.Fatalf("view = %+v", v)
	}
}
