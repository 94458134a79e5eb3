package liqotest_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqotech/liqo/apis/authentication/v1beta1"
	liqocorev1beta1 "github.com/liqotech/liqo/apis/core/v1beta1"

	"github.com/federation-autoscaler/federation-autoscaler/agent/liqo"
	"github.com/federation-autoscaler/federation-autoscaler/deploy/testbin"
	"github.com/federation-autoscaler/federation-autoscaler/deploy/testpoll"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/pki"
)

// TestLiqoConformance runs the driver and the agents' Liqo rules against
// Liqo's own code, as the agents' ServiceAccounts. One control plane for
// all subtests keeps the wall time down (a start is several seconds on a
// loaded machine); each subtest uses its own ids.
func TestLiqoConformance(t *testing.T) {
	w := start(t)
	t.Run("cluster id", w.testClusterID)
	t.Run("peering user", w.testPeeringUser)
	t.Run("resource slices", w.testResourceSlices)
	t.Run("unpeer", w.testUnpeer)
	t.Run("agent refuses to start", w.testAgentRefusesToStart)
}

// The agent binary, as each agent's ServiceAccount with the shipped RBAC and
// the liqoctl driver, refuses to start on a --liqo-cluster-id that disagrees
// with Liqo's and without Liqo, exit status 1 and a message saying which,
// before it talks to any broker (the bundle's broker does not exist).
func (w *world) testAgentRefusesToStart(t *testing.T) {
	ctx := context.Background()
	bin, err := testbin.Build(ctx, t.TempDir())
	must(t, "building the binary", err)
	pkiDir := t.TempDir()
	now := time.Now()
	must(t, "pki init", pki.Init(pkiDir, nil, false, now))
	for _, role := range []api.Role{api.RoleProvider, api.RoleConsumer} {
		sa := map[api.Role]string{api.RoleProvider: providerSA, api.RoleConsumer: consumerSA}[role]
		kc, _ := w.as(t, sa)
		bundle := filepath.Join(pkiDir, string(role)+".tar.gz")
		must(t, "pki join", pki.WriteJoinBundle(pkiDir, "start-"+string(role), role, "https://127.0.0.1:9", bundle, false, now))
		for _, tc := range []struct {
			name string
			args []string
			want string
		}{
			{"mismatched id", []string{"--liqo-cluster-id", "the-broker-id"}, "--liqo-cluster-id the-broker-id disagrees with Liqo's own cluster id " + localLiqoID},
			{"absent Liqo", []string{"--liqo-namespace", "no-liqo-here"}, "no Liqo installation in namespace no-liqo-here"},
		} {
			args := append([]string{"agent", "--role", string(role), "--bundle", bundle, "--kubeconfig", kc, "--namespace", agentNS,
				"--liqo-driver", "liqoctl", "--liqoctl-path", w.liqoctl, "--install-crds=false",
				"--health-listen", "127.0.0.1:0", "--local-api-listen", "127.0.0.1:0"}, tc.args...)
			cmd := exec.CommandContext(ctx, bin, args...)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), tc.want) {
				t.Errorf("%s agent, %s: %v, want exit status 1 saying %q; output:\n%s", role, tc.name, err, tc.want, out)
			}
		}
	}
}

// The id is Liqo's: read from its ConfigMap as each agent; a disagreeing
// --liqo-cluster-id and an absent Liqo are refused with what to do.
func (w *world) testClusterID(t *testing.T) {
	ctx := context.Background()
	for _, sa := range []string{providerSA, consumerSA} {
		_, c := w.as(t, sa)
		if id, err := liqo.ResolveClusterID(ctx, c, "", ""); err != nil || id != localLiqoID {
			t.Errorf("%s: Liqo's id = %q, %v; want %s", sa, id, err, localLiqoID)
		}
		if _, err := liqo.ResolveClusterID(ctx, c, "", "the-broker-id"); err == nil || !strings.Contains(err.Error(), "disagrees with Liqo's own cluster id "+localLiqoID) {
			t.Errorf("%s: mismatched id: %v, want a refusal naming both ids", sa, err)
		}
		if _, err := liqo.ResolveClusterID(ctx, c, "no-liqo-here", ""); err == nil || !strings.Contains(err.Error(), "no Liqo installation in namespace no-liqo-here") {
			t.Errorf("%s: absent Liqo: %v, want a refusal saying Liqo is not installed", sa, err)
		}
	}
}

// peeringUserState is what `liqoctl generate peering-user` leaves for a
// consumer: its CSR and its RoleBindings.
func (w *world) peeringUserState(t *testing.T, consumer string) (csrs, bindings int) {
	t.Helper()
	ctx := context.Background()
	sel := client.MatchingLabels{"liqo.io/peering-user-name": "liqo-peer-user-" + consumer}
	var cl certv1.CertificateSigningRequestList
	must(t, "listing CSRs", w.admin.List(ctx, &cl, sel))
	var rl rbacv1.RoleBindingList
	must(t, "listing RoleBindings", w.admin.List(ctx, &rl, sel))
	return len(cl.Items), len(rl.Items)
}

