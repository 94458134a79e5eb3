package experiment

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const validYAML = `
suite: t
metric: carbon
seed: 1
consumers: 2
providers: 4
chunksPerProvider: 4
phases:
- {name: A, policy: Random}
- {name: B, policy: Eco}
phaseLength: 30s
carbon: {refreshInterval: 10s, low: 50, high: 500, jitter: 20, greenFraction: [0.25, 0.5]}
`

func TestParseConfigDefaults(t *testing.T) {
	c, err := ParseConfig([]byte(validYAML))
	if err != nil {
		t.Fatal(err)
	}
	if c.Latency.Network != NetworkSimulated || *c.Latency.JitterMs != 1 {
		t.Errorf("latency defaults: network %q, jitter %v ms; want simulated, 1", c.Latency.Network, *c.Latency.JitterMs)
	}
	if c.Mode != ModeReserve || c.Demand != 1 || c.Output != "results" || c.Offset.Duration != 5*time.Second {
		t.Fatalf("defaults: mode %q demand %d output %q offset %s", c.Mode, c.Demand, c.Output, c.Offset.Duration)
	}
	// hold 8s + pause 8s rounds up to two refresh intervals.
	if c.Period() != 20*time.Second || c.Iterations() != 1 {
		t.Fatalf("period %s, iterations %d; want 20s and 1", c.Period(), c.Iterations())
	}
	if w := c.Warnings(); len(w) != 0 {
		t.Fatalf("warnings %v, want none", w)
	}
}

func TestParseConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name, replace, with, want string
	}{
		{"unknown key", "seed: 1", "seed: 1\nseeds: 2", `unknown field "seeds"`},
		{"metric", "metric: carbon", "metric: price", `metric "price": use "carbon" or "latency"`},
		{"one provider", "providers: 4", "providers: 1", "providers 1: use 2 to"},
		{"unknown policy", "policy: Eco", "policy: Greenest", `phases[1].policy "Greenest"`},
		{"one phase", "- {name: B, policy: Eco}", "", "phases: list 2 to"},
		{"duplicate phase", "name: B", "name: A", "phases[1]: give each phase a distinct name"},
		{"carbon range", "low: 50, high: 500", "low: 500, high: 50", "carbon.low 500 and carbon.high 50"},
		{"green fraction", "greenFraction: [0.25, 0.5]", "greenFraction: [0.6, 0.5]", "carbon.greenFraction [0.6 0.5]"},
		{"region", "chunksPerProvider: 4", "chunksPerProvider: 4\nproviderRegions: [XX]", `region "XX" is not in mock-geo's table`},
		{"demand over capacity", "chunksPerProvider: 4", "chunksPerProvider: 1\ndemand: 3", "exceed the federation's 4 × 1 chunks"},
		{"no iteration", "phaseLength: 30s", "phaseLength: 6s", "holds no iteration"},
		{"mode", "seed: 1", "seed: 1\nmode: watch", `mode "watch"`},
		{"suite", "suite: t", "suite: a/b", `suite "a/b"`},
		{"latency without refresh", "metric: carbon", "metric: latency", "latency.refreshInterval: set how often"},
		{"latency network", "seed: 1", "seed: 1\nlatency: {network: tcp}", `latency.network "tcp": use "simulated"`},
		{"latency jitter", "seed: 1", "seed: 1\nlatency: {jitterMs: -1}", "latency.jitterMs -1: use 0 to 50 ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(validYAML, tc.replace) {
				t.Fatalf("test bug: %q not in the valid config", tc.replace)
			}
			_, err := ParseConfig([]byte(strings.Replace(validYAML, tc.replace, tc.with, 1)))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestObservationDelayWarning(t *testing.T) {
	c, err := ParseConfig([]byte(strings.Replace(validYAML, "seed: 1", "seed: 1\ncadences: {advertisement: 6s}", 1)))
	if err != nil {
		t.Fatal(err)
	}
	w := c.Warnings()
	if len(w) == 0 || !strings.Contains(w[0], "observation delay 6s is longer than half the carbon refresh interval 10s") {
		t.Fatalf("warnings %v, want the observation delay one", w)
	}
}

func TestLoadConfigNamesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.yaml")
	if err := os.WriteFile(path, []byte("suite: [\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadConfig(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("error %v, want it to name %s", err, path)
	}
}

// The shipped configurations parse and fit the 10-minute budget of a
// scale's eco + latency pair (phases only: start-up and drains come on top).
func TestShippedConfigurations(t *testing.T) {
	files, err := filepath.Glob("../../experiments/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no configurations in experiments/: %v", err)
	}
	for _, f := range files {
		c, err := LoadConfig(f)
		if err != nil {
			t.Error(err)
			continue
		}
		if d := time.Duration(len(c.Phases)) * c.PhaseLength.Duration; d > 5*time.Minute {
			t.Errorf("%s: %d phases of %s = %s, over half of a scale's 10 minutes", f, len(c.Phases), c.PhaseLength.Duration, d)
		}
		if w := c.Warnings(); len(w) > 0 {
			t.Errorf("%s: %v", f, w)
		}
	}
}
