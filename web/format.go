package web

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

const dash = "—"

// ago renders the age of t relative to now ("4s ago", "3m ago", "never").
func ago(now, t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	d := now.Sub(t)
	switch {
	case d < 0:
		return "just now"
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	default:
		return fmt.Sprintf("%dd ago", int(d.Hours()/24))
	}
}

func clockTime(t time.Time) string {
	if t.IsZero() {
		return dash
	}
	return t.UTC().Format("15:04:05")
}

func location(city, region string) string {
	switch {
	case city != "" && region != "":
		return city + ", " + region
	case city != "":
		return city
	case region != "":
		return region
	}
	return dash
}

func topologyLocation(t *api.Topology) string {
	if t == nil {
		return dash
	}
	return location(t.City, t.Region)
}

// resources renders a ResourceList as "cpu 2 · memory 4Gi", sorted.
func resources(rl corev1.ResourceList) string {
	if len(rl) == 0 {
		return dash
	}
	keys := make([]string, 0, len(rl))
	for k := range rl {
		keys = append(keys, string(k))
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		q := rl[corev1.ResourceName(k)]
		parts = append(parts, k+" "+q.String())
	}
	return strings.Join(parts, " · ")
}

func money(v float64) string {
	return fmt.Sprintf("%.4f", v)
}

// perHour renders a cost per hour ("0.0280 /h"); nil is "unpriced" (a
// resource without a price), never 0.
func perHour(v *float64) string {
	if v == nil {
		return "unpriced"
	}
	return money(*v) + " /h"
}

func carbon(v *float64) string {
	if v == nil {
		return dash
	}
	return fmt.Sprintf("%.0f g/kWh", *v)
}

func millis(v float64) string {
	if math.IsNaN(v) || v < 0 {
		return dash
	}
	return fmt.Sprintf("%.1f ms", v)
}

func sharingSummary(s *api.Sharing) string {
	if s == nil {
		return "everyone"
	}
	var parts []string
	if len(s.AllowedConsumers) > 0 {
		parts = append(parts, "only "+strings.Join(s.AllowedConsumers, ", "))
	}
	if len(s.DeniedConsumers) > 0 {
		parts = append(parts, "not "+strings.Join(s.DeniedConsumers, ", "))
	}
	if s.MaxChunksPerConsumer > 0 {
		parts = append(parts, fmt.Sprintf("≤%d chunks each", s.MaxChunksPerConsumer))
	}
	if len(parts) == 0 {
		return "everyone"
	}
	return strings.Join(parts, "; ")
}

func policyLabel(configured api.PlacementType, applied api.PlacementType) string {
	if configured == "" {
		configured = api.PlacementStandard
	}
	if applied != "" && applied != configured {
		return string(configured) + " (applied: " + string(applied) + ")"
	}
	return string(configured)
}

func phaseClass(p api.Phase) string {
	switch p {
	case api.PhasePeered:
		return "ok"
	case api.PhaseFailed, api.PhaseExpired:
		return "bad"
	case api.PhaseReleased:
		return ""
	default:
		return "warn"
	}
}

func chunksLabel(n int32, t api.ChunkType) string {
	if t == "" {
		t = api.ChunkStandard
	}
	return fmt.Sprintf("%d × %s", n, t)
}
