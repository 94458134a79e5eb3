//go:build tools

// Package liqoctlbin only records, for `go mod tidy`, the program
// build-liqoctl.sh compiles (the real liqoctl of the pinned Liqo release); it
// is never built itself.
package liqoctlbin

import (
	_ "github.com/liqotech/liqo/cmd/liqoctl"
)
