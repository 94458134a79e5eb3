package experiment

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"encoding/xml"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// smokeYAML is the configuration tests' valid one (a small topology:
// 2 consumers, 4 providers, Random then Eco) with short phases: the whole
// path (workload pods → CA stand-in → adapter → consumer agent → broker →
// peering) with the carbon replayed, three iterations per phase. Demand
// arrives 3 s after each refresh and goes 4 s later, 3 s before the next
// refresh: a reservation that a loaded machine (or the race detector)
// delays by up to 3 s is still valued at the conditions it was chosen on.
var smokeYAML = strings.NewReplacer(
	"suite: t", "suite: smoke",
	"seed: 1", "seed: 7\nhold: 4s\npause: 4s\noffset: 3s",
	"phaseLength: 30s", "phaseLength: 33s",
).Replace(validYAML)

// TestSmokeExperiment runs a smoke experiment end to end (about a minute)
// and checks its outputs: both phases placed, the replay is valid, Eco is
// within 5 % of the achievable minimum and Random clearly above it, and
// every file and chart is present and parses.
func TestSmokeExperiment(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a federation for about a minute")
	}
	cfg, dir, s, err := execute(t, smokeYAML)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Phases) != 2 {
		t.Fatalf("phases %+v, want 2", s.Phases)
	}
	random, eco := s.Phases[0], s.Phases[1]
	for _, p := range s.Phases {
		// 2 consumers × 1 chunk × 3 iterations.
		if p.Selections < 4 {
			t.Errorf("phase %s placed %d chunks, want at least 4 (2 consumers × 3 iterations)", p.Name, p.Selections)
		}
	}
	if r := eco.Replay; r == nil || !r.Valid || r.Match < cfg.Validity || r.Match <= r.Chance {
		t.Errorf("replay check %+v: want valid, match ≥ %v and above chance", r, cfg.Validity)
	}
	if eco.Multiple > 1.05 || eco.Multiple < 1 {
		t.Errorf("Eco's multiple %.3f, want 1 to 1.05", eco.Multiple)
	}
	if random.Multiple < 1.5*eco.Multiple {
		t.Errorf("Random's multiple %.3f is not clearly above Eco's %.3f", random.Multiple, eco.Multiple)
	}
	checkOutputs(t, dir, s, cfg)
}

// execute runs the suite of configuration yaml (the results and the
// work folder in temporary folders, at most 3 minutes, progress to the
// test log).
func execute(t *testing.T, yaml string) (*Config, string, *Summary, error) {
	t.Helper()
	cfg, err := ParseConfig([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Output = t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir, s, err := Execute(ctx, cfg, Options{WorkDir: t.TempDir(), Progress: func(line string) { t.Log(line) }})
	return cfg, dir, s, err
}

// checkOutputs checks that every file and chart of the run is present and
// parses: the CSVs with data (reservations in reserve mode only; probes
// for latency), summary.md with phase B's row, the PNGs and SVGs.
func checkOutputs(t *testing.T, dir string, s *Summary, cfg *Config) {
	t.Helper()
	csvs := []string{Files.Selections, Files.Observations, Files.Snapshots}
	if cfg.Metric == MetricLatency {
		csvs[1] = Files.Probes
	}
	if cfg.Mode == ModeReserve {
		csvs = append(csvs, Files.Reservations)
	}
	for _, name := range csvs {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		rows, err := csv.NewReader(f).ReadAll()
		_ = f.Close()
		if err != nil || len(rows) < 2 {
			t.Errorf("%s: %d rows, %v; want a header and data", name, len(rows), err)
		}
	}
	var back Summary
	data, err := os.ReadFile(filepath.Join(dir, Files.SummaryJSON))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &back); err != nil || len(back.Phases) != len(s.Phases) || back.Phases[1].Multiple != s.Phases[1].Multiple {
		t.Errorf("summary.json: %v, %+v", err, back.Phases)
	}
	md, err := os.ReadFile(filepath.Join(dir, Files.SummaryMD))
	if row := "| B | " + string(cfg.Phases[1].Policy) + " |"; err != nil || !strings.Contains(string(md), row) {
		t.Errorf("summary.md %q, %v: want the row %q", md, err, row)
	}
	for _, chart := range []string{Files.Timeline, Files.Boxes} {
		f, err := os.Open(filepath.Join(dir, chart+".png"))
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		_ = f.Close()
		if err != nil || img.Bounds().Dx() < 100 {
			t.Errorf("%s.png: %v", chart, err)
		}
		svg, err := os.ReadFile(filepath.Join(dir, chart+".svg"))
		if err != nil {
			t.Fatal(err)
		}
		var root struct {
			XMLName xml.Name
		}
		if err := xml.NewDecoder(bytes.NewReader(svg)).Decode(&root); err != nil || root.XMLName.Local != "svg" {
			t.Errorf("%s.svg: root %q, %v; want an svg document", chart, root.XMLName.Local, err)
		}
	}
}
