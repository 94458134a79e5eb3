package liqo_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/federation-autoscaler/federation-autoscaler/agent/liqo"
)

func clusterIDConfigMap(ns, id string, labelled bool) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: liqo.ClusterIDConfigMapName}, Data: map[string]string{liqo.ClusterIDConfigMapKey: id}}
	if labelled {
		cm.Labels = map[string]string{liqo.ClusterIDConfigMapLabel: liqo.ClusterIDConfigMapLabelValue}
	}
	return cm
}

func TestResolveClusterID(t *testing.T) {
	long := strings.Repeat("a", 52)
	tests := []struct {
		name       string
		objs       []client.Object
		ns         string
		configured string
		want       string
		wantErr    string
	}{
		{name: "read from Liqo", objs: []client.Object{clusterIDConfigMap("liqo", "4c8e-uuid", true)}, want: "4c8e-uuid"},
		{name: "configured and agreeing", objs: []client.Object{clusterIDConfigMap("liqo", "cons-1", true)}, configured: "cons-1", want: "cons-1"},
		{name: "another namespace", objs: []client.Object{clusterIDConfigMap("liqo-system", "cons-1", true)}, ns: "liqo-system", want: "cons-1"},
		{name: "mismatch is refused naming both ids", objs: []client.Object{clusterIDConfigMap("liqo", "4c8e-uuid", true)}, configured: "cons-1",
			wantErr: "--liqo-cluster-id cons-1 disagrees with Liqo's own cluster id 4c8e-uuid"},
		{name: "Liqo absent", wantErr: "no Liqo installation in namespace liqo"},
		{name: "Liqo in another namespace than asked", objs: []client.Object{clusterIDConfigMap("liqo-system", "x", true)}, wantErr: "point --liqo-namespace at"},
		{name: "not Liqo's ConfigMap", objs: []client.Object{clusterIDConfigMap("liqo", "x", false)}, wantErr: "is not Liqo's clusterid ConfigMap"},
		{name: "no key", objs: []client.Object{&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "liqo", Name: liqo.ClusterIDConfigMapName,
			Labels: map[string]string{liqo.ClusterIDConfigMapLabel: liqo.ClusterIDConfigMapLabelValue}}}}, wantErr: "has no CLUSTER_ID key"},
		{name: "id too long for its tenant namespace", objs: []client.Object{clusterIDConfigMap("liqo", long, true)}, wantErr: "fits 63"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := runtime.NewScheme()
			if err := clientgoscheme.AddToScheme(s); err != nil {
				t.Fatal(err)
			}
			c := fake.NewClientBuilder().WithScheme(s).WithObjects(tt.objs...).Build()
			got, err := liqo.ResolveClusterID(context.Background(), c, tt.ns, tt.configured)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ResolveClusterID = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestCheckClusterIDFitsTheTenantNamespace(t *testing.T) {
	for _, tt := range []struct {
		id string
		ok bool
	}{
		{strings.Repeat("a", 51), true},
		{strings.Repeat("a", 52), false},
		{"a.b", false}, // a DNS subdomain is not a Liqo id
		{"UPPER", false},
		{"", false},
		{"7c1ab0f2-6c5e-4d0e-9a57-2b1d0cf5c8a1", true}, // what liqoctl install picks
	} {
		err := liqo.CheckClusterID("id", tt.id)
		if (err == nil) != tt.ok {
			t.Errorf("CheckClusterID(%q) = %v, want ok=%v", tt.id, err, tt.ok)
		}
		if tt.ok && len(liqo.TenantNamespace(tt.id)) > 63 {
			t.Errorf("tenant namespace of %q is %d characters", tt.id, len(liqo.TenantNamespace(tt.id)))
		}
	}
}
