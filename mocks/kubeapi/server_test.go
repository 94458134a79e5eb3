package kubeapi_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/federation-autoscaler/federation-autoscaler/deploy/testpoll"
	"github.com/federation-autoscaler/federation-autoscaler/mocks/kubeapi"
)

func startServer(t *testing.T) *rest.Config {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	srv := kubeapi.New(kubeapi.Options{Name: t.Name()})
	cfg, err := srv.Start(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = srv.Close()
	})
	return cfg
}

func TestTypedClientCRUDAndSelectors(t *testing.T) {
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(startServer(t))

	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "work"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	// A pod in a missing namespace is refused, as NamespaceLifecycle does.
	_, err := cs.CoreV1().Pods("nope").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}, metav1.CreateOptions{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("pod in missing namespace: got %v, want NotFound", err)
	}
	for i, node := range []string{"", "n1", ""} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i), Labels: map[string]string{"app": "a", "i": fmt.Sprint(i)}},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
		created, err := cs.CoreV1().Pods("work").Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create pod: %v", err)
		}
		if created.UID == "" || created.ResourceVersion == "" || created.Status.Phase != corev1.PodPending {
			t.Fatalf("created pod lacks server fields: %+v", created.ObjectMeta)
		}
	}
	if _, err := cs.CoreV1().Pods("work").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p0"}}, metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("duplicate create: got %v, want AlreadyExists", err)
	}
	tests := []struct {
		name         string
		label, field string
		want         int
	}{
		{"all", "", "", 3},
		{"label", "i=1", "", 1},
		{"unscheduled", "", "spec.nodeName=", 2},
		{"scheduled", "app=a", "spec.nodeName=n1", 1},
		{"by name", "", "metadata.name=p2", 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			list, err := cs.CoreV1().Pods("work").List(ctx, metav1.ListOptions{LabelSelector: tc.label, FieldSelector: tc.field})
			if err != nil {
				t.Fatal(err)
			}
			if len(list.Items) != tc.want {
				t.Fatalf("got %d pods, want %d", len(list.Items), tc.want)
			}
		})
	}

	// Optimistic concurrency: a stale update conflicts.
	p, _ := cs.CoreV1().Pods("work").Get(ctx, "p0", metav1.GetOptions{})
	stale := p.DeepCopy()
	p.Labels["x"] = "1"
	if _, err := cs.CoreV1().Pods("work").Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update: %v", err)
	}
	stale.Labels["x"] = "2"
	if _, err := cs.CoreV1().Pods("work").Update(ctx, stale, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("stale update: got %v, want Conflict", err)
	}
	// Status subresource: only status changes there, status ignored on the main resource.
	p, _ = cs.CoreV1().Pods("work").Get(ctx, "p0", metav1.GetOptions{})
	p.Status.Phase = corev1.PodRunning
	p.Labels["y"] = "ignored"
	if _, err := cs.CoreV1().Pods("work").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, _ := cs.CoreV1().Pods("work").Get(ctx, "p0", metav1.GetOptions{})
	if got.Status.Phase != corev1.PodRunning || got.Labels["y"] != "" {
		t.Fatalf("status update: phase %q labels %v", got.Status.Phase, got.Labels)
	}
	// Binding sets the node once.
	if err := cs.CoreV1().Pods("work").Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "p2"}, Target: corev1.ObjectReference{Kind: "Node", Name: "n2"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("bind: %v", err)
	}
	got, _ = cs.CoreV1().Pods("work").Get(ctx, "p2", metav1.GetOptions{})
	if got.Spec.NodeName != "n2" {
		t.Fatalf("bound pod on %q", got.Spec.NodeName)
	}
	// Strategic merge and JSON patches.
	if _, err := cs.CoreV1().Pods("work").Patch(ctx, "p1", types.StrategicMergePatchType, []byte(`{"metadata":{"labels":{"s":"1"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatalf("strategic patch: %v", err)
	}
	if _, err := cs.CoreV1().Pods("work").Patch(ctx, "p1", types.JSONPatchType, []byte(`[{"op":"add","path":"/metadata/labels/j","value":"2"}]`), metav1.PatchOptions{}); err != nil {
		t.Fatalf("json patch: %v", err)
	}
	got, _ = cs.CoreV1().Pods("work").Get(ctx, "p1", metav1.GetOptions{})
	if got.Labels["s"] != "1" || got.Labels["j"] != "2" || got.Labels["app"] != "a" {
		t.Fatalf("patched labels %v", got.Labels)
	}
	// Finalizers hold deletion until removed.
	got.Finalizers = []string{"example.com/hold"}
	_, err = cs.CoreV1().Pods("work").Update(ctx, got, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Pods("work").Delete(ctx, "p1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err = cs.CoreV1().Pods("work").Get(ctx, "p1", metav1.GetOptions{})
	if err != nil || got.DeletionTimestamp == nil {
		t.Fatalf("finalized pod: err %v, deletionTimestamp %v", err, got.DeletionTimestamp)
	}
	got.Finalizers = nil
	if _, err := cs.CoreV1().Pods("work").Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Pods("work").Get(ctx, "p1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("pod after last finalizer: got %v, want NotFound", err)
	}
	// Deleting a namespace removes its objects.
	if err := cs.CoreV1().Namespaces().Delete(ctx, "work", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	list, _ := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if len(list.Items) != 0 {
		t.Fatalf("%d pods left after namespace deletion", len(list.Items))
	}
}

func TestInformersSeeChanges(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs := kubernetes.NewForConfigOrDie(startServer(t))
	factory := informers.NewSharedInformerFactory(cs, 0)
	nodes := factory.Core().V1().Nodes()
	inf := nodes.Informer()
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("informer never synced")
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}}}
	if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testpoll.Until(t, 10*time.Second, "informer sees the node", func() bool {
		n, err := nodes.Lister().Get("n1")
		return err == nil && n.Status.Allocatable.Cpu().Value() == 4
	})
	if err := cs.CoreV1().Nodes().Delete(ctx, "n1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testpoll.Until(t, 10*time.Second, "informer sees the deletion", func() bool {
		_, err := nodes.Lister().Get("n1")
		return apierrors.IsNotFound(err)
	})
}

func TestCRDsWithControllerRuntimeAndDynamic(t *testing.T) {
	ctx := context.Background()
	cfg := startServer(t)
	sch := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(sch)
	_ = apiextensionsv1.AddToScheme(sch)
	c, err := client.New(cfg, client.Options{Scheme: sch})
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Kind: "Widget", ListKind: "WidgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				Schema:       &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object"}},
			}},
		},
	}
	if err := c.Create(ctx, crd); err != nil {
		t.Fatalf("create CRD: %v", err)
	}
	var got apiextensionsv1.CustomResourceDefinition
	if err := c.Get(ctx, client.ObjectKey{Name: crd.Name}, &got); err != nil {
		t.Fatal(err)
	}
	established := false
	for _, cond := range got.Status.Conditions {
		established = established || (cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue)
	}
	if !established {
		t.Fatalf("CRD not Established: %+v", got.Status.Conditions)
	}

	w := &unstructured.Unstructured{}
	w.SetAPIVersion("example.com/v1")
	w.SetKind("Widget")
	w.SetNamespace("default")
	w.SetName("w1")
	_ = unstructured.SetNestedField(w.Object, "blue", "spec", "color")
	if err := c.Create(ctx, w); err != nil {
		t.Fatalf("create widget: %v", err)
	}
	_ = unstructured.SetNestedField(w.Object, "Ready", "status", "phase")
	if err := c.Status().Update(ctx, w); err != nil {
		t.Fatalf("status update: %v", err)
	}
	patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"size":3}}`))
	if err := c.Patch(ctx, w, patch); err != nil {
		t.Fatalf("merge patch: %v", err)
	}
	dyn := dynamic.NewForConfigOrDie(cfg)
	gvr := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	u, err := dyn.Resource(gvr).Namespace("default").Get(ctx, "w1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
	color, _, _ := unstructured.NestedString(u.Object, "spec", "color")
	size, _, _ := unstructured.NestedInt64(u.Object, "spec", "size")
	if phase != "Ready" || color != "blue" || size != 3 || u.GetGeneration() != 2 {
		t.Fatalf("widget: phase %q color %q size %d generation %d", phase, color, size, u.GetGeneration())
	}
	list := &unstructured.UnstructuredList{}
	list.SetAPIVersion("example.com/v1")
	list.SetKind("WidgetList")
	if err := c.List(ctx, list, client.InNamespace("default")); err != nil || len(list.Items) != 1 {
		t.Fatalf("list widgets: %v, %d items", err, len(list.Items))
	}
	// Deleting the CRD stops serving it.
	if err := c.Delete(ctx, crd); err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(gvr).Namespace("default").Get(ctx, "w1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("widget after CRD deletion: got %v, want NotFound", err)
	}
}

