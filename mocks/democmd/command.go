// Package democmd provides the `demo` subcommand.
package democmd

import (
	"errors"

	"github.com/spf13/cobra"
)

// NewCommand returns the `demo` subcommand.
// SKELETON: replaced by the issue that builds it.
func NewCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "demo",
		Short: "demo (not built yet)",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("demo is not built yet")
		},
	}
}
