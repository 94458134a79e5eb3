package provider

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/federation-autoscaler/federation-autoscaler/agent/health"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// TestAdvertisementStaysWithinTheBrokersLimits: what the cluster and the
// location and carbon services report is checked with the broker's rules
// before it is sent. A node reporting more than api.MaxQuantity advertises
// the maximum; an unusable location or carbon answer is left out (and shown
// as a missing input) instead of making the broker refuse the whole
// advertisement.
func TestAdvertisementStaysWithinTheBrokersLimits(t *testing.T) {
	tests := []struct {
		name        string
		topo        *api.Topology
		current     float64
		forecast    []float64
		wantTopo    bool
		wantCarbon  bool
		wantInputOK map[string]bool
	}{
		{name: "usable", topo: &api.Topology{Region: "eu", City: "Paris", Latitude: 48.86, Longitude: 2.35}, current: 55, forecast: []float64{55, 60},
			wantTopo: true, wantCarbon: true, wantInputOK: map[string]bool{"geo": true, "carbon": true}},
		{name: "latitude out of range", topo: &api.Topology{Region: "eu", Latitude: 999, Longitude: 2},
			wantInputOK: map[string]bool{"geo": false}},
		{name: "huge carbon", topo: &api.Topology{Region: "eu", Latitude: 1, Longitude: 2}, current: 9e307,
			wantTopo: true, wantInputOK: map[string]bool{"geo": true, "carbon": false}},
		{name: "huge forecast value", topo: &api.Topology{Region: "eu", Latitude: 1, Longitude: 2}, current: 10, forecast: []float64{10, 1e30},
			wantTopo: true, wantInputOK: map[string]bool{"geo": true, "carbon": false}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			node := &corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: "n1"},
				Status: corev1.NodeStatus{
					Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1e30"), corev1.ResourceMemory: resource.MustParse("8Gi")},
					Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
					Addresses:   []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}},
				},
			}
			tracker := health.NewTracker(nil, 0)
			a, err := New(Config{
				ClusterID: "provider-1", Kube: kubefake.NewClientset(node), Broker: &recordingBroker{}, Driver: nopUsers{}, Tracker: tracker,
				Geo: func(context.Context, string) (*api.Topology, error) { return tc.topo, nil },
				Carbon: func(context.Context, string) (*float64, []float64, error) {
					cur := tc.current
					return &cur, tc.forecast, nil
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer func() { cancel(); a.cap.Shutdown() }()
			if err := a.cap.Start(ctx); err != nil {
				t.Fatal(err)
			}
			req, err := a.Advertisement(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := req.Validate(); err != nil {
				t.Fatalf("the agent built an advertisement the broker refuses: %v", err)
			}
			if cpu, limit := req.Resources[corev1.ResourceCPU], api.MaxQuantityValue(); cpu.Cmp(limit) != 0 {
				t.Errorf("cpu %s, want the limit %s", cpu.String(), limit.String())
			}
			if mem := req.Resources[corev1.ResourceMemory]; mem.String() != "8Gi" {
				t.Errorf("memory %s changed", mem.String())
			}
			if (req.Topology != nil) != tc.wantTopo || (req.CarbonIntensity != nil) != tc.wantCarbon {
				t.Errorf("topology %+v carbon %v, want topology %v carbon %v", req.Topology, req.CarbonIntensity, tc.wantTopo, tc.wantCarbon)
			}
			inputs := tracker.Report().Inputs
			for name, ok := range tc.wantInputOK {
				if got := inputs[name]; (got == "ok") != ok || !ok && !strings.Contains(got, "must be") {
					t.Errorf("input %s = %q, want ok=%v with the broker's reason", name, got, ok)
				}
			}
		})
	}
}
