package consolidate

import (
	"context"
	"encoding/json"
	"maps"
	"strconv"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// replicaSet adds ReplicaSet name in shop with replicas (controlled by
// Deployment dep when not empty) and returns the controller reference its
// pods carry.
func (f *fixture) replicaSet(name string, replicas int32, dep string) metav1.OwnerReference {
	f.t.Helper()
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop", UID: types.UID("uid-" + name), Generation: 1},
		Spec:   appsv1.ReplicaSetSpec{Replicas: new(replicas)},
		Status: appsv1.ReplicaSetStatus{Replicas: replicas, AvailableReplicas: replicas, ObservedGeneration: 1}}
	if dep != "" {
		rs.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: KindDeployment, Name: dep, UID: types.UID("uid-" + dep), Controller: new(true)}}
	}
	if _, err := f.kube.AppsV1().ReplicaSets("shop").Create(context.Background(), rs, metav1.CreateOptions{}); err != nil {
		f.t.Fatal(err)
	}
	return metav1.OwnerReference{APIVersion: "apps/v1", Kind: KindReplicaSet, Name: name, UID: rs.UID, Controller: new(true)}
}

func (f *fixture) deployment(name string, replicas int32, mod ...func(*appsv1.Deployment)) {
	f.t.Helper()
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop", UID: types.UID("uid-" + name), Generation: 1},
		Spec:   appsv1.DeploymentSpec{Replicas: new(replicas)},
		Status: appsv1.DeploymentStatus{Replicas: replicas, UpdatedReplicas: replicas, AvailableReplicas: replicas, ObservedGeneration: 1}}
	for _, m := range mod {
		m(d)
	}
	if _, err := f.kube.AppsV1().Deployments("shop").Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

// hpa adds a HorizontalPodAutoscaler in shop scaling kind/name.
func (f *fixture) hpa(kind, name string) {
	f.t.Helper()
	h := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{Kind: kind, Name: name, APIVersion: "apps/v1"}, MaxReplicas: 5}}
	if _, err := f.kube.AutoscalingV2().HorizontalPodAutoscalers("shop").Create(context.Background(), h, metav1.CreateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

func ownedBy(ref metav1.OwnerReference) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.OwnerReferences = []metav1.OwnerReference{ref} }
}

// scale reads an owner's replicas and surge record.
func (f *fixture) scale(kind, name string) (int32, string) {
	f.t.Helper()
	o, _, err := f.c.getOwner(context.Background(), kind, "shop", name)
	if err != nil {
		f.t.Fatal(err)
	}
	return *o.replicas, o.meta.Annotations[AnnotationSurge]
}

// observe plays the owner's controller: status caught up with the spec,
// available of them available.
func (f *fixture) observe(kind, name string, available int32) {
	f.t.Helper()
	ctx := context.Background()
	switch kind {
	case KindReplicaSet:
		rs, _ := f.kube.AppsV1().ReplicaSets("shop").Get(ctx, name, metav1.GetOptions{})
		rs.Generation++
		rs.Status = appsv1.ReplicaSetStatus{Replicas: *rs.Spec.Replicas, AvailableReplicas: available, ObservedGeneration: rs.Generation}
		if _, err := f.kube.AppsV1().ReplicaSets("shop").Update(ctx, rs, metav1.UpdateOptions{}); err != nil {
			f.t.Fatal(err)
		}
	case KindDeployment:
		d, _ := f.kube.AppsV1().Deployments("shop").Get(ctx, name, metav1.GetOptions{})
		d.Generation++
		d.Status = appsv1.DeploymentStatus{Replicas: *d.Spec.Replicas, UpdatedReplicas: *d.Spec.Replicas, AvailableReplicas: available, ObservedGeneration: d.Generation}
		if _, err := f.kube.AppsV1().Deployments("shop").Update(ctx, d, metav1.UpdateOptions{}); err != nil {
			f.t.Fatal(err)
		}
	}
}

func (f *fixture) tainted(node string) bool {
	f.t.Helper()
	n, err := f.kube.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	t := movingTaint(n)
	return t != nil && t.Effect == corev1.TaintEffectNoSchedule
}

func (f *fixture) deletionCost(ns, name string) string {
	f.t.Helper()
	p, err := f.kube.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return p.Annotations[corev1.PodDeletionCost]
}

// placed starts a move of dear to cheap and binds its placeholders.
func (f *fixture) placed() {
	f.t.Helper()
	f.reconcile([]api.Reevaluation{move(dear, "cheap")}, oneAtATime)
	f.node("vn-cheap-1", cheap, "res-c")
	f.bindAll("vn-cheap-1")
}

