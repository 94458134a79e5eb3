package pki

import (
	"testing"
)

// FuzzLoadBundle feeds raw bytes to the bundle loader: it must never panic
// and anything it accepts must be internally consistent.
func FuzzLoadBundle(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0x1f, 0x8b})
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := ParseBundle(data, t0)
		if err != nil {
			return
		}
		if ValidateClusterID(b.ClusterID) != nil {
			t.Fatalf("accepted a bundle with cluster id %q", b.ClusterID)
		}
		if _, err := b.ClientTLSConfig(); err != nil {
			t.Fatalf("accepted bundle has no usable TLS config: %v", err)
		}
	})
}

// FuzzParseCertificatePEM must never panic.
func FuzzParseCertificatePEM(f *testing.F) {
	f.Add([]byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseCertificatePEM(data)
		if err == nil && c == nil {
			t.Fatal("nil certificate without an error")
		}
		if err == nil {
			RoleOf(c)
		}
	})
}

// FuzzParsePrivateKeyPEM must never panic.
func FuzzParsePrivateKeyPEM(f *testing.F) {
	f.Add([]byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		k, err := ParsePrivateKeyPEM(data)
		if err == nil && k == nil {
			t.Fatal("nil key without an error")
		}
	})
}

// FuzzJoinYAML: whatever parses is valid.
func FuzzJoinYAML(f *testing.F) {
	f.Add([]byte("clusterId: c1\nrole: provider\nbrokerURL: https://b:8443\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := parseJoinYAML(data)
		if err != nil {
			return
		}
		if ValidateClusterID(cfg.ClusterID) != nil {
			t.Fatalf("accepted cluster id %q", cfg.ClusterID)
		}
		if _, err := ValidateBrokerURL(cfg.BrokerURL); err != nil {
			t.Fatalf("accepted broker URL %q: %v", cfg.BrokerURL, err)
		}
		if cfg.Role != "" && validateRole(cfg.Role, false) != nil {
			t.Fatalf("accepted role %q", cfg.Role)
		}
	})
}
