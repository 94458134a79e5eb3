// Package pki is the federation's public-key infrastructure: the federation
// CA, the broker's serving certificate, the member clusters' client
// certificates (common name = cluster id, role recorded in the certificate),
// the join bundles that carry them to a member cluster, the TLS
// configurations of both ends of the mTLS link, and the separate local CA of
// the Cluster Autoscaler ↔ adapter link.
//
// Everything is done with Go's crypto/x509 (ECDSA P-256); no openssl is
// needed. Every function that stamps or checks a validity period takes the
// current time as a parameter so callers and tests control the clock.
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha1" //nolint:gosec // SubjectKeyId derivation (RFC 5280 §4.2.1.2 method 1), not a security use.
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// File names written by Init in the PKI directory.
const (
	CACertFile     = "ca.crt"
	CAKeyFile      = "ca.key"
	BrokerCertFile = "broker.crt"
	BrokerKeyFile  = "broker.key"
)

// Validity periods.
const (
	CAValidity     = 10 * 365 * 24 * time.Hour
	ServerValidity = 2 * 365 * 24 * time.Hour
	ClientValidity = 365 * 24 * time.Hour
	// Backdate is subtracted from "now" for NotBefore, so a certificate is
	// usable at once on a machine whose clock is slightly behind.
	Backdate = 5 * time.Minute
)

// RoleOUPrefix prefixes the Subject.OrganizationalUnit entry that records a
// client certificate's role: "federation-autoscaler:provider" or
// "federation-autoscaler:consumer".
const RoleOUPrefix = "federation-autoscaler:"

// maxPEMSize bounds any certificate or key file read from disk or a bundle.
const maxPEMSize = 1 << 20

// RoleOf returns the role recorded in a client certificate. It is false when
// the certificate carries no role (a legacy reference certificate) or
// carries conflicting or unknown roles.
func RoleOf(cert *x509.Certificate) (api.Role, bool) {
	if cert == nil {
		return "", false
	}
	var found api.Role
	for _, ou := range cert.Subject.OrganizationalUnit {
		v, ok := strings.CutPrefix(ou, RoleOUPrefix)
		if !ok {
			continue
		}
		r := api.Role(v)
		if r != api.RoleProvider && r != api.RoleConsumer {
			return "", false
		}
		if found != "" && found != r {
			return "", false
		}
		found = r
	}
	return found, found != ""
}

// ValidateClusterID returns an error unless id is a DNS-1123 label: at most
// 63 lowercase letters, digits and '-', starting and ending with a letter or
// digit. Cluster ids become certificate common names and Kubernetes object
// names, so nothing else is accepted.
func ValidateClusterID(id string) error {
	ok := len(id) >= 1 && len(id) <= 63
	for i := 0; ok && i < len(id); i++ {
		c := id[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '-' && i != 0 && i != len(id)-1:
		default:
			ok = false
		}
	}
	if !ok {
		return fmt.Errorf("cluster id %q is not a DNS-1123 label: use lowercase letters, digits and '-', at most 63 characters, starting and ending with a letter or digit", id)
	}
	return nil
}

func validateRole(role api.Role, allowEmpty bool) error {
	switch role {
	case api.RoleProvider, api.RoleConsumer:
		return nil
	case "":
		if allowEmpty {
			return nil
		}
	}
	return fmt.Errorf("role %q is not valid: use %q or %q", role, api.RoleProvider, api.RoleConsumer)
}

// CA is a certificate authority held in memory: its certificate and key.
type CA struct {
	cert    *x509.Certificate
	certPEM []byte
	key     *ecdsa.PrivateKey
}

// NewCA creates a fresh federation CA (ECDSA P-256, valid 10 years from now).
func NewCA(now time.Time) (*CA, error) {
	return newCA("Federation Autoscaler CA", now)
}

func newCA(commonName string, now time.Time) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	ski, err := subjectKeyID(key.Public())
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName, Organization: []string{"federation-autoscaler"}},
		NotBefore:             now.Add(-Backdate),
		NotAfter:              now.Add(CAValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
		SubjectKeyId:          ski,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("self-sign CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse new CA certificate: %w", err)
	}
	return &CA{cert: cert, certPEM: encodeCert(der), key: key}, nil
}

// LoadCA reads dir/ca.crt and dir/ca.key and checks that they belong
// together and that the certificate is a CA.
func LoadCA(dir string) (*CA, error) {
	certPEM, err := readLimited(filepath.Join(dir, CACertFile))
	if err != nil {
		return nil, fmt.Errorf("read CA certificate (run `pki init --dir %s` first?): %w", dir, err)
	}
	keyPEM, err := readLimited(filepath.Join(dir, CAKeyFile))
	if err != nil {
		return nil, fmt.Errorf("read CA key: %w", err)
	}
	return parseCA(certPEM, keyPEM)
}