// TestSurgeMakesBeforeBreak: once the room is Ready, the pods of a
// ReplicaSet (and of a Deployment's) on the worse nodes get the lowest
// deletion cost, the worse nodes the NoSchedule taint, and the owners are
// scaled up by their pods there, with both groups "keep"; once the new pods
// are available the owners are scaled back (the record removed), and once
// their controllers observed that the worse group drains.
func TestSurgeMakesBeforeBreak(t *testing.T) {
	f := newFixture(t)
	f.node("vn-dear-1", dear, "res-1")
	f.node("vn-dear-2", dear, "res-2")
	web := f.replicaSet("web", 3, "")
	f.pod("shop", "web-a", "vn-dear-1", ownedBy(web))
	f.pod("shop", "web-b", "vn-dear-2", ownedBy(web))
	f.pod("shop", "web-c", "local-1", ownedBy(web))
	f.deployment("api", 2)
	apiRS := f.replicaSet("api-5d8", 2, "api")
	f.pod("shop", "api-a", "vn-dear-1", ownedBy(apiRS))
	f.pod("shop", "api-b", "local-1", ownedBy(apiRS))
	f.placed()

	f.reconcile(nil, oneAtATime)
	if m := f.c.Moves(); len(m) != 1 || m[0].Phase != PhaseSurging || len(m[0].Surges) != 2 {
		t.Fatalf("moves %+v, want one surging two owners", m)
	}
	if n := len(f.placeholders()); n != 0 {
		t.Fatalf("%d placeholders left while surging", n)
	}
	if r := f.c.Roles(); !maps.Equal(r, map[string]api.ConsolidationRole{dear: api.RoleKeep, cheap: api.RoleKeep}) {
		t.Fatalf("roles while surging %v, want both keep", r)
	}
	for _, n := range []string{"vn-dear-1", "vn-dear-2"} {
		if !f.tainted(n) {
			t.Errorf("%s not tainted %s:NoSchedule", n, TaintMoving)
		}
	}
	if f.tainted("vn-cheap-1") {
		t.Error("the better group's node is tainted")
	}
	low := strconv.Itoa(DeletionCost)
	for _, p := range []string{"web-a", "web-b", "api-a"} {
		if c := f.deletionCost("shop", p); c != low {
			t.Errorf("%s deletion cost %q, want %q", p, c, low)
		}
	}
	for _, p := range []string{"web-c", "api-b"} {
		if c := f.deletionCost("shop", p); c != "" {
			t.Errorf("%s (not on the worse nodes) deletion cost %q, want none", p, c)
		}
	}
	for _, tc := range []struct {
		kind, name string
		want, by   int32
	}{{KindReplicaSet, "web", 3, 2}, {KindDeployment, "api", 2, 1}} {
		got, rec := f.scale(tc.kind, tc.name)
		var r surgeRecord
		if err := json.Unmarshal([]byte(rec), &r); err != nil || r.Replicas != tc.want || r.By != tc.by || r.Move != key(dear) {
			t.Errorf("%s %s surge record %q (%v)", tc.kind, tc.name, rec, err)
		}
		if got != tc.want+tc.by {
			t.Errorf("%s %s replicas %d, want %d", tc.kind, tc.name, got, tc.want+tc.by)
		}
	}
	if got, _ := f.scale(KindReplicaSet, "api-5d8"); got != 2 {
		t.Errorf("the Deployment's ReplicaSet was scaled itself: %d", got)
	}

	// One owner's new pods available, not the other's: still surging.
	f.observe(KindReplicaSet, "web", 5)
	f.observe(KindDeployment, "api", 2)
	f.reconcile(nil, oneAtATime)
	if got, _ := f.scale(KindReplicaSet, "web"); got != 5 {
		t.Fatalf("web scaled back to %d before every surge was available", got)
	}
	f.observe(KindDeployment, "api", 3)
	f.reconcile(nil, oneAtATime)
	for _, tc := range []struct {
		kind, name string
		want       int32
	}{{KindReplicaSet, "web", 3}, {KindDeployment, "api", 2}} {
		if got, rec := f.scale(tc.kind, tc.name); got != tc.want || rec != "" {
			t.Errorf("%s %s after the surge: replicas %d record %q, want %d and none", tc.kind, tc.name, got, rec, tc.want)
		}
	}
	if m := f.c.Moves(); m[0].Phase != PhaseSurging {
		t.Fatalf("phase %s before the controllers observed the scale-back, want Surging", m[0].Phase)
	}
	f.observe(KindReplicaSet, "web", 3)
	f.observe(KindDeployment, "api", 2)
	f.reconcile(nil, oneAtATime)
	if r := f.c.Roles(); !maps.Equal(r, map[string]api.ConsolidationRole{dear: api.RoleDrain, cheap: api.RoleKeep}) {
		t.Fatalf("roles after the surge %v, want dear drain, cheap keep", r)
	}
	if !f.tainted("vn-dear-1") {
		t.Error("the worse node lost its taint while draining")
	}
	f.vns = f.vns[2:]
	f.reconcile(nil, oneAtATime)
	if m := f.c.Moves(); len(m) != 0 {
		t.Fatalf("moves %+v after the drain, want none", m)
	}
	if f.tainted("vn-dear-1") {
		t.Error("taint left after the move ended (node still listed)")
	}
}

