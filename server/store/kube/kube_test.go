package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	brokercrds "github.com/federation-autoscaler/federation-autoscaler/deploy/crds/broker"
	"github.com/federation-autoscaler/federation-autoscaler/deploy/testbin"
	"github.com/federation-autoscaler/federation-autoscaler/deploy/testcluster"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/store"
	"github.com/federation-autoscaler/federation-autoscaler/server/store/storetest"
)

// cluster is one real kube-apiserver + etcd shared by the subtests of
// TestKubernetesStore, each in its own namespace.
type cluster struct {
	cfg *rest.Config
	cs  kubernetes.Interface
	n   atomic.Int64
}

func (c *cluster) namespace(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("store-%d", c.n.Add(1))
	_, err := c.cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return name
}

func (c *cluster) open(t testing.TB, ns string, mod ...func(*Options)) *Store {
	t.Helper()
	opts := Options{Namespace: ns}
	for _, m := range mod {
		m(&opts)
	}
	s, err := Open(c.cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestKubernetesStore(t *testing.T) {
	env := testcluster.Start(t)
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{cfg: env.Config, cs: cs}
	// Before the CRDs are installed: Load says what to do.
	t.Run("CRDsMissing", func(t *testing.T) {
		_, err := c.open(t, c.namespace(t)).Load(context.Background())
		if err == nil || !strings.Contains(err.Error(), "kubectl apply -f deploy/crds/broker") {
			t.Fatalf("Load without the CRDs: %v", err)
		}
	})
	if err := brokercrds.Install(context.Background(), env.Config); err != nil {
		t.Fatal(err)
	}
	t.Run("Conformance", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) storetest.Opener {
			ns := c.namespace(t)
			return func(t *testing.T) store.Store { return c.open(t, ns) }
		})
	})
	for name, fn := range map[string]func(*testing.T, *cluster){
		"CrashAtEveryStep":            testCrashAtEveryStep,
		"CredentialsOnlyInSecrets":    testCredentialsOnlyInSecrets,
		"SecondWriterIsFenced":        testSecondWriterIsFenced,
		"StaleWriterNeverOverwrites":  testStaleWriterNeverOverwrites,
		"PrinterColumns":              testPrinterColumns,
		"LargeBatchInParts":           testLargeBatchInParts,
		"ManifestRoleSuffices":        testManifestRoleSuffices,
		"WarmStandby":                 testWarmStandby,
		"StalledWriterNeverRecreates": testStalledWriterNeverRecreates,
	} {
		t.Run(name, func(t *testing.T) { fn(t, c) })
	}
}

var errCrash = errors.New("injected crash")

func res(id string, phase api.Phase) store.Reservation {
	return store.Reservation{ID: id, ConsumerID: "c1", ProviderID: "p1", ChunkType: api.ChunkStandard, ChunkCount: 1, Phase: phase}
}

func mustLoad(t *testing.T, s store.Store) store.Snapshot {
	t.Helper()
	snap, err := s.Load(context.Background())
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return snap
}

func mustApply(t *testing.T, s store.Store, batch ...store.Mutation) {
	t.Helper()
	if err := s.Apply(context.Background(), batch); err != nil {
		t.Fatalf("Apply: %v", err)
	}
}

func phases(snap store.Snapshot) map[string]api.Phase {
	out := map[string]api.Phase{}
	for _, r := range snap.Reservations {
		out[r.ID] = r.Phase
	}
	return out
}

