//go:build tools

// Package kubebin only records, for `go mod tidy`, the programs build.sh
// compiles; it is never built itself.
package kubebin

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
)
