package crds_test

import (
	"context"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fav1alpha1 "github.com/federation-autoscaler/federation-autoscaler/agent/apis/v1alpha1"
	"github.com/federation-autoscaler/federation-autoscaler/deploy/crds"
	"github.com/federation-autoscaler/federation-autoscaler/deploy/testcluster"
)

func TestAllMatchesReferenceKinds(t *testing.T) {
	defs, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		short  string
		status bool
	}{
		"consumerpolicies.autoscaling.federation-autoscaler.io":  {"cpolicy", false},
		"virtualnodestates.autoscaling.federation-autoscaler.io": {"vns", true},
	}
	if len(defs) != len(want) {
		t.Fatalf("got %d CRDs, want %d", len(defs), len(want))
	}
	for _, d := range defs {
		w, ok := want[d.Name]
		if !ok {
			t.Errorf("unexpected CRD %s", d.Name)
			continue
		}
		if d.Spec.Scope != apiextensionsv1.NamespaceScoped || d.Spec.Group != fav1alpha1.GroupName {
			t.Errorf("%s: scope %s group %s", d.Name, d.Spec.Scope, d.Spec.Group)
		}
		if len(d.Spec.Names.ShortNames) != 1 || d.Spec.Names.ShortNames[0] != w.short {
			t.Errorf("%s: short names %v, want %s", d.Name, d.Spec.Names.ShortNames, w.short)
		}
		if len(d.Spec.Versions) != 1 || d.Spec.Versions[0].Name != "v1alpha1" {
			t.Fatalf("%s: versions %+v", d.Name, d.Spec.Versions)
		}
		v := d.Spec.Versions[0]
		if got := v.Subresources != nil && v.Subresources.Status != nil; got != w.status {
			t.Errorf("%s: status subresource %v, want %v", d.Name, got, w.status)
		}
		if len(v.AdditionalPrinterColumns) < 2 {
			t.Errorf("%s: printer columns %v", d.Name, v.AdditionalPrinterColumns)
		}
	}
}

func TestInstallCreatesUpdatesAndWaits(t *testing.T) {
	env := testcluster.Start(t) // installs the CRDs through envtest
	ctx := context.Background()
	c := env.Client

	// Update path: everything exists already; a label we added survives.
	var vns apiextensionsv1.CustomResourceDefinition
	name := "virtualnodestates.autoscaling.federation-autoscaler.io"
	if err := c.Get(ctx, client.ObjectKey{Name: name}, &vns); err != nil {
		t.Fatal(err)
	}
	vns.Labels = map[string]string{"keep": "me"}
	vns.Spec.Versions[0].AdditionalPrinterColumns = nil // drift the installer must undo
	if err := c.Update(ctx, &vns); err != nil {
		t.Fatal(err)
	}
	if err := crds.Install(ctx, env.Config); err != nil {
		t.Fatalf("Install over existing CRDs: %v", err)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, &vns); err != nil {
		t.Fatal(err)
	}
	if vns.Labels["keep"] != "me" || len(vns.Spec.Versions[0].AdditionalPrinterColumns) == 0 {
		t.Errorf("after Install: labels %v, printer columns %d", vns.Labels, len(vns.Spec.Versions[0].AdditionalPrinterColumns))
	}

	// Create path: delete one, install, use it at once.
	rr := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "consumerpolicies.autoscaling.federation-autoscaler.io"}}
	if err := c.Delete(ctx, rr); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(rr), rr)), nil
	})
	if err != nil {
		t.Fatalf("CRD deletion did not finish: %v", err)
	}
	if err := crds.Install(ctx, env.Config); err != nil {
		t.Fatalf("Install after deleting a CRD: %v", err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(rr), rr); err != nil {
		t.Fatalf("CRD not recreated: %v", err)
	}
	for _, cond := range rr.Status.Conditions {
		if cond.Type == apiextensionsv1.Established && cond.Status != apiextensionsv1.ConditionTrue {
			t.Errorf("Install returned before the CRD was established: %+v", cond)
		}
	}

	// A context that is already over is reported, not waited on.
	done, cancel := context.WithCancel(ctx)
	cancel()
	if err := crds.Install(done, env.Config); err == nil {
		t.Errorf("Install with a cancelled context succeeded")
	}
}
