// Package adaptercmd provides the `adapter` subcommand: the Cluster
// Autoscaler's externalgrpc cloud provider, served over mTLS (the adapter
// PKI from `server/pki`) and backed by the consumer agent's local API.
package adaptercmd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/federation-autoscaler/federation-autoscaler/adapter/externalgrpc"
	"github.com/federation-autoscaler/federation-autoscaler/adapter/localapi"
	"github.com/federation-autoscaler/federation-autoscaler/cli"
	"github.com/federation-autoscaler/federation-autoscaler/server/netguard"
	"github.com/federation-autoscaler/federation-autoscaler/server/pki"
)

// Options are the adapter's flags.
type Options struct {
	// Listen is the gRPC listen address.
	Listen string
	// AgentURL is the consumer agent's local API.
	AgentURL string
	// TLSDir holds the adapter PKI (ca.crt, server.crt, server.key).
	TLSDir string
	// Insecure serves plaintext gRPC (tests only).
	Insecure bool
	// CacheTTL bounds the age of node-group reads.
	CacheTTL time.Duration
	// DrainUtilization and DrainUnneededTime are what NodeGroupGetOptions
	// answers for a group drained in a consolidation.
	DrainUtilization  float64
	DrainUnneededTime time.Duration
	// ShutdownTimeout bounds the graceful stop.
	ShutdownTimeout time.Duration
	// Limits bound what the listener holds (--max-conns,
	// --max-conns-per-ip, --handshake-timeout; zero: automatic).
	Limits netguard.Limits
}

// Validate rejects missing or conflicting flags.
func (o *Options) Validate() error {
	switch {
	case o.Listen == "":
		return errors.New("--listen is required")
	case o.AgentURL == "":
		return errors.New("--agent-url is required")
	case o.Insecure && o.TLSDir != "":
		return errors.New("--insecure and --tls-dir exclude each other: choose plaintext (tests only) or mTLS")
	case !o.Insecure && o.TLSDir == "":
		return errors.New("--tls-dir is required: the Cluster Autoscaler connects with mTLS using the adapter PKI " +
			"(ca.crt, server.crt/key, client.crt/key; see docs/adapter.md); pass --insecure only for tests")
	case o.CacheTTL <= 0:
		return fmt.Errorf("--cache-ttl must be positive, got %s", o.CacheTTL)
	case !(o.DrainUtilization >= 0 && o.DrainUtilization <= 2):
		return fmt.Errorf("--consolidation-drain-utilization must be from 0 (the default, %v) to 2, got %v", externalgrpc.DefaultDrainUtilization, o.DrainUtilization)
	case o.DrainUnneededTime < 0:
		return fmt.Errorf("--consolidation-unneeded-time must not be negative (0: the default, 1m), got %s", o.DrainUnneededTime)
	}
	_, err := o.Limits.ForListeners(1)
	return err
}

// NewCommand returns the `adapter` subcommand.
func NewCommand() *cobra.Command {
	o := Options{ShutdownTimeout: 5 * time.Second}
	cmd := &cobra.Command{
		Use:   "adapter",
		Short: "Serve the Cluster Autoscaler's externalgrpc cloud provider backed by the consumer agent",
		Long: `Serve the Cluster Autoscaler's externalgrpc cloud provider protocol (CA 1.32
through 1.35+). Every node group is a provider × chunk type of the consumer's
policy-masked view; every instance is a single-chunk reservation. Point an
unmodified Cluster Autoscaler at it with --cloud-provider=externalgrpc and a
cloud-config naming this address and the adapter PKI's client certificate
(docs/adapter.md).`,
		Args: cobra.NoArgs,
		RunE: cli.WithLogger(func(cmd *cobra.Command, log *slog.Logger) error {
			return Run(cmd.Context(), o, log, nil)
		}),
	}
	f := cmd.Flags()
	f.StringVar(&o.Listen, "listen", ":8086", "gRPC listen address for the Cluster Autoscaler")
	f.StringVar(&o.AgentURL, "agent-url", "http://127.0.0.1:9090", "base URL of the consumer agent's local API")
	f.StringVar(&o.TLSDir, "tls-dir", "", "folder of the adapter PKI (ca.crt, server.crt, server.key); clients must present a certificate signed by ca.crt")
	f.BoolVar(&o.Insecure, "insecure", false, "serve plaintext gRPC without client authentication (tests only)")
	f.DurationVar(&o.CacheTTL, "cache-ttl", 2*time.Second, "maximum age of the node-group data reads are served from")
	f.Float64Var(&o.DrainUtilization, "consolidation-drain-utilization", externalgrpc.DefaultDrainUtilization, "scale-down utilization threshold NodeGroupGetOptions answers for a node group drained in a consolidation")
	f.DurationVar(&o.DrainUnneededTime, "consolidation-unneeded-time", externalgrpc.DefaultDrainUnneededTime, "longest scale-down unneeded time NodeGroupGetOptions answers for a node group drained in a consolidation")
	o.Limits.AddFlags(f)
	return cmd
}

