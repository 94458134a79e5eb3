// Package mockcmd provides the `mock-geo` and `mock-eco` subcommands: the
// small HTTP services that give a test or demo federation geography and
// carbon data (docs/mocks.md).
package mockcmd

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/federation-autoscaler/federation-autoscaler/cli"
	"github.com/federation-autoscaler/federation-autoscaler/mocks/eco"
	"github.com/federation-autoscaler/federation-autoscaler/mocks/geo"
	"github.com/federation-autoscaler/federation-autoscaler/server/netguard"
)

// NewGeoCommand returns the `mock-geo` subcommand.
func NewGeoCommand() *cobra.Command {
	var listen, data string
	cmd := &cobra.Command{
		Use:   "mock-geo [--listen ADDR] [--data FILE]",
		Short: "Run mock-geo, an ip-api.com-style geolocation service (GET /json/{ip})",
		Long: `mock-geo answers GET /json/{ip} like ip-api.com from a CIDR table (longest
prefix wins) and GET /healthz. The built-in table maps the reference's
172.23.x lab blocks and one loopback /24 per city (127.0.1.0/24 Sydney,
127.0.2.0/24 Montreal, …; docs/mocks.md), so a federation on one machine
has geography. --data replaces the table with a JSON or YAML file.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			table := geo.DefaultTable()
			if data != "" {
				var err error
				if table, err = geo.LoadData(data); err != nil {
					return err
				}
			}
			return serve(cmd, "mock-geo", listen, geo.Handler(table))
		},
	}
	cmd.Flags().StringVar(&listen, "listen", ":8080", "address to listen on")
	cmd.Flags().StringVar(&data, "data", "", "JSON or YAML file replacing the built-in CIDR table")
	return cmd
}

// NewEcoCommand returns the `mock-eco` subcommand.
func NewEcoCommand() *cobra.Command {
	var (
		listen, data string
		integers     bool
	)
	cmd := &cobra.Command{
		Use:   "mock-eco [--listen ADDR] [--data FILE] [--integers]",
		Short: "Run mock-eco, a carbon-intensity service (GET /carbon, GET /carbon/forecast)",
		Long: `mock-eco answers GET /carbon?region=R (the current UTC hour's gCO2eq/kWh),
GET /carbon/forecast?region=R (24 hourly values, the current UTC hour first)
and GET /healthz, from 24-hour profiles of the 12 region codes mock-geo
returns (docs/mocks.md). --data replaces the profiles with a JSON or YAML
file; --integers rounds every value, for the reference's agents.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			profiles := eco.DefaultProfiles()
			if data != "" {
				var err error
				if profiles, err = eco.LoadData(data); err != nil {
					return err
				}
			}
			return serve(cmd, "mock-eco", listen, eco.Handler(profiles, eco.Options{Now: time.Now, Integers: integers}))
		},
	}
	cmd.Flags().StringVar(&listen, "listen", ":8081", "address to listen on")
	cmd.Flags().StringVar(&data, "data", "", "JSON or YAML file replacing the built-in carbon profiles")
	cmd.Flags().BoolVar(&integers, "integers", false, "round every value to a whole number (reference agents decode integers)")
	return cmd
}

// serve runs h on listen until the command's context ends.
func serve(cmd *cobra.Command, name, listen string, h http.Handler) error {
	log, err := cli.Logger(cmd)
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	// A mock listens like the product does: through the guard, with the
	// automatic limits (server/netguard).
	guard, err := netguard.New(netguard.Options{Listeners: 1, Logger: log})
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	ln, err := guard.Listen(ctx, name, listen)
	if err != nil {
		return fmt.Errorf("%s: listen on %s: %w", name, listen, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 60 * time.Second}
	log.Info("listening", "service", name, "addr", ln.Addr().String())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("%s: %w", name, err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("%s: shutdown: %w", name, err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}
