// Package testbin builds the federation-autoscaler binary for the tests
// that run it as a child process (the broker command's tests, the deploy
// scripts' tests, the attack suite), so that each builds it the same way:
// once per test binary, from the repository this package is in, with the
// Go toolchain running the tests.
package testbin

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
)

// RepoRoot is the repository's root folder.
func RepoRoot() string {
	_, self, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(self), "..", ".."))
}

// Build builds the binary into dir and returns its path. The error carries
// the compiler's output.
func Build(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "federation-autoscaler")
	//nolint:staticcheck // SA1019: the tests run under `go test`, whose GOROOT is the toolchain that must build the binary too.
	cmd := exec.CommandContext(ctx, filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", bin, ".")
	cmd.Dir = RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building federation-autoscaler in %s: %w\n%s", cmd.Dir, err, out)
	}
	return bin, nil
}