func parseCA(certPEM, keyPEM []byte) (*CA, error) {
	cert, err := ParseCertificatePEM(certPEM)
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	if !cert.IsCA || !cert.BasicConstraintsValid {
		return nil, errors.New("CA certificate: not a CA (basic constraints CA:TRUE missing)")
	}
	signer, err := ParsePrivateKeyPEM(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("CA key: %w", err)
	}
	key, ok := signer.(*ecdsa.PrivateKey)
	if !ok {
		return nil, errors.New("CA key: not an ECDSA key")
	}
	if !key.PublicKey.Equal(cert.PublicKey) {
		return nil, errors.New("CA key does not match the CA certificate")
	}
	return &CA{cert: cert, certPEM: encodeCert(cert.Raw), key: key}, nil
}

// CertPEM returns the CA certificate, PEM-encoded.
func (ca *CA) CertPEM() []byte { return append([]byte(nil), ca.certPEM...) }

// Certificate returns the parsed CA certificate.
func (ca *CA) Certificate() *x509.Certificate { return ca.cert }

// IssueServer issues a TLS server certificate (server auth) whose SANs are
// every entry of hosts (an IP address or a DNS name) plus 127.0.0.1 and
// localhost. It is valid for 2 years, never beyond the CA.
func (ca *CA) IssueServer(hosts []string, now time.Time) (certPEM, keyPEM []byte, err error) {
	var dns []string
	var ips []net.IP
	seen := map[string]bool{}
	for _, h := range append(append([]string(nil), hosts...), "127.0.0.1", "localhost") {
		h = strings.TrimSpace(h)
		if h == "" {
			return nil, nil, errors.New("empty --host: give a DNS name or an IP address")
		}
		if ip := net.ParseIP(h); ip != nil {
			if !seen["ip:"+ip.String()] {
				seen["ip:"+ip.String()] = true
				ips = append(ips, ip)
			}
			continue
		}
		name := strings.ToLower(strings.TrimSuffix(h, "."))
		if err := validateDNSName(name); err != nil {
			return nil, nil, fmt.Errorf("host %q: %w", h, err)
		}
		if !seen["dns:"+name] {
			seen["dns:"+name] = true
			dns = append(dns, name)
		}
	}
	cn := "federation-autoscaler-server"
	if len(hosts) > 0 {
		cn = hosts[0]
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn, Organization: []string{"federation-autoscaler"}},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    dns,
		IPAddresses: ips,
	}
	return ca.issue(tmpl, now, ServerValidity)
}

// IssueClient issues a client certificate (client auth, 1 year, never beyond
// the CA) with CN = clusterID and the role recorded in
// Subject.OrganizationalUnit as RoleOUPrefix+role. An empty role issues a
// role-less certificate, which is what a legacy reference certificate looks
// like.
func (ca *CA) IssueClient(clusterID string, role api.Role, now time.Time) (certPEM, keyPEM []byte, err error) {
	if err := ValidateClusterID(clusterID); err != nil {
		return nil, nil, err
	}
	if err := validateRole(role, true); err != nil {
		return nil, nil, err
	}
	subj := pkix.Name{CommonName: clusterID, Organization: []string{"federation-autoscaler"}}
	if role != "" {
		subj.OrganizationalUnit = []string{RoleOUPrefix + string(role)}
	}
	tmpl := &x509.Certificate{
		Subject:     subj,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	return ca.issue(tmpl, now, ClientValidity)
}

func (ca *CA) issue(tmpl *x509.Certificate, now time.Time, validity time.Duration) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate key: %w", err)
	}
	if tmpl.SerialNumber, err = newSerial(); err != nil {
		return nil, nil, err
	}
	if tmpl.SubjectKeyId, err = subjectKeyID(key.Public()); err != nil {
		return nil, nil, err
	}
	tmpl.NotBefore = now.Add(-Backdate)
	tmpl.NotAfter = now.Add(validity)
	if tmpl.NotAfter.After(ca.cert.NotAfter) {
		tmpl.NotAfter = ca.cert.NotAfter
	}
	if !tmpl.NotAfter.After(now) {
		return nil, nil, fmt.Errorf("the CA expired on %s: create a new one with `pki init --force`", ca.cert.NotAfter.UTC().Format(time.RFC3339))
	}
	tmpl.BasicConstraintsValid = true
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		return nil, nil, fmt.Errorf("sign certificate: %w", err)
	}
	keyPEM, err = encodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	return encodeCert(der), keyPEM, nil
}