// GeneratePeeringUser and DeletePeeringUser with the real liqoctl as the
// provider agent (shipped RBAC): repeated, and started from every partial
// state an interrupted call leaves.
func (w *world) testPeeringUser(t *testing.T) {
	ctx := context.Background()
	kc, c := w.as(t, providerSA)
	d := liqo.NewLiqoctl(liqo.LiqoctlOptions{Path: w.liqoctl, Kubeconfig: kc, Client: c})
	const consumer = "cons-pu"

	generate := func(what string) string {
		t.Helper()
		out, err := d.GeneratePeeringUser(ctx, consumer)
		must(t, what, err)
		cfg, err := clientcmd.Load([]byte(out))
		must(t, what+": the kubeconfig parses", err)
		if len(cfg.Clusters) != 1 || len(cfg.AuthInfos) != 1 {
			t.Fatalf("%s: kubeconfig has %d clusters and %d users", what, len(cfg.Clusters), len(cfg.AuthInfos))
		}
		for _, ai := range cfg.AuthInfos {
			if len(ai.ClientCertificateData) == 0 || len(ai.ClientKeyData) == 0 {
				t.Fatalf("%s: the peering user has no client certificate", what)
			}
		}
		if csrs, rbs := w.peeringUserState(t, consumer); csrs != 1 || rbs != 2 {
			t.Fatalf("%s: %d CSRs and %d RoleBindings of the user, want 1 and 2", what, csrs, rbs)
		}
		return out
	}
	first := generate("generate")
	// A retry (the answer was lost) finds the whole user: it converges, to
	// a new credential.
	if again := generate("generate again"); again == first {
		t.Error("the second generate returned the first credential; the earlier one was deleted")
	}

	// Interrupted states: what a crash between liqoctl's steps leaves.
	var rbs rbacv1.RoleBindingList
	sel := client.MatchingLabels{"liqo.io/peering-user-name": "liqo-peer-user-" + consumer}
	must(t, "listing RoleBindings", w.admin.List(ctx, &rbs, sel))
	must(t, "dropping one RoleBinding", w.admin.Delete(ctx, &rbs.Items[0]))
	generate("generate after one RoleBinding was lost")
	must(t, "dropping every RoleBinding", w.admin.DeleteAllOf(ctx, &rbacv1.RoleBinding{}, client.InNamespace(liqo.DefaultNamespace), sel))
	must(t, "listing RoleBindings", w.admin.List(ctx, &rbs, sel))
	for i := range rbs.Items {
		must(t, "dropping a RoleBinding", w.admin.Delete(ctx, &rbs.Items[i]))
	}
	generate("generate after the CSR was left alone (crash after the CSR)")

	// Delete: converges from the full user, a partial one and none.
	must(t, "delete", d.DeletePeeringUser(ctx, consumer))
	if csrs, rbs := w.peeringUserState(t, consumer); csrs != 0 || rbs != 0 {
		t.Fatalf("after delete: %d CSRs and %d RoleBindings left", csrs, rbs)
	}
	must(t, "delete again", d.DeletePeeringUser(ctx, consumer))
	generate("generate after delete")
	must(t, "listing RoleBindings", w.admin.List(ctx, &rbs, sel))
	for i := range rbs.Items { // a delete interrupted after the RoleBindings
		must(t, "dropping a RoleBinding", w.admin.Delete(ctx, &rbs.Items[i]))
	}
	must(t, "delete of a half-deleted user", d.DeletePeeringUser(ctx, consumer))
	if csrs, rbs := w.peeringUserState(t, consumer); csrs != 0 || rbs != 0 {
		t.Fatalf("after the second delete: %d CSRs and %d RoleBindings left", csrs, rbs)
	}

	// An id that is no Liqo id never reaches liqoctl.
	if _, err := d.GeneratePeeringUser(ctx, strings.Repeat("a", 52)); err == nil || !strings.Contains(err.Error(), "fits 63") {
		t.Errorf("a 52-character id: %v, want it refused", err)
	}
}

