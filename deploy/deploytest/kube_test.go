package deploytest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"

	"github.com/federation-autoscaler/federation-autoscaler/deploy/testbin"
	"github.com/federation-autoscaler/federation-autoscaler/deploy/testcluster"
)

const (
	partOf    = "app.kubernetes.io/part-of=federation-autoscaler"
	testImage = "registry.example.org/fa/federation-autoscaler:v9.9.9"
)

// cluster is a real kube-apiserver + etcd with typed helpers.
type cluster struct {
	env *testcluster.Env
	dyn dynamic.Interface
	dis discovery.DiscoveryInterface
}

func startCluster(t *testing.T) *cluster {
	t.Helper()
	need(t)
	env := testcluster.Start(t)
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	dis, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	return &cluster{env: env, dyn: dyn, dis: dis}
}

// objKey names an object: group/kind, namespace, name.
func objKey(gvk schema.GroupVersionKind, ns, name string) string {
	return gvk.Group + "/" + gvk.Kind + " " + ns + "/" + name
}

// labeled lists every object of every listable resource matching selector,
// key → object. Objects being deleted (a finalizer only a controller
// removes; none runs here) are reported in terminating.
func (c *cluster) labeled(t *testing.T, selector string) (live map[string]*unstructured.Unstructured, terminating []string) {
	t.Helper()
	_, lists, err := c.dis.ServerGroupsAndResources()
	if err != nil {
		t.Fatalf("discovery: %v", err)
	}
	live = map[string]*unstructured.Unstructured{}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !hasVerb(r.Verbs, "list") {
				continue
			}
			if (gv.Group == "" && gv.Version == "v1" && r.Kind == "Event") || gv.Group == "events.k8s.io" {
				continue
			}
			items, err := c.dyn.Resource(gv.WithResource(r.Name)).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
			if err != nil {
				continue // e.g. a version not served for list
			}
			for i := range items.Items {
				o := &items.Items[i]
				k := objKey(gv.WithKind(r.Kind), o.GetNamespace(), o.GetName())
				if o.GetDeletionTimestamp() != nil {
					terminating = append(terminating, k)
					continue
				}
				live[k] = o
			}
		}
	}
	sort.Strings(terminating)
	return live, dedupe(terminating)
}

func dedupe(s []string) []string {
	var out []string
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

func hasVerb(verbs []string, v string) bool {
	for _, x := range verbs {
		if x == v {
			return true
		}
	}
	return false
}

func keys(m map[string]*unstructured.Unstructured) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// contains reports the first path where got lacks or differs from want
// (the server adds defaults, so got may hold more).
func contains(path string, want, got any) string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return path
		}
		for k, v := range w {
			if p := contains(path+"."+k, v, g[k]); p != "" {
				return p
			}
		}
		return ""
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return path
		}
		for i := range w {
			if p := contains(fmt.Sprintf("%s[%d]", path, i), w[i], g[i]); p != "" {
				return p
			}
		}
		return ""
	default:
		if !reflect.DeepEqual(want, got) {
			return fmt.Sprintf("%s: want %v, got %v", path, want, got)
		}
		return ""
	}
}

// checkApplied checks that the labeled objects of component are exactly the
// dry run's objects and each holds what the dry run printed.
func (c *cluster) checkApplied(t *testing.T, component, dryRun string) map[string]*unstructured.Unstructured {
	t.Helper()
	want := map[string]*unstructured.Unstructured{}
	for _, o := range decodeAll(t, []byte(dryRun)) {
		if o.GetKind() == "Secret" { // kustomize folds long base64 lines
			data, _, _ := unstructured.NestedStringMap(o.Object, "data")
			for k, v := range data {
				data[k] = strings.Join(strings.Fields(v), "")
			}
			_ = unstructured.SetNestedStringMap(o.Object, data, "data")
		}
		want[objKey(o.GroupVersionKind(), o.GetNamespace(), o.GetName())] = o
	}
	live, term := c.labeled(t, partOf+",app.kubernetes.io/component="+component)
	if len(term) > 0 {
		t.Errorf("objects terminating after up: %v", term)
	}
	if !reflect.DeepEqual(keys(want), keys(live)) {
		t.Fatalf("objects on the server differ from the dry run\n dry run: %v\n server:  %v", keys(want), keys(live))
	}
	for k, w := range want {
		if p := contains("", w.Object, live[k].Object); p != "" {
			t.Errorf("%s on the server differs from the dry run at %s", k, p)
		}
	}
	return live
}

