package pki

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

var t0 = time.Date(2026, 7, 22, 10, 30, 0, 0, time.UTC)

func mustCert(t *testing.T, pemBytes []byte) *x509.Certificate {
	t.Helper()
	c, err := ParseCertificatePEM(pemBytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestInitWritesFilesWithModesAndRefusesOverwrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	if err := Init(dir, []string{"broker.example.org", "10.0.0.7"}, false, t0); err != nil {
		t.Fatal(err)
	}
	for name, mode := range map[string]os.FileMode{CACertFile: 0o644, CAKeyFile: 0o600, BrokerCertFile: 0o644, BrokerKeyFile: 0o600, IssuedFile: 0o600} {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != mode {
			t.Errorf("%s mode = %v, want %v", name, st.Mode().Perm(), mode)
		}
	}
	before, _ := os.ReadFile(filepath.Join(dir, CACertFile))
	err := Init(dir, nil, false, t0)
	if err == nil || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("second Init without force: err = %v, want a refusal mentioning --force", err)
	}
	after, _ := os.ReadFile(filepath.Join(dir, CACertFile))
	if !bytes.Equal(before, after) {
		t.Fatal("refused Init still changed ca.crt")
	}
	if err := Init(dir, nil, true, t0); err != nil {
		t.Fatalf("Init with force: %v", err)
	}
	after, _ = os.ReadFile(filepath.Join(dir, CACertFile))
	if bytes.Equal(before, after) {
		t.Fatal("forced Init did not replace the CA")
	}
	// The files left in place form a working PKI.
	if _, err := LoadCA(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := ServerTLSConfigAt(dir, t0); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 5 {
		t.Fatalf("dir holds %d entries, want 5 (no temp files left)", len(entries))
	}
}

func TestCAAndServerCertificate(t *testing.T) {
	dir := t.TempDir()
	if err := Init(dir, []string{"broker.example.org", "10.0.0.7", "::1", "localhost"}, false, t0); err != nil {
		t.Fatal(err)
	}
	ca, err := LoadCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	caCert := ca.Certificate()
	if !caCert.IsCA || caCert.PublicKeyAlgorithm != x509.ECDSA {
		t.Fatalf("CA: IsCA=%v alg=%v", caCert.IsCA, caCert.PublicKeyAlgorithm)
	}
	if got, want := caCert.NotAfter, t0.Add(CAValidity); !got.Equal(want) {
		t.Errorf("CA NotAfter = %v, want %v (10 years)", got, want)
	}
	raw, _ := os.ReadFile(filepath.Join(dir, BrokerCertFile))
	srv := mustCert(t, raw)
	var ips []string
	for _, ip := range srv.IPAddresses {
		ips = append(ips, ip.String())
	}
	if got, want := strings.Join(srv.DNSNames, ","), "broker.example.org,localhost"; got != want {
		t.Errorf("DNS SANs = %s, want %s", got, want)
	}
	if got, want := strings.Join(ips, ","), "10.0.0.7,::1,127.0.0.1"; got != want {
		t.Errorf("IP SANs = %s, want %s", got, want)
	}
	if len(srv.ExtKeyUsage) != 1 || srv.ExtKeyUsage[0] != x509.ExtKeyUsageServerAuth {
		t.Errorf("ExtKeyUsage = %v, want server auth", srv.ExtKeyUsage)
	}
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	for _, name := range []string{"broker.example.org", "127.0.0.1", "localhost", "10.0.0.7"} {
		if _, err := srv.Verify(x509.VerifyOptions{DNSName: name, Roots: pool, CurrentTime: t0}); err != nil {
			t.Errorf("server cert does not verify for %s: %v", name, err)
		}
	}
	if _, _, err := ca.IssueServer([]string{"bad host!"}, t0); err == nil {
		t.Error("IssueServer accepted an invalid host")
	}
}

func TestIssueClientRoles(t *testing.T) {
	ca, err := NewCA(t0)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		role    api.Role
		wantOU  []string
		wantOK  bool
		wantErr bool
	}{
		{role: api.RoleProvider, wantOU: []string{"federation-autoscaler:provider"}, wantOK: true},
		{role: api.RoleConsumer, wantOU: []string{"federation-autoscaler:consumer"}, wantOK: true},
		{role: "", wantOK: false}, // legacy reference certificate
		{role: "admin", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(string(tt.role), func(t *testing.T) {
			certPEM, _, err := ca.IssueClient("cluster-a", tt.role, t0)
			if tt.wantErr {
				if err == nil {
					t.Fatal("want an error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			c := mustCert(t, certPEM)
			if c.Subject.CommonName != "cluster-a" {
				t.Errorf("CN = %q", c.Subject.CommonName)
			}
			if strings.Join(c.Subject.OrganizationalUnit, ",") != strings.Join(tt.wantOU, ",") {
				t.Errorf("OU = %v, want %v", c.Subject.OrganizationalUnit, tt.wantOU)
			}
			role, ok := RoleOf(c)
			if ok != tt.wantOK || role != tt.role {
				t.Errorf("RoleOf = %q,%v, want %q,%v", role, ok, tt.role, tt.wantOK)
			}
			if !c.NotAfter.Equal(t0.Add(ClientValidity)) {
				t.Errorf("NotAfter = %v, want 1 year after %v", c.NotAfter, t0)
			}
			if len(c.ExtKeyUsage) != 1 || c.ExtKeyUsage[0] != x509.ExtKeyUsageClientAuth {
				t.Errorf("ExtKeyUsage = %v, want client auth", c.ExtKeyUsage)
			}
		})
	}
}

func TestRoleOfConflicting(t *testing.T) {
	for _, ous := range [][]string{
		{"federation-autoscaler:provider", "federation-autoscaler:consumer"},
		{"federation-autoscaler:root"},
		{"ops"},
		nil,
	} {
		c := &x509.Certificate{}
		c.Subject.OrganizationalUnit = ous
		if r, ok := RoleOf(c); ok {
			t.Errorf("RoleOf(%v) = %q, true; want false", ous, r)
		}
	}
	c := &x509.Certificate{}
	c.Subject.OrganizationalUnit = []string{"ops", "federation-autoscaler:consumer"}
	if r, ok := RoleOf(c); !ok || r != api.RoleConsumer {
		t.Errorf("RoleOf = %q,%v", r, ok)
	}
	if _, ok := RoleOf(nil); ok {
		t.Error("RoleOf(nil) = true")
	}
}

func TestValidateClusterID(t *testing.T) {
	for id, ok := range map[string]bool{
		"a": true, "cluster-1": true, "0abc": true, strings.Repeat("a", 63): true,
		"": false, "Foo_1": false, "-a": false, "a-": false, "a.b": false, "UPPER": false,
		strings.Repeat("a", 64): false, "a b": false, "ü": false,
	} {
		err := ValidateClusterID(id)
		if (err == nil) != ok {
			t.Errorf("ValidateClusterID(%q) = %v, want ok=%v", id, err, ok)
		}
	}
	err := ValidateClusterID("Foo_1")
	want := `cluster id "Foo_1" is not a DNS-1123 label: use lowercase letters, digits and '-', at most 63 characters, starting and ending with a letter or digit`
	if err == nil || err.Error() != want {
		t.Errorf("message = %v, want %s", err, want)
	}
}

func TestWriteJoinBundleValidation(t *testing.T) {
	dir := t.TempDir()
	if err := Init(dir, nil, false, t0); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "b.tar.gz")
	tests := []struct {
		name, id, url string
		role          api.Role
		wantErr       string
	}{
		{"bad id", "Foo_1", "https://b:8443", api.RoleProvider, "DNS-1123"},
		{"no role", "a", "https://b:8443", "", "role"},
		{"bad role", "a", "https://b:8443", "admin", "role"},
		{"http", "a", "http://b:8443", api.RoleProvider, "https"},
		{"no scheme", "a", "b:8443", api.RoleProvider, "https"},
		{"no host", "a", "https:///x", api.RoleProvider, "no host"},
		{"userinfo", "a", "https://u:p@b", api.RoleProvider, "user"},
		{"bad port", "a", "https://b:99999", api.RoleProvider, "port"},
		{"empty", "a", "", api.RoleProvider, "https"},
		{"empty item in list", "a", "https://b:8443,,https://c:8443", api.RoleProvider, "single commas"},
		{"listed twice", "a", "https://b:8443, https://b:8443", api.RoleProvider, "twice"},
		{"one bad in list", "a", "https://b:8443,http://c:8443", api.RoleProvider, "https"},
		{"too many", "a", strings.Repeat("https://b:8443,", MaxBrokerURLs) + "https://c", api.RoleProvider, "limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := WriteJoinBundle(dir, tt.id, tt.role, tt.url, out, false, t0)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
			}
			if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
				t.Fatal("a refused bundle was written")
			}
		})
	}
	if err := WriteJoinBundle(t.TempDir(), "a", api.RoleProvider, "https://b", out, false, t0); err == nil || !strings.Contains(err.Error(), "pki init") {
		t.Fatalf("missing CA: err = %v", err)
	}
}

