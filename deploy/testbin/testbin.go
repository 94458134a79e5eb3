// Package testbin builds the federation-autoscaler binary for the tests
// that run it as a child process (the broker command's tests, the deploy
// scripts' tests, the attack suite), so that each builds it the same way:
// once per test binary, from the repository this package is in, with the
// Go toolchain running the tests; and holds the one rule for a test whose
// outside tool is missing (MissingTool).
package testbin

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
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

// MissingTool ends a test that cannot run for lack of a tool the set-up
// (.ci/setup) installs: under CI=true it fails (the CI must have every
// tool), elsewhere it skips. msg says what is missing and how to get it.
func MissingTool(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(msg + "; CI=true, so this is a failure: .ci/setup must provide it")
	}
	t.Skip(msg + "; skipping (CI=true makes this a failure)")
}
