package brokercmd

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/federation-autoscaler/federation-autoscaler/cli"
	"github.com/federation-autoscaler/federation-autoscaler/server/store"
)

// MigrateBatch is how many records migrate-store writes per commit.
const MigrateBatch = 500

// MigrateOptions are the flags of `broker migrate-store`: the bbolt side
// (--data-dir) and the Kubernetes side (StoreOptions' flags).
type MigrateOptions struct {
	From, To string
	DataDir  string
	Kube     StoreOptions
}

// newMigrateCommand returns `broker migrate-store`.
func newMigrateCommand() *cobra.Command {
	var mo MigrateOptions
	cmd := &cobra.Command{
		Use:   "migrate-store",
		Short: "Copy the broker's state from one store to another (bolt → kubernetes, or back: a backup)",
		Long: `Copy every record (reservations, instructions, staged credentials, advertisements,
consumers) from --from to --to. Stop the broker first. The target must be empty:
the copy is refused otherwise, and a copy that fails midway leaves a partial
target to empty before running again. The dashboard history is not copied.`,
		Example: `  federation-autoscaler broker migrate-store --from bolt --data-dir /var/lib/fa --to kubernetes --namespace federation-autoscaler
  federation-autoscaler broker migrate-store --from kubernetes --to bolt --data-dir /backup/fa-2026-12-01`,
		Args: cobra.NoArgs,
		RunE: cli.WithLogger(func(cmd *cobra.Command, log *slog.Logger) error {
			n, err := Migrate(cmd.Context(), mo, log)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "copied %d records from %s to %s\n", n, mo.From, mo.To)
			return nil
		}),
	}
	f := cmd.Flags()
	f.StringVar(&mo.From, "from", "", "store to copy from: bolt or kubernetes (required)")
	f.StringVar(&mo.To, "to", "", "store to copy to: bolt or kubernetes (required)")
	f.StringVar(&mo.DataDir, "data-dir", "", "the bolt side's directory")
	mo.Kube.addFlags(f)
	_ = f.MarkHidden("store")
	return cmd
}

// Migrate copies every record from mo.From to mo.To and returns how many.
func Migrate(ctx context.Context, mo MigrateOptions, log *slog.Logger) (int, error) {
	if mo.From == mo.To || !validBackend(mo.From) || !validBackend(mo.To) {
		return 0, fmt.Errorf("--from %q --to %q: want one of %s and %s each, and not the same", mo.From, mo.To, StoreBolt, StoreKubernetes)
	}
	from, err := mo.open(mo.From, log)
	if err != nil {
		return 0, err
	}
	defer from.Close()
	to, err := mo.open(mo.To, log)
	if err != nil {
		return 0, err
	}
	defer to.Close()
	snap, err := from.Load(ctx)
	if err != nil {
		return 0, fmt.Errorf("reading --from %s: %w", mo.From, err)
	}
	have, err := to.Load(ctx)
	if err != nil {
		return 0, fmt.Errorf("reading --to %s: %w", mo.To, err)
	}
	if n := len(have.Puts()); n > 0 {
		return 0, fmt.Errorf("--to %s already holds %d records; migrate-store copies into an empty store only (empty it, or pick another --data-dir / --namespace)", mo.To, n)
	}
	all := snap.Puts()
	for i := 0; i < len(all); i += MigrateBatch {
		if err := to.Apply(ctx, all[i:min(i+MigrateBatch, len(all))]); err != nil {
			return i, fmt.Errorf("writing --to %s after %d of %d records (the target is partial: empty it before running again): %w", mo.To, i, len(all), err)
		}
	}
	return len(all), nil
}

func validBackend(b string) bool { return b == StoreBolt || b == StoreKubernetes }

func (mo MigrateOptions) open(backend string, log *slog.Logger) (store.Store, error) {
	o := Options{DataDir: mo.DataDir, Store: mo.Kube}
	o.Store.Backend = backend
	if errs := o.Store.errors(o.DataDir); len(errs) > 0 {
		return nil, errs[0]
	}
	st, _, err := openStore(o, log)
	return st, err
}
