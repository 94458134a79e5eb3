// Package adaptercmd provides the `adapter` subcommand.
package adaptercmd

import (
	"errors"

	"github.com/spf13/cobra"
)

// NewCommand returns the `adapter` subcommand.
// SKELETON: replaced by the issue that builds it.
func NewCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "adapter",
		Short: "adapter (not built yet)",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("adapter is not built yet")
		},
	}
}
