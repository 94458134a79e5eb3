package consolidate

import (
	"context"
	"maps"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/federation-autoscaler/federation-autoscaler/adapter/localapi"
	"github.com/federation-autoscaler/federation-autoscaler/agent/liqo"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

const (
	dear  = "ng-dear-standard"
	cheap = "ng-cheap-standard"
)

func rl(cpu, mem string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}
}

// TestPlaceholder: the placeholder pod made for each kind of moving pod.
func TestPlaceholder(t *testing.T) {
	tol := corev1.Toleration{Key: liqo.VirtualNodeTaintKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}
	tests := []struct {
		name     string
		pod      corev1.PodSpec
		requests corev1.ResourceList
		selector map[string]string
	}{
		{"one container", corev1.PodSpec{Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: rl("1", "1Gi")}}}, Tolerations: []corev1.Toleration{tol}},
			rl("1", "1Gi"), map[string]string{liqo.RemoteClusterIDLabel: "liqo-cheap"}},
		{"containers summed, a larger init container wins, overhead added", corev1.PodSpec{
			Containers:     []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: rl("500m", "256Mi")}}, {Resources: corev1.ResourceRequirements{Requests: rl("250m", "256Mi")}}},
			InitContainers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: rl("2", "128Mi")}}},
			Overhead:       rl("100m", "0"),
		}, rl("2100m", "512Mi"), map[string]string{liqo.RemoteClusterIDLabel: "liqo-cheap"}},
		{"host and provider pins dropped, other selectors kept", corev1.PodSpec{
			Containers:   []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: rl("1", "1Gi")}}},
			NodeSelector: map[string]string{corev1.LabelHostname: "vn-1", liqo.RemoteClusterIDLabel: "liqo-dear", corev1.LabelArchStable: "amd64"},
		}, rl("1", "1Gi"), map[string]string{liqo.RemoteClusterIDLabel: "liqo-cheap", corev1.LabelArchStable: "amd64"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "shop"}, Spec: tc.pod}
			ph := Placeholder(p, "fa", dear, cheap, "liqo-cheap", DefaultPriorityClass, DefaultImage)
			if ph.Namespace != "fa" || ph.Labels[LabelPlaceholder] != key(dear) || ph.Annotations[AnnotationFor] != "shop/web-1" ||
				ph.Annotations[AnnotationFrom] != dear || ph.Annotations[AnnotationTo] != cheap {
				t.Errorf("metadata %+v", ph.ObjectMeta)
			}
			if again := Placeholder(p, "fa", dear, cheap, "liqo-cheap", DefaultPriorityClass, DefaultImage); again.Name != ph.Name {
				t.Errorf("names differ: %s, %s", ph.Name, again.Name)
			}
			got := ph.Spec.Containers[0].Resources.Requests
			if len(got) != len(tc.requests) {
				t.Errorf("requests %v, want %v", got, tc.requests)
			}
			for n, q := range tc.requests {
				if g := got[n]; g.Cmp(q) != 0 {
					t.Errorf("request %s = %s, want %s", n, g.String(), q.String())
				}
			}
			if !maps.Equal(ph.Spec.NodeSelector, tc.selector) {
				t.Errorf("node selector %v, want %v", ph.Spec.NodeSelector, tc.selector)
			}
			if len(ph.Spec.Tolerations) != len(tc.pod.Tolerations) {
				t.Errorf("tolerations %v, want %v", ph.Spec.Tolerations, tc.pod.Tolerations)
			}
			if ph.Spec.PriorityClassName != DefaultPriorityClass || ph.Spec.Priority == nil || *ph.Spec.Priority != PlaceholderPriority ||
				ph.Spec.PreemptionPolicy == nil || *ph.Spec.PreemptionPolicy != corev1.PreemptNever {
				t.Errorf("priority %q %v %v", ph.Spec.PriorityClassName, ph.Spec.Priority, ph.Spec.PreemptionPolicy)
			}
		})
	}
}