// testCrashAtEveryStep stops an Apply after each of its steps, as a crash
// of the broker would, and checks that a new store loads either the state
// before the batch (crash before the commit point) or after it (at or
// after it), completes it, and keeps going.
func testCrashAtEveryStep(t *testing.T, c *cluster) {
	before := map[string]api.Phase{"a": api.PhasePending, "b": api.PhasePending}
	after := map[string]api.Phase{"a": api.PhasePeered, "c": api.PhasePending, "d": api.PhasePending}
	batch := []store.Mutation{
		store.PutReservation(res("a", api.PhasePeered)),
		store.Delete(store.KindReservation, "b"),
		store.PutReservation(res("c", api.PhasePending)),
		store.PutReservation(res("d", api.PhasePending)),
	}
	for _, tc := range []struct {
		step      string
		partBytes int
		want      map[string]api.Phase
	}{
		{"parts", 400, before}, // the parts are written, the head is not
		{"committed", 0, after},
		{"committed", 400, after},
		{"record 0", 0, after},
		{"record 2", 400, after},
	} {
		t.Run(fmt.Sprintf("%s/part-%d", tc.step, tc.partBytes), func(t *testing.T) {
			ns := c.namespace(t)
			setParts := func(o *Options) { o.PartBytes = tc.partBytes; o.Workers = 1 }
			s := c.open(t, ns, setParts)
			mustLoad(t, s)
			mustApply(t, s, store.PutReservation(res("a", api.PhasePending)), store.PutReservation(res("b", api.PhasePending)))
			s.opts.crash = func(step string) error {
				if step == tc.step {
					return errCrash
				}
				return nil
			}
			if err := s.Apply(context.Background(), batch); !errors.Is(err, errCrash) {
				t.Fatalf("Apply with a crash at %q: %v", tc.step, err)
			}
			// A new broker takes over.
			s2 := c.open(t, ns, setParts)
			if got := phases(mustLoad(t, s2)); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("after a crash at %q: %v, want %v", tc.step, got, tc.want)
			}
			mustApply(t, s2, store.PutReservation(res("e", api.PhaseFailed)))
			want := maps.Clone(tc.want)
			want["e"] = api.PhaseFailed
			// The objects themselves now hold exactly the state (nothing
			// left to replay) and no journal part is left over.
			s3 := c.open(t, ns)
			known, _, err := s3.readRecords(context.Background(), "")
			if err != nil {
				t.Fatal(err)
			}
			snap, err := snapshot(known, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := phases(snap); !reflect.DeepEqual(got, want) {
				t.Fatalf("record objects after the next commit: %v, want %v", got, want)
			}
			assertNoStaleParts(t, c, ns)
		})
	}
}

func assertNoStaleParts(t *testing.T, c *cluster, ns string) {
	t.Helper()
	l, err := c.cs.CoreV1().Secrets(ns).List(context.Background(), metav1.ListOptions{LabelSelector: LabelRecord + "=" + partRecord})
	if err != nil {
		t.Fatal(err)
	}
	h, err := journalStore{cs: c.cs, namespace: ns}.readHead(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range l.Items {
		if h.Journal.Parts == 0 || s.Annotations[annotationPartOf] != h.Journal.partOf() {
			t.Errorf("stale journal part %s left (head at %d)", s.Name, h.Journal.Seq)
		}
	}
}

func testCredentialsOnlyInSecrets(t *testing.T, c *cluster) {
	ns := c.namespace(t)
	s := c.open(t, ns)
	const secret = "SECRET-KUBECONFIG-7f3a"
	mustApply(t, s,
		store.PutReservation(res("r1", api.PhasePeering)),
		store.PutCredential(store.Credential{ConsumerID: "c1", ProviderID: "p1", Kubeconfig: secret}),
		store.PutInstruction(store.Instruction{ID: "gk.c1.p1", Kind: api.KindGenerateKubeconfig, TargetID: "p1"}),
	)
	for k, n := range crdKinds {
		raw, err := s.backends[k].(*crBackend).rc.Get().Namespace(ns).Resource(n[1]).Do(context.Background()).Raw()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(raw), secret) {
			t.Errorf("the credential is in a %s custom resource", n[0])
		}
	}
	sec, err := c.cs.CoreV1().Secrets(ns).Get(context.Background(), credentialPrefix+"c1.p1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sec.Type != SecretTypeCredential || !strings.Contains(string(sec.Data[recordDataKey]), secret) {
		t.Errorf("credential Secret: type %q, data %q", sec.Type, sec.Data)
	}
	if got := mustLoad(t, c.open(t, ns)).Credentials; len(got) != 1 || got[0].Kubeconfig != secret {
		t.Errorf("loaded credentials %+v", got)
	}
}

func testSecondWriterIsFenced(t *testing.T, c *cluster) {
	ns := c.namespace(t)
	a, b := c.open(t, ns), c.open(t, ns)
	mustLoad(t, a)
	mustLoad(t, b)
	mustApply(t, a, store.PutReservation(res("from-a", api.PhasePending)))
	if err := b.Apply(context.Background(), []store.Mutation{store.PutReservation(res("from-b", api.PhasePending))}); !errors.Is(err, ErrFenced) {
		t.Fatalf("second writer's Apply: %v, want ErrFenced", err)
	}
	// Fenced until it loads again; then it writes, and a is fenced.
	if err := b.Apply(context.Background(), []store.Mutation{store.PutReservation(res("from-b", api.PhasePending))}); !errors.Is(err, ErrFenced) {
		t.Fatalf("fenced writer's Apply before Load: %v", err)
	}
	if got := phases(mustLoad(t, b)); !reflect.DeepEqual(got, map[string]api.Phase{"from-a": api.PhasePending}) {
		t.Fatalf("b loads %v", got)
	}
	mustApply(t, b, store.PutReservation(res("from-b", api.PhasePending)))
	if err := a.Apply(context.Background(), []store.Mutation{store.Delete(store.KindReservation, "from-b")}); !errors.Is(err, ErrFenced) {
		t.Fatalf("first writer after the second committed: %v", err)
	}
	want := map[string]api.Phase{"from-a": api.PhasePending, "from-b": api.PhasePending}
	if got := phases(mustLoad(t, c.open(t, ns))); !reflect.DeepEqual(got, want) {
		t.Fatalf("final state %v, want %v", got, want)
	}
}

