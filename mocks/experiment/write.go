package experiment

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Summary is summary.json.
type Summary struct {
	Suite     string        `json:"suite"`
	Metric    string        `json:"metric"`
	Mode      string        `json:"mode"`
	Seed      uint64        `json:"seed"`
	Consumers int           `json:"consumers"`
	Providers int           `json:"providers"`
	StartedAt time.Time     `json:"startedAt"`
	WallTime  float64       `json:"wallTimeSeconds"`
	LoadAvg   string        `json:"loadAverage,omitempty"`
	Warnings  []string      `json:"warnings,omitempty"`
	Phases    []PhaseResult `json:"phases"`
	// Comparable is false when a phase's replay check failed: its
	// multiple is reported but not compared.
	Comparable bool    `json:"comparable"`
	Config     *Config `json:"config"`
}

// Files are the names of a result folder's files.
var Files = struct {
	Selections, Reservations, Observations, Probes, Snapshots, SummaryJSON, SummaryMD string
	Timeline, Boxes                                                                   string
}{
	"selections.csv", "reservations.csv", "observations.csv", "probes.csv", "snapshots.csv", "summary.json", "summary.md",
	"timeline", "boxes",
}

// NewSummary assembles the summary of a finished run.
func NewSummary(cfg *Config, results []PhaseResult, started time.Time, wall time.Duration) *Summary {
	s := &Summary{
		Suite: cfg.Suite, Metric: cfg.Metric, Mode: cfg.Mode, Seed: cfg.Seed, Consumers: cfg.Consumers, Providers: cfg.Providers,
		StartedAt: started.UTC(), WallTime: roundDur(wall), Warnings: cfg.Warnings(), Phases: results, Comparable: true, Config: cfg,
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		s.LoadAvg = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	for _, p := range results {
		if p.Replay != nil && !p.Replay.Valid {
			s.Comparable = false
		}
	}
	return s
}

// Write writes every output into <cfg.Output>/<suite>/<UTC time of
// started>/ and returns the folder.
func Write(cfg *Config, rec *Records, s *Summary) (string, error) {
	dir := filepath.Join(cfg.Output, cfg.Suite, s.StartedAt.Format("20060102T150405Z"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("creating the results folder: %w", err)
	}
	obsFile := Files.Observations
	if cfg.Metric == MetricLatency {
		obsFile = Files.Probes
	}
	for name, rows := range map[string][][]string{
		Files.Selections: selectionRows(rec), Files.Reservations: reservationRows(rec),
		obsFile: observationRows(rec), Files.Snapshots: snapshotRows(rec),
	} {
		if err := writeCSV(filepath.Join(dir, name), rows); err != nil {
			return dir, err
		}
	}
	js, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return dir, err
	}
	if err := os.WriteFile(filepath.Join(dir, Files.SummaryJSON), append(js, '\n'), 0o644); err != nil {
		return dir, err
	}
	if err := os.WriteFile(filepath.Join(dir, Files.SummaryMD), []byte(SummaryMarkdown(s)), 0o644); err != nil {
		return dir, err
	}
	return dir, Charts(dir, cfg, rec, s)
}

func writeCSV(path string, rows [][]string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	werr := w.WriteAll(rows)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return fmt.Errorf("writing %s: %w", path, werr)
	}
	return nil
}

func num(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }

func selectionRows(rec *Records) [][]string {
	rows := [][]string{{"phase", "iteration", "tau_s", "consumer", "provider", "reservation_id", "value", "best", "worst"}}
	for _, s := range rec.Selections {
		rows = append(rows, []string{s.Phase, strconv.Itoa(s.Iteration), num(roundDur(s.Tau)), s.Consumer, s.Provider, s.ReservationID, num(s.Value), num(s.Best), num(s.Worst)})
	}
	return rows
}