// fixture is a consumer cluster with virtual nodes on dear (autoscaled)
// and the view offering cheap.
type fixture struct {
	t    *testing.T
	kube *fake.Clientset
	clk  *clocktesting.FakeClock
	c    *Consolidator
	vns  []localapi.VirtualNode
	view []api.NodeGroupView
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{t: t, kube: fake.NewClientset(), clk: clocktesting.NewFakeClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))}
	var err error
	if f.c, err = New(Config{Kube: f.kube, Namespace: "fa", Clock: f.clk}); err != nil {
		t.Fatal(err)
	}
	f.view = []api.NodeGroupView{
		{ID: dear, ProviderClusterID: "dear", ProviderLiqoClusterID: "liqo-dear", Type: api.ChunkStandard, MaxSize: 2, CurrentReserved: 2},
		{ID: cheap, ProviderClusterID: "cheap", ProviderLiqoClusterID: "liqo-cheap", Type: api.ChunkStandard, MaxSize: 4},
	}
	return f
}

// node adds a Ready virtual node of reservation res in group g.
func (f *fixture) node(name, g, res string) {
	f.t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	if _, err := f.kube.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
		f.t.Fatal(err)
	}
	f.vns = append(f.vns, localapi.VirtualNode{Name: name, VirtualNodeName: name, ReservationID: res, NodeGroupID: g, Phase: localapi.PhaseRunning})
}

func (f *fixture) pod(ns, name, node string, mod ...func(*corev1.Pod)) {
	f.t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: corev1.PodSpec{NodeName: node,
		Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{Requests: rl("1", "1Gi")}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	for _, m := range mod {
		m(p)
	}
	if _, err := f.kube.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) reconcile(moves []api.Reevaluation, b Budget) {
	f.t.Helper()
	if err := f.c.Reconcile(context.Background(), Inputs{Moves: moves, Budget: b,
		VirtualNodes: func(context.Context) ([]localapi.VirtualNode, error) { return f.vns, nil }, Groups: func(context.Context) ([]api.NodeGroupView, error) {
			return f.view, nil
		}}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) placeholders() []corev1.Pod {
	f.t.Helper()
	l, err := f.kube.CoreV1().Pods(metav1.NamespaceAll).List(context.Background(), metav1.ListOptions{LabelSelector: LabelPlaceholder})
	if err != nil {
		f.t.Fatal(err)
	}
	return l.Items
}

// bindAll binds every placeholder to node.
func (f *fixture) bindAll(node string) {
	f.t.Helper()
	for _, p := range f.placeholders() {
		p.Spec.NodeName = node
		if _, err := f.kube.CoreV1().Pods(p.Namespace).Update(context.Background(), &p, metav1.UpdateOptions{}); err != nil {
			f.t.Fatal(err)
		}
	}
}

func move(from, target string) api.Reevaluation {
	return api.Reevaluation{NodeGroupID: from, ProviderClusterID: "dear", ChunkType: api.ChunkStandard, Decision: api.DecisionMove, Target: target, Reason: "cheaper"}
}

var oneAtATime = Budget{Max: 1, Window: 10 * time.Minute}

// TestMoveThroughItsPhases: a move decision for autoscaled nodes places one
// placeholder per moving pod (not the DaemonSet's, not a finished one) with
// no role yet; once they are bound to a Ready node of the better group they
// are deleted and the roles are drain/keep; once the worse group's nodes
// are gone the move ends and the roles go.
func TestMoveThroughItsPhases(t *testing.T) {
	f := newFixture(t)
	f.node("vn-dear-1", dear, "res-1")
	f.node("vn-dear-2", dear, "res-2")
	f.pod("shop", "web-1", "vn-dear-1")
	f.pod("shop", "web-2", "vn-dear-2")
	f.pod("kube-system", "agent-x", "vn-dear-1", func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "agent", Controller: new(true)}}
	})
	f.pod("shop", "job-1", "vn-dear-2", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded })

	f.reconcile([]api.Reevaluation{move(dear, "cheap")}, oneAtATime)
	ph := f.placeholders()
	if len(ph) != 2 {
		t.Fatalf("placeholders %d, want 2 (web-1, web-2)", len(ph))
	}
	for _, p := range ph {
		if p.Namespace != "fa" || p.Spec.NodeSelector[liqo.RemoteClusterIDLabel] != "liqo-cheap" {
			t.Errorf("placeholder %s/%s selects %v", p.Namespace, p.Name, p.Spec.NodeSelector)
		}
	}
	if _, err := f.kube.SchedulingV1().PriorityClasses().Get(context.Background(), DefaultPriorityClass, metav1.GetOptions{}); err != nil {
		t.Fatalf("PriorityClass: %v", err)
	}
	if r := f.c.Roles(); len(r) != 0 {
		t.Fatalf("roles while placing: %v, want none", r)
	}
	// Bound to a node that is not the better group's: still placing.
	f.node("vn-other", "ng-other-standard", "res-9")
	f.bindAll("vn-other")
	f.reconcile(nil, oneAtATime)
	if m := f.c.Moves(); len(m) != 1 || m[0].Phase != PhasePlacing {
		t.Fatalf("moves %+v, want one placing", m)
	}
	f.node("vn-cheap-1", cheap, "res-3")
	f.bindAll("vn-cheap-1")
	f.reconcile(nil, oneAtATime)
	if n := len(f.placeholders()); n != 0 {
		t.Fatalf("placeholders left after the room was made: %d", n)
	}
	if r := f.c.Roles(); !maps.Equal(r, map[string]api.ConsolidationRole{dear: api.RoleDrain, cheap: api.RoleKeep}) {
		t.Fatalf("roles %v, want dear drain, cheap keep", r)
	}
	// CA drained one node: still draining.
	f.vns[0].Phase = localapi.PhaseDeleting
	f.reconcile(nil, oneAtATime)
	if r := f.c.Roles(); r[dear] != api.RoleDrain {
		t.Fatalf("roles with one dear node left: %v", r)
	}
	f.vns = f.vns[2:]
	f.reconcile(nil, oneAtATime)
	if m, r := f.c.Moves(), f.c.Roles(); len(m) != 0 || len(r) != 0 {
		t.Fatalf("after the drain: moves %+v roles %v, want none", m, r)
	}
}