// Init creates the federation PKI in dir: ca.crt, ca.key (0600), broker.crt
// and broker.key (0600), the broker certificate carrying hosts plus
// 127.0.0.1 and localhost, and an empty registry of issued certificates
// (IssuedFile). It refuses to replace an existing CA unless force is set.
func Init(dir string, hosts []string, force bool, now time.Time) error {
	if err := refuseExisting(dir, force, CACertFile, CAKeyFile); err != nil {
		return err
	}
	ca, err := NewCA(now)
	if err != nil {
		return err
	}
	certPEM, keyPEM, err := ca.IssueServer(hosts, now)
	if err != nil {
		return err
	}
	caKeyPEM, err := encodeKey(ca.key)
	if err != nil {
		return err
	}
	if err := writeFiles(dir, []file{
		{BrokerCertFile, certPEM, 0o644},
		{BrokerKeyFile, keyPEM, 0o600},
		{CAKeyFile, caKeyPEM, 0o600},
		{CACertFile, ca.certPEM, 0o644},
	}); err != nil {
		return err
	}
	// Certificates of a replaced CA no longer work: forget them.
	return writeIssued(dir, issuedRegistry{})
}

// ServerTLSConfig is the broker's API listener configuration: it serves
// dir/broker.crt with dir/broker.key, requires TLS 1.3, and requires and
// verifies client certificates against dir/ca.crt. The serving certificate
// is checked as ServerTLSConfigAt does, at the current time.
func ServerTLSConfig(dir string) (*tls.Config, error) {
	return ServerTLSConfigAt(dir, time.Now())
}

// ServerTLSConfigAt is ServerTLSConfig checked at now: the key must be the
// certificate's, and the certificate must chain to ca.crt for server auth
// and be valid at now (CheckServingCertificate). A broker that started with
// anything else would answer /readyz while every agent's handshake fails.
func ServerTLSConfigAt(dir string, now time.Time) (*tls.Config, error) {
	return serverTLSConfig(dir, BrokerCertFile, BrokerKeyFile, now)
}

func serverTLSConfig(dir, certFile, keyFile string, now time.Time) (*tls.Config, error) {
	caPEM, err := readLimited(filepath.Join(dir, CACertFile))
	if err != nil {
		return nil, fmt.Errorf("read CA certificate: %w", err)
	}
	caCert, err := ParseCertificatePEM(caPEM)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, CACertFile), err)
	}
	certPEM, err := readLimited(filepath.Join(dir, certFile))
	if err != nil {
		return nil, fmt.Errorf("read server certificate: %w", err)
	}
	keyPEM, err := readLimited(filepath.Join(dir, keyFile))
	if err != nil {
		return nil, fmt.Errorf("read server key: %w", err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%s and %s do not form a key pair (is %s the key of another certificate?): %w", certFile, keyFile, keyFile, err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", certFile, err)
	}
	if err := CheckServingCertificate(leaf, caCert, now); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, certFile), err)
	}
	pair.Leaf = leaf
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{pair},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
	}, nil
}

// CheckServingCertificate checks that leaf can serve TLS at now: valid at
// now, usable for server authentication, and signed by ca, itself valid at
// now. Each failure says what is wrong and how to fix it.
func CheckServingCertificate(leaf, ca *x509.Certificate, now time.Time) error {
	return checkLeaf(leaf, ca, now, x509.ExtKeyUsageServerAuth, "server",
		"issue a new one signed by the CA (`federation-autoscaler pki init --force` makes a new CA and broker certificate; every join bundle must then be made again)")
}

// CheckClientCertificate is CheckServingCertificate for a client
// certificate (client authentication).
func CheckClientCertificate(leaf, ca *x509.Certificate, now time.Time) error {
	return checkLeaf(leaf, ca, now, x509.ExtKeyUsageClientAuth, "client",
		"make a new join bundle with `federation-autoscaler pki join` on the machine that holds the CA")
}

