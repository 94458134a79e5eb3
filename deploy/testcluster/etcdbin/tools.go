//go:build tools

// Package etcdbin only records, for `go mod tidy`, the program build.sh
// compiles; it is never built itself.
package etcdbin

import (
	_ "go.etcd.io/etcd/server/v3"
)
