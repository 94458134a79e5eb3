package web

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/web/views"
)

// ExplanationSource is an optional interface of an OverviewSource (the
// broker's domain implements it): every consumer's placement explanation,
// as the operator sees it. The dashboard reads it only while a page is
// rendered, and only when the source's Version moved (when it is
// Versioned). A list handed out is never modified afterwards, and while
// nothing it explains changed the source may hand the same list (the same
// slice) out again: the dashboard re-renders the explanations only when
// it gets another list.
type ExplanationSource interface {
	Explanations(ctx context.Context) ([]api.PlacementExplanation, error)
}

// Rows of one chunk type's candidates each view shows; the rest are
// counted ("and 12 more: 3 eligible, 9 filtered").
const (
	// DashboardWhyRows bounds the dashboard, which shows every consumer.
	DashboardWhyRows = 8
	// ConsoleWhyRows bounds the consumer console, which shows one.
	ConsoleWhyRows = 50
)

// explainMetric returns the header of the candidates' metric column and
// the rendering of a value (nil: the provider lacks the metric).
func explainMetric(m api.ExplainMetric, cur string) (header string, value func(*float64) string) {
	missing := "—"
	var f func(float64) string
	switch m {
	case api.MetricCost:
		header, missing, f = "Cost per chunk", "unpriced", func(v float64) string { return perHour(cur, v) }
	case api.MetricCarbon:
		header, missing, f = "Carbon, weighted", "no carbon data", func(v float64) string { return fmt.Sprintf("%.0f g/kWh", v) }
	case api.MetricDistance:
		header, missing, f = "Distance", "no coordinates", func(v float64) string { return fmt.Sprintf("%.0f km", v) }
	case api.MetricWeightedScore:
		header, f = "Score (lower wins)", func(v float64) string { return "score " + strconv.FormatFloat(v, 'f', 3, 64) }
	default:
		header, f = "Score (higher wins)", func(v float64) string { return "score " + strconv.FormatFloat(v, 'f', 3, 64) }
	}
	return header, func(v *float64) string {
		if v == nil {
			return missing
		}
		return f(*v)
	}
}

// marginText renders a margin in the metric's unit ("0.0280 EUR/h").
func marginText(m api.ExplainMetric, cur string, v float64) string {
	_, value := explainMetric(m, cur)
	s := value(&v)
	return strings.TrimPrefix(s, "score ")
}

// filterReason says in words why a candidate cannot be chosen.
func filterReason(c api.PlacementCandidate) string {
	switch {
	case c.Outcome == api.OutcomeBlocking:
		return "full for this cluster, and a peering of it is in flight there: the autoscaler waits for it"
	case c.Filter == api.FilterDenied:
		return "denies this cluster"
	case c.Filter == api.FilterNotAllowed:
		return "lends only to other clusters"
	case c.Filter == api.FilterQuota:
		return "this cluster holds the provider's per-consumer quota"
	case c.Filter == api.FilterFull:
		return "no free chunk"
	case c.Filter == api.FilterStale:
		return "stale: no recent advertisement"
	}
	return ""
}

func outcomeClass(o api.CandidateOutcome) string {
	switch o {
	case api.OutcomeWinner:
		return "ok"
	case api.OutcomeBlocking:
		return "warn"
	case api.OutcomeFiltered:
		return "bad"
	}
	return ""
}

// whySummary is one chunk type's decision in a sentence.
func whySummary(policy api.PlacementType, m api.ExplainMetric, cur string, te api.ChunkTypeExplanation) string {
	_, value := explainMetric(m, cur)
	metricOf := func(id string) string {
		for _, c := range te.Candidates {
			if c.ProviderClusterID == id {
				return value(c.Metric)
			}
		}
		return ""
	}
	switch {
	case te.BlockedBy != "":
		return fmt.Sprintf("Nothing is growable now: %s ranks first but is full, and a peering of this cluster there is still in flight; the autoscaler waits for it.", te.BlockedBy)
	case len(te.Winners) == 0:
		return "Nothing is growable now: no provider has room for this cluster."
	}
	var b strings.Builder
	switch {
	case policy == api.PlacementChoice:
		// Every provider with room is growable; the consumer agent's
		// selector picks (docs/placement.md), its fallback by score.
		return fmt.Sprintf("Candidates: %s, every provider with room (the consumer's model picks among them; its fallback is the lowest score, %s with %s).",
			strings.Join(te.Winners, ", "), te.Winners[0], metricOf(te.Winners[0]))
	case len(te.Winners) > 1:
		fmt.Fprintf(&b, "Shortlisted: %s (the consumer picks by measured RTT).", strings.Join(te.Winners, ", "))
	default:
		fmt.Fprintf(&b, "%s wins with %s.", te.Winners[0], metricOf(te.Winners[0]))
	}
	switch {
	case te.RunnerUp == "":
		b.WriteString(" No other provider has room for this cluster.")
	case te.Margin != nil:
		fmt.Fprintf(&b, " Runner-up %s (%s), margin %s.", te.RunnerUp, metricOf(te.RunnerUp), marginText(m, cur, *te.Margin))
	default:
		fmt.Fprintf(&b, " Runner-up %s (%s).", te.RunnerUp, metricOf(te.RunnerUp))
	}
	return b.String()
}

