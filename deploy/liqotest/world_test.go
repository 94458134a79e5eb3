package liqotest_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqotech/liqo/pkg/webhooks/resourceslice"

	"github.com/federation-autoscaler/federation-autoscaler/agent/liqo"
	"github.com/federation-autoscaler/federation-autoscaler/deploy/crds"
	"github.com/federation-autoscaler/federation-autoscaler/deploy/testbin"
	"github.com/federation-autoscaler/federation-autoscaler/deploy/testcluster"
	"github.com/federation-autoscaler/federation-autoscaler/deploy/testpoll"
)

// The agents' namespace and ServiceAccounts, as deploy/rbac ships them.
const (
	agentNS     = "federation-autoscaler"
	providerSA  = "provider-agent"
	consumerSA  = "consumer-agent"
	localLiqoID = "cluster-under-test"
	// deadline bounds every wait on a real condition (a starved 2-core
	// machine is slow, never stuck).
	deadline = 2 * time.Minute
	// liqoctlWait bounds the wait for a liqoctl build in progress when the
	// test has no deadline (go test -timeout 0); with one, the wait ends
	// suiteTime before it, so a build that is too late fails with its log
	// instead of a test-binary panic.
	liqoctlWait = 60 * time.Minute
	suiteTime   = 10 * time.Minute
)

// world is one real control plane with Liqo's CRDs, Liqo's ResourceSlice
// webhook, a minimal Liqo install and the agents' RBAC.
type world struct {
	env     *testcluster.Env
	liqoctl string
	admin   client.Client
	kube    kubernetes.Interface
}

// start brings the world up; everything stops when the test ends.
func start(t *testing.T) *world {
	t.Helper()
	testcluster.SkipIfDisabled(t)
	// liqoctl first: waiting for its build holds no control plane.
	liqoctl := liqoctlBinary(t)
	env := testcluster.Start(t)
	w := &world{env: env, liqoctl: liqoctl, admin: env.Client}
	kube, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	w.kube = kube
	ctx := context.Background()

	// Liqo's CRDs from its chart (they replace the simulated Liqo's
	// free-form ones testcluster installs).
	defs, err := crds.Decode(os.DirFS(liqoModuleDir(t, "deployments", "liqo", "charts", "liqo-crds", "crds")))
	if err != nil {
		t.Fatalf("decoding Liqo's CRDs: %v", err)
	}
	if err := crds.Apply(ctx, env.Config, defs); err != nil {
		t.Fatalf("installing Liqo's CRDs: %v", err)
	}

	w.installLiqo(t, localLiqoID)
	w.serveWebhook(t)
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	wg.Add(2)
	go func() { defer wg.Done(); w.signCSRs(runCtx, t) }()
	go func() { defer wg.Done(); w.finalizeNamespaces(runCtx, t) }()

	// The agents' RBAC as shipped, plus the binding docs/liqo.md asks an
	// operator to make for `liqoctl peer`/`unpeer` on the consumer.
	env.EnsureNamespace(t, agentNS)
	env.ApplyFile(t, filepath.Join(testbin.RepoRoot(), "deploy", "rbac", "provider-agent.yaml"))
	env.ApplyFile(t, filepath.Join(testbin.RepoRoot(), "deploy", "rbac", "consumer-agent.yaml"))
	must(t, "binding cluster-admin to the consumer agent (docs/liqo.md)", w.admin.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "federation-autoscaler:consumer-liqoctl"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: consumerSA, Namespace: agentNS}},
	}))
	return w
}

// liqoctlBinary returns the real liqoctl v1.1.2. The suite never builds it
// (a cold build is far longer than the suite; docs/testing.md): .ci/setup
// starts the build in the background and the suite waits here for a build
// in progress, up to liqoctlWait before the test's own deadline. Missing
// liqoctl fails the suite under CI=true and skips it elsewhere
// (testbin.MissingTool); `make test` names it under NOT EVERY SUITE RAN.
func liqoctlBinary(t *testing.T) string {
	t.Helper()
	wait := liqoctlWait
	if dl, ok := t.Deadline(); ok {
		wait = time.Until(dl) - suiteTime
	}
	if wait < time.Second {
		wait = time.Second
	}
	cmd := exec.Command("bash", filepath.Join(testbin.RepoRoot(), "deploy", "liqotest", "build-liqoctl.sh"),
		"--wait", strconv.Itoa(int(wait/time.Second)))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	waited := time.Now()
	if err := cmd.Run(); err != nil {
		testbin.MissingTool(t, fmt.Sprintf("the real liqoctl is not there (%v): %s", err, strings.TrimSpace(stderr.String())))
	}
	if d := time.Since(waited); d > 10*time.Second {
		t.Logf("waited %s for the background liqoctl build", d.Round(time.Second))
	}
	return strings.TrimSpace(stdout.String())
}

