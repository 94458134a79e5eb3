package provider

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/federation-autoscaler/federation-autoscaler/deploy/testcluster"
	"github.com/federation-autoscaler/federation-autoscaler/deploy/testpoll"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// recordingBroker records advertisements and serves no instructions.
type recordingBroker struct {
	mu   sync.Mutex
	advs []api.AdvertisementRequest
}

func (b *recordingBroker) Advertise(_ context.Context, req api.AdvertisementRequest) (api.AdvertisementResponse, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.advs = append(b.advs, req)
	return api.AdvertisementResponse{Accepted: true}, nil
}
func (b *recordingBroker) Advertisement(_ context.Context, id string) (api.AdvertisementSnapshot, error) {
	return api.AdvertisementSnapshot{ClusterID: id}, nil
}

func (b *recordingBroker) Instructions(ctx context.Context, _ time.Duration) ([]api.InstructionView, bool, error) {
	<-ctx.Done()
	return nil, false, ctx.Err()
}
func (b *recordingBroker) PostResult(context.Context, string, api.InstructionResultRequest) error {
	return nil
}

func (b *recordingBroker) last() (api.AdvertisementRequest, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.advs) == 0 {
		return api.AdvertisementRequest{}, 0
	}
	return b.advs[len(b.advs)-1], len(b.advs)
}

type nopUsers struct{}

func (nopUsers) GeneratePeeringUser(context.Context, string) (string, error) { return "kc", nil }
func (nopUsers) DeletePeeringUser(context.Context, string) error             { return nil }

// runAgent runs a until the test ends, then stops it and fails the test
// if Run returned an error.
func runAgent(t *testing.T, a *Agent) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
}

func mkNode(t *testing.T, kube kubernetes.Interface, name string, ready, cordoned bool, lbls map[string]string, cpu, mem string) {
	t.Helper()
	ctx := context.Background()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls}, Spec: corev1.NodeSpec{Unschedulable: cordoned}}
	created, err := kube.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	created.Status = corev1.NodeStatus{
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem), corev1.ResourcePods: resource.MustParse("110")},
		Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem), corev1.ResourcePods: resource.MustParse("110")},
		Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}},
		Addresses:   []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "172.23.4.10"}},
	}
	if _, err := kube.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func mkPod(t *testing.T, kube kubernetes.Interface, name, node, cpu string, lbls map[string]string) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: lbls},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "busybox",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}},
	}
	out, err := kube.CoreV1().Pods("default").Create(context.Background(), p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestFreeCapacityFromRealObjects runs the provider against a real
// kube-apiserver: the advertisement follows Node and Pod changes.
func TestFreeCapacityFromRealObjects(t *testing.T) {
	env := testcluster.Start(t)
	kube, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	mkNode(t, kube, "worker-1", true, false, nil, "4", "8Gi")
	mkNode(t, kube, "cordoned", true, true, nil, "16", "64Gi")
	mkNode(t, kube, "not-ready", false, false, nil, "16", "64Gi")
	mkNode(t, kube, "rs-virtual", true, false, map[string]string{liqoTypeLabel: liqoVirtualNodeType}, "2", "4Gi")

	b := &recordingBroker{}
	a, err := New(Config{ClusterID: "provider-1", Kube: kube, Broker: b, Driver: nopUsers{}, Interval: time.Hour, Debounce: 10 * time.Millisecond, ProbePort: 5000})
	if err != nil {
		t.Fatal(err)
	}
	runAgent(t, a)
	cpuIs := func(want string) func() bool {
		return func() bool {
			adv, n := b.last()
			q := adv.Resources[corev1.ResourceCPU]
			return n > 0 && q.Cmp(resource.MustParse(want)) == 0
		}
	}
	testpoll.Until(t, 30*time.Second, "first advertisement: only worker-1 counts", cpuIs("4"))
	first, _ := b.last()
	if m := first.Resources[corev1.ResourceMemory]; m.Cmp(resource.MustParse("8Gi")) != 0 || first.ProbeEndpoint != "172.23.4.10:5000" {
		t.Fatalf("first advertisement %+v", first)
	}

	podA := mkPod(t, kube, "a", "worker-1", "1", nil)
	testpoll.Until(t, 30*time.Second, "pod a subtracted", cpuIs("3"))
	mkPod(t, kube, "offloaded", "worker-1", "1", map[string]string{liqoManagedByLabel: liqoShadowPodManaged})
	mkPod(t, kube, "on-cordoned", "cordoned", "1", nil)
	podB := mkPod(t, kube, "b", "worker-1", "500m", nil)
	// Only b changes the amount: the offloaded pod is the broker's, the
	// cordoned node does not count.
	testpoll.Until(t, 30*time.Second, "pod b subtracted", cpuIs("2500m"))
	if err := kube.CoreV1().Pods("default").Delete(context.Background(), podA.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	testpoll.Until(t, 30*time.Second, "pod a removed", cpuIs("3500m"))
	podB.Status.Phase = corev1.PodSucceeded
	if _, err := kube.CoreV1().Pods("default").UpdateStatus(context.Background(), podB, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testpoll.Until(t, 30*time.Second, "succeeded pod b no longer counts", cpuIs("4"))

	// Caps from the sharing configuration apply at once.
	p50 := int32(50)
	if err := a.Sharing().Apply(SharingConfig{Capacity: map[corev1.ResourceName]Cap{corev1.ResourceCPU: {Percent: &p50}}, UnitPrices: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0.02")}}); err != nil {
		t.Fatal(err)
	}
	testpoll.Until(t, 30*time.Second, "50% cap", cpuIs("2"))
	last, _ := b.last()
	if last.CapacityScalePercent["cpu"] != 50 || last.UnitPrices.Cpu().String() != "20m" {
		t.Errorf("capped advertisement %+v", last)
	}
}