func checkLeaf(leaf, ca *x509.Certificate, now time.Time, usage x509.ExtKeyUsage, kind, renew string) error {
	at := func(t time.Time) string { return t.UTC().Format(time.RFC3339) }
	switch {
	case now.After(ca.NotAfter):
		return fmt.Errorf("the CA certificate expired on %s: %s", at(ca.NotAfter), renew)
	case now.Before(leaf.NotBefore):
		return fmt.Errorf("the certificate is not valid before %s (now %s): is this machine's clock right?", at(leaf.NotBefore), at(now))
	case now.After(leaf.NotAfter):
		return fmt.Errorf("the certificate expired on %s: %s", at(leaf.NotAfter), renew)
	}
	if !hasUsage(leaf, usage) {
		return fmt.Errorf("the certificate is not for TLS %s authentication (its extended key usage lacks %s): %s", kind, usageName(usage), renew)
	}
	if err := leaf.CheckSignatureFrom(ca); err != nil {
		return fmt.Errorf("the certificate is not signed by the CA (signed by another CA, or was the CA replaced?): %s: %w", renew, err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
		return fmt.Errorf("the certificate does not verify against %s for %s authentication: %w", CACertFile, kind, err)
	}
	return nil
}

func hasUsage(c *x509.Certificate, usage x509.ExtKeyUsage) bool {
	for _, u := range c.ExtKeyUsage {
		if u == usage || u == x509.ExtKeyUsageAny {
			return true
		}
	}
	return false
}

func usageName(u x509.ExtKeyUsage) string {
	if u == x509.ExtKeyUsageServerAuth {
		return "serverAuth"
	}
	return "clientAuth"
}

// ParseCertificatePEM parses exactly one PEM "CERTIFICATE" block.
func ParseCertificatePEM(data []byte) (*x509.Certificate, error) {
	block, rest := pem.Decode(data)
	if block == nil {
		return nil, errors.New("no PEM data found: expected a CERTIFICATE block")
	}
	if block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("PEM block is %q, expected CERTIFICATE", block.Type)
	}
	if len(strings.TrimSpace(string(rest))) != 0 {
		return nil, errors.New("unexpected data after the CERTIFICATE block: expected exactly one certificate")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse certificate: %w", err)
	}
	return cert, nil
}

// ParsePrivateKeyPEM parses one PEM private key: "PRIVATE KEY" (PKCS #8)
// or "EC PRIVATE KEY" (SEC 1). Only ECDSA keys are accepted.
func ParsePrivateKeyPEM(data []byte) (crypto.Signer, error) {
	block, rest := pem.Decode(data)
	if block == nil {
		return nil, errors.New("no PEM data found: expected a PRIVATE KEY block")
	}
	if len(strings.TrimSpace(string(rest))) != 0 {
		return nil, errors.New("unexpected data after the private key block")
	}
	switch block.Type {
	case "PRIVATE KEY":
		k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parse PKCS #8 key: %w", err)
		}
		ec, ok := k.(*ecdsa.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("private key is %T, expected ECDSA", k)
		}
		return ec, nil
	case "EC PRIVATE KEY":
		k, err := x509.ParseECPrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parse EC key: %w", err)
		}
		return k, nil
	default:
		return nil, fmt.Errorf("PEM block is %q, expected PRIVATE KEY or EC PRIVATE KEY", block.Type)
	}
}

func validateDNSName(name string) error {
	if len(name) == 0 || len(name) > 253 {
		return errors.New("not a DNS name: 1 to 253 characters")
	}
	for _, label := range strings.Split(name, ".") {
		// A leading wildcard label is allowed in SANs.
		if label == "*" {
			continue
		}
		if len(label) == 0 || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return errors.New("not a DNS name: labels of 1 to 63 characters, not starting or ending with '-'")
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return errors.New("not a DNS name or IP address: use letters, digits, '-' and '.'")
			}
		}
	}
	return nil
}

func newSerial() (*big.Int, error) {
	s, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("generate serial number: %w", err)
	}
	return s.Add(s, big.NewInt(1)), nil
}

func subjectKeyID(pub crypto.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("marshal public key: %w", err)
	}
	sum := sha1.Sum(der) //nolint:gosec // key identifier, not a security use.
	return sum[:], nil
}

func encodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("marshal private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func readLimited(path string) ([]byte, error) { return readLimitedN(path, maxPEMSize) }

// readLimitedN reads the file at path, refusing one larger than limit bytes.
func readLimitedN(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > limit {
		return nil, fmt.Errorf("%s is %d bytes, larger than the %d-byte limit for this file", path, st.Size(), limit)
	}
	buf := make([]byte, st.Size())
	if _, err := io.ReadFull(f, buf); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return buf, nil
}

// refuseExisting fails when any of names exists in dir, unless force.
func refuseExisting(dir string, force bool, names ...string) error {
	if force {
		return nil
	}
	for _, n := range names {
		p := filepath.Join(dir, n)
		if _, err := os.Lstat(p); err == nil {
			return fmt.Errorf("%s already exists: refusing to replace an existing CA (every certificate it signed would stop working); use --force to replace it", p)
		} else if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("check %s: %w", p, err)
		}
	}
	return nil
}

type file struct {
	name string
	data []byte
	mode os.FileMode
}

// writeFiles writes each file atomically (temporary file, fsync, rename)
// with its mode, creating dir with 0700 if needed.
func writeFiles(dir string, files []file) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create directory %s: %w", dir, err)
	}
	for _, f := range files {
		if err := writeFileAtomic(filepath.Join(dir, f.name), f.data, f.mode); err != nil {
			return err
		}
	}
	return nil
}

func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // no-op after a successful rename
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	// The rename is durable once the directory is synced.
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return fmt.Errorf("write %s: sync directory: %w", path, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("write %s: sync directory: %w", path, err)
	}
	return nil
}
