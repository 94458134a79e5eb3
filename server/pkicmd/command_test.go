package pkicmd

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/cli"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/pki"
)

// run executes `federation-autoscaler <args>` with the pki subcommand and
// returns stdout and the error.
func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := cli.NewRoot(NewCommand())
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

func TestInitJoinAdapter(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "pki")
	out, err := run(t, "pki", "init", "--dir", dir, "--host", "broker.example.org", "--host", "10.1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"ca.crt", "ca.key", "broker.crt", "broker.key"} {
		if !strings.Contains(out, filepath.Join(dir, f)) {
			t.Errorf("init output does not name %s:\n%s", f, out)
		}
	}
	if strings.Contains(out, "PRIVATE KEY") || strings.Contains(out, "CERTIFICATE") {
		t.Fatalf("init printed key material:\n%s", out)
	}
	if _, err := run(t, "pki", "init", "--dir", dir); err == nil || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("second init: %v", err)
	}
	if _, err := run(t, "pki", "init", "--dir", dir, "--force"); err != nil {
		t.Fatalf("init --force: %v", err)
	}

	bundle := filepath.Join(base, "p1.tar.gz")
	out, err = run(t, "pki", "join", "--dir", dir, "--cluster-id", "paris-1", "--role", "provider", "--broker-url", "https://broker.example.org:8443", "--out", bundle)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, bundle) || strings.Contains(out, "PRIVATE KEY") {
		t.Fatalf("join output:\n%s", out)
	}
	b, err := pki.LoadBundle(bundle)
	if err != nil {
		t.Fatal(err)
	}
	if b.ClusterID != "paris-1" || b.Role != api.RoleProvider {
		t.Fatalf("bundle = %s/%s", b.ClusterID, b.Role)
	}

	adir := filepath.Join(base, "adapter")
	out, err = run(t, "pki", "adapter", "--dir", adir, "--host", "fa-adapter.kube-system.svc")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"ca.crt", "server.crt", "server.key", "client.crt", "client.key"} {
		if !strings.Contains(out, filepath.Join(adir, f)) {
			t.Errorf("adapter output does not name %s:\n%s", f, out)
		}
	}
	if _, err := pki.AdapterServerTLSConfig(adir); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, "pki", "adapter", "--dir", adir); err == nil || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("second adapter: %v", err)
	}
}

func TestJoinErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := run(t, "pki", "init", "--dir", dir); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "b.tar.gz")
	base := []string{"pki", "join", "--dir", dir, "--out", out}
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"bad cluster id", []string{"--cluster-id", "Foo_1", "--role", "provider", "--broker-url", "https://b"}, `cluster id "Foo_1" is not a DNS-1123 label`},
		{"bad role", []string{"--cluster-id", "a", "--role", "admin", "--broker-url", "https://b"}, "use provider or consumer"},
		{"missing role", []string{"--cluster-id", "a", "--broker-url", "https://b"}, "--role is required (or FA_ROLE)"},
		{"missing cluster id", []string{"--role", "provider", "--broker-url", "https://b"}, "--cluster-id is required (or FA_CLUSTER_ID)"},
		{"http url", []string{"--cluster-id", "a", "--role", "provider", "--broker-url", "http://b"}, "https"},
		{"unknown flag", []string{"--cluster-id", "a", "--nope"}, "unknown flag"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := run(t, append(append([]string{}, base...), tt.args...)...)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
			}
			if _, err := os.Stat(out); err == nil {
				t.Fatal("a bundle was written")
			}
		})
	}
	if _, err := run(t, "pki", "join", "--dir", t.TempDir(), "--cluster-id", "a", "--role", "consumer", "--broker-url", "https://b", "--out", out); err == nil || !strings.Contains(err.Error(), "pki init") {
		t.Fatalf("join without CA: %v", err)
	}
}

