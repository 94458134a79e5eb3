package liqotest_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/federation-autoscaler/federation-autoscaler/deploy/testbin"
)

// fakeGo is a `go` that "builds" liqoctl: it counts its calls, waits until
// the release file exists (the test decides when the build ends), then
// writes a liqoctl that reports v1.1.2, or fails when the fail file exists.
const fakeGo = `#!/usr/bin/env bash
set -euo pipefail
echo x >>"${FAKE_DIR}/calls"
out=""
while (($#)); do [[ "$1" == -o ]] && out="$2"; shift; done
while [[ ! -e "${FAKE_DIR}/release" ]]; do sleep 0.05; done
if [[ -e "${FAKE_DIR}/fail" ]]; then echo "fake go: cannot reach the module proxy" >&2; exit 1; fi
printf '#!/bin/sh\necho "Client version: v1.1.2"\n' >"${out}"
chmod +x "${out}"
`

// script runs build-liqoctl.sh with the fake go and returns its output.
type script struct {
	t         *testing.T
	fake, out string
}

func newScript(t *testing.T) *script {
	s := &script{t: t, fake: t.TempDir(), out: t.TempDir()}
	if err := os.WriteFile(filepath.Join(s.fake, "go"), []byte(fakeGo), 0o755); err != nil {
		t.Fatal(err)
	}
	// A test that fails half-way still lets the fake build end.
	t.Cleanup(func() { _ = os.WriteFile(filepath.Join(s.fake, "release"), nil, 0o644) })
	return s
}

func (s *script) cmd(args ...string) *exec.Cmd {
	cmd := exec.Command("bash", append([]string{filepath.Join(testbin.RepoRoot(), "deploy", "liqotest", "build-liqoctl.sh")}, args...)...)
	cmd.Env = append(os.Environ(), "PATH="+s.fake+":"+os.Getenv("PATH"), "FA_LIQOCTL_DIR="+s.out, "FAKE_DIR="+s.fake)
	return cmd
}

// run runs the script to its end; wantOK says whether it must succeed.
func (s *script) run(wantOK bool, args ...string) (stdout, stderr string) {
	s.t.Helper()
	cmd := s.cmd(args...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if (err == nil) != wantOK {
		s.t.Fatalf("build-liqoctl.sh %v: %v (want success %v)\nstdout: %s\nstderr: %s", args, err, wantOK, o.String(), e.String())
	}
	return o.String(), e.String()
}

func (s *script) touch(name string) {
	s.t.Helper()
	if err := os.WriteFile(filepath.Join(s.fake, name), nil, 0o644); err != nil {
		s.t.Fatal(err)
	}
}

func (s *script) calls() int {
	b, _ := os.ReadFile(filepath.Join(s.fake, "calls"))
	return strings.Count(string(b), "x")
}

func wantIn(t *testing.T, what, got, want string) {
	t.Helper()
	if !strings.Contains(got, want) {
		t.Errorf("%s: %q does not say %q", what, got, want)
	}
}

// TestBuildScriptInTheBackground: .ci/setup's --background returns while
// the build runs and holds the lock; the suite's --wait waits for it;
// `make test`'s --check names a missing or unfinished liqoctl; a finished
// build is never redone.
func TestBuildScriptInTheBackground(t *testing.T) {
	s := newScript(t)
	check, _ := s.run(true, "--check")
	wantIn(t, "--check before any build", check, "no liqoctl v1.1.2 in "+s.out)
	_, stderr := s.run(false, "--wait", "0")
	wantIn(t, "--wait without a build", stderr, "no build running")

	// The fake build cannot finish before the release file exists, so
	// everything below sees it in progress.
	out, _ := s.run(true, "--background")
	wantIn(t, "--background", out, "in the background")
	again, _ := s.run(true, "--background")
	wantIn(t, "a second --background", again, "already running")
	check, _ = s.run(true, "--check")
	wantIn(t, "--check during the build", check, "still building in the background")
	_, stderr = s.run(false, "--wait", "1")
	wantIn(t, "--wait shorter than the build", stderr, "was still running after 1 s")

	waiter := s.cmd("--wait", "600")
	var wo, we bytes.Buffer
	waiter.Stdout, waiter.Stderr = &wo, &we
	if err := waiter.Start(); err != nil {
		t.Fatal(err)
	}
	s.touch("release")
	if err := waiter.Wait(); err != nil {
		t.Fatalf("--wait for the build: %v\n%s", err, we.String())
	}
	if got := strings.TrimSpace(wo.String()); got != filepath.Join(s.out, "liqoctl") {
		t.Errorf("--wait printed %q, want the binary's path", got)
	}
	if check, _ = s.run(true, "--check"); check != "" {
		t.Errorf("--check with liqoctl built: %q, want nothing", check)
	}
	s.run(true, "--background")
	s.run(true)
	if n := s.calls(); n != 1 {
		t.Errorf("go build ran %d times, want once", n)
	}
}

// TestBuildScriptFailure: a failed background build is reported by --wait
// with the end of its log, and --check names the suite.
func TestBuildScriptFailure(t *testing.T) {
	s := newScript(t)
	s.touch("fail")
	s.touch("release")
	s.run(true, "--background")
	_, stderr := s.run(false, "--wait", "600")
	wantIn(t, "--wait after a failed build", stderr, "fake go: cannot reach the module proxy")
	check, _ := s.run(true, "--check")
	wantIn(t, "--check after a failed build", check, "Liqo conformance suite (deploy/liqotest): no liqoctl v1.1.2")
	_, stderr = s.run(false, "--wait")
	wantIn(t, "--wait without seconds", stderr, "--wait needs a number of seconds")
	_, stderr = s.run(false, "--locked-build")
	wantIn(t, "--locked-build by hand", stderr, "internal")
}