// Liqo's webhook refuses a second Create of a slice name with Forbidden; the
// consumer's read-first EnsureResourceSlice converges anyway, as the
// consumer agent.
func (w *world) testResourceSlices(t *testing.T) {
	ctx := context.Background()
	_, c := w.as(t, consumerSA)
	const prov = "prov-rs"
	tenant := liqo.TenantNamespace(prov)
	w.env.EnsureNamespace(t, tenant) // Liqo creates it on peer
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi")}
	slice := func(name string) *authv1beta1.ResourceSlice {
		return liqo.NewResourceSlice(name, tenant, localLiqoID, prov, res)
	}

	// Why the agent reads first: the plain retry is refused by Liqo.
	must(t, "first create", c.Create(ctx, slice("rs-plain")))
	if err := c.Create(ctx, slice("rs-plain")); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "same name already exists") {
		t.Fatalf("a second create of the same slice: %v, want Liqo's webhook to refuse it with Forbidden", err)
	}

	for i := range 3 { // a first Peer, a redelivered one, one after a restart
		must(t, "EnsureResourceSlice", liqo.EnsureResourceSlice(ctx, c, slice("rs-r1")))
		var live authv1beta1.ResourceSlice
		must(t, "reading the slice", c.Get(ctx, client.ObjectKey{Namespace: tenant, Name: "rs-r1"}, &live))
		if err := liqo.CheckResourceSlice(&live); err != nil || !liqo.WantsVirtualNode(&live) {
			t.Fatalf("call %d: the slice is not what Liqo accepts: %v", i, err)
		}
	}
	// A different slice under that name is an error that says so.
	bigger := slice("rs-r1")
	bigger.Spec.Resources[corev1.ResourceCPU] = resource.MustParse("8")
	if err := liqo.EnsureResourceSlice(ctx, c, bigger); err == nil || !strings.Contains(err.Error(), "is not the one asked for") {
		t.Errorf("a different slice of the same name: %v", err)
	}
	// Without the tenant namespace (no peering) the error says so.
	lone := liqo.NewResourceSlice("rs-r2", liqo.TenantNamespace("not-peered"), localLiqoID, "not-peered", res)
	if err := liqo.EnsureResourceSlice(ctx, c, lone); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("a slice for a provider that is not peered: %v", err)
	}
}

// Unpeer with the real liqoctl as the consumer agent: with a credential the
// provider revoked (the test signer's certificates authenticate nobody),
// liqoctl unpeer cannot read the provider's id, force unpeer tears the
// peering down locally; repeating it converges.
func (w *world) testUnpeer(t *testing.T) {
	ctx := context.Background()
	// A provider credential as the provider's driver mints it.
	pkc, pc := w.as(t, providerSA)
	revoked, err := liqo.NewLiqoctl(liqo.LiqoctlOptions{Path: w.liqoctl, Kubeconfig: pkc, Client: pc}).GeneratePeeringUser(ctx, localLiqoID)
	must(t, "minting the provider credential", err)

	kc, c := w.as(t, consumerSA)
	d := liqo.NewLiqoctl(liqo.LiqoctlOptions{Path: w.liqoctl, Kubeconfig: kc, Client: c, UnpeerTimeout: deadline})
	const prov = "prov-un"
	// What a peering leaves on the consumer: the ForeignCluster and the
	// tenant namespace with a slice.
	must(t, "ForeignCluster", w.admin.Create(ctx, &liqocorev1beta1.ForeignCluster{
		ObjectMeta: metav1.ObjectMeta{Name: prov, Labels: map[string]string{liqo.RemoteClusterIDLabel: prov}},
		Spec:       liqocorev1beta1.ForeignClusterSpec{ClusterID: liqocorev1beta1.ClusterID(prov)},
	}))
	must(t, "tenant namespace", w.admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: liqo.TenantNamespace(prov),
		Labels: map[string]string{liqo.RemoteClusterIDLabel: prov, "liqo.io/tenant-namespace": "true"}}}))
	must(t, "slice", liqo.EnsureResourceSlice(ctx, c, liqo.NewResourceSlice("rs-u1", liqo.TenantNamespace(prov), localLiqoID, prov,
		corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")})))

	for i, kubeconfig := range []string{revoked, revoked, ""} { // revoked, repeated, credential lost
		must(t, fmt.Sprintf("unpeer %d", i), d.Unpeer(ctx, prov, kubeconfig))
		var fcs liqocorev1beta1.ForeignClusterList
		must(t, "listing ForeignClusters", w.admin.List(ctx, &fcs))
		for _, fc := range fcs.Items {
			if string(fc.Spec.ClusterID) == prov {
				t.Fatalf("call %d: ForeignCluster %s is still there", i, fc.Name)
			}
		}
		testpoll.UntilSeen(t, deadline, fmt.Sprintf("call %d: the tenant namespace %s going", i, liqo.TenantNamespace(prov)), func() (bool, string) {
			var ns corev1.Namespace
			err := w.admin.Get(ctx, client.ObjectKey{Name: liqo.TenantNamespace(prov)}, &ns)
			return apierrors.IsNotFound(err), fmt.Sprintf("get: %v, deletion requested at %v", err, ns.DeletionTimestamp)
		})
	}
}
