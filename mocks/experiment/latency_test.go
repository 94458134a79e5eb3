package experiment

import (
	"errors"
	"strings"
	"testing"
)

// latencyYAML is a small latency suite in observe mode: 2 consumers in
// London, 4 providers all in Paris (one distance: the Latency shortlist
// holds all four, and the measured RTT alone decides), Random then
// Latency.
const latencyYAML = `
suite: latency-smoke
metric: latency
seed: 11
consumers: 2
providers: 4
consumerRegions: [ENG]
providerRegions: [IDF]
chunksPerProvider: 4
mode: observe
phases:
- {name: A, policy: Random}
- {name: B, policy: Latency}
phaseLength: 21s
hold: 2s
pause: 2s
latency: {refreshInterval: 6s, minMs: 5, maxMs: 60, network: NETWORK}
`

// TestLatencyExperiment runs the latency suite end to end over both
// networks. Over the simulated one (the published tables') the
// measurements do not depend on the machine's load, so it asserts the
// policies: Latency at its floor (the shortlist keeps the tied providers),
// Random clearly above. Over real UDP on loopback (the echoes wait each
// pair's round trip) it asserts that the path works: both phases placed
// and every sample probed every provider; its numbers depend on the load.
func TestLatencyExperiment(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a federation twice for about half a minute each")
	}
	for _, network := range []string{NetworkSimulated, NetworkUDP} {
		t.Run(network, func(t *testing.T) {
			cfg, dir, s, err := execute(t, strings.Replace(latencyYAML, "NETWORK", network, 1))
			if err != nil && (network == NetworkSimulated || !errors.Is(err, ErrNotComparable)) {
				t.Fatal(err)
			}
			if s == nil || len(s.Phases) != 2 {
				t.Fatalf("summary %+v, want 2 phases", s)
			}
			for _, p := range s.Phases {
				if p.Selections < 4 { // 2 consumers × 3 iterations
					t.Errorf("phase %s: %d selections, want at least 4", p.Name, p.Selections)
				}
			}
			checkOutputs(t, dir, s, cfg)
			if network == NetworkUDP {
				return
			}
			random, latency := s.Phases[0], s.Phases[1]
			if r := latency.Replay; r == nil || !r.Valid || r.Match <= r.Chance {
				t.Errorf("replay check %+v: want valid and above chance", r)
			}
			if latency.Multiple < 1 || latency.Multiple > 1.05 {
				t.Errorf("Latency's multiple %.3f, want 1 to 1.05 (every tied provider on the shortlist, measured within the 1 ms jitter)", latency.Multiple)
			}
			if random.Multiple < 1.3*latency.Multiple {
				t.Errorf("Random's multiple %.3f is not clearly above Latency's %.3f", random.Multiple, latency.Multiple)
			}
		})
	}
}
