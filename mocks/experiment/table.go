package experiment

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// LatestSummaries reads the newest summary.json of every suite under root
// (root/<suite>/<UTC time>/summary.json; the folder names sort by time).
func LatestSummaries(root string) ([]*Summary, error) {
	suites, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("reading the results root: %w", err)
	}
	var out []*Summary
	for _, s := range suites {
		if !s.IsDir() {
			continue
		}
		runs, err := filepath.Glob(filepath.Join(root, s.Name(), "*", Files.SummaryJSON))
		if err != nil || len(runs) == 0 {
			continue
		}
		slices.Sort(runs)
		data, err := os.ReadFile(runs[len(runs)-1])
		if err != nil {
			return nil, err
		}
		var sum Summary
		if err := json.Unmarshal(data, &sum); err != nil {
			return nil, fmt.Errorf("%s: %w", runs[len(runs)-1], err)
		}
		out = append(out, &sum)
	}
	return out, nil
}

// headlineRows are the table's rows: a policy measured on a metric.
var headlineRows = []struct{ policy, metric string }{
	{"Random", MetricCarbon}, {"Random", MetricLatency},
	{"Eco", MetricCarbon}, {"Latency", MetricLatency},
	{"Standard", MetricCarbon}, {"Standard", MetricLatency},
	{"Weighted", MetricCarbon}, {"Weighted", MetricLatency},
}

// HeadlineTable is the reference's headline table, ours: per policy and
// metric, the multiple of the achievable minimum at each scale
// (consumers × providers), then every suite's wall time.
func HeadlineTable(sums []*Summary) string {
	type scale struct{ c, p int }
	var scales []scale
	for _, s := range sums {
		if sc := (scale{s.Consumers, s.Providers}); !slices.Contains(scales, sc) {
			scales = append(scales, sc)
		}
	}
	slices.SortFunc(scales, func(a, b scale) int { return cmp.Or(cmp.Compare(a.c, b.c), cmp.Compare(a.p, b.p)) })
	var b strings.Builder
	b.WriteString("| policy | measured on |")
	for _, sc := range scales {
		fmt.Fprintf(&b, " %d×%d |", sc.c, sc.p)
	}
	b.WriteString("\n|---|---|" + strings.Repeat("---|", len(scales)) + "\n")
	for _, row := range headlineRows {
		fmt.Fprintf(&b, "| %s | %s |", row.policy, row.metric)
		for _, sc := range scales {
			cell := "—"
			for _, s := range sums {
				if s.Consumers != sc.c || s.Providers != sc.p || s.Metric != row.metric {
					continue
				}
				for _, p := range s.Phases {
					if p.Policy == row.policy && p.Selections > 0 {
						cell = fmt.Sprintf("%.2f×", p.Multiple)
						if p.Replay != nil && !p.Replay.Valid {
							cell += " (refused: replay)"
						}
					}
				}
			}
			b.WriteString(" " + cell + " |")
		}
		b.WriteString("\n")
	}
	b.WriteString("\n| suite | scale | mode | wall time | load average |\n|---|---|---|---|---|\n")
	slices.SortFunc(sums, func(x, y *Summary) int {
		return cmp.Or(cmp.Compare(x.Consumers, y.Consumers), strings.Compare(x.Metric, y.Metric))
	})
	for _, s := range sums {
		fmt.Fprintf(&b, "| %s | %d×%d | %s | %.0f s | %s |\n", s.Suite, s.Consumers, s.Providers, s.Mode, s.WallTime, s.LoadAvg)
	}
	return b.String()
}
