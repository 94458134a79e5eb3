package pki

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// Entries of a join bundle.
const (
	BundleCACert   = "ca.crt"
	BundleCert     = "tls.crt"
	BundleKey      = "tls.key"
	BundleJoinYAML = "join.yaml"
)

// Size limits of a join bundle.
const (
	// MaxBundleEntrySize bounds each entry of a bundle.
	MaxBundleEntrySize = 1 << 20
	// MaxBundleSize bounds the compressed bundle and the sum of its entries.
	MaxBundleSize = 4 << 20
	// MaxBrokerURLs bounds how many broker URLs one bundle carries (the
	// replicas of an HA broker reached without a Service); more is refused.
	MaxBrokerURLs = 16
)

// JoinConfig is join.yaml inside a join bundle.
type JoinConfig struct {
	ClusterID string   `json:"clusterId"`
	Role      api.Role `json:"role"`
	BrokerURL string   `json:"brokerURL"`
	// AlternateBrokerURLs are the other replicas of an HA broker, tried
	// in order after BrokerURL when it is unreachable or a standby. Absent
	// in a single-URL bundle, so that such a bundle reads as before.
	AlternateBrokerURLs []string `json:"alternateBrokerURLs,omitempty"`
}

// Bundle is a loaded and validated join bundle.
type Bundle struct {
	ClusterID string
	Role      api.Role
	BrokerURL string
	// AlternateBrokerURLs are tried after BrokerURL (see JoinConfig).
	AlternateBrokerURLs []string
	CACertPEM           []byte
	CertPEM             []byte
	KeyPEM              []byte
}

// BrokerURLs returns every broker URL of the bundle, BrokerURL first.
func (b *Bundle) BrokerURLs() []string {
	return append([]string{b.BrokerURL}, b.AlternateBrokerURLs...)
}

// ParseBrokerURLs splits a comma-separated list of broker URLs (one URL is
// a list of one), validates each with ValidateBrokerURL and refuses
// duplicates, empty items and more than MaxBrokerURLs.
func ParseBrokerURLs(list string) ([]string, error) {
	parts := strings.Split(list, ",")
	for i, p := range parts {
		parts[i] = strings.TrimSpace(p)
	}
	if err := validateBrokerURLs(parts); err != nil {
		return nil, err
	}
	return parts, nil
}

// validateBrokerURLs checks a bundle's list of broker URLs.
func validateBrokerURLs(urls []string) error {
	if len(urls) > MaxBrokerURLs {
		return fmt.Errorf("%d broker URLs, over the limit of %d: give the replicas' Service URL instead of every pod", len(urls), MaxBrokerURLs)
	}
	for i, p := range urls {
		if p == "" {
			return errors.New("empty broker URL: give https://<host>[:port], or several separated by single commas")
		}
		if _, err := ValidateBrokerURL(p); err != nil {
			return err
		}
		if slices.Contains(urls[:i], p) {
			return fmt.Errorf("broker URL %q is listed twice", p)
		}
	}
	return nil
}

// ValidateBrokerURL checks that u is an absolute https URL with a host and
// no user information. Any path is ignored by the agents.
func ValidateBrokerURL(u string) (*url.URL, error) {
	parsed, err := url.Parse(u)
	if err != nil {
		return nil, fmt.Errorf("broker URL %q: %w", u, err)
	}
	if parsed.Scheme != "https" {
		return nil, fmt.Errorf("broker URL %q: the scheme must be https (the broker only speaks mTLS), e.g. https://broker.example.org:8443", u)
	}
	if parsed.Hostname() == "" {
		return nil, fmt.Errorf("broker URL %q has no host: use https://<host>[:port]", u)
	}
	if parsed.User != nil {
		return nil, fmt.Errorf("broker URL %q must not carry user information", u)
	}
	if p := parsed.Port(); p != "" {
		if _, err := parsePort(p); err != nil {
			return nil, fmt.Errorf("broker URL %q: %w", u, err)
		}
	}
	return parsed, nil
}

func parsePort(p string) (int, error) {
	n := 0
	for _, c := range p {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("port %q is not a number", p)
		}
		n = n*10 + int(c-'0')
		if n > 65535 {
			return 0, fmt.Errorf("port %q is out of range", p)
		}
	}
	if n == 0 {
		return 0, fmt.Errorf("port %q is out of range", p)
	}
	return n, nil
}

