// Package mockcmd provides the `mock-geo` and `mock-eco` subcommands.
package mockcmd

import (
	"errors"

	"github.com/spf13/cobra"
)

// NewGeoCommand returns the `mock-geo` subcommand.
// SKELETON: replaced by the placement issue.
func NewGeoCommand() *cobra.Command {
	return &cobra.Command{Use: "mock-geo", Short: "mock-geo (not built yet)", RunE: func(*cobra.Command, []string) error { return errors.New("not built yet") }}
}

// NewEcoCommand returns the `mock-eco` subcommand.
// SKELETON: replaced by the placement issue.
func NewEcoCommand() *cobra.Command {
	return &cobra.Command{Use: "mock-eco", Short: "mock-eco (not built yet)", RunE: func(*cobra.Command, []string) error { return errors.New("not built yet") }}
}