func TestJoinBundleRoundTrip(t *testing.T) {
	dir := t.TempDir()
	if err := Init(dir, []string{"broker.example.org"}, false, t0); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "sub", "c1.tar.gz")
	if err := WriteJoinBundle(dir, "consumer-1", api.RoleConsumer, "https://broker.example.org:8443/ignored", out, false, t0); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("bundle mode = %v, want 0600", st.Mode().Perm())
	}
	// tar entry modes
	data, _ := os.ReadFile(out)
	modes := tarModes(t, data)
	if modes[BundleKey] != 0o600 || len(modes) != 4 {
		t.Errorf("tar entries = %v, want 4 with tls.key 0600", modes)
	}
	b, err := ParseBundle(data, t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if b.ClusterID != "consumer-1" || b.Role != api.RoleConsumer || b.BrokerURL != "https://broker.example.org:8443/ignored" {
		t.Fatalf("bundle = %+v", b)
	}
	caPEM, _ := os.ReadFile(filepath.Join(dir, CACertFile))
	if !bytes.Equal(b.CACertPEM, caPEM) {
		t.Error("bundle CA differs from the federation CA")
	}
	cfg, err := b.ClientTLSConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ServerName != "broker.example.org" || cfg.MinVersion != tls.VersionTLS13 || len(cfg.Certificates) != 1 {
		t.Errorf("client TLS config: ServerName=%q Min=%x certs=%d", cfg.ServerName, cfg.MinVersion, len(cfg.Certificates))
	}
	// Expired: one year and a day later.
	if _, err := ParseBundle(data, t0.Add(ClientValidity+24*time.Hour)); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("expired bundle: err = %v", err)
	}
	// Real clock: LoadBundle on a bundle issued now.
	out2 := filepath.Join(t.TempDir(), "p.tar.gz")
	if err := WriteJoinBundle(dir, "provider-1", api.RoleProvider, "https://127.0.0.1:8443", out2, false, time.Now()); err != nil {
		t.Fatal(err)
	}
	if b, err := LoadBundle(out2); err != nil || b.Role != api.RoleProvider {
		t.Fatalf("LoadBundle = %+v, %v", b, err)
	}
}