// WriteJoinBundle mints a client certificate for clusterID with role
// (provider or consumer) from the CA in dir and writes the join bundle out
// (a .tar.gz, mode 0600) holding ca.crt, tls.crt, tls.key and join.yaml.
// brokerURL is one URL or a comma-separated list (ParseBrokerURLs): the
// first becomes join.yaml's brokerURL, the rest its alternateBrokerURLs.
// It records the certificate in dir's registry (IssuedFile) and refuses a
// cluster id the registry holds under the other role: one cluster id has
// one role. It refuses to replace an existing out unless force is set.
func WriteJoinBundle(dir, clusterID string, role api.Role, brokerURL, out string, force bool, now time.Time) error {
	if err := ValidateClusterID(clusterID); err != nil {
		return err
	}
	if err := validateRole(role, false); err != nil {
		return err
	}
	if _, err := ParseBrokerURLs(brokerURL); err != nil {
		return err
	}
	if out == "" {
		return errors.New("no output file: give --out FILE")
	}
	ca, err := LoadCA(dir)
	if err != nil {
		return err
	}
	unlock, err := lockIssued(dir)
	if err != nil {
		return err
	}
	defer unlock()
	if err := refuseExistingBundle(out, force); err != nil {
		return err
	}
	reg, err := readIssued(dir)
	if err != nil {
		return err
	}
	if c, ok := reg.conflict(clusterID, role); ok {
		return fmt.Errorf("cluster id %q already holds a %s certificate (serial %s, issued %s): one cluster id has one role, and a %s certificate with the same id would be the same cluster to the broker; choose another cluster id for the %s (to retire the %s certificate instead, rotate the CA with `pki init --force` and re-issue every bundle)",
			clusterID, c.Role, c.Serial, c.IssuedAt.UTC().Format(time.RFC3339), role, role, c.Role)
	}
	data, cert, err := buildJoinBundle(ca, clusterID, role, brokerURL, now)
	if err != nil {
		return err
	}
	// Record first: a bundle written but not recorded would escape the
	// role check; a recorded certificate whose bundle failed to write only
	// reserves the id for its role.
	reg.Certificates = append(reg.Certificates, IssuedCert{
		ClusterID: clusterID, Role: role, Serial: cert.SerialNumber.Text(16),
		IssuedAt: now.UTC().Truncate(time.Second), NotAfter: cert.NotAfter.UTC(),
	})
	if err := writeIssued(dir, reg); err != nil {
		return err
	}
	if d := filepath.Dir(out); d != "" {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("create directory for %s: %w", out, err)
		}
	}
	return writeFileAtomic(out, data, 0o600)
}

// refuseExistingBundle fails when out exists, unless force.
func refuseExistingBundle(out string, force bool) error {
	if force {
		return nil
	}
	if _, err := os.Lstat(out); err == nil {
		return fmt.Errorf("%s already exists: refusing to overwrite a join bundle (it may be another cluster's); choose another --out, or use --force to replace it", out)
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("check %s: %w", out, err)
	}
	return nil
}

// BuildJoinBundle mints a client certificate with ca and returns the join
// bundle bytes (.tar.gz). role may be empty, which builds a legacy
// (role-less) bundle; the pki join command never does. brokerURL is one
// URL or a comma-separated list, as for WriteJoinBundle.
func BuildJoinBundle(ca *CA, clusterID string, role api.Role, brokerURL string, now time.Time) ([]byte, error) {
	data, _, err := buildJoinBundle(ca, clusterID, role, brokerURL, now)
	return data, err
}

// buildJoinBundle is BuildJoinBundle that also returns the certificate.
func buildJoinBundle(ca *CA, clusterID string, role api.Role, brokerURL string, now time.Time) ([]byte, *x509.Certificate, error) {
	urls, err := ParseBrokerURLs(brokerURL)
	if err != nil {
		return nil, nil, err
	}
	certPEM, keyPEM, err := ca.IssueClient(clusterID, role, now)
	if err != nil {
		return nil, nil, err
	}
	cert, err := ParseCertificatePEM(certPEM)
	if err != nil {
		return nil, nil, err
	}
	joinYAML, err := yaml.Marshal(JoinConfig{ClusterID: clusterID, Role: role, BrokerURL: urls[0], AlternateBrokerURLs: urls[1:]})
	if err != nil {
		return nil, nil, fmt.Errorf("encode join.yaml: %w", err)
	}
	data, err := packBundle(now, []file{
		{BundleCACert, ca.certPEM, 0o644},
		{BundleCert, certPEM, 0o644},
		{BundleKey, keyPEM, 0o600},
		{BundleJoinYAML, joinYAML, 0o644},
	})
	return data, cert, err
}