// testStaleWriterNeverOverwrites: a writer that committed, stalled before
// writing its records and resumed after another writer had replayed its
// commit and committed a later one must not overwrite the later record.
func testStaleWriterNeverOverwrites(t *testing.T, c *cluster) {
	ns := c.namespace(t)
	a := c.open(t, ns)
	mustLoad(t, a)
	mustApply(t, a, store.PutReservation(res("r", api.PhasePending)))
	a.opts.crash = func(step string) error {
		if step == "committed" {
			return errCrash
		}
		return nil
	}
	stale := []store.Mutation{store.PutReservation(res("r", api.PhasePeering))}
	if err := a.Apply(context.Background(), stale); !errors.Is(err, errCrash) {
		t.Fatal(err)
	}
	b := c.open(t, ns)
	if got := phases(mustLoad(t, b)); got["r"] != api.PhasePeering {
		t.Fatalf("b loads %v", got)
	}
	mustApply(t, b, store.PutReservation(res("r", api.PhasePeered)))
	// a resumes writing its commit's records.
	entries, err := encodeBatch(stale, DefaultPartBytes)
	if err != nil {
		t.Fatal(err)
	}
	a.opts.crash = nil
	if err := a.writeRecords(context.Background(), a.head.Journal.Seq, entries); !errors.Is(err, errSuperseded) {
		t.Fatalf("the stale writer: %v, want errSuperseded", err)
	}
	if !a.fenced {
		t.Error("the stale writer is not fenced")
	}
	if got := phases(mustLoad(t, c.open(t, ns))); got["r"] != api.PhasePeered {
		t.Fatalf("after the stale writer: %v", got)
	}
}

// testPrinterColumns asks the API server for the table kubectl get prints.
func testPrinterColumns(t *testing.T, c *cluster) {
	ns := c.namespace(t)
	s := c.open(t, ns)
	r := res("res-1", api.PhasePeered)
	r.ChunkCount = 3
	mustApply(t, s, store.PutReservation(r),
		store.PutAdvertisement(store.Advertisement{Request: api.AdvertisementRequest{ClusterID: "p1", Resources: corev1.ResourceList{corev1.ResourceCPU: mustQuantity(t, "16")}}}))
	for _, tc := range []struct {
		resource string
		want     map[string]string
	}{
		{"reservations", map[string]string{"Name": "res-1", "Phase": "Peered", "Consumer": "c1", "Provider": "p1", "Type": "standard", "Chunks": "3"}},
		{"advertisements", map[string]string{"Name": "p1", "Provider": "p1", "CPU": "16"}},
	} {
		raw, err := s.backends[store.KindReservation].(*crBackend).rc.Get().Namespace(ns).Resource(tc.resource).
			SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").Do(context.Background()).Raw()
		if err != nil {
			t.Fatal(err)
		}
		var table metav1.Table
		if err := json.Unmarshal(raw, &table); err != nil {
			t.Fatal(err)
		}
		if len(table.Rows) != 1 {
			t.Fatalf("%s: %d rows", tc.resource, len(table.Rows))
		}
		got := map[string]string{}
		for i, col := range table.ColumnDefinitions {
			got[col.Name] = fmt.Sprint(table.Rows[0].Cells[i])
		}
		for col, want := range tc.want {
			if got[col] != want {
				t.Errorf("kubectl get %s: column %s = %q, want %q (row %v)", tc.resource, col, got[col], want, got)
			}
		}
	}
}

