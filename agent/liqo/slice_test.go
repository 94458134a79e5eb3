package liqo_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	authv1beta1 "github.com/liqotech/liqo/apis/authentication/v1beta1"

	"github.com/federation-autoscaler/federation-autoscaler/agent/liqo"
)

// webhookLike refuses a Create of a slice name that exists, with Forbidden,
// as Liqo's validating webhook does (admission runs before the store's
// AlreadyExists). creates counts the Creates that reached it.
func webhookLike(creates *int) interceptor.Funcs {
	return interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		if _, ok := obj.(*authv1beta1.ResourceSlice); ok {
			*creates++
			var list authv1beta1.ResourceSliceList
			if err := c.List(ctx, &list); err != nil {
				return err
			}
			for _, rs := range list.Items {
				if rs.Name == obj.GetName() {
					return apierrors.NewForbidden(schema.GroupResource{Group: "authentication.liqo.io", Resource: "resourceslices"}, obj.GetName(),
						errString("a resourceslice with the same name already exists in the cluster"))
				}
			}
		}
		return c.Create(ctx, obj, opts...)
	}}
}

type errString string

func (e errString) Error() string { return string(e) }

func TestEnsureResourceSlice(t *testing.T) {
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
	want := liqo.NewResourceSlice("rs-r1", liqo.TenantNamespace("prov"), "cons", "prov", res)
	other := liqo.NewResourceSlice("rs-r1", liqo.TenantNamespace("prov"), "cons", "prov", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")})
	elsewhere := liqo.NewResourceSlice("rs-r1", liqo.TenantNamespace("prov2"), "cons", "prov2", res)
	tests := []struct {
		name        string
		existing    []client.Object
		wantErr     string
		wantCreates int // over the three calls
	}{
		{name: "absent: created", wantCreates: 1},
		{name: "redelivered: read, not created again", existing: []client.Object{want.DeepCopy()}, wantCreates: 0},
		{name: "a different slice of that name is an error", existing: []client.Object{other}, wantErr: "is not the one asked for (resources"},
		{name: "the name taken in another namespace: Liqo's refusal is reported", existing: []client.Object{elsewhere}, wantErr: "same name already exists", wantCreates: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := runtime.NewScheme()
			if err := authv1beta1.AddToScheme(s); err != nil {
				t.Fatal(err)
			}
			creates := 0
			c := fake.NewClientBuilder().WithScheme(s).WithObjects(tt.existing...).WithInterceptorFuncs(webhookLike(&creates)).Build()
			for i := range 3 { // every call converges to the same answer
				err := liqo.EnsureResourceSlice(context.Background(), c, want)
				if tt.wantErr != "" {
					if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
						t.Fatalf("call %d: error = %v, want it to contain %q", i, err, tt.wantErr)
					}
					continue
				}
				if err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
			}
			if creates != tt.wantCreates {
				t.Errorf("%d Creates reached the API, want %d", creates, tt.wantCreates)
			}
			if tt.wantErr == "" {
				var live authv1beta1.ResourceSlice
				if err := c.Get(context.Background(), client.ObjectKeyFromObject(want), &live); err != nil {
					t.Fatalf("the slice is not there: %v", err)
				}
			}
		})
	}
}

func TestEnsureResourceSliceRefusesABadSlice(t *testing.T) {
	rs := liqo.NewResourceSlice("rs-r1", "default", "cons", "prov", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")})
	s := runtime.NewScheme()
	if err := authv1beta1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(s).Build()
	if err := liqo.EnsureResourceSlice(context.Background(), c, rs); err == nil || !strings.Contains(err.Error(), "not the tenant namespace") {
		t.Fatalf("error = %v, want the tenant namespace named", err)
	}
	var list authv1beta1.ResourceSliceList
	if err := c.List(context.Background(), &list); err != nil || len(list.Items) != 0 {
		t.Fatalf("slices created: %d (%v)", len(list.Items), err)
	}
}