// upTwice runs script with --dry-run, for real, and for real again: the
// server holds exactly the dry run's objects, the second run changes
// nothing and prints the same dry run.
func (c *cluster) upTwice(t *testing.T, dir, component, script string, args ...string) (map[string]*unstructured.Unstructured, result) {
	t.Helper()
	args = append([]string{"--kubeconfig", c.env.Kubeconfig, "--image", testImage}, args...)
	dry := mustRun(t, dir, script, append(args, "--dry-run")...)
	if d := os.Getenv("FA_DEPLOYTEST_DUMP"); d != "" { // keep the rendering for a look
		if err := os.WriteFile(filepath.Join(d, script+".yaml"), []byte(dry.Stdout), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if !strings.Contains(dry.Stdout, "kind: ") {
		t.Fatalf("%s --dry-run printed no manifests:\n%s", script, dry.Stderr)
	}
	if none, _ := c.labeled(t, partOf+",app.kubernetes.io/component="+component); len(none) > 0 {
		t.Fatalf("--dry-run created objects: %v", keys(none))
	}
	applied := mustRun(t, dir, script, args...)
	live := c.checkApplied(t, component, dry.Stdout)
	for k, o := range live {
		cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		for _, ct := range cs {
			if img := ct.(map[string]any)["image"].(string); img != testImage && !strings.HasPrefix(img, "registry.k8s.io/autoscaling/cluster-autoscaler:") {
				t.Errorf("%s runs image %q, want --image %s", k, img, testImage)
			}
		}
	}
	dry2 := mustRun(t, dir, script, append(args, "--dry-run")...)
	if dry2.Stdout != dry.Stdout {
		t.Errorf("a second --dry-run printed other manifests than the first")
	}
	mustRun(t, dir, script, args...)
	// Nothing changed: the same objects with the same content. The
	// resourceVersion is compared too, except for PersistentVolumeClaims:
	// their admission plugins make the API server write a no-op apply
	// (content identical, managedFields time included), which bumps it.
	again, _ := c.labeled(t, partOf+",app.kubernetes.io/component="+component)
	if !reflect.DeepEqual(keys(live), keys(again)) {
		t.Errorf("running %s twice changed the set of objects\n first: %v\n again: %v", script, keys(live), keys(again))
	}
	for k, o := range live {
		a := again[k]
		if a == nil {
			continue
		}
		if o.GetResourceVersion() != a.GetResourceVersion() && o.GetKind() != "PersistentVolumeClaim" {
			t.Errorf("running %s twice changed %s (resourceVersion %s → %s)", script, k, o.GetResourceVersion(), a.GetResourceVersion())
		}
		x, y := o.DeepCopy(), a.DeepCopy()
		x.SetResourceVersion("")
		y.SetResourceVersion("")
		if !reflect.DeepEqual(x.Object, y.Object) {
			xb, _ := json.MarshalIndent(x.Object, "", " ")
			yb, _ := json.MarshalIndent(y.Object, "", " ")
			t.Errorf("running %s twice changed %s:\nbefore: %s\nafter: %s", script, k, xb, yb)
		}
	}
	return live, applied
}

// down runs a down script and checks nothing of component is left (objects
// only a controller would finish deleting — namespace, PVC protection — must
// at least be terminating).
func (c *cluster) down(t *testing.T, dir, component, script string, args ...string) {
	t.Helper()
	sel := partOf + ",app.kubernetes.io/component=" + component
	before, _ := c.labeled(t, sel)
	dry := mustRun(t, dir, script, append([]string{"--kubeconfig", c.env.Kubeconfig, "--dry-run"}, args...)...)
	listed := strings.Fields(dry.Stdout)
	if len(listed) != len(before) {
		t.Errorf("%s --dry-run lists %d objects, %d are labeled for %s:\n%v\n%v", script, len(listed), len(before), component, listed, keys(before))
	}
	if after, _ := c.labeled(t, sel); len(after) != len(before) {
		t.Fatalf("%s --dry-run deleted objects", script)
	}
	mustRun(t, dir, script, append([]string{"--kubeconfig", c.env.Kubeconfig}, args...)...)
	live, term := c.labeled(t, sel)
	if len(live) > 0 {
		t.Errorf("%s left %v", script, keys(live))
	}
	for _, k := range term {
		if !strings.HasPrefix(k, "/Namespace ") && !strings.HasPrefix(k, "/PersistentVolumeClaim ") {
			t.Errorf("%s left %s terminating", script, k)
		}
	}
}

// canI asks the API server whether the ServiceAccount may do verb on
// resource in ns ("" for cluster scope).
func (c *cluster) canI(t *testing.T, ns, sa, verb, resource, inNS string) bool {
	t.Helper()
	args := []string{"--kubeconfig", c.env.Kubeconfig, "auth", "can-i", verb, resource, "--as=system:serviceaccount:" + ns + ":" + sa}
	if r, sub, ok := strings.Cut(resource, "/"); ok {
		args[4], args = r, append(args, "--subresource="+sub)
	}
	if inNS != "" {
		args = append(args, "-n", inNS)
	}
	out, _ := kubectl(t, args...)
	return strings.TrimSpace(out) == "yes"
}

func (c *cluster) checkRBAC(t *testing.T, ns, sa string, allowed, denied [][3]string) {
	t.Helper()
	for _, a := range allowed {
		if !c.canI(t, ns, sa, a[0], a[1], a[2]) {
			t.Errorf("%s cannot %s %s in %q, but needs to", sa, a[0], a[1], a[2])
		}
	}
	for _, d := range denied {
		if c.canI(t, ns, sa, d[0], d[1], d[2]) {
			t.Errorf("%s can %s %s in %q: more than it needs", sa, d[0], d[1], d[2])
		}
	}
}

func secretData(t *testing.T, live map[string]*unstructured.Unstructured, ns, name string) map[string][]byte {
	t.Helper()
	o, ok := live[objKey(schema.GroupVersionKind{Kind: "Secret"}, ns, name)]
	if !ok {
		t.Fatalf("no Secret %s/%s", ns, name)
	}
	s, _, _ := unstructured.NestedStringMap(o.Object, "data")
	out := map[string][]byte{}
	for k, v := range s {
		b, err := decodeB64(v)
		if err != nil {
			t.Fatalf("Secret %s/%s key %s: %v", ns, name, k, err)
		}
		out[k] = b
	}
	return out
}

func checkSecretFiles(t *testing.T, live map[string]*unstructured.Unstructured, ns, name string, files map[string]string) {
	t.Helper()
	data := secretData(t, live, ns, name)
	if len(data) != len(files) {
		t.Errorf("Secret %s holds %d keys, want %d (%v)", name, len(data), len(files), files)
	}
	for k, path := range files {
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(data[k], want) {
			t.Errorf("Secret %s key %s is not the bytes of %s", name, k, path)
		}
	}
}

func deploymentArgs(t *testing.T, live map[string]*unstructured.Unstructured, ns, name string, container int) []string {
	t.Helper()
	o, ok := live[objKey(schema.GroupVersionKind{Group: "apps", Kind: "Deployment"}, ns, name)]
	if !ok {
		t.Fatalf("no Deployment %s/%s", ns, name)
	}
	cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
	var args []string
	for _, a := range cs[container].(map[string]any)["args"].([]any) {
		args = append(args, a.(string))
	}
	return args
}

func hasArg(args []string, a string) bool {
	for _, x := range args {
		if x == a {
			return true
		}
	}
	return false
}

// TestManifestsServerDryRun validates every folder with a server-side
// dry-run apply against a real kube-apiserver (schemas, CRD validation,
// RBAC escalation checks).
func TestManifestsServerDryRun(t *testing.T) {
	c := startCluster(t)
	c.env.EnsureNamespace(t, "federation-autoscaler")
	c.env.EnsureNamespace(t, "federation-autoscaler-mocks")
	for _, f := range folders {
		t.Run(f, func(t *testing.T) {
			out, err := kubectl(t, "--kubeconfig", c.env.Kubeconfig, "apply", "--server-side", "--force-conflicts", "--dry-run=server",
				"--field-manager=deploytest", "-k", filepath.Join(testbin.RepoRoot(), "deploy", "manifests", f))
			if err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(out, "(server dry run)"); n != len(kustomize(t, f)) {
				t.Errorf("%d objects validated, want %d:\n%s", n, len(kustomize(t, f)), out)
			}
		})
	}
}
