package demo_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/federation-autoscaler/federation-autoscaler/mocks/demo"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// TestDefaultScenarioGolden: the embedded scenario.yaml parses, passes its
// checks, and reads as testdata/scenario.golden.json says (go test -update
// rewrites it after a deliberate change; review the diff).
func TestDefaultScenarioGolden(t *testing.T) {
	s, err := demo.DefaultScenario()
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	golden := filepath.Join("testdata", "scenario.golden.json")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update once to write it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the default scenario differs from %s (go test -update after a deliberate change):\n%s", golden, got)
	}
	// The defaults the demo's flags and tests rely on.
	if n := demo.MaxProviders(); n != len(s.Providers) || n < 3 {
		t.Fatalf("MaxProviders() = %d for %d cities", n, len(s.Providers))
	}
	first := demo.DefaultProviders(3)
	if first[0].ID != "sydney" || first[1].ID != "montreal" || first[2].ID != "paris" || first[0].Nodes != 1 || first[0].NodeCPU != "8" {
		t.Fatalf("DefaultProviders(3) = %+v", first)
	}
	if got := len(demo.DefaultProviders(1000)); got != len(s.Providers) {
		t.Fatalf("DefaultProviders(1000) gave %d, want all %d", got, len(s.Providers))
	}
}

// TestParseScenarioRefusesBadInput: every mistake in a scenario is named,
// with what to change.
func TestParseScenarioRefusesBadInput(t *testing.T) {
	good, err := os.ReadFile("scenario.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, from, to, want string
	}{
		{"unknown field", "renewable: true,", "renewabel: true,", `unknown field "renewabel"`},
		{"region", "region: QC,", "region: XX,", `providers[1] (montreal): region "XX" is not a region of mock-geo's table`},
		{"consumer region", "region: ENG", "region: ZZZ", `consumer.region "ZZZ"`},
		{"duplicate id", "id: paris,", "id: sydney,", "providers[2] (sydney): id used twice"},
		{"bad id", "id: milan,", "id: Milan_1,", "providers[4] (Milan_1): id is not a cluster id"},
		{"negative delay", "probeDelay: 4ms", "probeDelay: -4ms", "providers[2] (paris): probeDelay -4ms is negative"},
		{"negative price", `cpuPrice: "0.050"`, `cpuPrice: "-0.050"`, "providers[2] (paris): prices must not be negative"},
		{"bad quantity", `memoryPrice: "0.005", probeDelay: 4ms`, `memoryPrice: "cheap", probeDelay: 4ms`, "quantities must match"},
		{"node size", `providerNodes: {count: 1, cpu: "8"`, `providerNodes: {count: 1, cpu: "0"`, `providerNodes: cpu "0" and memory "16Gi" must both be positive`},
		{"workload", "replicas: 6", "replicas: 500", "workload: replicas 500: use 0 to 200"},
		{"cadence", "resync: 2s", "resync: 0s", "agents.resync 0s: must be positive"},
		{"no providers", "providers:\n", "providers: []\nunused:\n", `unknown field "unused"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !bytes.Contains(good, []byte(tc.from)) {
				t.Fatalf("scenario.yaml no longer contains %q: update the test", tc.from)
			}
			_, err := demo.ParseScenario(bytes.Replace(good, []byte(tc.from), []byte(tc.to), 1))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ParseScenario: %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if _, err := demo.ParseScenario([]byte("consumer: {region: ENG, node: {cpu: '2', memory: 4Gi}}\nproviderNodes: {cpu: '8', memory: 16Gi}\nworkload: {namespace: demo, replicas: 1, cpu: '1', memory: 1Gi}\n")); err == nil ||
		!strings.Contains(err.Error(), "providers: a demo needs at least one") || !strings.Contains(err.Error(), "agents.consumerHeartbeat") {
		t.Fatalf("a scenario without providers and cadences: %v, want both named", err)
	}
}