// pki join: one cluster id has one role; an existing bundle is replaced
// only with --force.
func TestJoinRefusals(t *testing.T) {
	dir := t.TempDir()
	if _, err := run(t, "pki", "init", "--dir", dir); err != nil {
		t.Fatal(err)
	}
	outDir := t.TempDir()
	join := func(id, role, out string, extra ...string) error {
		args := []string{"pki", "join", "--dir", dir, "--cluster-id", id, "--role", role, "--broker-url", "https://b:8443", "--out", filepath.Join(outDir, out)}
		_, err := run(t, append(args, extra...)...)
		return err
	}
	if err := join("lyon-1", "consumer", "lyon-1.tar.gz"); err != nil {
		t.Fatal(err)
	}
	first := mustRead(t, filepath.Join(outDir, "lyon-1.tar.gz"))
	tests := []struct {
		name, id, role, out string
		extra               []string
		wantErr             string
	}{
		{"the id under the other role", "lyon-1", "provider", "lyon-1-p.tar.gz", nil, `cluster id "lyon-1" already holds a consumer certificate`},
		{"the id under the other role with --force", "lyon-1", "provider", "lyon-1-p.tar.gz", []string{"--force"}, "choose another cluster id for the provider"},
		{"an existing bundle", "lyon-1", "consumer", "lyon-1.tar.gz", nil, "already exists: refusing to overwrite a join bundle"},
		{"another cluster onto an existing bundle", "lyon-2", "consumer", "lyon-1.tar.gz", nil, "--force"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := join(tt.id, tt.role, tt.out, tt.extra...)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(outDir, "lyon-1-p.tar.gz")); !os.IsNotExist(err) {
		t.Fatal("a refused join wrote its bundle")
	}
	if !bytes.Equal(first, mustRead(t, filepath.Join(outDir, "lyon-1.tar.gz"))) {
		t.Fatal("a refused join changed the existing bundle")
	}
	if err := join("lyon-1", "consumer", "lyon-1.tar.gz", "--force"); err != nil {
		t.Fatalf("re-issue with --force: %v", err)
	}
	if bytes.Equal(first, mustRead(t, filepath.Join(outDir, "lyon-1.tar.gz"))) {
		t.Fatal("--force did not replace the bundle")
	}
}

func TestEnvFallback(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	bundle := filepath.Join(t.TempDir(), "c.tar.gz")
	t.Setenv("FA_DIR", dir)
	t.Setenv("FA_HOST", "env-broker.example.org,10.9.9.9")
	if _, err := run(t, "pki", "init"); err != nil {
		t.Fatal(err)
	}
	crt, err := pki.ParseCertificatePEM(mustRead(t, filepath.Join(dir, "broker.crt")))
	if err != nil {
		t.Fatal(err)
	}
	if crt.DNSNames[0] != "env-broker.example.org" || crt.IPAddresses[0].String() != "10.9.9.9" {
		t.Fatalf("SANs from FA_HOST: %v %v", crt.DNSNames, crt.IPAddresses)
	}
	t.Setenv("FA_CLUSTER_ID", "consumer-9")
	t.Setenv("FA_ROLE", "consumer")
	t.Setenv("FA_BROKER_URL", "https://env-broker.example.org:8443")
	t.Setenv("FA_OUT", bundle)
	// A flag given on the command line wins over the environment.
	if _, err := run(t, "pki", "join", "--cluster-id", "consumer-10"); err != nil {
		t.Fatal(err)
	}
	b, err := pki.LoadBundle(bundle)
	if err != nil {
		t.Fatal(err)
	}
	if b.ClusterID != "consumer-10" || b.Role != api.RoleConsumer || b.BrokerURL != "https://env-broker.example.org:8443" {
		t.Fatalf("bundle = %+v", b)
	}
	t.Setenv("FA_FORCE", "maybe")
	if _, err := run(t, "pki", "init"); err == nil || !strings.Contains(err.Error(), "FA_FORCE") {
		t.Fatalf("bad FA_FORCE: %v", err)
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"pki", "--help"}, {"pki", "init", "--help"}, {"pki", "join", "--help"}, {"pki", "adapter", "--help"}, {"pki"}} {
		out, err := run(t, args...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if !strings.Contains(out, "Usage:") {
			t.Errorf("%v printed no usage:\n%s", args, out)
		}
	}
}

func TestInjectedClock(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	dir := t.TempDir()
	root := cli.NewRoot(newCommand(func() time.Time { return at }))
	root.SetOut(&bytes.Buffer{})
	root.SetArgs([]string{"pki", "init", "--dir", dir})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	ca, err := pki.LoadCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !ca.Certificate().NotAfter.Equal(at.Add(pki.CAValidity)) {
		t.Fatalf("CA NotAfter = %v", ca.Certificate().NotAfter)
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
