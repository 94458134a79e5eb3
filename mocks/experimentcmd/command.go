// Package experimentcmd provides the `experiment` subcommand: the paired
// policy experiments of mocks/experiment, and `experiment table`, the
// headline table of their results (docs/experiments.md).
package experimentcmd

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/federation-autoscaler/federation-autoscaler/cli"
	"github.com/federation-autoscaler/federation-autoscaler/mocks/experiment"
)

// NewCommand returns the `experiment` subcommand.
func NewCommand() *cobra.Command {
	var config, output, cpuProfile string
	cmd := &cobra.Command{
		Use:   "experiment --config FILE",
		Short: "Run a paired policy experiment on a simulated federation and write its results",
		Long: `Build a federation in one process with the demo's wiring (the real broker,
agents, adapter and the CA stand-in over simulated clusters), run the phases the
configuration names (the first is the baseline, e.g. Random, then Eco) while
seeded generators replay the same carbon or latency conditions from the start
of every phase, check that the phases saw the same conditions, and write CSVs,
summary.md, summary.json and PNG + SVG charts to results/<suite>/<UTC time>/.
The configuration's keys are in docs/experiments.md; unknown keys are an error.
Exits 1 when a phase failed the replay check (its comparison is refused).`,
		Example: `  federation-autoscaler experiment --config experiments/eco-3x7.yaml
  federation-autoscaler experiment table --results results --out results/headline.md`,
		Args: cobra.NoArgs,
		RunE: cli.WithLogger(func(cmd *cobra.Command, log *slog.Logger) error {
			cfg, err := experiment.LoadConfig(config)
			if err != nil {
				return err
			}
			if output != "" {
				cfg.Output = output
			}
			out := cmd.ErrOrStderr()
			for _, w := range cfg.Warnings() {
				fmt.Fprintf(out, "WARNING: %s\n", w)
			}
			if cpuProfile != "" {
				stopProfile, err := startCPUProfile(cpuProfile)
				if err != nil {
					return err
				}
				defer stopProfile()
			}
			start := time.Now()
			progress := func(s string) { fmt.Fprintf(out, "[%6.1fs] %s\n", time.Since(start).Seconds(), s) }
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			dir, s, err := experiment.Execute(ctx, cfg, experiment.Options{Logger: log, Progress: progress})
			if s != nil {
				fmt.Fprintln(cmd.OutOrStdout(), experiment.SummaryMarkdown(s))
				fmt.Fprintf(cmd.OutOrStdout(), "Results: %s\n", dir)
			}
			return err
		}),
	}
	cmd.Flags().StringVar(&config, "config", "", "the experiment's configuration (YAML or JSON; docs/experiments.md) (required)")
	cmd.Flags().StringVar(&output, "output", "", "results root (default: the configuration's output, else results)")
	cmd.Flags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file (go tool pprof)")
	_ = cmd.MarkFlagRequired("config")
	cmd.AddCommand(newTableCommand())
	return cmd
}

// startCPUProfile profiles the process's CPU into path until the
// returned function is called.
func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("creating the CPU profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("starting the CPU profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}

func newTableCommand() *cobra.Command {
	var results, out string
	cmd := &cobra.Command{
		Use:   "table",
		Short: "Write the headline table (policy → multiple of the achievable minimum per scale) from the latest result of every suite",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sums, err := experiment.LatestSummaries(results)
			if err != nil {
				return err
			}
			if len(sums) == 0 {
				return errors.New("no summary.json under " + results + ": run the experiments first (make experiments)")
			}
			md := experiment.HeadlineTable(sums)
			if out != "" {
				if err := os.WriteFile(out, []byte(md), 0o644); err != nil {
					return err
				}
			}
			fmt.Fprint(cmd.OutOrStdout(), md)
			return nil
		},
	}
	cmd.Flags().StringVar(&results, "results", "results", "results root")
	cmd.Flags().StringVar(&out, "out", "", "also write the table to this file")
	return cmd
}