// Run serves until ctx ends. ready, when not nil, is called with the bound
// address once the listener accepts connections.
func Run(ctx context.Context, o Options, log *slog.Logger, ready func(net.Addr)) error {
	if err := o.Validate(); err != nil {
		return err
	}
	agent, err := localapi.NewClient(o.AgentURL, nil)
	if err != nil {
		return fmt.Errorf("--agent-url: %w", err)
	}
	guard, err := netguard.New(netguard.Options{Limits: o.Limits, Listeners: 1, Logger: log})
	if err != nil {
		return err
	}
	// grpc-go retries temporary accept errors itself; the guard adds the
	// connection caps and closes peers silent for --handshake-timeout, and
	// ConnectionTimeout bounds the rest of the TLS and HTTP/2 handshakes.
	opts := []grpc.ServerOption{grpc.ConnectionTimeout(guard.Limits().HandshakeTimeout)}
	if o.Insecure {
		log.Warn("Serving plaintext gRPC without client authentication (--insecure): for tests only")
	} else {
		tlsCfg, err := pki.AdapterServerTLSConfig(o.TLSDir)
		if err != nil {
			return fmt.Errorf("loading the adapter PKI from --tls-dir %s (create it with the pki subcommand): %w", o.TLSDir, err)
		}
		opts = append(opts, grpc.Creds(credentials.NewTLS(tlsCfg)))
	}
	srv, err := externalgrpc.New(externalgrpc.Config{Agent: agent, Logger: log, CacheTTL: o.CacheTTL, DrainUtilization: o.DrainUtilization, DrainUnneededTime: o.DrainUnneededTime})
	if err != nil {
		return err
	}
	defer srv.Close()
	opts = append(opts, grpc.ChainUnaryInterceptor(srv.LogCalls))
	gs := grpc.NewServer(opts...)
	srv.Register(gs)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(gs, hs)

	lis, err := guard.Listen(ctx, "adapter", o.Listen)
	if err != nil {
		return fmt.Errorf("listening on --listen %s: %w", o.Listen, err)
	}
	log.Info("Adapter serving the Cluster Autoscaler", "listen", lis.Addr().String(), "agent", o.AgentURL, "mtls", !o.Insecure)
	if ready != nil {
		ready(lis.Addr())
	}
	errc := make(chan error, 1)
	go func() { errc <- gs.Serve(lis) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serving gRPC: %w", err)
	case <-ctx.Done():
	}
	hs.Shutdown()
	stopped := make(chan struct{})
	go func() {
		gs.GracefulStop()
		close(stopped)
	}()
	timer := time.NewTimer(o.ShutdownTimeout)
	defer timer.Stop()
	select {
	case <-stopped:
	case <-timer.C:
		gs.Stop() // calls still running after the grace period are cut
	}
	if err := <-errc; err != nil {
		log.Warn("gRPC serving ended with an error", "err", err)
	}
	log.Info("Adapter stopped")
	return nil
}
