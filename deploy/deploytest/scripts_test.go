package deploytest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestCentral: central-up.sh creates the CA once, deploys the broker with
// its TLS Secret (never ca.key), mints bundles; mocks can share its
// namespace without owning it; each down removes exactly its own objects.
func TestCentral(t *testing.T) {
	c := startCluster(t)
	dir := t.TempDir()
	const ns = "federation-autoscaler"
	token := filepath.Join(dir, "dashboard-token")
	if err := os.WriteFile(token, []byte("0123456789abcdef0123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	live, res := c.upTwice(t, dir, "central", "central-up.sh", "--host", "broker.example.org", "--api-node-port", "31443", "--dashboard-token-file", token)
	if !strings.Contains(res.Stdout, "Broker URL:    https://broker.example.org:31443\n") ||
		!strings.Contains(res.Stdout, "Dashboard URL: http://broker.example.org:30444/\n") {
		t.Errorf("central-up.sh did not print the URLs:\n%s", res.Stdout)
	}
	pki := filepath.Join(dir, "federation-pki")
	checkSecretFiles(t, live, ns, "broker-tls", map[string]string{
		"ca.crt": filepath.Join(pki, "ca.crt"), "broker.crt": filepath.Join(pki, "broker.crt"), "broker.key": filepath.Join(pki, "broker.key"),
	})
	checkSecretFiles(t, live, ns, "broker-dashboard", map[string]string{"token": token})
	svc := live[objKey(schema.GroupVersionKind{Kind: "Service"}, ns, "broker")]
	ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	if p := ports[0].(map[string]any)["nodePort"]; p != int64(31443) {
		t.Errorf("API node port %v, want 31443", p)
	}
	c.checkRBAC(t, ns, "broker", nil, [][3]string{{"get", "secrets", ns}, {"list", "pods", ""}, {"list", "nodes", ""}})

	// Bundles: minted with the recorded broker URL, 0600, refused twice.
	r := mustRun(t, dir, "central-up.sh", "join", "--cluster-id", "paris-1", "--role", "provider")
	bundle := filepath.Join(dir, "paris-1.tar.gz")
	st, err := os.Stat(bundle)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("bundle %s: %v mode %v (stderr %s)", bundle, err, st, r.Stderr)
	}
	if join := readTarEntry(t, bundle, "join.yaml"); !strings.Contains(join, "brokerURL: https://broker.example.org:31443") || !strings.Contains(join, "role: provider") {
		t.Errorf("join.yaml = %q", join)
	}
	if r := run(t, dir, "central-up.sh", "join", "--cluster-id", "paris-1", "--role", "provider"); r.Code == 0 {
		t.Error("a second join over the same file succeeded")
	}

	// mocks in the broker's namespace: used, not owned.
	_, res = c.upTwice(t, dir, "mocks", "mock-up.sh", "--namespace", ns)
	if !strings.Contains(res.Stderr, "namespace federation-autoscaler exists and was not created by mock-up.sh") {
		t.Errorf("mock-up.sh did not say it leaves the broker's namespace alone:\n%s", res.Stderr)
	}
	c.down(t, dir, "mocks", "mock-down.sh", "--namespace", ns)
	if still, _ := c.labeled(t, partOf+",app.kubernetes.io/component=central"); len(still) != len(live) {
		t.Errorf("mock-down.sh touched the broker: %d central objects left of %d", len(still), len(live))
	}
	c.down(t, dir, "central", "central-down.sh")
	if _, err := os.Stat(filepath.Join(pki, "ca.key")); err != nil {
		t.Errorf("central-down.sh removed the local CA: %v", err)
	}
}

// TestMocks: own namespace, created and removed.
func TestMocks(t *testing.T) {
	c := startCluster(t)
	dir := t.TempDir()
	live, _ := c.upTwice(t, dir, "mocks", "mock-up.sh", "--geo-node-port", "31480")
	if _, ok := live[objKey(schema.GroupVersionKind{Kind: "Namespace"}, "", "federation-autoscaler-mocks")]; !ok {
		t.Error("mock-up.sh did not create its namespace")
	}
	c.down(t, dir, "mocks", "mock-down.sh")
}

// TestProvider: the bundle in a Secret byte for byte, the sharing file in
// the ConfigMap, least-privilege RBAC; switching the Liqo driver converges.
func TestProvider(t *testing.T) {
	c := startCluster(t)
	dir := t.TempDir()
	const ns = "fa-provider"
	bundle := makeBundle(t, filepath.Join(dir, "pki"), dir, "paris-1", "provider")
	sharing := filepath.Join(dir, "sharing.yaml")
	if err := os.WriteFile(sharing, []byte("unitPrices:\n  cpu: \"0.05\"\nallowedConsumers: [milan-1]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	live, _ := c.upTwice(t, dir, "provider", "provider-up.sh", "--bundle", bundle, "--namespace", ns,
		"--sharing-file", sharing, "--mock-geo-url", "http://10.0.0.5:30480")
	checkSecretFiles(t, live, ns, "provider-bundle", map[string]string{"bundle.tar.gz": bundle})
	cm := live[objKey(schema.GroupVersionKind{Kind: "ConfigMap"}, ns, "provider-sharing")]
	if got, _, _ := unstructured.NestedString(cm.Object, "data", "sharing.yaml"); got != readFile(t, sharing) {
		t.Errorf("provider-sharing holds %q, want the --sharing-file", got)
	}
	args := deploymentArgs(t, live, ns, "provider-agent", 0)
	for _, a := range []string{"--liqo-driver=liqoctl", "--install-crds=false", "--mock-geo-url=http://10.0.0.5:30480", "--bundle=/etc/federation-autoscaler/bundle/bundle.tar.gz"} {
		if !hasArg(args, a) {
			t.Errorf("provider-agent args %v lack %s", args, a)
		}
	}
	c.checkRBAC(t, ns, "provider-agent",
		[][3]string{{"list", "nodes", ""}, {"watch", "pods", ""}, {"update", "configmaps", ns}, {"create", "certificatesigningrequests.certificates.k8s.io", ""}, {"deletecollection", "certificatesigningrequests.certificates.k8s.io", ""}},
		[][3]string{{"get", "secrets", ns}, {"update", "configmaps", "default"}, {"delete", "nodes", ""}, {"create", "customresourcedefinitions.apiextensions.k8s.io", ""}})

	// The simulated driver: no liqoctl RBAC left behind.
	mustRun(t, dir, "provider-up.sh", "--kubeconfig", c.env.Kubeconfig, "--image", testImage, "--bundle", bundle, "--namespace", ns, "--liqo-driver", "sim")
	c.checkRBAC(t, ns, "provider-agent", [][3]string{{"list", "nodes", ""}}, [][3]string{{"create", "certificatesigningrequests.certificates.k8s.io", ""}})

	// A new bundle replaces the Secret and rolls the pods (the checksum
	// annotation of the pod template changes).
	sum := func() string {
		l, _ := c.labeled(t, partOf+",app.kubernetes.io/component=provider")
		o := l[objKey(schema.GroupVersionKind{Group: "apps", Kind: "Deployment"}, ns, "provider-agent")]
		v, _, _ := unstructured.NestedString(o.Object, "spec", "template", "metadata", "annotations", "federation-autoscaler.io/config-checksum")
		return v
	}
	before := sum()
	renewed := filepath.Join(dir, "renewed")
	if err := os.Mkdir(renewed, 0o700); err != nil {
		t.Fatal(err)
	}
	bundle2 := makeBundle(t, filepath.Join(dir, "pki"), renewed, "paris-1", "provider")
	mustRun(t, dir, "provider-up.sh", "--kubeconfig", c.env.Kubeconfig, "--image", testImage, "--bundle", bundle2, "--namespace", ns, "--liqo-driver", "sim")
	if after := sum(); before == "" || after == before {
		t.Errorf("pod template checksum %q → %q: a new bundle must roll the agent", before, after)
	}
	l, _ := c.labeled(t, partOf+",app.kubernetes.io/component=provider")
	checkSecretFiles(t, l, ns, "provider-bundle", map[string]string{"bundle.tar.gz": bundle2})
	c.down(t, dir, "provider", "provider-down.sh", "--namespace", ns)
}

// TestConsumer: bundle and adapter PKI in Secrets, cloud-config pointing at
// the adapter in the chosen namespace, policy, RBAC for the agent (with the
// simulated Liqo) and the Cluster Autoscaler.
func TestConsumer(t *testing.T) {
	c := startCluster(t)
	dir := t.TempDir()
	const ns = "fa-consumer"
	bundle := makeBundle(t, filepath.Join(dir, "pki"), dir, "milan-1", "consumer")
	live, _ := c.upTwice(t, dir, "consumer", "consumer-up.sh", "--bundle", bundle, "--namespace", ns,
		"--liqo-driver", "sim", "--placement", "Price")
	apki := filepath.Join(dir, "adapter-pki-milan-1")
	checkSecretFiles(t, live, ns, "consumer-bundle", map[string]string{"bundle.tar.gz": bundle})
	checkSecretFiles(t, live, ns, "adapter-tls", map[string]string{
		"ca.crt": filepath.Join(apki, "ca.crt"), "server.crt": filepath.Join(apki, "server.crt"), "server.key": filepath.Join(apki, "server.key"),
	})
	checkSecretFiles(t, live, ns, "cluster-autoscaler-tls", map[string]string{
		"ca.crt": filepath.Join(apki, "ca.crt"), "client.crt": filepath.Join(apki, "client.crt"), "client.key": filepath.Join(apki, "client.key"),
	})
	cm := live[objKey(schema.GroupVersionKind{Kind: "ConfigMap"}, ns, "cluster-autoscaler-cloud-config")]
	if cc, _, _ := unstructured.NestedString(cm.Object, "data", "cloud-config"); !strings.Contains(cc, `address: "adapter.`+ns+`.svc:8086"`) {
		t.Errorf("cloud-config does not point at the adapter in %s:\n%s", ns, cc)
	}
	pol := live[objKey(schema.GroupVersionKind{Group: "autoscaling.federation-autoscaler.io", Kind: "ConsumerPolicy"}, ns, "default")]
	if p, _, _ := unstructured.NestedString(pol.Object, "spec", "placement", "type"); p != "Price" {
		t.Errorf("ConsumerPolicy placement %q, want Price", p)
	}
	if args := deploymentArgs(t, live, ns, "consumer-agent", 0); !hasArg(args, "--liqo-driver=sim") {
		t.Errorf("consumer-agent args %v lack --liqo-driver=sim", args)
	}
	if args := deploymentArgs(t, live, ns, "cluster-autoscaler", 0); !hasArg(args, "--cloud-provider=externalgrpc") || !hasArg(args, "--cloud-config=/config/cloud-config") {
		t.Errorf("cluster-autoscaler args %v", args)
	}
	c.checkRBAC(t, ns, "consumer-agent",
		[][3]string{{"list", "consumerpolicies.autoscaling.federation-autoscaler.io", ns}, {"create", "virtualnodestates.autoscaling.federation-autoscaler.io", ns},
			{"create", "secrets", ns}, {"patch", "nodes", ""}, {"create", "resourceslices.authentication.liqo.io", "liqo-tenant-x"}, {"create", "nodes", ""},
			{"create", "configmaps", ns},                                                                       // the simulated Liqo's clusterid ConfigMap (namespaced Role)
			{"list", "pods", ""}, {"create", "pods", ns}, {"create", "priorityclasses.scheduling.k8s.io", ""}}, // consolidation placeholders
		[][3]string{{"create", "consumerpolicies.autoscaling.federation-autoscaler.io", ns}, {"get", "secrets", "default"}, {"create", "pods", "default"}, {"delete", "pods", "default"},
			{"create", "customresourcedefinitions.apiextensions.k8s.io", ""}})
	c.checkRBAC(t, ns, "cluster-autoscaler",
		[][3]string{{"update", "nodes", ""}, {"list", "pods", ""}, {"create", "pods/eviction", "default"}, {"create", "leases.coordination.k8s.io", ns}},
		[][3]string{{"get", "secrets", ns}, {"delete", "nodes", ""}, {"create", "leases.coordination.k8s.io", "kube-system"}})
	// The real Liqo driver: the simulation's RBAC is dropped, the
	// cluster-wide and the namespaced parts.
	mustRun(t, dir, "consumer-up.sh", "--kubeconfig", c.env.Kubeconfig, "--image", testImage, "--bundle", bundle, "--namespace", ns)
	c.checkRBAC(t, ns, "consumer-agent", [][3]string{{"patch", "nodes", ""}}, [][3]string{{"create", "nodes", ""}, {"create", "configmaps", ns}})
	c.down(t, dir, "consumer", "consumer-down.sh", "--namespace", ns)
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func readTarEntry(t *testing.T, path, name string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("%s: no %s: %v", path, name, err)
		}
		if h.Name == name {
			var b bytes.Buffer
			if _, err := b.ReadFrom(tr); err != nil {
				t.Fatal(err)
			}
			return b.String()
		}
	}
}

// TestCentralHA: central-up.sh --ha deploys the highly available broker:
// its CRDs, two replicas electing a leader, a PodDisruptionBudget, and a
// ServiceAccount that may use its records, Secrets and Lease in its
// namespace only.
func TestCentralHA(t *testing.T) {
	c := startCluster(t)
	dir := t.TempDir()
	const ns = "federation-autoscaler"
	live, _ := c.upTwice(t, dir, "central", "central-up.sh", "--host", "broker.example.org", "--ha")
	dep := live[objKey(schema.GroupVersionKind{Group: "apps", Kind: "Deployment"}, ns, "broker")]
	if dep == nil {
		t.Fatal("no broker Deployment")
	}
	if n, _, _ := unstructured.NestedInt64(dep.Object, "spec", "replicas"); n != 2 {
		t.Errorf("replicas %d, want 2", n)
	}
	args, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
	if a := args[0].(map[string]any)["args"]; !strings.Contains(strings.Join(toStrings(a), " "), "--store=kubernetes --leader-elect") {
		t.Errorf("broker args %v", a)
	}
	if live[objKey(schema.GroupVersionKind{Group: "policy", Kind: "PodDisruptionBudget"}, ns, "broker")] == nil {
		t.Error("no PodDisruptionBudget")
	}
	if live[objKey(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}, "", "reservations.broker.federation-autoscaler.io")] == nil {
		t.Error("the broker's CRDs were not applied")
	}
	c.checkRBAC(t, ns, "broker",
		[][3]string{{"create", "reservations.broker.federation-autoscaler.io", ns}, {"update", "secrets", ns}, {"update", "leases.coordination.k8s.io", ns}},
		[][3]string{{"get", "secrets", "default"}, {"list", "pods", ""}, {"create", "customresourcedefinitions.apiextensions.k8s.io", ""}})
}

func toStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}