// TestWhatStartsAMove: decisions that start nothing, and the budget.
func TestWhatStartsAMove(t *testing.T) {
	tests := []struct {
		name   string
		setup  func(f *fixture)
		moves  []api.Reevaluation
		budget Budget
		want   int // moves under way
	}{
		{"move of autoscaled nodes", nil, []api.Reevaluation{move(dear, "cheap")}, oneAtATime, 1},
		{"a keep decision", nil, []api.Reevaluation{{NodeGroupID: dear, ChunkType: api.ChunkStandard, Decision: api.DecisionKeep, Target: "cheap"}}, oneAtATime, 0},
		{"only manual reservations there", func(f *fixture) {
			f.vns[0].ReservationID = "manual-1"
		}, []api.Reevaluation{move(dear, "cheap")}, oneAtATime, 0},
		{"target not in the view", nil, []api.Reevaluation{move(dear, "gone")}, oneAtATime, 0},
		{"target without head-room", func(f *fixture) {
			f.view[1].CurrentReserved = f.view[1].MaxSize
		}, []api.Reevaluation{move(dear, "cheap")}, oneAtATime, 0},
		{"budget 0", nil, []api.Reevaluation{move(dear, "cheap")}, Budget{Max: 0, Window: time.Hour}, 0},
		{"budget 1 of two decisions", func(f *fixture) {
			f.node("vn-mid-1", "ng-mid-standard", "res-m")
			f.pod("shop", "web-m", "vn-mid-1")
			f.view = append(f.view, api.NodeGroupView{ID: "ng-best-standard", ProviderClusterID: "best", ProviderLiqoClusterID: "liqo-best", Type: api.ChunkStandard, MaxSize: 2})
		}, []api.Reevaluation{move(dear, "cheap"), move("ng-mid-standard", "best")}, oneAtATime, 1},
		{"budget 2 of two decisions", func(f *fixture) {
			f.node("vn-mid-1", "ng-mid-standard", "res-m")
			f.view = append(f.view, api.NodeGroupView{ID: "ng-best-standard", ProviderClusterID: "best", ProviderLiqoClusterID: "liqo-best", Type: api.ChunkStandard, MaxSize: 2})
		}, []api.Reevaluation{move(dear, "cheap"), move("ng-mid-standard", "best")}, Budget{Max: 2, Window: time.Hour}, 2},
		{"a group a move grows into never moves itself", func(f *fixture) {
			f.node("vn-cheap-1", cheap, "res-c")
			f.view[0].CurrentReserved = 1
		}, []api.Reevaluation{move(dear, "cheap"), move(cheap, "dear")}, Budget{Max: 5, Window: time.Hour}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.node("vn-dear-1", dear, "res-1")
			f.pod("shop", "web-1", "vn-dear-1")
			if tc.setup != nil {
				tc.setup(f)
			}
			f.reconcile(tc.moves, tc.budget)
			if got := len(f.c.Moves()); got != tc.want {
				t.Fatalf("moves %+v, want %d", f.c.Moves(), tc.want)
			}
		})
	}
}