// buildWhy renders an explanation with at most maxRows candidates per
// chunk type.
func buildWhy(ex api.PlacementExplanation, cur string, maxRows int) views.Why {
	header, value := explainMetric(ex.Metric, cur)
	w := views.Why{Consumer: ex.ConsumerClusterID, Policy: "Policy " + string(ex.AppliedPlacement), Metric: header}
	if ex.Weights != nil {
		ws := ex.Weights
		w.Policy += fmt.Sprintf(" (weights price %g, carbon %g, distance %g, free capacity %g)", ws.Price, ws.Carbon, ws.Distance, ws.FreeCapacity)
	}
	if ex.NotSharing > 0 {
		w.NotSharing = fmt.Sprintf("%d provider(s) do not share with this cluster", ex.NotSharing)
		if ex.NotSharing == 1 {
			w.NotSharing = "1 provider does not share with this cluster"
		}
	}
	for _, te := range ex.ChunkTypes {
		wt := views.WhyType{Type: string(te.ChunkType), Summary: whySummary(ex.AppliedPlacement, ex.Metric, cur, te)}
		shown := te.Candidates
		if len(shown) > maxRows {
			shown = shown[:maxRows]
			var eligible, filtered int
			for _, c := range te.Candidates[maxRows:] {
				if c.Outcome == api.OutcomeFiltered || c.Outcome == api.OutcomeBlocking {
					filtered++
				} else {
					eligible++
				}
			}
			wt.More = fmt.Sprintf("and %d more: %d eligible, %d filtered out", len(te.Candidates)-maxRows, eligible, filtered)
		}
		for _, c := range shown {
			row := views.WhyRow{
				Rank: dash, Provider: c.ProviderClusterID, Metric: value(c.Metric),
				Outcome: string(c.Outcome), Class: outcomeClass(c.Outcome), Reason: filterReason(c),
				Room: fmt.Sprintf("%d of %d free", c.FreeChunks, c.TotalChunks),
			}
			if c.Rank > 0 {
				row.Rank = strconv.Itoa(int(c.Rank))
				row.Room = fmt.Sprintf("%d more (%d of %d free)", c.HeadRoom, c.FreeChunks, c.TotalChunks)
			}
			wt.Rows = append(wt.Rows, row)
		}
		w.Types = append(w.Types, wt)
	}
	return w
}

// largestChunk is the biggest chunk shape among the offered node groups
// (most cpu, then most memory), rendered "cpu 2, memory 4Gi".
func largestChunk(groups []api.NodeGroupView) string {
	var best corev1.ResourceList
	for _, g := range groups {
		s := g.ChunkResources
		if len(s) == 0 {
			continue
		}
		if best == nil {
			best = s
			continue
		}
		c := s.Cpu().Cmp(*best.Cpu())
		if c > 0 || (c == 0 && s.Memory().Cmp(*best.Memory()) > 0) {
			best = s
		}
	}
	return strings.ReplaceAll(resources(best), " · ", ", ")
}

// unfitRows explains the pending pods no chunk fits.
func unfitRows(st ConsumerStatus) []views.UnfitRow {
	if len(st.UnfitPods) == 0 {
		return nil
	}
	why := "no node group can fit this pod: largest chunk " + largestChunk(st.NodeGroups)
	out := make([]views.UnfitRow, 0, len(st.UnfitPods))
	for _, p := range st.UnfitPods {
		req := corev1.ResourceList{}
		for name, q := range p.Requests {
			if name == corev1.ResourceCPU || name == corev1.ResourceMemory || strings.Contains(string(name), "/") {
				req[name] = q
			}
		}
		out = append(out, views.UnfitRow{Pod: p.Namespace + "/" + p.Name, Requests: strings.ReplaceAll(resources(req), " · ", ", "), Reason: why})
	}
	return out
}
