package testcluster_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/federation-autoscaler/federation-autoscaler/deploy/testcluster"
)

// TestKubeVersionIsOnePin checks that the shell pin every build script
// sources (kube-version.sh), the module kube-apiserver is built from
// (kubebin/go.mod) and the Go constant that names the cache folder agree:
// a drift would rebuild into a folder nobody reads, or test against a
// control plane of another version than the one the docs name.
func TestKubeVersionIsOnePin(t *testing.T) {
	out, err := exec.Command("bash", "-c", `set -euo pipefail; source kube-version.sh; printf '%s\n%s' "${KUBE_VERSION}" "$(kube_version_ldflags)"`).Output()
	if err != nil {
		t.Fatalf("sourcing kube-version.sh: %v", err)
	}
	pin, ldflags, _ := strings.Cut(string(out), "\n")
	if pin != testcluster.KubeVersion {
		t.Errorf("kube-version.sh pins KUBE_VERSION=%s, testcluster.KubeVersion is %s: change both", pin, testcluster.KubeVersion)
	}
	major, minor, _ := strings.Cut(strings.TrimPrefix(testcluster.KubeVersion, "v"), ".")
	minor, _, _ = strings.Cut(minor, ".")
	for _, pkg := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
		for _, want := range []string{
			" -X " + pkg + ".gitVersion=" + testcluster.KubeVersion,
			" -X " + pkg + ".gitMajor=" + major,
			" -X " + pkg + ".gitMinor=" + minor,
			" -X " + pkg + ".gitTreeState=clean",
		} {
			if !strings.Contains(ldflags, want) {
				t.Errorf("kube_version_ldflags = %q, want it to contain %q", ldflags, want)
			}
		}
	}
	mod, err := os.ReadFile(filepath.Join("kubebin", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "require k8s.io/kubernetes " + testcluster.KubeVersion + "\n"; !strings.Contains(string(mod), want) {
		t.Errorf("kubebin/go.mod does not contain %q: the apiserver would be built from another version than the pin", want)
	}
}
