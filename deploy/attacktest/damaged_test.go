package attacktest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/pki"
	"github.com/federation-autoscaler/federation-autoscaler/server/store"
	"github.com/federation-autoscaler/federation-autoscaler/server/store/bolt"
)

// Issue #11 item 7: damaged or wrong state is refused at start with exit
// status 1 and a message that says what is wrong and what to do, never a
// panic; an explicit flag starts fresh without destroying anything.

// dataDir returns a data directory whose broker.db holds one reservation.
func dataDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	s, err := bolt.Open(dir, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := store.Reservation{ID: "res-1", ConsumerID: "c1", ProviderID: "p1", ChunkType: api.ChunkStandard, ChunkCount: 1, Phase: api.PhasePeered, CreatedAt: time.Now()}
	if err := s.Apply(context.Background(), []store.Mutation{store.PutReservation(r)}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestDamagedStoreStopsTheStart: the real binary refuses a damaged
// database with exit status 1 and a message saying what is wrong and what
// to do, and leaves the file as it was.
func TestDamagedStoreStopsTheStart(t *testing.T) {
	pkiDir := t.TempDir()
	run(t, "pki", "init", "--dir", pkiDir)
	tests := []struct {
		name   string
		damage func(path string) error
		want   string
	}{
		{"zero bytes", func(p string) error { return os.Truncate(p, 0) }, "empty (0 bytes)"},
		{"truncated", func(p string) error { return os.Truncate(p, 8192) }, "it was truncated"},
		{"not a database", func(p string) error { return os.WriteFile(p, []byte(strings.Repeat("garbage ", 4096)), 0o600) }, "neither meta page is valid"},
		{"random tree pages", overwritePages(2, 4), "page"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := dataDir(t)
			db := filepath.Join(dir, bolt.FileName)
			if err := tc.damage(db); err != nil {
				t.Fatal(err)
			}
			before, _ := os.ReadFile(db)
			out, code := runToExit(t, "broker", "--pki-dir", pkiDir, "--data-dir", dir, "--listen", "127.0.0.1:0", "--dashboard-listen", "127.0.0.1:0")
			if code != 1 {
				t.Fatalf("exit status %d, want 1:\n%s", code, out)
			}
			for _, want := range []string{db + " is damaged", tc.want, "Restore", "--reset-damaged-store"} {
				if !strings.Contains(out, want) {
					t.Errorf("output does not say %q:\n%s", want, out)
				}
			}
			if strings.Contains(out, "panic") || strings.Contains(out, "SIGBUS") {
				t.Errorf("the broker crashed instead of refusing:\n%s", out)
			}
			if after, _ := os.ReadFile(db); string(after) != string(before) {
				t.Error("the refused file was changed")
			}
		})
	}
}

// TestResetDamagedStore: with --reset-damaged-store the broker moves the
// damaged file aside, says so, and serves with an empty store.
func TestResetDamagedStore(t *testing.T) {
	dir := dataDir(t)
	db := filepath.Join(dir, bolt.FileName)
	if err := os.Truncate(db, 8192); err != nil {
		t.Fatal(err)
	}
	b := startBroker(t, 1024, "--data-dir", dir, "--reset-damaged-store")
	if m := b.out.find(regexp.MustCompile(`moved it aside.*truncated|truncated.*moved it aside`)); m == nil {
		t.Errorf("the start logs do not say the store was reset and why:\n%s", b.out.tail(20))
	}
	kept, _ := filepath.Glob(db + ".damaged-*")
	if len(kept) != 1 {
		t.Fatalf("damaged files kept: %v, want one", kept)
	}
	if st, err := os.Stat(kept[0]); err != nil || st.Size() != 8192 {
		t.Fatalf("the damaged file was not kept as it was: %v %v", st, err)
	}
	c := b.caller(t, "c1", api.RoleConsumer)
	expect(t, "res-1 in the fresh store", c.Must(t, "GET", "/api/v1/reservations/res-1", nil), http.StatusNotFound, api.CodeNotFound)
}

// overwritePages fills n pages from page first on with random bytes (the
// meta pages 0 and 1 stay valid, so only a walk of the tree finds it).
func overwritePages(first, n int) func(path string) error {
	return func(path string) error {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		junk := make([]byte, n*os.Getpagesize())
		if _, err := rand.Read(junk); err != nil {
			return err
		}
		if _, err := f.WriteAt(junk, int64(first*os.Getpagesize())); err != nil {
			_ = f.Close()
			return err
		}
		return f.Close()
	}
}

// TestBadBrokerCertificateStopsTheStart: a broker certificate no agent
// could use stops the start with exit status 1 and says why (it used to
// start, answer /readyz 200, and fail every handshake silently).
func TestBadBrokerCertificateStopsTheStart(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name   string
		mutate func(c *x509.Certificate, key **ecdsa.PrivateKey)
		want   string
	}{
		{"expired", func(c *x509.Certificate, _ **ecdsa.PrivateKey) {
			c.NotBefore, c.NotAfter = now.Add(-48*time.Hour), now.Add(-24*time.Hour)
		}, "expired on"},
		{"not yet valid", func(c *x509.Certificate, _ **ecdsa.PrivateKey) { c.NotBefore = now.Add(24 * time.Hour) }, "not valid before"},
		{"no serverAuth", func(c *x509.Certificate, _ **ecdsa.PrivateKey) {
			c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
		}, "lacks serverAuth"},
		{"key does not match", func(_ *x509.Certificate, key **ecdsa.PrivateKey) {
			other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			*key = other
		}, "do not form a key pair"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pkiDir := t.TempDir()
			run(t, "pki", "init", "--dir", pkiDir)
			writeBrokerCert(t, pkiDir, now, tc.mutate)
			out, code := runToExit(t, "broker", "--pki-dir", pkiDir, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--dashboard-listen", "127.0.0.1:0")
			if code != 1 {
				t.Fatalf("exit status %d, want 1:\n%s", code, out)
			}
			if !strings.Contains(out, tc.want) || !strings.Contains(out, pki.BrokerCertFile) {
				t.Errorf("output does not name %s and say %q:\n%s", pki.BrokerCertFile, tc.want, out)
			}
			if strings.Contains(out, "listening") {
				t.Errorf("the broker started listening:\n%s", out)
			}
		})
	}
}

// writeBrokerCert signs a broker certificate with dir's CA key after
// mutate changed its template (or the key written next to it).
func writeBrokerCert(t *testing.T, dir string, now time.Time, mutate func(*x509.Certificate, **ecdsa.PrivateKey)) {
	t.Helper()
	ca, err := pki.LoadCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	caKeyPEM, err := os.ReadFile(filepath.Join(dir, pki.CAKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	caKey, err := pki.ParsePrivateKeyPEM(caKeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(now.UnixNano()), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, BasicConstraintsValid: true,
	}
	written := key
	mutate(tmpl, &written)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Certificate(), &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(written)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, pki.BrokerCertFile), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, pki.BrokerKeyFile), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
}
