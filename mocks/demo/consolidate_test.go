package demo_test

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	fav1alpha1 "github.com/federation-autoscaler/federation-autoscaler/agent/apis/v1alpha1"
	"github.com/federation-autoscaler/federation-autoscaler/agent/consolidate"
	"github.com/federation-autoscaler/federation-autoscaler/mocks/demo"
	"github.com/federation-autoscaler/federation-autoscaler/mocks/demo/workload"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// costThreshold sets the consumer's re-evaluation cost threshold in its
// ConsumerPolicy through the consumer cluster's Kubernetes API.
func (d *driver) costThreshold(perHour float64) {
	d.t.Helper()
	dyn, err := dynamic.NewForConfig(d.fed.Consumer.Cluster.RESTConfig())
	if err != nil {
		d.t.Fatal(err)
	}
	patch := fmt.Sprintf(`{"spec":{"lifecycle":{"thresholds":{"costPerHour":%g}}}}`, perHour)
	gvr := fav1alpha1.GroupVersion.WithResource("consumerpolicies")
	if _, err := dyn.Resource(gvr).Namespace(d.fed.Consumer.Namespace).Patch(context.Background(), "default", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		d.t.Fatalf("setting the ConsumerPolicy's cost threshold: %v", err)
	}
}

// decision is the broker's re-evaluation decision for the consumer's
// group, with the consumer's last heartbeat.
func (d *driver) decision(group string) (api.Reevaluation, metav1.Time, bool) {
	for _, c := range d.overview().Consumers {
		if c.ClusterID != demo.ConsumerID {
			continue
		}
		for _, r := range c.Reevaluations {
			if r.NodeGroupID == group {
				return r, c.LastSeen, true
			}
		}
		return api.Reevaluation{}, c.LastSeen, false
	}
	return api.Reevaluation{}, metav1.Time{}, false
}

// placeholders counts the consolidation placeholders on the consumer.
func (d *driver) placeholders() int {
	d.t.Helper()
	l, err := d.consumer.CoreV1().Pods(d.fed.Consumer.Namespace).List(context.Background(), metav1.ListOptions{LabelSelector: consolidate.LabelPlaceholder})
	if err != nil {
		d.t.Fatal(err)
	}
	return len(l.Items)
}

// watchRunningEvents follows the workload's pods with a watch (an
// informer: every add, update and delete in order) until the test ends;
// the returned func gives the fewest Running pods (phase Running, not
// being deleted) after any event since the watch synced.
func (d *driver) watchRunningEvents() func() int {
	d.t.Helper()
	var mu sync.Mutex
	fewest := math.MaxInt
	running := map[string]bool{}
	observe := func(obj any, gone bool) {
		p, ok := obj.(*corev1.Pod)
		if !ok {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				p, _ = t.Obj.(*corev1.Pod)
			}
		}
		if p == nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		running[p.Name] = !gone && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil
		n := 0
		for _, r := range running {
			if r {
				n++
			}
		}
		fewest = min(fewest, n)
	}
	pods := d.consumer.CoreV1().Pods("demo")
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = workload.Label
			return pods.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = workload.Label
			return pods.Watch(ctx, o)
		},
	}
	_, ctrl := cache.NewInformerWithOptions(cache.InformerOptions{ListerWatcher: lw, ObjectType: &corev1.Pod{}, Handler: cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { observe(obj, false) },
		UpdateFunc: func(_, obj any) { observe(obj, false) },
		DeleteFunc: func(obj any) { observe(obj, true) },
	}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); ctrl.RunWithContext(ctx) }()
	d.t.Cleanup(func() { cancel(); <-done })
	if !cache.WaitForCacheSync(ctx.Done(), ctrl.HasSynced) {
		d.t.Fatal("the pod watch did not sync")
	}
	// The initial list's adds count one by one: the floor starts once
	// every listed pod was seen.
	mu.Lock()
	fewest = 0
	for _, r := range running {
		if r {
			fewest++
		}
	}
	mu.Unlock()
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		return fewest
	}
}

// surges lists the consolidation's surge records left on the consumer's
// ReplicaSets.
func (d *driver) surges() []string {
	d.t.Helper()
	l, err := d.consumer.AppsV1().ReplicaSets(metav1.NamespaceAll).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		d.t.Fatal(err)
	}
	var out []string
	for _, rs := range l.Items {
		if v, ok := rs.Annotations[consolidate.AnnotationSurge]; ok {
			out = append(out, rs.Namespace+"/"+rs.Name+"="+v)
		}
	}
	return out
}

