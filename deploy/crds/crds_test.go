package crds_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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

	// Create path: a definition the server has never seen. (Not by deleting
	// one of ours first: CRD deletion waits on the apiserver's cleanup
	// finalizer, which took over 30 s on a fresh CI machine and is not what
	// this test is about.) Apply is the create-or-update Install runs.
	defs, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	fresh := defs[0].DeepCopy()
	fresh.Spec.Names.Plural = "installprobes"
	fresh.Spec.Names.Singular = "installprobe"
	fresh.Spec.Names.Kind = "InstallProbe"
	fresh.Spec.Names.ListKind = "InstallProbeList"
	fresh.Spec.Names.ShortNames = nil
	fresh.Name = fresh.Spec.Names.Plural + "." + fresh.Spec.Group
	if err := crds.Apply(ctx, env.Config, []*apiextensionsv1.CustomResourceDefinition{fresh}); err != nil {
		t.Fatalf("Apply of a new CRD: %v", err)
	}
	var got apiextensionsv1.CustomResourceDefinition
	if err := c.Get(ctx, client.ObjectKeyFromObject(fresh), &got); err != nil {
		t.Fatalf("CRD not created: %v", err)
	}
	established := false
	for _, cond := range got.Status.Conditions {
		if cond.Type == apiextensionsv1.Established {
			established = cond.Status == apiextensionsv1.ConditionTrue
		}
	}
	if !established {
		t.Errorf("Apply returned before the CRD was established: %+v", got.Status.Conditions)
	}
	// Served at once: an object of the new kind can be created.
	probe := &unstructured.Unstructured{}
	probe.SetAPIVersion(fresh.Spec.Group + "/" + fresh.Spec.Versions[0].Name)
	probe.SetKind(fresh.Spec.Names.Kind)
	probe.SetNamespace("default")
	probe.SetName("probe")
	if err := c.Create(ctx, probe); err != nil {
		t.Errorf("creating an object of the just-applied kind: %v", err)
	}

	// A context that is already over is reported, not waited on.
	done, cancel := context.WithCancel(ctx)
	cancel()
	if err := crds.Install(done, env.Config); err == nil {
		t.Errorf("Install with a cancelled context succeeded")
	}
}

// TestConsumerPolicyBudgetBounds: the real API server takes budgets as
// quantities from 0 to 1000000000 (a string or a number) and refuses a
// negative one, a larger one and a warning threshold outside 1–100, saying
// which field.
func TestConsumerPolicyBudgetBounds(t *testing.T) {
	env := testcluster.Start(t)
	ctx := context.Background()
	cases := []struct {
		name   string
		budget map[string]any
		want   string // "" accepted, else a part of the refusal
	}{
		{"decimal strings", map[string]any{"perHour": "2.50", "perMonth": "1500"}, ""},
		{"a number and milli", map[string]any{"perHour": int64(3), "perMonth": "1500m", "warnAtPercent": int64(90)}, ""},
		{"zero", map[string]any{"perHour": "0"}, ""},
		{"the largest", map[string]any{"perMonth": "1G"}, ""},
		{"negative", map[string]any{"perHour": "-1"}, "perHour must be an amount from 0 to 1000000000"},
		{"too large", map[string]any{"perMonth": "1000000001"}, "perMonth must be an amount from 0 to 1000000000"},
		{"not a quantity", map[string]any{"perHour": "two euros"}, "spec.budget.perHour"},
		{"warning at 0 %", map[string]any{"perHour": "1", "warnAtPercent": int64(0)}, "spec.budget.warnAtPercent"},
		{"warning above 100 %", map[string]any{"perHour": "1", "warnAtPercent": int64(101)}, "spec.budget.warnAtPercent"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cp := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"budget": tc.budget}}}
			cp.SetAPIVersion("autoscaling.federation-autoscaler.io/v1alpha1")
			cp.SetKind("ConsumerPolicy")
			cp.SetNamespace("default")
			cp.SetName(fmt.Sprintf("budget-%d", i))
			err := env.Client.Create(ctx, cp)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("accepted, want refused with %q", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("refused with %v, want %q in it", err, tc.want)
			}
		})
	}
}