// TestJoinBundleBrokerURLs: a bundle may list an HA broker's replicas; a
// single-URL bundle's join.yaml stays what it was (agents that read it
// strictly keep reading it), and the TLS server name follows the hosts.
func TestJoinBundleBrokerURLs(t *testing.T) {
	ca, err := NewCA(t0)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, list     string
		wantURLs       []string
		wantServerName string
		wantYAML       string
	}{
		{"one URL", "https://broker.example.org:8443", []string{"https://broker.example.org:8443"}, "broker.example.org",
			"brokerURL: https://broker.example.org:8443\nclusterId: c1\nrole: consumer\n"},
		{"replicas on one host", "https://b.example.org:8443, https://b.example.org:8444", []string{"https://b.example.org:8443", "https://b.example.org:8444"}, "b.example.org",
			"alternateBrokerURLs:\n- https://b.example.org:8444\nbrokerURL: https://b.example.org:8443\nclusterId: c1\nrole: consumer\n"},
		{"replicas on three hosts", "https://b-0:8443,https://b-1:8443,https://b-2:8443", []string{"https://b-0:8443", "https://b-1:8443", "https://b-2:8443"}, "",
			"alternateBrokerURLs:\n- https://b-1:8443\n- https://b-2:8443\nbrokerURL: https://b-0:8443\nclusterId: c1\nrole: consumer\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, err := BuildJoinBundle(ca, "c1", api.RoleConsumer, tt.list, t0)
			if err != nil {
				t.Fatal(err)
			}
			entries, err := readBundleEntries(data)
			if err != nil {
				t.Fatal(err)
			}
			if got := string(entries[BundleJoinYAML]); got != tt.wantYAML {
				t.Errorf("join.yaml =\n%s\nwant\n%s", got, tt.wantYAML)
			}
			b, err := ParseBundle(data, t0)
			if err != nil {
				t.Fatal(err)
			}
			if got := b.BrokerURLs(); !slices.Equal(got, tt.wantURLs) {
				t.Errorf("BrokerURLs() = %v, want %v", got, tt.wantURLs)
			}
			cfg, err := b.ClientTLSConfig()
			if err != nil {
				t.Fatal(err)
			}
			if cfg.ServerName != tt.wantServerName {
				t.Errorf("ServerName = %q, want %q", cfg.ServerName, tt.wantServerName)
			}
		})
	}
}

