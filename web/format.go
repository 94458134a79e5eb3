package web

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/placement"
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
	// As t.UTC().Format("15:04:05"), without parsing the layout: the live
	// dashboard writes one per row.
	h, m, s := t.UTC().Clock()
	b := [8]byte{byte('0' + h/10), byte('0' + h%10), ':', byte('0' + m/10), byte('0' + m%10), ':', byte('0' + s/10), byte('0' + s%10)}
	return string(b[:])
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

// DefaultCurrency is the currency prices are shown in when the options name
// none. Placement compares prices as plain numbers, so a federation prices
// in one currency; the flag --currency of the broker and the agents names
// it for the pages.
const DefaultCurrency = "EUR"

var currencyCode = regexp.MustCompile(`^[A-Z]{3}$`)

// checkCurrency accepts an ISO 4217 code ("" means DefaultCurrency).
func checkCurrency(c string) (string, error) {
	if c == "" {
		return DefaultCurrency, nil
	}
	if !currencyCode.MatchString(c) {
		return "", fmt.Errorf("web: currency %s is not an ISO 4217 code: write three capital letters such as EUR, USD or CHF", api.ShowString(c))
	}
	return c, nil
}

// money renders v with four decimals (as %.4f; strconv: the live
// dashboard formats hundreds of these per publication).
func money(v float64) string {
	return strconv.FormatFloat(v, 'f', 4, 64)
}

// gramsPerHour renders a carbon rate with one decimal ("12.5 g/h").
func gramsPerHour(v float64) string {
	return strconv.FormatFloat(v, 'f', 1, 64) + " g/h"
}

// perHour renders a cost per hour with its currency ("0.0280 EUR/h").
func perHour(cur string, v float64) string {
	return money(v) + " " + cur + "/h"
}

// pricePerHour is perHour with nil for "unpriced" (a resource without a
// price), never 0.
func pricePerHour(cur string, v *float64) string {
	if v == nil {
		return "unpriced"
	}
	return perHour(cur, *v)
}

// quantityPerHour renders a node group's cost (the wire's Quantity text,
// such as "48m") as money per hour; "" is "unpriced".
func quantityPerHour(cur, q string) string {
	if q == "" {
		return "unpriced"
	}
	v, err := resource.ParseQuantity(q)
	if err != nil {
		return dash
	}
	f, err := strconv.ParseFloat(v.AsDec().String(), 64)
	if err != nil {
		return dash
	}
	return perHour(cur, f)
}

// metricColumn is the header of the node groups' metric column and the
// rendering of one value under the applied policy (docs/placement.md):
// Price stamps the cost per chunk, Eco the weighted carbon intensity,
// Latency the distance, Weighted a score; Standard stamps none.
func metricColumn(p api.PlacementType, cur string) (header string, value func(float64) string) {
	switch p {
	case api.PlacementPrice:
		return "Cost per chunk", func(v float64) string { return perHour(cur, v) }
	case api.PlacementEco:
		return "Carbon, weighted", func(v float64) string { return fmt.Sprintf("%.0f g/kWh", v) }
	case api.PlacementLatency:
		return "Distance", func(v float64) string { return fmt.Sprintf("%.0f km", v) }
	case api.PlacementWeighted:
		return "Score (lower wins)", func(v float64) string { return "score " + strconv.FormatFloat(v, 'f', 3, 64) }
	case api.PlacementChoice:
		return "Fallback score (lower wins)", func(v float64) string { return "score " + strconv.FormatFloat(v, 'f', 3, 64) }
	}
	return "Metric", func(float64) string { return dash }
}

func carbon(v *float64) string {
	if v == nil {
		return dash
	}
	return strconv.FormatFloat(*v, 'f', 0, 64) + " g/kWh"
}

func millis(v float64) string {
	if math.IsNaN(v) || v < 0 {
		return dash
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + " ms"
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

// phaseLabel is a reservation's phase as the pages show it, with the
// disconnect grace when its provider is gone: "Peered, provider
// disconnected, grace until 14:03:10", amber.
func phaseLabel(p api.Phase, graceUntil *time.Time) (label, class string) {
	if graceUntil == nil {
		return string(p), phaseClass(p)
	}
	return string(p) + ", provider disconnected, grace until " + clockTime(*graceUntil), "warn"
}

func chunksLabel(n int32, t api.ChunkType) string {
	if t == "" {
		t = api.ChunkStandard
	}
	return fmt.Sprintf("%d × %s", n, t)
}

// groupUse renders a node group's use by this consumer: "1 of 4 chunks"
// for the growable group; a group the policy masks (maxSize =
// currentReserved) says so instead of "0 / 0".
func groupUse(g api.NodeGroupView) string {
	switch {
	case g.MaxSize > g.CurrentReserved:
		return fmt.Sprintf("%d of %d chunks", g.CurrentReserved, g.MaxSize)
	case g.CurrentReserved > 0:
		return fmt.Sprintf("%d held · masked by policy", g.CurrentReserved)
	}
	return "masked by policy"
}

// maskedUse is groupUse of g as the consumer's masked view has it (what
// the Cluster Autoscaler sees): a group the view leaves out, or whose
// maxSize it lowered to what is held, is masked by the policy. Without a
// masked view (nil) g's own sizes are shown.
func maskedUse(g api.NodeGroupView, masked []api.NodeGroupView) string {
	if masked == nil {
		return groupUse(g)
	}
	for _, m := range masked {
		if m.ID == g.ID {
			return groupUse(m)
		}
	}
	g.MaxSize = g.CurrentReserved
	return groupUse(g)
}

// chunkCost is a provider's cost per chunk for the dashboard: the broker's
// costPerChunk, which it leaves out both for a free provider and for an
// unpriced one; false (shown "unpriced", never 0) when no chunk type of
// the provider is priced by placement.CostPerChunk's rule.
func chunkCost(a api.AdvertisementSnapshot, sizes map[api.ChunkType]corev1.ResourceList) (float64, bool) {
	if a.CostPerChunk > 0 {
		return a.CostPerChunk, true
	}
	for _, size := range sizes {
		if _, ok := placement.CostPerChunk(a.UnitPrices, size); ok {
			return 0, true
		}
	}
	return 0, false
}

// rttList renders measured RTTs per provider, sorted by provider
// ("milan 12.3 ms · paris 80.1 ms"); "not measured" when there are none.
func rttList(m map[string]float64) string {
	if len(m) == 0 {
		return "not measured"
	}
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	parts := make([]string, 0, len(ids))
	for _, id := range ids {
		parts = append(parts, id+" "+millis(m[id]))
	}
	return strings.Join(parts, " · ")
}