func reservationRows(rec *Records) [][]string {
	rows := [][]string{{"phase", "reservation_id", "consumer", "provider", "status", "first_seen_tau_s"}}
	for _, r := range rec.Reservations {
		rows = append(rows, []string{r.Phase, r.ID, r.Consumer, r.Provider, r.Status, num(roundDur(r.FirstSeen))})
	}
	return rows
}

func observationRows(rec *Records) [][]string {
	rows := [][]string{{"phase", "sample", "tau_s", "consumer", "provider", "observed", "truth"}}
	for _, o := range rec.Observations {
		rows = append(rows, []string{o.Phase, strconv.Itoa(o.Sample), num(roundDur(o.Tau)), o.Consumer, o.Provider, num(o.Observed), num(o.Truth)})
	}
	return rows
}

func snapshotRows(rec *Records) [][]string {
	rows := [][]string{{"phase", "sample", "tau_s", "provider", "available", "free_chunks", "reserved_chunks", "carbon"}}
	for _, s := range rec.Snapshots {
		c := ""
		if s.Carbon != nil {
			c = num(*s.Carbon)
		}
		rows = append(rows, []string{s.Phase, strconv.Itoa(s.Sample), num(roundDur(s.Tau)), s.Provider, strconv.FormatBool(s.Available), strconv.Itoa(int(s.Free)), strconv.Itoa(int(s.Reserved)), c})
	}
	return rows
}

// SummaryMarkdown is summary.md.
func SummaryMarkdown(s *Summary) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Experiment %s: %s, %d consumers × %d providers\n\n", s.Suite, s.Metric, s.Consumers, s.Providers)
	fmt.Fprintf(&b, "Mode %s, seed %d, started %s, wall time %.0f s, load average %s.\n\n", s.Mode, s.Seed, s.StartedAt.Format(time.RFC3339), s.WallTime, s.LoadAvg)
	for _, w := range s.Warnings {
		fmt.Fprintf(&b, "> **Warning:** %s\n\n", w)
	}
	b.WriteString("| phase | policy | selections | multiple of the achievable minimum | median ratio | worst achievable | replay match | chance | comparison |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, p := range s.Phases {
		match, chance, verdict := "—", "—", "baseline"
		if r := p.Replay; r != nil {
			match, chance = fmt.Sprintf("%.0f %%", 100*r.Match), fmt.Sprintf("%.0f %%", 100*r.Chance)
			verdict = "valid"
			if !r.Valid {
				verdict = "**refused**: " + r.Reason
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %.2f× | %.2f× | %.2f× | %s | %s | %s |\n", p.Name, p.Policy, p.Selections, p.Multiple, p.MedianRatio, p.WorstMultiple, match, chance, verdict)
	}
	if !s.Comparable {
		b.WriteString("\nAt least one phase failed the replay check: its multiple is not a comparison with the baseline.\n")
	}
	fmt.Fprintf(&b, "\nCharts: `%s.png` / `.svg` (the phases over time within the achievable band), `%s.png` / `.svg` (per phase, and the achievable minimum).\n", Files.Timeline, Files.Boxes)
	return b.String()
}

// Execute runs cfg end to end: Run, Analyze, Write. It returns the
// results folder and the summary; an error after the folder was written
// still returns both (a failed replay check: ErrNotComparable).
func Execute(ctx context.Context, cfg *Config, o Options) (string, *Summary, error) {
	started := time.Now()
	rec, err := Run(ctx, cfg, o)
	if err != nil {
		return "", nil, err
	}
	s := NewSummary(cfg, Analyze(cfg, rec), started, time.Since(started))
	dir, err := Write(cfg, rec, s)
	if err != nil {
		return dir, s, err
	}
	if !s.Comparable {
		return dir, s, fmt.Errorf("%w: see %s", ErrNotComparable, filepath.Join(dir, Files.SummaryMD))
	}
	return dir, s, nil
}

// ErrNotComparable says a phase failed the replay check: its multiple is
// in the results but is no comparison with the baseline.
var ErrNotComparable = errors.New("a phase did not replay the baseline's conditions; its comparison is refused")
