// Package brokercmd provides the `broker` subcommand.
package brokercmd

import (
	"errors"

	"github.com/spf13/cobra"
)

// NewCommand returns the `broker` subcommand.
// SKELETON: replaced by the issue that builds it.
func NewCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "broker",
		Short: "broker (not built yet)",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("broker is not built yet")
		},
	}
}