func packBundle(now time.Time, files []file) ([]byte, error) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, f := range files {
		hdr := &tar.Header{Name: f.name, Mode: int64(f.mode), Size: int64(len(f.data)), ModTime: now.UTC().Truncate(time.Second), Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("write bundle entry %s: %w", f.name, err)
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, fmt.Errorf("write bundle entry %s: %w", f.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("close bundle tar: %w", err)
	}
	if err := gz.Close(); err != nil {
		return nil, fmt.Errorf("close bundle gzip: %w", err)
	}
	return buf.Bytes(), nil
}

// LoadBundle reads and validates the join bundle at path against the
// current time. See ParseBundle for what is checked.
func LoadBundle(path string) (*Bundle, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("read join bundle: %w", err)
	}
	if st.Size() > MaxBundleSize {
		return nil, fmt.Errorf("join bundle %s is %d bytes, over the %d-byte limit: is it really a bundle made by `pki join`?", path, st.Size(), MaxBundleSize)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read join bundle: %w", err)
	}
	b, err := LoadBundleBytes(data)
	if err != nil {
		return nil, fmt.Errorf("join bundle %s: %w", path, err)
	}
	return b, nil
}

// LoadBundleBytes validates a join bundle given as raw .tar.gz bytes against
// the current time. See ParseBundle.
func LoadBundleBytes(data []byte) (*Bundle, error) {
	return ParseBundle(data, time.Now())
}

// ParseBundle validates a join bundle (raw .tar.gz bytes) at time now:
// exactly the four regular-file entries ca.crt, tls.crt, tls.key and
// join.yaml, each at most 1 MiB, no absolute or ".." paths, no duplicates;
// join.yaml strict with a DNS-1123 clusterId, a valid role and an https
// broker URL; the key matches the certificate; the certificate chains to
// the bundle's CA for client auth at now; its CN equals clusterId and its
// recorded role equals join.yaml's role (both empty for a legacy bundle).
func ParseBundle(data []byte, now time.Time) (*Bundle, error) {
	entries, err := readBundleEntries(data)
	if err != nil {
		return nil, err
	}
	cfg, err := parseJoinYAML(entries[BundleJoinYAML])
	if err != nil {
		return nil, err
	}
	caCert, err := ParseCertificatePEM(entries[BundleCACert])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", BundleCACert, err)
	}
	if !caCert.IsCA {
		return nil, fmt.Errorf("%s is not a CA certificate", BundleCACert)
	}
	cert, err := ParseCertificatePEM(entries[BundleCert])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", BundleCert, err)
	}
	if _, err := tls.X509KeyPair(entries[BundleCert], entries[BundleKey]); err != nil {
		return nil, fmt.Errorf("%s does not match %s: %w", BundleKey, BundleCert, err)
	}
	if err := CheckClientCertificate(cert, caCert, now); err != nil {
		return nil, fmt.Errorf("%s is not a valid client certificate of the bundle's CA at %s: %w", BundleCert, now.UTC().Format(time.RFC3339), err)
	}
	if cert.Subject.CommonName != cfg.ClusterID {
		return nil, fmt.Errorf("certificate common name %q differs from join.yaml clusterId %q", cert.Subject.CommonName, cfg.ClusterID)
	}
	certRole, _ := RoleOf(cert)
	if certRole != cfg.Role {
		return nil, fmt.Errorf("certificate role %q differs from join.yaml role %q", certRole, cfg.Role)
	}
	return &Bundle{
		ClusterID:           cfg.ClusterID,
		Role:                cfg.Role,
		BrokerURL:           cfg.BrokerURL,
		AlternateBrokerURLs: cfg.AlternateBrokerURLs,
		CACertPEM:           entries[BundleCACert],
		CertPEM:             entries[BundleCert],
		KeyPEM:              entries[BundleKey],
	}, nil
}

