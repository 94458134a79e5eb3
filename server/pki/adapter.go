package pki

import (
	"crypto/tls"
	"time"
)

// Files written by InitAdapter.
const (
	AdapterServerCertFile = "server.crt"
	AdapterServerKeyFile  = "server.key"
	AdapterClientCertFile = "client.crt"
	AdapterClientKeyFile  = "client.key"
	// AdapterClientCN is the common name of the Cluster Autoscaler's client
	// certificate.
	AdapterClientCN = "cluster-autoscaler"
)

// InitAdapter creates the local PKI of the Cluster Autoscaler ↔ adapter
// link in dir, separate from the federation's: ca.crt, ca.key (0600), the
// adapter's serving certificate server.crt/server.key (SANs: hosts plus
// 127.0.0.1 and localhost) and the Cluster Autoscaler's client certificate
// client.crt/client.key (for the cloud-config `cert`/`key`, with
// `cacert` = ca.crt). It refuses to replace an existing CA unless force.
func InitAdapter(dir string, hosts []string, force bool, now time.Time) error {
	if err := refuseExisting(dir, force, CACertFile, CAKeyFile); err != nil {
		return err
	}
	ca, err := newCA("Federation Autoscaler adapter CA", now)
	if err != nil {
		return err
	}
	srvCert, srvKey, err := ca.IssueServer(hosts, now)
	if err != nil {
		return err
	}
	cliCert, cliKey, err := ca.IssueClient(AdapterClientCN, "", now)
	if err != nil {
		return err
	}
	caKey, err := encodeKey(ca.key)
	if err != nil {
		return err
	}
	return writeFiles(dir, []file{
		{AdapterServerCertFile, srvCert, 0o644},
		{AdapterServerKeyFile, srvKey, 0o600},
		{AdapterClientCertFile, cliCert, 0o644},
		{AdapterClientKeyFile, cliKey, 0o600},
		{CAKeyFile, caKey, 0o600},
		{CACertFile, ca.certPEM, 0o644},
	})
}

// AdapterServerTLSConfig is the adapter's gRPC listener configuration: it
// serves dir/server.crt, requires TLS 1.3, and requires and verifies client
// certificates against dir/ca.crt. The serving certificate is checked at
// the current time as ServerTLSConfigAt does.
func AdapterServerTLSConfig(dir string) (*tls.Config, error) {
	return AdapterServerTLSConfigAt(dir, time.Now())
}

// AdapterServerTLSConfigAt is AdapterServerTLSConfig checked at now.
func AdapterServerTLSConfigAt(dir string, now time.Time) (*tls.Config, error) {
	return serverTLSConfig(dir, AdapterServerCertFile, AdapterServerKeyFile, now)
}
