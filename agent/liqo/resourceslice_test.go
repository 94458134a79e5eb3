package liqo_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/federation-autoscaler/federation-autoscaler/agent/liqo"
)

func TestNewResourceSlice(t *testing.T) {
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi")}
	rs := liqo.NewResourceSlice("rs-r1", liqo.TenantNamespace("prov-1"), "cons-1", "prov-1", res)
	res[corev1.ResourceCPU] = resource.MustParse("99") // the slice keeps its own copy

	if rs.Namespace != "liqo-tenant-prov-1" || rs.Name != "rs-r1" {
		t.Errorf("slice at %s/%s", rs.Namespace, rs.Name)
	}
	for k, v := range map[string]string{"liqo.io/replication": "true", "liqo.io/remoteID": "prov-1", "liqo.io/remote-cluster-id": "prov-1"} {
		if rs.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, rs.Labels[k], v)
		}
	}
	if rs.Annotations["liqo.io/create-virtual-node"] != "true" {
		t.Errorf("annotations = %v", rs.Annotations)
	}
	if rs.Spec.Class != "default" || string(*rs.Spec.ConsumerClusterID) != "cons-1" || string(*rs.Spec.ProviderClusterID) != "prov-1" {
		t.Errorf("spec = %+v", rs.Spec)
	}
	if cpu := rs.Spec.Resources[corev1.ResourceCPU]; cpu.String() != "2" {
		t.Errorf("cpu = %s, want 2", cpu.String())
	}
	if err := liqo.CheckResourceSlice(rs); err != nil {
		t.Errorf("CheckResourceSlice(new slice) = %v", err)
	}
	if !liqo.WantsVirtualNode(rs) {
		t.Errorf("WantsVirtualNode(new slice) = false")
	}
}

func TestCheckResourceSlice(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(m map[string]string) (ns string)
		wantErr string
	}{
		{"no replication label", func(m map[string]string) string { delete(m, "liqo.io/replication"); return "" }, "liqo.io/replication=true is missing"},
		{"replication false", func(m map[string]string) string { m["liqo.io/replication"] = "false"; return "" }, "liqo.io/replication=true is missing"},
		{"no remote cluster id", func(m map[string]string) string { delete(m, "liqo.io/remote-cluster-id"); return "" }, "liqo.io/remote-cluster-id is missing"},
		{"remoteID differs", func(m map[string]string) string { m["liqo.io/remoteID"] = "other"; return "" }, "does not match"},
		{"wrong namespace", func(map[string]string) string { return "default" }, "not the tenant namespace"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := liqo.NewResourceSlice("rs", liqo.TenantNamespace("p"), "c", "p", nil)
			if ns := tt.mutate(rs.Labels); ns != "" {
				rs.Namespace = ns
			}
			err := liqo.CheckResourceSlice(rs)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("CheckResourceSlice = %v, want %q", err, tt.wantErr)
			}
		})
	}
	rs := liqo.NewResourceSlice("rs", liqo.TenantNamespace("p"), "c", "p", nil)
	for _, v := range []string{"", "false"} {
		rs.Annotations["liqo.io/create-virtual-node"] = v
		if liqo.WantsVirtualNode(rs) {
			t.Errorf("WantsVirtualNode with annotation %q = true", v)
		}
	}
}