func readBundleEntries(data []byte) (map[string][]byte, error) {
	if len(data) > MaxBundleSize {
		return nil, fmt.Errorf("bundle is %d bytes, over the %d-byte limit", len(data), MaxBundleSize)
	}
	gz, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("not a gzip file (a join bundle is a .tar.gz made by `pki join`): %w", err)
	}
	defer gz.Close()
	tr := tar.NewReader(io.LimitReader(gz, MaxBundleSize+64<<10))
	entries := map[string][]byte{}
	var total int64
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read bundle tar: %w", err)
		}
		name := hdr.Name
		if strings.HasPrefix(name, "/") || strings.Contains(name, `\`) {
			return nil, fmt.Errorf("bundle entry %q has an absolute or non-portable path", name)
		}
		for _, part := range strings.Split(name, "/") {
			if part == ".." {
				return nil, fmt.Errorf("bundle entry %q contains '..'", name)
			}
		}
		name = path.Clean(name)
		if hdr.Typeflag != tar.TypeReg {
			return nil, fmt.Errorf("bundle entry %q is not a regular file", hdr.Name)
		}
		switch name {
		case BundleCACert, BundleCert, BundleKey, BundleJoinYAML:
		default:
			return nil, fmt.Errorf("unexpected bundle entry %q: a bundle holds only %s, %s, %s and %s", hdr.Name, BundleCACert, BundleCert, BundleKey, BundleJoinYAML)
		}
		if _, dup := entries[name]; dup {
			return nil, fmt.Errorf("duplicate bundle entry %q", name)
		}
		if hdr.Size < 0 || hdr.Size > MaxBundleEntrySize {
			return nil, fmt.Errorf("bundle entry %q is %d bytes, over the %d-byte limit", name, hdr.Size, MaxBundleEntrySize)
		}
		total += hdr.Size
		if total > MaxBundleSize {
			return nil, fmt.Errorf("bundle entries total over the %d-byte limit", MaxBundleSize)
		}
		buf, err := io.ReadAll(io.LimitReader(tr, MaxBundleEntrySize+1))
		if err != nil {
			return nil, fmt.Errorf("read bundle entry %q: %w", name, err)
		}
		if int64(len(buf)) != hdr.Size {
			return nil, fmt.Errorf("bundle entry %q is truncated", name)
		}
		entries[name] = buf
	}
	for _, want := range []string{BundleCACert, BundleCert, BundleKey, BundleJoinYAML} {
		if _, ok := entries[want]; !ok {
			return nil, fmt.Errorf("bundle has no %s entry", want)
		}
	}
	return entries, nil
}

// parseJoinYAML decodes join.yaml strictly and validates every field.
func parseJoinYAML(data []byte) (*JoinConfig, error) {
	var cfg JoinConfig
	if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", BundleJoinYAML, err)
	}
	if err := ValidateClusterID(cfg.ClusterID); err != nil {
		return nil, fmt.Errorf("%s clusterId: %w", BundleJoinYAML, err)
	}
	if err := validateRole(cfg.Role, true); err != nil {
		return nil, fmt.Errorf("%s: %w", BundleJoinYAML, err)
	}
	if _, err := ValidateBrokerURL(cfg.BrokerURL); err != nil {
		return nil, fmt.Errorf("%s: %w", BundleJoinYAML, err)
	}
	if len(cfg.AlternateBrokerURLs) > 0 {
		if err := validateBrokerURLs(append([]string{cfg.BrokerURL}, cfg.AlternateBrokerURLs...)); err != nil {
			return nil, fmt.Errorf("%s alternateBrokerURLs: %w", BundleJoinYAML, err)
		}
	}
	return &cfg, nil
}

// ClientTLSConfig is an agent's configuration for dialling the broker:
// TLS 1.3, the bundle's CA as the only root, the bundle's client
// certificate, and ServerName = the broker URL's host. When the bundle's
// URLs name different hosts ServerName stays empty: the HTTP transport then
// verifies each connection against the host it dials.
func (b *Bundle) ClientTLSConfig() (*tls.Config, error) {
	u, err := ValidateBrokerURL(b.BrokerURL)
	if err != nil {
		return nil, err
	}
	serverName := u.Hostname()
	for _, alt := range b.AlternateBrokerURLs {
		a, err := ValidateBrokerURL(alt)
		if err != nil {
			return nil, err
		}
		if a.Hostname() != serverName {
			serverName = ""
		}
	}
	pair, err := tls.X509KeyPair(b.CertPEM, b.KeyPEM)
	if err != nil {
		return nil, fmt.Errorf("bundle key pair: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b.CACertPEM) {
		return nil, errors.New("bundle CA certificate: no certificate found")
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		RootCAs:      pool,
		Certificates: []tls.Certificate{pair},
		ServerName:   serverName,
	}, nil
}
