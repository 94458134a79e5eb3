// Package cli builds the federation-autoscaler root command: version
// information, the FA_<FLAG_NAME> environment fallback for every flag, and
// the shared logger setup.
package cli

import (
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Version is stamped at build time with -ldflags "-X .../cli.Version=…".
var Version = "dev"

// EnvPrefix prefixes the environment variable of every flag.
const EnvPrefix = "FA_"

// NewRoot returns the root command with the given subcommands attached.
func NewRoot(subcommands ...*cobra.Command) *cobra.Command {
	root := &cobra.Command{
		Use:   "federation-autoscaler",
		Short: "Borrow spare capacity from other Kubernetes clusters through the Cluster Autoscaler",
		Long: `Federation Autoscaler lets a consumer cluster that runs out of room borrow
chunk-sized virtual nodes from provider clusters, picked by the consumer's
placement policy. Every flag can also be set with an environment variable
FA_<FLAG_NAME> (upper case, dashes as underscores), e.g. FA_PKI_DIR.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return ApplyEnv(cmd.Flags(), os.LookupEnv)
		},
	}
	root.PersistentFlags().String("log-level", "info", "log level: debug, info, warn, error")
	root.PersistentFlags().String("log-format", "text", "log format: text or json")
	root.AddCommand(&cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), Version)
		},
	})
	root.AddCommand(subcommands...)
	return root
}

// EnvName is the environment variable read for flag name.
func EnvName(flag string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// ApplyEnv sets every flag that was not given on the command line from its
// FA_<FLAG_NAME> environment variable, when that is set. A flag given on the
// command line wins.
func ApplyEnv(fs *pflag.FlagSet, lookup func(string) (string, bool)) error {
	var firstErr error
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Changed || firstErr != nil {
			return
		}
		v, ok := lookup(EnvName(f.Name))
		if !ok {
			return
		}
		if err := fs.Set(f.Name, v); err != nil {
			firstErr = fmt.Errorf("environment variable %s=%q is not a valid value for --%s: %w", EnvName(f.Name), v, f.Name, err)
		}
	})
	return firstErr
}

// Logger builds the slog logger selected by the persistent --log-level and
// --log-format flags of cmd.
func Logger(cmd *cobra.Command) (*slog.Logger, error) {
	levelName, _ := cmd.Flags().GetString("log-level")
	format, _ := cmd.Flags().GetString("log-format")
	var level slog.Level
	if err := level.UnmarshalText([]byte(levelName)); err != nil {
		return nil, fmt.Errorf("--log-level %q: use debug, info, warn or error", levelName)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch format {
	case "text", "":
		return slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(cmd.ErrOrStderr(), opts)), nil
	default:
		return nil, fmt.Errorf("--log-format %q: use text or json", format)
	}
}

// WithLogger is a command's RunE that builds the logger of --log-level and
// --log-format (Logger) and runs run with it; a bad flag value is the
// command's error.
func WithLogger(run func(cmd *cobra.Command, log *slog.Logger) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		log, err := Logger(cmd)
		if err != nil {
			return err
		}
		return run(cmd, log)
	}
}
