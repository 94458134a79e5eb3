package preflight

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

var nsGR = schema.GroupResource{Resource: "namespaces"}

// newClient returns the agent's view (through funcs) and the test's view of
// one fake API.
func newClient(t *testing.T, funcs interceptor.Funcs, objs ...client.Object) (agent client.Client, direct client.Client) {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	base := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()
	return interceptor.NewClient(base, funcs), base
}

func forbidGet(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
	return apierrors.NewForbidden(nsGR, "fa", errors.New(`User "system:serviceaccount:fa:agent" cannot get resource "namespaces"`))
}

func forbidCreate(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error {
	return apierrors.NewForbidden(nsGR, "fa", errors.New(`User "system:serviceaccount:fa:agent" cannot create resource "namespaces"`))
}

func TestEnsureNamespace(t *testing.T) {
	existing := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fa"}}
	tests := []struct {
		name        string
		objs        []client.Object
		funcs       interceptor.Funcs
		wantCreated bool
		wantErr     string
	}{
		{name: "exists", objs: []client.Object{existing}},
		{name: "missing: created", wantCreated: true},
		{name: "missing, create forbidden", funcs: interceptor.Funcs{Create: forbidCreate},
			wantErr: "namespace fa does not exist and the agent may not create it"},
		{name: "get forbidden, exists", objs: []client.Object{existing}, funcs: interceptor.Funcs{Get: forbidGet}},
		{name: "get forbidden, missing: created", funcs: interceptor.Funcs{Get: forbidGet}, wantCreated: true},
		{name: "get and create forbidden", funcs: interceptor.Funcs{Get: forbidGet, Create: forbidCreate},
			wantErr: "cannot tell whether namespace fa exists"},
		{name: "being deleted", objs: []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fa", DeletionTimestamp: ptrNow(), Finalizers: []string{"kubernetes"}}}},
			wantErr: "is being deleted"},
		{name: "API down", funcs: interceptor.Funcs{Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
			return errors.New("connection refused")
		}}, wantErr: "reading namespace fa: connection refused"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, direct := newClient(t, tc.funcs, tc.objs...)
			created, err := EnsureNamespace(context.Background(), c, "fa")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || created != tc.wantCreated {
				t.Fatalf("created %v, err %v; want created %v", created, err, tc.wantCreated)
			}
			if created {
				var ns corev1.Namespace
				if err := direct.Get(context.Background(), client.ObjectKey{Name: "fa"}, &ns); err != nil || ns.Labels[ManagedByLabel] != ManagedBy {
					t.Fatalf("created namespace: %v %v", err, ns.Labels)
				}
			}
		})
	}
}

func TestCanList(t *testing.T) {
	tests := []struct {
		name    string
		list    client.ObjectList
		funcs   interceptor.Funcs
		wantErr string
	}{
		{name: "allowed", list: &corev1.NodeList{}},
		{name: "forbidden", list: &corev1.PodList{}, funcs: interceptor.Funcs{List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
			return apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("nope"))
		}}, wantErr: "the agent may not list Pod cluster-wide"},
		{name: "CRD missing", list: &corev1.ConfigMapList{}, funcs: interceptor.Funcs{List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
			return &meta.NoKindMatchError{GroupKind: schema.GroupKind{Group: "autoscaling.federation-autoscaler.io", Kind: "VirtualNodeState"}}
		}}, wantErr: "the API server does not serve ConfigMap"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := newClient(t, tc.funcs)
			err := CanList(context.Background(), c, tc.list, "")
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func ptrNow() *metav1.Time {
	n := metav1.Now()
	return &n
}