// TestConsolidation: the workload runs on montreal (0.086 per chunk-hour)
// while sydney (0.048) is away. When sydney comes back the saving, 0.038
// per chunk, does not beat the consumer's threshold of 0.05: the broker
// decides keep and nothing moves across two of the consumer's heartbeats.
// With the threshold at 0.01 it decides move, and the capacity moves to
// sydney through the Cluster Autoscaler stand-in, make-before-break:
// placeholders grow sydney's group, the workload's ReplicaSet is surged by
// montreal's 4 pods onto that room and scaled back once they are Running,
// the ReplicaSet controller deleting montreal's (lowest
// pod-deletion-cost), and CA removes montreal's emptied nodes. A watch on
// the pods sees Running never below the 6 replicas across the whole move
// (the PodDisruptionBudget, maxUnavailable 2, would have allowed 4: it is
// not what keeps them); afterwards no placeholder, no surge record, and the
// ReplicaSet back at 6. The broker's one disruption budget counts the
// consolidation once (the agent reports it in every heartbeat while it
// runs).
func TestConsolidation(t *testing.T) {
	fed := startDemo(t, demo.DefaultProviders(3), nil)
	d := newDriver(t, fed)
	d.eventually("three providers advertised", 30*time.Second, func() (bool, string) {
		o := d.overview()
		return len(o.Advertisements) == 3, fmt.Sprintf("%d advertisements", len(o.Advertisements))
	})
	d.policy("Price", nil)
	d.costThreshold(0.05)
	sydney := fed.Provider("sydney")
	sydney.Stop()
	d.eventually("sydney unavailable", 40*time.Second, func() (bool, string) {
		a, ok := d.advertisement("sydney")
		return ok && !a.Available, fmt.Sprintf("available=%v", a.Available)
	})
	maxUnavailable := intstr.FromInt32(2)
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "workload", Namespace: "demo"}, Spec: policyv1.PodDisruptionBudgetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{workload.Label: "true"}}, MaxUnavailable: &maxUnavailable,
	}}
	if _, err := d.consumer.PolicyV1().PodDisruptionBudgets("demo").Create(context.Background(), pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	d.workload(true, 6)
	d.runningOn(6, map[string]int{"montreal": 2})

	if err := sydney.Restart(); err != nil {
		t.Fatal(err)
	}
	const group = "ng-montreal-standard"
	var seen metav1.Time
	d.eventually("the broker keeps montreal: sydney saves 0.038, not more than 0.05", 60*time.Second, func() (bool, string) {
		r, last, ok := d.decision(group)
		seen = last
		return ok && r.Decision == api.DecisionKeep && r.Target == "sydney", fmt.Sprintf("%+v", r)
	})
	beats := 0
	d.eventually("two consumer heartbeats answered after the keep", 30*time.Second, func() (bool, string) {
		if _, last, _ := d.decision(group); last.After(seen.Time) {
			beats, seen = beats+1, last
		}
		return beats >= 2, fmt.Sprintf("%d heartbeats", beats)
	})
	if n := d.placeholders(); n != 0 {
		t.Fatalf("%d placeholders while the broker keeps montreal", n)
	}
	d.runningOn(6, map[string]int{"montreal": 2})

	floor := d.watchRunningEvents()
	if n := floor(); n != 6 {
		t.Fatalf("%d pods Running when the watch started, want 6", n)
	}
	d.costThreshold(0.01)
	d.eventually("the broker decides the move to sydney", 60*time.Second, func() (bool, string) {
		r, _, ok := d.decision(group)
		return ok && r.Decision == api.DecisionMove && r.Target == "sydney", fmt.Sprintf("%+v", r)
	})
	// Two new chunks peered, then two nodes drained one after the other
	// (each for the 2 s unneeded time): a generous deadline on a loaded
	// machine.
	moved := d.runningOnWithin(6, map[string]int{"sydney": 2}, 3*time.Minute)
	t.Logf("moved to sydney in %s after the move decision", moved.Round(time.Millisecond))
	d.eventually("the one disruption budget counts the consolidation once", 30*time.Second, func() (bool, string) {
		for _, c := range d.overview().Consumers {
			if b := c.MoveBudget; c.ClusterID == demo.ConsumerID && b != nil {
				// The broker's default budget: 2 moves per hour.
				return b.Consolidations == 1 && b.Migrations == 0 && b.Limit == 2 && b.WindowSeconds == 3600, b.Summary()
			}
		}
		return false, "no move budget in the overview"
	})
	if fewest := floor(); fewest < 6 {
		t.Errorf("Running pods fell to %d during the move, want never below the 6 replicas", fewest)
	}
	if n := d.placeholders(); n != 0 {
		t.Errorf("%d placeholders left after the move", n)
	}
	d.eventually("no surge left, the ReplicaSet back at 6", 30*time.Second, func() (bool, string) {
		rs, err := d.consumer.AppsV1().ReplicaSets("demo").Get(context.Background(), workload.ReplicaSetName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		s := d.surges()
		return len(s) == 0 && rs.Spec.Replicas != nil && *rs.Spec.Replicas == 6, fmt.Sprintf("surges %v, replicas %v", s, rs.Spec.Replicas)
	})
	d.off()
}