// TestBudgetWindow: with one move per 10 minutes, a second decision waits
// for the window even after the first move ended, then starts.
func TestBudgetWindow(t *testing.T) {
	f := newFixture(t)
	f.node("vn-dear-1", dear, "res-1")
	f.node("vn-mid-1", "ng-mid-standard", "res-m")
	f.view = append(f.view, api.NodeGroupView{ID: "ng-best-standard", ProviderLiqoClusterID: "liqo-best", Type: api.ChunkStandard, MaxSize: 2})
	both := []api.Reevaluation{move(dear, "cheap"), move("ng-mid-standard", "best")}
	f.reconcile(both, oneAtATime)
	if m := f.c.Moves(); len(m) != 1 || m[0].From != dear || m[0].Phase != PhaseDraining {
		t.Fatalf("moves %+v, want dear draining at once (no pod to make room for)", m)
	}
	f.vns = f.vns[1:] // dear drained
	f.clk.Step(9 * time.Minute)
	f.reconcile(both[1:], oneAtATime)
	if m := f.c.Moves(); len(m) != 0 {
		t.Fatalf("moves %+v inside the window, want none", m)
	}
	f.clk.Step(time.Minute)
	f.reconcile(both[1:], oneAtATime)
	if m := f.c.Moves(); len(m) != 1 || m[0].From != "ng-mid-standard" {
		t.Fatalf("moves %+v after the window, want mid", m)
	}
}

// TestTimeoutsAndOrphans: a move that gets no room in PlaceTimeout is
// abandoned and its placeholders deleted; one that does not drain in
// DrainTimeout ends with its roles; placeholders no move owns (an agent
// restart) are deleted.
func TestTimeoutsAndOrphans(t *testing.T) {
	f := newFixture(t)
	f.node("vn-dear-1", dear, "res-1")
	f.pod("shop", "web-1", "vn-dear-1")
	f.reconcile([]api.Reevaluation{move(dear, "cheap")}, oneAtATime)
	f.clk.Step(DefaultPlaceTimeout)
	f.reconcile(nil, oneAtATime)
	if m, n := f.c.Moves(), len(f.placeholders()); len(m) != 0 || n != 0 {
		t.Fatalf("after the place timeout: moves %+v, %d placeholders; want none", m, n)
	}

	f.clk.Step(oneAtATime.Window)
	f.reconcile([]api.Reevaluation{move(dear, "cheap")}, oneAtATime)
	f.node("vn-cheap-1", cheap, "res-3")
	f.bindAll("vn-cheap-1")
	f.reconcile(nil, oneAtATime)
	if r := f.c.Roles(); r[dear] != api.RoleDrain {
		t.Fatalf("roles %v, want dear drained", r)
	}
	f.clk.Step(DefaultDrainTimeout)
	f.reconcile(nil, oneAtATime)
	if m, r := f.c.Moves(), f.c.Roles(); len(m) != 0 || len(r) != 0 {
		t.Fatalf("after the drain timeout: moves %+v roles %v; want none", m, r)
	}

	restarted, err := New(Config{Kube: f.kube, Namespace: "fa", Clock: f.clk})
	if err != nil {
		t.Fatal(err)
	}
	f.pod("fa", "fa-placeholder-left", "", func(p *corev1.Pod) { p.Labels = map[string]string{LabelPlaceholder: key(dear)} })
	f.c = restarted
	f.reconcile(nil, oneAtATime)
	if n := len(f.placeholders()); n != 0 {
		t.Fatalf("orphaned placeholders left: %d", n)
	}
}