func TestLegacyBundle(t *testing.T) {
	ca, err := NewCA(t0)
	if err != nil {
		t.Fatal(err)
	}
	data, err := BuildJoinBundle(ca, "old-cluster", "", "https://b", t0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ParseBundle(data, t0)
	if err != nil {
		t.Fatal(err)
	}
	if b.Role != "" {
		t.Fatalf("role = %q", b.Role)
	}
	c := mustCert(t, b.CertPEM)
	if _, ok := RoleOf(c); ok {
		t.Fatal("legacy certificate carries a role")
	}
}

type entry struct {
	name string
	data []byte
	typ  byte
}

func tarGz(t testing.TB, entries []entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		hdr := &tar.Header{Name: e.name, Mode: 0o600, Typeflag: typ}
		if typ == tar.TypeReg {
			hdr.Size = int64(len(e.data))
		}
		if typ == tar.TypeSymlink {
			hdr.Linkname = "/etc/passwd"
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if typ == tar.TypeReg {
			if _, err := tw.Write(e.data); err != nil {
				t.Fatal(err)
			}
		}
	}
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

func tarModes(t *testing.T, data []byte) map[string]int64 {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	modes := map[string]int64{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return modes
		}
		if err != nil {
			t.Fatal(err)
		}
		modes[h.Name] = h.Mode
	}
}

func TestTamperedBundles(t *testing.T) {
	ca, _ := NewCA(t0)
	foreign, _ := NewCA(t0)
	cert, key, _ := ca.IssueClient("c1", api.RoleProvider, t0)
	_, otherKey, _ := ca.IssueClient("c1", api.RoleProvider, t0)
	foreignCert, foreignKey, _ := foreign.IssueClient("c1", api.RoleProvider, t0)
	otherCN, otherCNKey, _ := ca.IssueClient("c2", api.RoleProvider, t0)
	consumerCert, consumerKey, _ := ca.IssueClient("c1", api.RoleConsumer, t0)
	legacyCert, legacyKey, _ := ca.IssueClient("c1", "", t0)
	srvCert, srvKey, _ := ca.IssueServer(nil, t0)
	join := []byte("clusterId: c1\nrole: provider\nbrokerURL: https://b:8443\n")
	good := func(over ...entry) []entry {
		es := []entry{{name: BundleCACert, data: ca.CertPEM()}, {name: BundleCert, data: cert}, {name: BundleKey, data: key}, {name: BundleJoinYAML, data: join}}
		for _, o := range over {
			for i := range es {
				if es[i].name == o.name {
					es[i] = o
				}
			}
		}
		return es
	}
	if _, err := ParseBundle(tarGz(t, good()), t0); err != nil {
		t.Fatalf("good bundle refused: %v", err)
	}
	if _, err := ParseBundle(tarGz(t, append([]entry{{name: "./" + BundleCACert, data: ca.CertPEM()}}, good()[1:]...)), t0); err != nil {
		t.Fatalf("./-prefixed entry refused: %v", err)
	}
	tests := []struct {
		name    string
		data    []byte
		wantErr string
	}{
		{"wrong key", tarGz(t, good(entry{name: BundleKey, data: otherKey})), "does not match"},
		{"foreign CA signed cert", tarGz(t, good(entry{name: BundleCert, data: foreignCert}, entry{name: BundleKey, data: foreignKey})), "another CA"},
		{"foreign CA in bundle", tarGz(t, good(entry{name: BundleCACert, data: foreign.CertPEM()})), "another CA"},
		{"CN mismatch", tarGz(t, good(entry{name: BundleCert, data: otherCN}, entry{name: BundleKey, data: otherCNKey})), "common name"},
		{"role mismatch", tarGz(t, good(entry{name: BundleCert, data: consumerCert}, entry{name: BundleKey, data: consumerKey})), "role"},
		{"legacy cert, role in yaml", tarGz(t, good(entry{name: BundleCert, data: legacyCert}, entry{name: BundleKey, data: legacyKey})), "role"},
		{"server cert as client", tarGz(t, good(entry{name: BundleCert, data: srvCert}, entry{name: BundleKey, data: srvKey})), "client certificate"},
		{"leaf as CA", tarGz(t, good(entry{name: BundleCACert, data: cert})), "not a CA"},
		{"path traversal", tarGz(t, append(good(), entry{name: "../evil", data: []byte("x")})), "'..'"},
		{"traversal to known name", tarGz(t, append(good()[1:], entry{name: "x/../ca.crt", data: ca.CertPEM()})), "'..'"},
		{"absolute path", tarGz(t, append(good()[1:], entry{name: "/ca.crt", data: ca.CertPEM()})), "absolute"},
		{"unknown entry", tarGz(t, append(good(), entry{name: "extra.txt", data: []byte("x")})), "unexpected bundle entry"},
		{"duplicate entry", tarGz(t, append(good(), entry{name: BundleCert, data: cert})), "duplicate"},
		{"symlink", tarGz(t, append(good()[1:], entry{name: BundleCACert, typ: tar.TypeSymlink})), "regular file"},
		{"directory", tarGz(t, append(good(), entry{name: "d/", typ: tar.TypeDir})), "regular file"},
		{"missing key", tarGz(t, good()[:2]), "no tls.key"},
		{"oversized entry", tarGz(t, good(entry{name: BundleJoinYAML, data: bytes.Repeat([]byte("#"), MaxBundleEntrySize+1)})), "limit"},
		{"bad yaml field", tarGz(t, good(entry{name: BundleJoinYAML, data: []byte("clusterId: c1\nrole: provider\nbrokerURL: https://b\nextra: 1\n")})), "join.yaml"},
		{"http broker", tarGz(t, good(entry{name: BundleJoinYAML, data: []byte("clusterId: c1\nrole: provider\nbrokerURL: http://b\n")})), "https"},
		{"alternate http broker", tarGz(t, good(entry{name: BundleJoinYAML, data: []byte("clusterId: c1\nrole: provider\nbrokerURL: https://b\nalternateBrokerURLs: [http://c]\n")})), "https"},
		{"alternate repeats brokerURL", tarGz(t, good(entry{name: BundleJoinYAML, data: []byte("clusterId: c1\nrole: provider\nbrokerURL: https://b\nalternateBrokerURLs: [https://b]\n")})), "twice"},
		{"bad cluster id", tarGz(t, good(entry{name: BundleJoinYAML, data: []byte("clusterId: C1\nrole: provider\nbrokerURL: https://b\n")})), "DNS-1123"},
		{"not gzip", []byte("hello"), "gzip"},
		{"two certs in tls.crt", tarGz(t, good(entry{name: BundleCert, data: append(append([]byte{}, cert...), cert...)})), "exactly one"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseBundle(tt.data, t0)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestLoadCARejectsMismatchedKey(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	if err := Init(a, nil, false, t0); err != nil {
		t.Fatal(err)
	}
	if err := Init(b, nil, false, t0); err != nil {
		t.Fatal(err)
	}
	k, _ := os.ReadFile(filepath.Join(b, CAKeyFile))
	if err := os.WriteFile(filepath.Join(a, CAKeyFile), k, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCA(a); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Fatalf("err = %v", err)
	}
	// A broker certificate of another CA is refused by ServerTLSConfig.
	if _, err := ServerTLSConfigAt(b, t0); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(b, BrokerCertFile), mustRead(t, filepath.Join(a, BrokerCertFile)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(b, BrokerKeyFile), mustRead(t, filepath.Join(a, BrokerKeyFile)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ServerTLSConfigAt(b, t0); err == nil || !strings.Contains(err.Error(), "not signed by") {
		t.Fatalf("foreign broker cert: %v", err)
	}
	// A leaf certificate cannot act as a CA.
	if err := os.WriteFile(filepath.Join(b, CACertFile), mustRead(t, filepath.Join(b, BrokerCertFile)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCA(b); err == nil || !strings.Contains(err.Error(), "not a CA") {
		t.Fatalf("err = %v", err)
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

// handshake runs one TLS 1.3 handshake over loopback TCP and returns the peer
// certificates the server saw and the server's and the client's errors.
func handshake(t *testing.T, srvCfg, cliCfg *tls.Config) (peers []*x509.Certificate, srvErr, cliErr error) {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", srvCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type result struct {
		err   error
		peers []*x509.Certificate
	}
	done := make(chan result, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- result{err: err}
			return
		}
		defer c.Close()
		tc := c.(*tls.Conn)
		_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
		err = tc.Handshake()
		if err == nil {
			// Read the client's byte so a post-handshake rejection reaches the client.
			_, err = tc.Read(make([]byte, 1))
		}
		done <- result{err: err, peers: tc.ConnectionState().PeerCertificates}
	}()
	conn, err := net.DialTimeout("tcp", ln.Addr().String(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	tc := tls.Client(conn, cliCfg)
	cliErr = tc.Handshake()
	if cliErr == nil {
		_, cliErr = tc.Write([]byte{1})
		if cliErr == nil {
			// With TLS 1.3 a refused client certificate surfaces on the first read.
			_ = tc.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, rerr := tc.Read(make([]byte, 1))
			if rerr != nil && !errors.Is(rerr, io.EOF) {
				cliErr = rerr
			}
		}
	}
	r := <-done
	return r.peers, r.err, cliErr
}

func TestMTLSHandshake(t *testing.T) {
	dir := t.TempDir()
	if err := Init(dir, nil, false, time.Now()); err != nil {
		t.Fatal(err)
	}
	srvCfg, err := ServerTLSConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	if srvCfg.MinVersion != tls.VersionTLS13 || srvCfg.ClientAuth != tls.RequireAndVerifyClientCert {
		t.Fatalf("server config: Min=%x ClientAuth=%v", srvCfg.MinVersion, srvCfg.ClientAuth)
	}
	out := filepath.Join(t.TempDir(), "c.tar.gz")
	if err := WriteJoinBundle(dir, "consumer-7", api.RoleConsumer, "https://127.0.0.1:8443", out, false, time.Now()); err != nil {
		t.Fatal(err)
	}
	b, err := LoadBundle(out)
	if err != nil {
		t.Fatal(err)
	}
	cliCfg, err := b.ClientTLSConfig()
	if err != nil {
		t.Fatal(err)
	}

	t.Run("bundle client is accepted", func(t *testing.T) {
		peers, srvErr, cliErr := handshake(t, srvCfg, cliCfg)
		if srvErr != nil || cliErr != nil {
			t.Fatalf("server err %v, client err %v", srvErr, cliErr)
		}
		if len(peers) == 0 || peers[0].Subject.CommonName != "consumer-7" {
			t.Fatalf("server saw peers %v", peers)
		}
		if r, ok := RoleOf(peers[0]); !ok || r != api.RoleConsumer {
			t.Fatalf("role seen by server = %q,%v", r, ok)
		}
	})
	t.Run("no client certificate is refused", func(t *testing.T) {
		noCert := cliCfg.Clone()
		noCert.Certificates = nil
		_, srvErr, _ := handshake(t, srvCfg, noCert)
		if srvErr == nil || !strings.Contains(srvErr.Error(), "certificate") {
			t.Fatalf("server err = %v, want a refused handshake", srvErr)
		}
	})
	t.Run("foreign CA client is refused", func(t *testing.T) {
		foreign, _ := NewCA(time.Now())
		data, err := BuildJoinBundle(foreign, "consumer-7", api.RoleConsumer, "https://127.0.0.1:8443", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		fb, err := LoadBundleBytes(data)
		if err != nil {
			t.Fatal(err)
		}
		fcfg, _ := fb.ClientTLSConfig()
		fcfg.RootCAs = cliCfg.RootCAs // trusts the broker, but its own cert is foreign
		_, srvErr, _ := handshake(t, srvCfg, fcfg)
		if srvErr == nil {
			t.Fatal("server accepted a client certificate of a foreign CA")
		}
	})
	t.Run("TLS 1.2 client is refused", func(t *testing.T) {
		old := cliCfg.Clone()
		old.MinVersion, old.MaxVersion = tls.VersionTLS12, tls.VersionTLS12
		if _, srvErr, _ := handshake(t, srvCfg, old); srvErr == nil {
			t.Fatal("server accepted TLS 1.2")
		}
	})
}

func TestAdapterPKI(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	if err := InitAdapter(dir, []string{"adapter.kube-system.svc"}, false, now); err != nil {
		t.Fatal(err)
	}
	for name, mode := range map[string]os.FileMode{CACertFile: 0o644, CAKeyFile: 0o600, AdapterServerCertFile: 0o644, AdapterServerKeyFile: 0o600, AdapterClientCertFile: 0o644, AdapterClientKeyFile: 0o600} {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != mode {
			t.Errorf("%s mode = %v, want %v", name, st.Mode().Perm(), mode)
		}
	}
	if err := InitAdapter(dir, nil, false, now); err == nil || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("second InitAdapter: %v", err)
	}
	srv := mustCert(t, mustRead(t, filepath.Join(dir, AdapterServerCertFile)))
	if strings.Join(srv.DNSNames, ",") != "adapter.kube-system.svc,localhost" {
		t.Errorf("adapter SANs = %v", srv.DNSNames)
	}
	srvCfg, err := AdapterServerTLSConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, AdapterClientCertFile), filepath.Join(dir, AdapterClientKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(mustRead(t, filepath.Join(dir, CACertFile)))
	cli := &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: pool, Certificates: []tls.Certificate{pair}, ServerName: "localhost"}
	if _, srvErr, cliErr := handshake(t, srvCfg, cli); srvErr != nil || cliErr != nil {
		t.Fatalf("adapter handshake: server %v client %v", srvErr, cliErr)
	}
	noCert := cli.Clone()
	noCert.Certificates = nil
	if _, srvErr, _ := handshake(t, srvCfg, noCert); srvErr == nil {
		t.Fatal("adapter accepted a client without a certificate")
	}
	// The federation CA and the adapter CA are distinct: a federation
	// client certificate is refused by the adapter.
	fed := t.TempDir()
	if err := Init(fed, nil, false, now); err != nil {
		t.Fatal(err)
	}
	fca, _ := LoadCA(fed)
	c, k, _ := fca.IssueClient("cluster-autoscaler", "", now)
	fpair, _ := tls.X509KeyPair(c, k)
	foreign := cli.Clone()
	foreign.Certificates = []tls.Certificate{fpair}
	if _, srvErr, _ := handshake(t, srvCfg, foreign); srvErr == nil {
		t.Fatal("adapter accepted a federation client certificate")
	}
}

func BenchmarkParseBundle(b *testing.B) {
	ca, err := NewCA(t0)
	if err != nil {
		b.Fatal(err)
	}
	data, err := BuildJoinBundle(ca, "c1", api.RoleProvider, "https://b:8443", t0)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseBundle(data, t0); err != nil {
			b.Fatal(err)
		}
	}
}

// TestServerTLSConfigRefusesUnusableCertificates writes real bad broker
// certificates and checks that each is refused with a message saying what
// is wrong (a broker serving them would be ready while every handshake
// fails).
func TestServerTLSConfigRefusesUnusableCertificates(t *testing.T) {
	now := t0.Add(30 * 24 * time.Hour)
	server := func() *x509.Certificate {
		return &x509.Certificate{KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	}
	tests := []struct {
		name string
		// make writes broker.crt and broker.key into dir made by Init at t0.
		make func(t *testing.T, dir string, ca *CA)
		want string
	}{
		{"valid", func(*testing.T, string, *CA) {}, ""},
		{"expired", func(t *testing.T, dir string, ca *CA) {
			writePair(t, dir, ca, server(), t0.Add(-2*ServerValidity), ServerValidity)
		}, "expired on"},
		{"not yet valid", func(t *testing.T, dir string, ca *CA) {
			writePair(t, dir, ca, server(), now.Add(48*time.Hour), ServerValidity)
		}, "not valid before"},
		{"client certificate as server certificate", func(t *testing.T, dir string, ca *CA) {
			c := server()
			c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
			writePair(t, dir, ca, c, t0, ServerValidity)
		}, "lacks serverAuth"},
		{"no extended key usage", func(t *testing.T, dir string, ca *CA) {
			c := server()
			c.ExtKeyUsage = nil
			writePair(t, dir, ca, c, t0, ServerValidity)
		}, "lacks serverAuth"},
		{"key of another certificate", func(t *testing.T, dir string, ca *CA) {
			other := t.TempDir()
			writePair(t, other, ca, server(), t0, ServerValidity)
			if err := os.WriteFile(filepath.Join(dir, BrokerKeyFile), mustRead(t, filepath.Join(other, BrokerKeyFile)), 0o600); err != nil {
				t.Fatal(err)
			}
		}, "do not form a key pair"},
		{"signed by another CA", func(t *testing.T, dir string, _ *CA) {
			other, err := NewCA(t0)
			if err != nil {
				t.Fatal(err)
			}
			writePair(t, dir, other, server(), t0, ServerValidity)
		}, "not signed by the CA"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := Init(dir, nil, false, t0); err != nil {
				t.Fatal(err)
			}
			ca, err := LoadCA(dir)
			if err != nil {
				t.Fatal(err)
			}
			tc.make(t, dir, ca)
			_, err = ServerTLSConfigAt(dir, now)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("a good certificate was refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("err = %v, want it to say %q", err, tc.want)
			}
		})
	}
	// An expired CA stops everything it signed.
	dir := t.TempDir()
	if err := Init(dir, nil, false, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := ServerTLSConfigAt(dir, t0.Add(CAValidity+time.Hour)); err == nil || !strings.Contains(err.Error(), "CA certificate expired") {
		t.Fatalf("expired CA: %v", err)
	}
}

func TestCheckClientCertificate(t *testing.T) {
	ca, err := NewCA(t0)
	if err != nil {
		t.Fatal(err)
	}
	cliPEM, _, err := ca.IssueClient("paris-1", api.RoleProvider, t0)
	if err != nil {
		t.Fatal(err)
	}
	srvPEM, _, err := ca.IssueServer(nil, t0)
	if err != nil {
		t.Fatal(err)
	}
	cli, srv := mustCert(t, cliPEM), mustCert(t, srvPEM)
	if err := CheckClientCertificate(cli, ca.Certificate(), t0); err != nil {
		t.Fatal(err)
	}
	if err := CheckClientCertificate(srv, ca.Certificate(), t0); err == nil || !strings.Contains(err.Error(), "lacks clientAuth") || !strings.Contains(err.Error(), "pki join") {
		t.Fatalf("server certificate as client certificate: %v", err)
	}
	if err := CheckClientCertificate(cli, ca.Certificate(), t0.Add(ClientValidity+time.Hour)); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("expired client certificate: %v", err)
	}
}

// writePair issues tmpl from ca as of issuedAt and writes it as the broker's
// certificate and key in dir.
func writePair(t *testing.T, dir string, ca *CA, tmpl *x509.Certificate, issuedAt time.Time, validity time.Duration) {
	t.Helper()
	certPEM, keyPEM, err := ca.issue(tmpl, issuedAt, validity)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeFiles(dir, []file{{BrokerCertFile, certPEM, 0o644}, {BrokerKeyFile, keyPEM, 0o600}}); err != nil {
		t.Fatal(err)
	}
}
