package deploytest

import (
	"archive/tar"
	"compress/gzip"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestScriptFailures: a bad bundle, a wrong role, a missing kubectl, an
// unreachable cluster, a missing binary or image each stop the script with exit 1
// and ONE line on stderr saying what to do. None needs a cluster.
func TestScriptFailures(t *testing.T) {
	need(t)
	dir := t.TempDir()
	pki := filepath.Join(dir, "pki")
	provider := makeBundle(t, pki, dir, "paris-1", "provider")
	consumer := makeBundle(t, pki, dir, "milan-1", "consumer")

	garbage := filepath.Join(dir, "garbage.tar.gz")
	if err := os.WriteFile(garbage, []byte("not a bundle"), 0o600); err != nil {
		t.Fatal(err)
	}
	extra := filepath.Join(dir, "extra.tar.gz")
	writeTarGz(t, extra, map[string]string{"ca.crt": "x", "tls.crt": "x", "tls.key": "x", "join.yaml": "role: provider\n", "evil.sh": "x"})
	noRole := filepath.Join(dir, "norole.tar.gz")
	writeTarGz(t, noRole, map[string]string{"ca.crt": "x", "tls.crt": "x", "tls.key": "x", "join.yaml": "clusterId: a\n"})

	// A kubeconfig for a port nothing listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	unreachable := filepath.Join(dir, "unreachable.kubeconfig")
	kc := "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: \"https://" + dead + "\", insecure-skip-tls-verify: true}\n" +
		"users:\n- name: u\n  user: {token: x}\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\n"
	if err := os.WriteFile(unreachable, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}

	img := []string{"--image", "registry.example.org/fa:v1"}
	short := filepath.Join(dir, "short-token")
	if err := os.WriteFile(short, []byte("tooshort\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, script string
		args         []string
		want         string
	}{
		{"no bundle", "provider-up.sh", nil, "--bundle FILE is required"},
		{"missing bundle", "provider-up.sh", []string{"--bundle", filepath.Join(dir, "nope.tar.gz")}, "no such file"},
		{"garbage bundle", "consumer-up.sh", []string{"--bundle", garbage}, "is not a join bundle (not a gzip tar)"},
		{"bundle with an extra file", "provider-up.sh", []string{"--bundle", extra}, "want exactly ca.crt join.yaml tls.crt tls.key"},
		{"bundle without a role", "provider-up.sh", []string{"--bundle", noRole}, "lacks role, clusterId or brokerURL"},
		{"consumer bundle to provider-up", "provider-up.sh", []string{"--bundle", consumer}, "was issued for a consumer, not a provider: use consumer-up.sh"},
		{"provider bundle to consumer-up", "consumer-up.sh", []string{"--bundle", provider}, "was issued for a provider, not a consumer: use provider-up.sh"},
		{"missing kubectl", "provider-up.sh", []string{"--image", "r.example.org/fa:v1", "--bundle", provider, "--kubectl", filepath.Join(dir, "no-kubectl")}, "kubectl not found"},
		{"missing kubectl (down)", "central-down.sh", []string{"--kubectl", filepath.Join(dir, "no-kubectl")}, "kubectl not found"},
		{"unreachable cluster", "provider-up.sh", []string{"--image", "r.example.org/fa:v1", "--bundle", provider, "--kubeconfig", unreachable}, "cannot reach the cluster's API server"},
		{"unreachable cluster (central)", "central-up.sh", append([]string{"--kubeconfig", unreachable}, img...), "cannot reach the cluster's API server"},
		{"unreachable cluster (mocks)", "mock-up.sh", append([]string{"--kubeconfig", unreachable}, img...), "cannot reach the cluster's API server"},
		{"unreachable cluster (down)", "consumer-down.sh", []string{"--kubeconfig", unreachable}, "cannot reach the cluster's API server"},
		{"missing binary", "central-up.sh", []string{"join", "--cluster-id", "a", "--role", "provider", "--bin", filepath.Join(dir, "no-bin")}, "federation-autoscaler binary not found"},
		{"join without a CA", "central-up.sh", []string{"join", "--cluster-id", "a", "--role", "provider", "--pki-dir", filepath.Join(dir, "empty")}, "no federation CA"},
		{"join with a bad id", "central-up.sh", []string{"join", "--cluster-id", "Paris_1", "--role", "provider"}, "is not a DNS-1123 label"},
		{"join with a bad role", "central-up.sh", []string{"join", "--cluster-id", "a", "--role", "broker"}, "--role provider or --role consumer"},
		{"bad namespace", "mock-up.sh", []string{"--namespace", "Bad_NS"}, "is not a DNS-1123 label"},
		{"bad node port", "central-up.sh", []string{"--api-node-port", "8443"}, "is not a node port"},
		{"bad image", "mock-up.sh", []string{"--image", "x; rm -rf /"}, "is not an image reference"},
		{"no image", "mock-up.sh", nil, "--image REF is required"},
		{"short dashboard token", "central-up.sh", append([]string{"--dashboard-token-file", short}, img...), "the token has 8 characters, use at least 16"},
		{"bad driver", "consumer-up.sh", []string{"--bundle", consumer, "--liqo-driver", "helm"}, "use liqoctl (real Liqo) or sim"},
		{"unknown flag", "consumer-down.sh", []string{"--force"}, "unknown argument --force"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, dir, tc.script, tc.args...)
			if r.Code != 1 {
				t.Errorf("exit %d, want 1 (stderr %q)", r.Code, r.Stderr)
			}
			if lines := strings.Split(strings.TrimRight(r.Stderr, "\n"), "\n"); len(lines) != 1 {
				t.Errorf("stderr has %d lines, want one:\n%s", len(lines), r.Stderr)
			}
			if !strings.Contains(r.Stderr, tc.want) || !strings.Contains(r.Stderr, tc.script+": error: ") {
				t.Errorf("stderr %q does not say %q", r.Stderr, tc.want)
			}
			if r.Stdout != "" {
				t.Errorf("stdout %q, want nothing", r.Stdout)
			}
		})
	}
}

func writeTarGz(t *testing.T, path string, files map[string]string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	zw := gzip.NewWriter(f)
	tw := tar.NewWriter(zw)
	for name, body := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o600, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []interface{ Close() error }{tw, zw, f} {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