func TestWatchResumesFromResourceVersion(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs := kubernetes.NewForConfigOrDie(startServer(t))
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}}
	created, err := cs.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.Data = map[string]string{"k": "v"}
	if _, err := cs.CoreV1().ConfigMaps("default").Update(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := cs.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{ResourceVersion: created.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ev := <-w.ResultChan()
	if ev.Type != "MODIFIED" || ev.Object.(*corev1.ConfigMap).Data["k"] != "v" {
		t.Fatalf("first event after resume: %s %+v", ev.Type, ev.Object)
	}
}

// TestProtobufBodies: client-go sends built-in types (and CRDs) as
// protobuf unless told otherwise; the server stores them as JSON.
func TestProtobufBodies(t *testing.T) {
	ctx := context.Background()
	cfg := rest.CopyConfig(startServer(t))
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cs := kubernetes.NewForConfigOrDie(cfg)
	if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "pb"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("protobuf create: %v", err)
	}
	got, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "pb", metav1.GetOptions{})
	if err != nil || got.Data["k"] != "v" {
		t.Fatalf("read back: %v %+v", err, got)
	}

	sch := runtime.NewScheme()
	_ = apiextensionsv1.AddToScheme(sch)
	codecs := serializer.NewCodecFactory(sch)
	info, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	if !ok {
		t.Fatal("no protobuf serializer")
	}
	crd := &apiextensionsv1.CustomResourceDefinition{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{Name: "gadgets.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com", Scope: apiextensionsv1.ClusterScoped,
			Names:    apiextensionsv1.CustomResourceDefinitionNames{Plural: "gadgets", Kind: "Gadget"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true}},
		},
	}
	var body bytes.Buffer
	if err := codecs.EncoderForVersion(info.Serializer, apiextensionsv1.SchemeGroupVersion).Encode(crd, &body); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(cfg.Host+"/apis/apiextensions.k8s.io/v1/customresourcedefinitions", runtime.ContentTypeProtobuf, &body)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("protobuf CRD create: status %d", resp.StatusCode)
	}
	if _, err := cs.Discovery().ServerResourcesForGroupVersion("example.com/v1"); err != nil {
		t.Fatalf("the CRD's resource is not served: %v", err)
	}
}

