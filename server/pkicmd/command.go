// Package pkicmd provides the `pki` subcommand: `pki init`, `pki join` and
// `pki adapter`, a documented interface other tools script against (see
// docs/pki.md).
package pkicmd

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/federation-autoscaler/federation-autoscaler/cli"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/pki"
)

// NewCommand returns the `pki` subcommand with the real clock.
func NewCommand() *cobra.Command {
	return newCommand(time.Now)
}

func newCommand(now func() time.Time) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pki",
		Short: "Create the federation CA, broker certificate, join bundles and the adapter's local PKI",
		Long: `pki manages the certificates of a federation (docs/pki.md):

  pki init     creates the federation CA and the broker's server certificate
  pki join     mints a member cluster's client certificate into a join bundle
  pki adapter  creates the local PKI of the Cluster Autoscaler <-> adapter link

Every flag can also be set as FA_<FLAG_NAME>, e.g. FA_DIR, FA_CLUSTER_ID.
Key material is never printed; only the paths written.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newInitCommand(now), newJoinCommand(now), newAdapterCommand(now))
	return cmd
}

func newInitCommand(now func() time.Time) *cobra.Command {
	var (
		dir   string
		hosts []string
		force bool
	)
	cmd := &cobra.Command{
		Use:   "init --dir D [--host H]... [--force]",
		Short: "Create the federation CA and the broker's server certificate",
		Long: `init creates, in --dir:
  ca.crt, ca.key (0600)         the federation CA (ECDSA P-256, 10 years)
  broker.crt, broker.key (0600) the broker's server certificate; SANs: every --host
                                (DNS name or IP address) plus 127.0.0.1 and localhost
It refuses to replace an existing CA unless --force is given: every certificate
signed by the old CA stops working.`,
		Example: `  federation-autoscaler pki init --dir /etc/fa/pki --host broker.example.org --host 203.0.113.10`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return fmt.Errorf("--dir is required (or FA_DIR)")
			}
			if err := pki.Init(dir, hosts, force, now()); err != nil {
				return err
			}
			return printWritten(cmd, dir, pki.CACertFile, pki.CAKeyFile, pki.BrokerCertFile, pki.BrokerKeyFile)
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "PKI directory to create the CA and broker certificate in (required)")
	cmd.Flags().StringSliceVar(&hosts, "host", nil, "DNS name or IP address the broker is reached at (repeatable or comma-separated; 127.0.0.1 and localhost are always added)")
	cmd.Flags().BoolVar(&force, "force", false, "replace an existing CA (invalidates every certificate it signed)")
	return cmd
}

func newJoinCommand(now func() time.Time) *cobra.Command {
	var (
		dir, clusterID, role, brokerURL, out string
		force                                bool
	)
	cmd := &cobra.Command{
		Use:   "join --dir D --cluster-id ID --role provider|consumer --broker-url URL --out F [--force]",
		Short: "Mint a member cluster's client certificate into a join bundle",
		Long: `join signs a client certificate with the CA in --dir (CN = --cluster-id, the
role recorded in the certificate, valid 1 year) and writes the join bundle
--out (a .tar.gz, mode 0600) holding ca.crt, tls.crt, tls.key and join.yaml
(clusterId, role, brokerURL). The cluster id must be a DNS-1123 label; the
broker URL must be https. The bundle holds a private key: send it over a
channel you trust (docs/pki.md).

Every certificate issued is recorded in --dir/issued.json. join refuses a
cluster id already issued under the other role (one cluster id has one
role), and refuses to overwrite an existing --out unless --force is given.`,
		Example: `  federation-autoscaler pki join --dir /etc/fa/pki --cluster-id paris-1 --role provider \
      --broker-url https://broker.example.org:8443 --out paris-1.tar.gz`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, f := range []struct{ flag, value string }{{"dir", dir}, {"cluster-id", clusterID}, {"role", role}, {"broker-url", brokerURL}, {"out", out}} {
				if f.value == "" {
					return fmt.Errorf("--%s is required (or %s)", f.flag, cli.EnvName(f.flag))
				}
			}
			r := api.Role(role)
			if r != api.RoleProvider && r != api.RoleConsumer {
				return fmt.Errorf("--role %q: use provider or consumer", role)
			}
			if err := pki.WriteJoinBundle(dir, clusterID, r, brokerURL, out, force, now()); err != nil {
				return err
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "wrote join bundle %s (cluster %s, role %s, broker %s)\n", out, clusterID, r, brokerURL)
			return err
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "PKI directory holding ca.crt and ca.key (required)")
	cmd.Flags().StringVar(&clusterID, "cluster-id", "", "the member cluster's id, a DNS-1123 label; becomes the certificate's CN (required)")
	cmd.Flags().StringVar(&role, "role", "", "provider or consumer (required)")
	cmd.Flags().StringVar(&brokerURL, "broker-url", "", "https URL of the broker API, e.g. https://broker.example.org:8443, or a comma-separated list of an HA broker's replica URLs tried in order (required)")
	cmd.Flags().StringVar(&out, "out", "", "path of the join bundle to write, e.g. cluster.tar.gz (required)")
	cmd.Flags().BoolVar(&force, "force", false, "overwrite an existing --out file")
	return cmd
}

func newAdapterCommand(now func() time.Time) *cobra.Command {
	var (
		dir   string
		hosts []string
		force bool
	)
	cmd := &cobra.Command{
		Use:   "adapter --dir D [--host H]... [--force]",
		Short: "Create the local PKI of the Cluster Autoscaler <-> adapter link",
		Long: `adapter creates, in --dir, a local CA separate from the federation's:
  ca.crt, ca.key (0600)          the adapter CA
  server.crt, server.key (0600)  the adapter's serving certificate (SANs: every --host
                                 plus 127.0.0.1 and localhost)
  client.crt, client.key (0600)  the Cluster Autoscaler's client certificate
Point the Cluster Autoscaler's externalgrpc cloud-config at them:
cacert = ca.crt, cert = client.crt, key = client.key.
It refuses to replace an existing CA unless --force is given.`,
		Example: `  federation-autoscaler pki adapter --dir /etc/fa/adapter-pki --host fa-adapter.kube-system.svc`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return fmt.Errorf("--dir is required (or FA_DIR)")
			}
			if err := pki.InitAdapter(dir, hosts, force, now()); err != nil {
				return err
			}
			return printWritten(cmd, dir, pki.CACertFile, pki.CAKeyFile, pki.AdapterServerCertFile, pki.AdapterServerKeyFile, pki.AdapterClientCertFile, pki.AdapterClientKeyFile)
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "directory to create the adapter PKI in (required)")
	cmd.Flags().StringSliceVar(&hosts, "host", nil, "DNS name or IP address the adapter is reached at (repeatable or comma-separated; 127.0.0.1 and localhost are always added)")
	cmd.Flags().BoolVar(&force, "force", false, "replace an existing adapter CA")
	return cmd
}

func printWritten(cmd *cobra.Command, dir string, names ...string) error {
	for _, n := range names {
		if _, err := fmt.Fprintf(cmd.OutOrStdout(), "wrote %s\n", filepath.Join(dir, n)); err != nil {
			return err
		}
	}
	return nil
}