// liqoModuleDir is a folder of the Liqo module the product requires, in the
// module cache.
func liqoModuleDir(t *testing.T, elem ...string) string {
	t.Helper()
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/liqotech/liqo")
	cmd.Dir = testbin.RepoRoot()
	out, err := cmd.Output()
	if err != nil || strings.TrimSpace(string(out)) == "" {
		t.Fatalf("locating the Liqo module (go list -m github.com/liqotech/liqo): %v", err)
	}
	return filepath.Join(append([]string{strings.TrimSpace(string(out))}, elem...)...)
}

// installLiqo is the stand-in for what `liqoctl install` leaves that the
// driver's commands read: the clusterid ConfigMap, the peering-user Role and
// ClusterRole (the chart's, labelled app.kubernetes.io/component=peering-user)
// and the liqo-controller-manager Deployment (liqoctl reads the API server
// address override from its arguments).
func (w *world) installLiqo(t *testing.T, id string) {
	t.Helper()
	ctx := context.Background()
	w.env.EnsureNamespace(t, liqo.DefaultNamespace)
	peeringUser := map[string]string{"app.kubernetes.io/component": "peering-user"}
	objs := []client.Object{
		&corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: liqo.DefaultNamespace, Name: liqo.ClusterIDConfigMapName,
				Labels: map[string]string{liqo.ClusterIDConfigMapLabel: liqo.ClusterIDConfigMapLabelValue, "app.kubernetes.io/component": "clusterid-configmap"}},
			Data: map[string]string{liqo.ClusterIDConfigMapKey: id},
		},
		&rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Namespace: liqo.DefaultNamespace, Name: "liqo-peering-user", Labels: peeringUser},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list"}}},
		},
		&rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: "liqo-peering-user", Labels: peeringUser},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"authentication.liqo.io"}, Resources: []string{"tenants"}, Verbs: []string{"get", "create", "update", "delete"}}},
		},
		&appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: liqo.DefaultNamespace, Name: "liqo-controller-manager",
				Labels: map[string]string{"app.kubernetes.io/name": "controller-manager", "app.kubernetes.io/component": "controller-manager"}},
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "liqo-controller-manager"}},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "liqo-controller-manager"}},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{
						Name: "controller-manager", Image: "ghcr.io/liqotech/liqo-controller-manager:v1.1.2",
						Args: []string{"--cluster-id=" + id, "--api-server-address-override=" + w.env.Config.Host},
					}}},
				},
			},
		},
	}
	for _, o := range objs {
		must(t, fmt.Sprintf("installing the Liqo stand-in %T %s", o, o.GetName()), w.admin.Create(ctx, o))
	}
}