// TestCloseUnderTraffic: Close returns promptly while clients keep
// watching, re-watching and holding a request half-sent, and every request
// after it is refused the way a real apiserver refuses during shutdown.
func TestCloseUnderTraffic(t *testing.T) {
	srv := kubeapi.New(kubeapi.Options{Name: t.Name()})
	cfg, err := srv.Start(context.Background(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(cfg)
	// Informers re-watch as soon as a watch ends.
	stop := make(chan struct{})
	defer close(stop)
	factory := informers.NewSharedInformerFactory(cs, 0)
	pods := factory.Core().V1().Pods().Informer()
	factory.Start(stop)
	if !cache.WaitForCacheSync(stop, pods.HasSynced) {
		t.Fatal("pod informer never synced")
	}
	// Raw watchers that reopen their watch in a loop, as fast as they can.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	opened := make(chan struct{}, 1)
	for range 4 {
		go func() {
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Host+"/api/v1/namespaces/default/pods?watch=true", nil)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					continue
				}
				select {
				case opened <- struct{}{}:
				default:
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}
		}()
	}
	<-opened
	// A request whose body never finishes keeps its connection busy.
	half, err := net.Dial("tcp", strings.TrimPrefix(cfg.Host, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer half.Close()
	if _, err := io.WriteString(half, "POST /api/v1/namespaces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"apiVersion\":"); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- srv.Close() }()
	select {
	case err := <-done:
		t.Logf("Close returned in %s (err %v)", time.Since(start).Round(time.Millisecond), err)
	case <-time.After(5 * time.Second):
		t.Fatal("Close is still waiting after 5 s")
	}
	// Nothing is left open: the half-sent request's connection is closed.
	if err := half.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, half); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("a half-sent request's connection is still open 5 s after Close")
		}
	}
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v1/namespaces/default/pods?watch=true", nil))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "shutting down") {
		t.Fatalf("a watch after Close: %d %s, want 503 apiserver is shutting down", rec.Code, rec.Body)
	}
	if err := srv.Close(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		t.Fatalf("second Close: %v", err)
	}
}
