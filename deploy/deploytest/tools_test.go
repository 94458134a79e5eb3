package deploytest

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/deploy/testbin"
	"github.com/federation-autoscaler/federation-autoscaler/deploy/testcluster"
)

// tools are the programs the scripts need, built once per test binary.
type tools struct {
	// Repo is the repository root.
	Repo string
	// Kubectl is the pinned kubectl; KubectlDir its folder (put on PATH).
	Kubectl, KubectlDir string
	// Bin is a freshly built federation-autoscaler binary.
	Bin string
	// Err is why they could not be built (every test that needs them fails
	// with it).
	Err error
}

// buildTools builds kubectl (cached across runs, under an exclusive lock so
// parallel test binaries never build twice) and the product binary (into
// dir).
func buildTools(dir string) *tools {
	t := &tools{Repo: testbin.RepoRoot()}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()

	kdir := os.Getenv("FA_KUBECTL_DIR")
	if kdir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			t.Err = fmt.Errorf("no FA_KUBECTL_DIR and no home folder: %w", err)
			return t
		}
		kdir = filepath.Join(home, ".cache", "federation-autoscaler", "kubectl-"+testcluster.KubeVersion) // build-kubectl.sh pins the control plane's version
	}
	if err := os.MkdirAll(filepath.Dir(kdir), 0o755); err != nil {
		t.Err = err
		return t
	}
	lock, err := os.OpenFile(kdir+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Err = fmt.Errorf("opening the kubectl build lock: %w", err)
		return t
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Err = fmt.Errorf("locking %s: %w", lock.Name(), err)
		return t
	}
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(t.Repo, "deploy", "deploytest", "build-kubectl.sh"))
	cmd.Env = append(os.Environ(), "FA_KUBECTL_DIR="+kdir)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	_ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if err != nil {
		t.Err = fmt.Errorf("building kubectl with deploy/deploytest/build-kubectl.sh (needs go and the module proxy once; a few minutes cold): %w\n%s", err, out.String())
		return t
	}
	t.KubectlDir, t.Kubectl = kdir, filepath.Join(kdir, "kubectl")

	t.Bin, t.Err = testbin.Build(ctx, dir)
	return t
}

var built *tools // set once by TestMain, read-only afterwards

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fa-deploytest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	built = buildTools(dir)
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

func need(t *testing.T) *tools {
	t.Helper()
	if built.Err != nil {
		t.Fatal(built.Err)
	}
	return built
}

// result is one script run.
type result struct {
	Code           int
	Stdout, Stderr string
}

// run runs a script of deploy/standalone with the pinned kubectl and the
// built binary first on PATH, in dir.
func run(t *testing.T, dir, script string, args ...string) result {
	t.Helper()
	tl := need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{filepath.Join(tl.Repo, "deploy", "standalone", script)}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"PATH="+tl.KubectlDir+string(os.PathListSeparator)+filepath.Dir(tl.Bin)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"KUBECONFIG=/nonexistent/kubeconfig", // only --kubeconfig counts
		"FA_KUBECTL=", "FA_BIN=", "FA_IMAGE=",
	)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	started := time.Now()
	err := cmd.Run()
	t.Logf("%s %s: exit %v in %s", script, strings.Join(args, " "), cmd.ProcessState.ExitCode(), time.Since(started).Round(time.Millisecond))
	res := result{Stdout: so.String(), Stderr: se.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		res.Code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s %s: %v", script, strings.Join(args, " "), err)
	}
	return res
}

// mustRun runs a script and fails the test unless it exits 0.
func mustRun(t *testing.T, dir, script string, args ...string) result {
	t.Helper()
	r := run(t, dir, script, args...)
	if r.Code != 0 {
		t.Fatalf("%s %s: exit %d\nstderr:\n%s\nstdout:\n%s", script, strings.Join(args, " "), r.Code, r.Stderr, r.Stdout)
	}
	return r
}

// kubectl runs the pinned kubectl.
func kubectl(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, need(t).Kubectl, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG=/nonexistent/kubeconfig")
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	if err != nil {
		return so.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, se.String())
	}
	return so.String(), nil
}

// makeBundle mints a join bundle with the built binary into dir.
func makeBundle(t *testing.T, pkiDir, dir, id, role string) string {
	t.Helper()
	tl := need(t)
	if _, err := os.Stat(filepath.Join(pkiDir, "ca.key")); err != nil {
		if out, err := exec.Command(tl.Bin, "pki", "init", "--dir", pkiDir, "--host", "broker.example.org").CombinedOutput(); err != nil {
			t.Fatalf("pki init: %v\n%s", err, out)
		}
	}
	out := filepath.Join(dir, id+".tar.gz")
	if b, err := exec.Command(tl.Bin, "pki", "join", "--dir", pkiDir, "--cluster-id", id, "--role", role,
		"--broker-url", "https://broker.example.org:30443", "--out", out).CombinedOutput(); err != nil {
		t.Fatalf("pki join: %v\n%s", err, b)
	}
	return out
}

func decodeB64(s string) ([]byte, error) { return base64.StdEncoding.DecodeString(s) }