// serveWebhook serves Liqo's own ResourceSlice validating webhook handler
// over TLS and registers it as Liqo's chart does
// (templates/webhooks/liqo-validating-webhook.yaml: path
// /validate/resourceslices, CREATE and UPDATE of
// authentication.liqo.io/v1beta1 resourceslices, failurePolicy Fail).
func (w *world) serveWebhook(t *testing.T) {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("/validate/resourceslices", resourceslice.NewValidator(w.admin))
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.ErrorLog = nil
	srv.StartTLS()
	t.Cleanup(srv.Close)
	caBundle := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	url := srv.URL + "/validate/resourceslices"
	fail, none := admissionregistrationv1.Fail, admissionregistrationv1.SideEffectClassNone
	ctx := context.Background()
	must(t, "registering Liqo's ResourceSlice webhook", w.admin.Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "liqo-validating"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "resourceslice.validate.liqo.io",
			AdmissionReviewVersions: []string{"v1", "v1beta1"},
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caBundle},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{"authentication.liqo.io"}, APIVersions: []string{"v1beta1"}, Resources: []string{"resourceslices"}},
			}},
			SideEffects:   &none,
			FailurePolicy: &fail,
		}},
	}))
	// The API server picks a new webhook configuration up asynchronously:
	// wait until a duplicate slice name is refused by the webhook.
	w.env.EnsureNamespace(t, "webhook-probe-a")
	w.env.EnsureNamespace(t, "webhook-probe-b")
	// (Liqo's duplicate check counts the slices it would replicate: those
	// labelled liqo.io/replication=true, as NewResourceSlice makes them.)
	probe := func(ns string) client.Object {
		return liqo.NewResourceSlice("probe", ns, localLiqoID, "probe-provider", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")})
	}
	must(t, "probe slice", w.admin.Create(ctx, probe("webhook-probe-a")))
	testpoll.UntilNil(t, deadline, "Liqo's webhook refusing a duplicate slice name", func() error {
		err := w.admin.Create(ctx, probe("webhook-probe-b"))
		switch {
		case apierrors.IsForbidden(err):
			return nil
		case err == nil:
			must(t, "removing the accepted duplicate", w.admin.Delete(ctx, probe("webhook-probe-b")))
			return errors.New("the duplicate was accepted")
		}
		return fmt.Errorf("last answer: %w", err)
	})
	must(t, "removing the probe", w.admin.Delete(ctx, probe("webhook-probe-a")))
}

// signCSRs plays the kube-controller-manager's CSR signer (a test control
// plane runs none): every approved CertificateSigningRequest without a
// certificate gets one from a test CA. The API server does not trust that
// CA, so the credentials are well-formed but authenticate nobody: exactly a
// revoked provider credential when a test uses one.
func (w *world) signCSRs(ctx context.Context, t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Error(err)
		return
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "liqotest signer"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(24 * time.Hour), IsCA: true, KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &key.PublicKey, key)
	if err != nil {
		t.Error(err)
		return
	}
	ca, _ := x509.ParseCertificate(caDER)
	serial := int64(2)
	_ = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		list, err := w.kube.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for i := range list.Items {
			csr := &list.Items[i]
			if len(csr.Status.Certificate) > 0 || !approved(csr) {
				continue
			}
			block, _ := pem.Decode(csr.Spec.Request)
			if block == nil {
				continue
			}
			req, err := x509.ParseCertificateRequest(block.Bytes)
			if err != nil {
				continue
			}
			serial++
			der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: req.Subject,
				NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}},
				ca, req.PublicKey, key)
			if err != nil {
				continue
			}
			csr.Status.Certificate = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
			_, _ = w.kube.CertificatesV1().CertificateSigningRequests().UpdateStatus(ctx, csr, metav1.UpdateOptions{})
		}
		return false, nil
	})
}

func approved(csr *certv1.CertificateSigningRequest) bool {
	for _, c := range csr.Status.Conditions {
		if c.Type == certv1.CertificateApproved && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// finalizeNamespaces plays the namespace controller (a test control plane
// runs none): a namespace being deleted loses its "kubernetes" finaliser, so
// it goes (liqoctl force unpeer waits for the tenant namespace to go).
func (w *world) finalizeNamespaces(ctx context.Context, t *testing.T) {
	_ = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		list, err := w.kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for i := range list.Items {
			ns := &list.Items[i]
			if ns.DeletionTimestamp == nil || len(ns.Spec.Finalizers) == 0 {
				continue
			}
			ns.Spec.Finalizers = nil
			_, _ = w.kube.CoreV1().Namespaces().Finalize(ctx, ns, metav1.UpdateOptions{})
		}
		return false, nil
	})
}

// as returns a kubeconfig file (for liqoctl) and a client (for the driver's
// own API calls) acting as the agent's ServiceAccount.
func (w *world) as(t *testing.T, sa string) (kubeconfigPath string, c client.Client) {
	t.Helper()
	_, c, kubeconfigPath = w.env.AsServiceAccount(t, agentNS, sa)
	return kubeconfigPath, c
}

func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}
