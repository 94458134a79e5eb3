package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestProductionPackagesLinkNoMocks: the simulated world (mocks/...) meets
// the production code only in this binary's wiring (main.go registers the
// simulated Liqo) and the demo. The packages of the broker, the agents and
// the adapter — what a production deployment runs — link none of it.
func TestProductionPackagesLinkNoMocks(t *testing.T) {
	// `go test` puts its own toolchain first on PATH.
	out, err := exec.Command("go", "list", "-deps", "./agent/...", "./adapter/...", "./server/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	const mocks = "github.com/federation-autoscaler/federation-autoscaler/mocks"
	var bad []string
	for _, pkg := range strings.Fields(string(out)) {
		if pkg == mocks || strings.HasPrefix(pkg, mocks+"/") {
			bad = append(bad, pkg)
		}
	}
	if len(bad) > 0 {
		t.Fatalf("production packages depend on the simulated world: %s (register simulations in main.go or the demo, not in agent/, adapter/ or server/)", strings.Join(bad, ", "))
	}
}
