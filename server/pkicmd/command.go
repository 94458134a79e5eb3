// Package pkicmd provides the `pki` subcommand.
package pkicmd

import (
	"errors"

	"github.com/spf13/cobra"
)

// NewCommand returns the `pki` subcommand.
// SKELETON: replaced by the issue that builds it.
func NewCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "pki",
		Short: "pki (not built yet)",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("pki is not built yet")
		},
	}
}
