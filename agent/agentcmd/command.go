// Package agentcmd provides the `agent` subcommand.
package agentcmd

import (
	"errors"

	"github.com/spf13/cobra"
)

// NewCommand returns the `agent` subcommand.
// SKELETON: replaced by the issue that builds it.
func NewCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "agent",
		Short: "agent (not built yet)",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("agent is not built yet")
		},
	}
}