func testLargeBatchInParts(t *testing.T, c *cluster) {
	ns := c.namespace(t)
	s := c.open(t, ns, func(o *Options) { o.PartBytes = 2 << 10 })
	var batch []store.Mutation
	for i := range 40 {
		batch = append(batch, store.PutReservation(res(fmt.Sprintf("r%02d", i), api.PhasePending)))
	}
	mustApply(t, s, batch...)
	if s.head.Journal.Parts < 2 {
		t.Fatalf("a %d-mutation batch with 2 KiB parts went into %d parts", len(batch), s.head.Journal.Parts)
	}
	mustApply(t, s, store.Delete(store.KindReservation, "r00"))
	assertNoStaleParts(t, c, ns)
	if got := len(mustLoad(t, c.open(t, ns)).Reservations); got != 39 {
		t.Fatalf("loaded %d reservations, want 39", got)
	}
	// A record larger than a part is refused, and says why.
	big := res("big", api.PhasePending)
	big.Message = strings.Repeat("x", 4<<10)
	err := s.Apply(context.Background(), []store.Mutation{store.PutReservation(big)})
	if err == nil || !strings.Contains(err.Error(), "at most") {
		t.Fatalf("an oversized record: %v", err)
	}
}

func mustQuantity(t *testing.T, s string) resource.Quantity {
	t.Helper()
	q, err := resource.ParseQuantity(s)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// testManifestRoleSuffices runs the store and the leader Lease as the HA
// manifests' ServiceAccount, with only the Role they grant it.
func testManifestRoleSuffices(t *testing.T, c *cluster) {
	ctx := context.Background()
	const ns = "federation-autoscaler"
	if _, err := c.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(testbin.RepoRoot(), "deploy", "manifests", "central", "ha", "broker-ha.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		var head struct{ Kind string }
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			t.Fatal(err)
		}
		switch head.Kind {
		case "Role":
			var r rbacv1.Role
			mustDecode(t, doc, &r)
			_, err = c.cs.RbacV1().Roles(ns).Create(ctx, &r, metav1.CreateOptions{})
		case "RoleBinding":
			var rb rbacv1.RoleBinding
			mustDecode(t, doc, &rb)
			_, err = c.cs.RbacV1().RoleBindings(ns).Create(ctx, &rb, metav1.CreateOptions{})
		default:
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	sa := rest.CopyConfig(c.cfg)
	sa.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":broker"}
	asSA := &cluster{cfg: sa, cs: kubernetes.NewForConfigOrDie(sa)}
	s := asSA.open(t, ns, func(o *Options) { o.PartBytes = 600 })
	mustLoad(t, s)
	mustApply(t, s, store.PutReservation(res("r1", api.PhasePending)), store.PutReservation(res("r2", api.PhasePending)),
		store.PutCredential(store.Credential{ConsumerID: "c1", ProviderID: "p1", Kubeconfig: "K"}),
		store.PutInstruction(store.Instruction{ID: "gk.c1.p1", Kind: api.KindGenerateKubeconfig, TargetID: "p1"}),
		store.PutAdvertisement(store.Advertisement{Request: api.AdvertisementRequest{ClusterID: "p1"}}),
		store.PutConsumer(store.Consumer{Heartbeat: api.HeartbeatRequest{ClusterID: "c1"}}))
	// A standby following it (watch) as the same ServiceAccount.
	standby := asSA.open(t, ns)
	follow(t, standby)
	mustApply(t, s, store.Delete(store.KindReservation, "r1"), store.Delete(store.KindCredential, "c1.p1"), store.Delete(store.KindInstruction, "gk.c1.p1"))
	if got := phases(mustLoad(t, s)); !reflect.DeepEqual(got, map[string]api.Phase{"r2": api.PhasePending}) {
		t.Fatalf("as the ServiceAccount: %v", got)
	}
	waitWarm(t, standby, store.KindReservation, store.KindCredential, store.KindInstruction)
	if got := phases(mustLoad(t, standby)); !reflect.DeepEqual(got, map[string]api.Phase{"r2": api.PhasePending}) || len(standby.lastLoad.Warm) < 3 {
		t.Fatalf("the standby as the ServiceAccount: %v, warm %v", got, standby.lastLoad.Warm)
	}
	leases := asSA.cs.CoordinationV1().Leases(ns)
	l, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "federation-autoscaler-broker"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating the Lease as the ServiceAccount: %v", err)
	}
	if l, err = leases.Get(ctx, l.Name, metav1.GetOptions{}); err == nil {
		_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	}
	if err != nil {
		t.Fatalf("renewing the Lease as the ServiceAccount: %v", err)
	}
	// And nothing beyond its namespace.
	if _, err := asSA.cs.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{}); err == nil {
		t.Error("the broker's ServiceAccount can list Secrets outside its namespace")
	}
}

func mustDecode(t *testing.T, doc string, into any) {
	t.Helper()
	if err := yaml.UnmarshalStrict([]byte(doc), into); err != nil {
		t.Fatal(err)
	}
}