// TestSurgeLeavesToCA: pods whose owner the surge must not scale keep CA's
// eviction; with none surged the move drains at once.
func TestSurgeLeavesToCA(t *testing.T) {
	tests := []struct {
		name  string
		setup func(f *fixture) func(*corev1.Pod)
	}{
		{"bare pod", func(*fixture) func(*corev1.Pod) { return func(*corev1.Pod) {} }},
		{"StatefulSet", func(*fixture) func(*corev1.Pod) {
			return ownedBy(metav1.OwnerReference{Kind: "StatefulSet", Name: "db", Controller: new(true)})
		}},
		{"HPA on the Deployment", func(f *fixture) func(*corev1.Pod) {
			f.deployment("web", 2)
			f.hpa(KindDeployment, "web")
			return ownedBy(f.replicaSet("web-1", 2, "web"))
		}},
		{"HPA on the ReplicaSet", func(f *fixture) func(*corev1.Pod) {
			f.hpa(KindReplicaSet, "web")
			return ownedBy(f.replicaSet("web", 2, ""))
		}},
		{"Deployment rolling out", func(f *fixture) func(*corev1.Pod) {
			f.deployment("web", 2, func(d *appsv1.Deployment) { d.Status.UpdatedReplicas = 1 })
			return ownedBy(f.replicaSet("web-1", 2, "web"))
		}},
		{"ReplicaSet gone", func(*fixture) func(*corev1.Pod) {
			return ownedBy(metav1.OwnerReference{Kind: KindReplicaSet, Name: "gone", Controller: new(true)})
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.node("vn-dear-1", dear, "res-1")
			f.pod("shop", "web-a", "vn-dear-1", tc.setup(f))
			f.placed()
			f.reconcile(nil, oneAtATime)
			if m := f.c.Moves(); len(m) != 1 || m[0].Phase != PhaseDraining || len(m[0].Surges) != 0 {
				t.Fatalf("moves %+v, want draining at once with no surge", m)
			}
			if !f.tainted("vn-dear-1") {
				t.Error("the worse node is not tainted: CA's evicted pods may land on it")
			}
			if c := f.deletionCost("shop", "web-a"); c != "" {
				t.Errorf("deletion cost %q on a pod left to CA", c)
			}
		})
	}
}

// TestSurgeTimeoutAndRestart: a surge not available in SurgeTimeout is
// scaled back and the move drains; replicas someone changed meanwhile are
// kept; a restarted agent undoes the surges and taints no move owns.
func TestSurgeTimeoutAndRestart(t *testing.T) {
	f := newFixture(t)
	f.node("vn-dear-1", dear, "res-1")
	web := f.replicaSet("web", 1, "")
	f.pod("shop", "web-a", "vn-dear-1", ownedBy(web))
	db := f.replicaSet("db", 1, "")
	f.pod("shop", "db-a", "vn-dear-1", ownedBy(db))
	f.placed()
	f.reconcile(nil, oneAtATime)
	// Someone scales db to 4 during the surge.
	rs, _ := f.kube.AppsV1().ReplicaSets("shop").Get(context.Background(), "db", metav1.GetOptions{})
	rs.Spec.Replicas = new(int32(4))
	if _, err := f.kube.AppsV1().ReplicaSets("shop").Update(context.Background(), rs, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.clk.Step(DefaultSurgeTimeout)
	f.reconcile(nil, oneAtATime)
	if got, rec := f.scale(KindReplicaSet, "web"); got != 1 || rec != "" {
		t.Fatalf("web after the surge timeout: %d replicas, record %q; want 1, none", got, rec)
	}
	if got, rec := f.scale(KindReplicaSet, "db"); got != 4 || rec != "" {
		t.Fatalf("db (changed meanwhile): %d replicas, record %q; want 4 kept, none", got, rec)
	}
	f.reconcile(nil, oneAtATime) // past the timeout: drains without waiting for the controllers
	if m := f.c.Moves(); len(m) != 1 || m[0].Phase != PhaseDraining {
		t.Fatalf("moves %+v, want draining", m)
	}

	// A restart mid-surge: the record and the taint are left behind.
	rec, _ := json.Marshal(surgeRecord{Move: key(dear), Replicas: 1, By: 1})
	rs, _ = f.kube.AppsV1().ReplicaSets("shop").Get(context.Background(), "web", metav1.GetOptions{})
	rs.Spec.Replicas, rs.Annotations = new(int32(2)), map[string]string{AnnotationSurge: string(rec)}
	if _, err := f.kube.AppsV1().ReplicaSets("shop").Update(context.Background(), rs, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	restarted, err := New(Config{Kube: f.kube, Namespace: "fa", Clock: f.clk})
	if err != nil {
		t.Fatal(err)
	}
	f.c = restarted
	f.reconcile(nil, oneAtATime)
	if got, rec := f.scale(KindReplicaSet, "web"); got != 1 || rec != "" {
		t.Fatalf("web after a restart: %d replicas, record %q; want 1, none", got, rec)
	}
	if f.tainted("vn-dear-1") {
		t.Fatal("taint left after a restart")
	}
}
