package uitest

// The field audit of issue #12: every field of the dashboard and both
// consoles compared with the broker's state (GET /api/v1/overview, the
// explanations) and the consumer agent's (its local API), read here, after
// each scenario of TestBrowser. docs/ui.md, "Field audit", lists which check
// compares which field.

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/playwright-community/playwright-go"
	corev1 "k8s.io/api/core/v1"

	"github.com/federation-autoscaler/federation-autoscaler/adapter/localapi"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/placement"
)

// readTables returns every table of the page under root (a CSS selector)
// by its data-testid: its rows (those with cells), each as its cells'
// text, with the row's data-* attributes under "@name".
const readTables = `(root) => {
	const txt = (el) => (el ? el.textContent.replace(/\s+/g, ' ').trim() : '');
	const out = {};
	document.querySelectorAll(root + ' table[data-testid]').forEach((t) => {
		const rows = [];
		t.querySelectorAll('tbody tr').forEach((tr) => {
			const r = {cells: [...tr.querySelectorAll('td')].map(txt), data: {...tr.dataset}, title: tr.getAttribute('title') || ''};
			rows.push(r);
		});
		out[t.dataset.testid] = rows;
	});
	const kv = {};
	document.querySelectorAll(root + ' dl.kv dt').forEach((dt) => { kv[txt(dt)] = txt(dt.nextElementSibling); });
	const stats = {};
	document.querySelectorAll(root + ' .stat').forEach((s) => { stats[txt(s.querySelector('.l'))] = txt(s.querySelector('.n')); });
	const ids = {};
	document.querySelectorAll(root + ' [data-testid]').forEach((el) => { if (el.tagName !== 'TABLE') { ids[el.dataset.testid] = txt(el); } });
	return JSON.stringify({tables: out, kv: kv, stats: stats, ids: ids});
}`

type shownRow struct {
	Cells []string          `json:"cells"`
	Data  map[string]string `json:"data"`
	Title string            `json:"title"`
}

type shownPage struct {
	Tables map[string][]shownRow `json:"tables"`
	KV     map[string]string     `json:"kv"`
	Stats  map[string]string     `json:"stats"`
	IDs    map[string]string     `json:"ids"`
}

// empty reports whether a table shows only its "empty" placeholder.
func (p shownPage) rows(table string) []shownRow {
	var out []shownRow
	for _, r := range p.Tables[table] {
		if len(r.Cells) > 1 {
			out = append(out, r)
		}
	}
	return out
}

func readPage(u *ui, p playwright.Page, root string) shownPage {
	u.t.Helper()
	raw, err := p.Evaluate(readTables, root)
	u.ok(err, "read the page")
	var s shownPage
	u.ok(json.Unmarshal([]byte(raw.(string)), &s), "decode the page")
	return s
}

// Formatting of the broker's values as the pages show them (docs/ui.md,
// Units).
// The functions from eur to chunksText, useText and nodeState say, from
// the broker's and the agents' own data, what each cell must read. They
// are the audit's specification of the wording (docs/ui.md), written
// apart from the pages' formatters on purpose: some repeat a formatter
// line for line (sharingText is web's sharingSummary), and calling the
// formatter instead would make the audit compare the pages with
// themselves, blind to a formatter that shows the wrong value or unit.
func eur(v float64) string { return fmt.Sprintf("%.4f EUR/h", v) }

func gkwh(v *float64) string {
	if v == nil {
		return "—"
	}
	return fmt.Sprintf("%.0f g/kWh", *v)
}

func locationText(city, region string) string {
	switch {
	case city != "" && region != "":
		return city + ", " + region
	case city != "":
		return city
	case region != "":
		return region
	}
	return "—"
}

func topoText(t *api.Topology) string {
	if t == nil {
		return "—"
	}
	return locationText(t.City, t.Region)
}

func sharingText(s *api.Sharing) string {
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

func resourcesText(rl corev1.ResourceList) string {
	if len(rl) == 0 {
		return "—"
	}
	var parts []string
	for k, q := range rl {
		parts = append(parts, string(k)+" "+q.String())
	}
	sort.Strings(parts)
	return strings.Join(parts, " · ")
}

// priceText is a provider's price per chunk by the broker's rule: its
// costPerChunk, else 0 when some chunk type is priced (free), else
// unpriced.
func priceText(a api.AdvertisementSnapshot, sizes map[api.ChunkType]corev1.ResourceList) string {
	if a.CostPerChunk > 0 {
		return eur(a.CostPerChunk)
	}
	for _, size := range sizes {
		if _, ok := placement.CostPerChunk(a.UnitPrices, size); ok {
			return eur(0)
		}
	}
	return "unpriced"
}

func policyText(c api.OverviewConsumer) string {
	configured := placementOf(c)
	if c.AppliedPlacement != "" && c.AppliedPlacement != configured {
		return string(configured) + " (applied: " + string(c.AppliedPlacement) + ")"
	}
	return string(configured)
}

func rttText(m map[string]float64) string {
	if len(m) == 0 {
		return "not measured"
	}
	var parts []string
	for id, ms := range m {
		parts = append(parts, fmt.Sprintf("%s %.1f ms", id, ms))
	}
	sort.Strings(parts)
	return strings.Join(parts, " · ")
}

func phaseText(r api.OverviewReservation) string {
	if r.GraceUntil != nil {
		return string(r.Status) + ", provider disconnected, grace until " + r.GraceUntil.UTC().Format("15:04:05")
	}
	return string(r.Status)
}

func chunksText(n int32, t api.ChunkType) string {
	if t == "" {
		t = api.ChunkStandard
	}
	return fmt.Sprintf("%d × %s", n, t)
}

// ageOK: an age ("4s ago", "3m ago") shown for t is within slack of now;
// the pages refresh ages every few seconds.
func ageOK(shown string, t time.Time, slack time.Duration) bool {
	if t.IsZero() {
		return shown == "never"
	}
	age := time.Since(t)
	if shown == "just now" {
		return age < slack
	}
	n, unit := 0, ""
	if _, err := fmt.Sscanf(shown, "%d%s", &n, &unit); err != nil {
		return false
	}
	var d time.Duration
	switch unit {
	case "s":
		d = time.Duration(n) * time.Second
	case "m":
		d = time.Duration(n) * time.Minute
		slack += time.Minute
	case "h":
		d = time.Duration(n) * time.Hour
		slack += time.Hour
	default:
		return false
	}
	return strings.HasSuffix(shown, " ago") && math.Abs(float64(age-d)) <= float64(slack)
}

// reservationsOf are the broker's live reservations, optionally of one
// consumer, as "id|consumer|provider|chunks|phase".
func liveReservations(ov api.Overview) []string {
	var out []string
	for _, r := range ov.Reservations {
		if r.Status.Terminal() {
			continue
		}
		out = append(out, strings.Join([]string{r.ReservationID, r.ConsumerClusterID, r.ProviderClusterID, chunksText(r.ChunkCount, r.ChunkType), phaseText(r)}, "|"))
	}
	slices.Sort(out)
	return out
}

// expectDashboardTruth: the dashboard's capacity (stats and chunk types),
// providers, consumers, reservations and moves are the broker's.
func expectDashboardTruth(u *ui, tg *Target, dash playwright.Page) {
	u.t.Helper()
	pollTruth(u, tg, "the dashboard's tables", func(ov api.Overview) string {
		s := readPage(u, dash, "#live")
		return dashboardProblem(ov, s)
	})
}

func dashboardProblem(ov api.Overview, s shownPage) string {
	cp := ov.Capacity
	stats := map[string]string{
		"chunks in total":     strconv.Itoa(int(cp.TotalChunks)),
		"chunks reserved":     strconv.Itoa(int(cp.ReservedChunks)),
		"chunks free":         strconv.Itoa(int(cp.AvailableChunks)),
		"providers available": fmt.Sprintf("%d / %d", cp.AvailableProviderCount, cp.ProviderCount),
		"consumers":           strconv.Itoa(len(ov.Consumers)),
	}
	for l, want := range stats {
		if got := s.Stats[l]; got != want {
			return fmt.Sprintf("the dashboard says %q %s, the broker %q", got, l, want)
		}
	}
	var wantTypes, gotTypes []string
	for t, c := range cp.ByChunkType {
		wantTypes = append(wantTypes, fmt.Sprintf("%s|%s|%d|%d|%d", t, resourcesText(cp.ChunkSizes[t]), c.TotalChunks, c.ReservedChunks, c.AvailableChunks))
	}
	for _, r := range s.rows("chunk-types") {
		gotTypes = append(gotTypes, strings.Join(r.Cells, "|"))
	}
	slices.Sort(wantTypes)
	if !slices.Equal(gotTypes, wantTypes) {
		return fmt.Sprintf("the chunk types read %v, the broker has %v", gotTypes, wantTypes)
	}

	provRows := map[string]shownRow{}
	for _, r := range s.rows("providers") {
		provRows[r.Data["provider"]] = r
	}
	if len(provRows) != len(ov.Advertisements) {
		return fmt.Sprintf("%d provider rows, the broker has %d advertisements", len(provRows), len(ov.Advertisements))
	}
	for _, a := range ov.Advertisements {
		r, ok := provRows[a.ClusterID]
		if !ok || len(r.Cells) != 8 {
			return "no row of provider " + a.ClusterID
		}
		co2 := gkwh(a.CarbonWeighted)
		if a.CarbonWeighted == nil && a.CarbonIntensity != nil {
			co2 = gkwh(a.CarbonIntensity) + " now"
		}
		if a.Renewable {
			co2 += " renewable"
		}
		state := "available"
		switch {
		case !a.Available && a.GraceUntil != nil:
			state = "disconnected, grace until " + a.GraceUntil.UTC().Format("15:04:05")
		case !a.Available:
			state = "unavailable"
		}
		want := []string{a.ClusterID, topoText(a.Topology), priceText(a, cp.ChunkSizes), co2, sharingText(a.Sharing),
			fmt.Sprintf("%d / %d / %d", a.AvailableChunks, a.ReservedChunks, a.ChunkCount), r.Cells[6], state}
		if !slices.Equal(r.Cells, want) {
			return fmt.Sprintf("provider %s reads %q, the broker says %q", a.ClusterID, r.Cells, want)
		}
		if !ageOK(r.Cells[6], a.LastSeen.Time, 10*time.Second) {
			return fmt.Sprintf("provider %s's freshness reads %q, its last advertisement is %v old", a.ClusterID, r.Cells[6], time.Since(a.LastSeen.Time).Round(time.Second))
		}
	}

	consRows := map[string]shownRow{}
	for _, r := range s.rows("consumers") {
		consRows[r.Data["consumer"]] = r
	}
	if len(consRows) != len(ov.Consumers) {
		return fmt.Sprintf("%d consumer rows, the broker has %d consumers", len(consRows), len(ov.Consumers))
	}
	for _, c := range ov.Consumers {
		r, ok := consRows[c.ClusterID]
		if !ok || len(r.Cells) != 8 {
			return "no row of consumer " + c.ClusterID
		}
		chosen := c.ChosenProvider
		if chosen == "" {
			chosen = "none growable now"
		}
		budget, saved := "none", "—"
		if c.Budget != nil {
			budget = r.Cells[5] // the budget's words: unit-tested (web TestBudget…); the demo sets none
		}
		if c.Savings != nil {
			saved = r.Cells[7] // unit-tested (web savingsLabel); the uitest demo runs without migration
		}
		want := []string{c.ClusterID, locationText(c.City, c.Region), policyText(c), chosen, rttText(c.MeasuredLatencies), budget, r.Cells[6], saved}
		if !slices.Equal(r.Cells, want) {
			return fmt.Sprintf("consumer %s reads %q, the broker says %q", c.ClusterID, r.Cells, want)
		}
		if !ageOK(r.Cells[6], c.LastSeen.Time, 10*time.Second) {
			return fmt.Sprintf("consumer %s's last heartbeat reads %q, the broker's is %v old", c.ClusterID, r.Cells[6], time.Since(c.LastSeen.Time).Round(time.Second))
		}
	}

	var gotRes []string
	for _, r := range s.rows("reservations") {
		if len(r.Cells) < 5 {
			continue
		}
		gotRes = append(gotRes, strings.Join([]string{r.Data["reservation"], r.Cells[1], r.Cells[2], r.Cells[3], r.Cells[4]}, "|"))
		if r.Cells[0] != r.Data["reservation"] {
			return fmt.Sprintf("reservation row %s shows id %q", r.Data["reservation"], r.Cells[0])
		}
	}
	slices.Sort(gotRes)
	if want := liveReservations(ov); !slices.Equal(gotRes, want) {
		return fmt.Sprintf("the reservations read %v, the broker's live ones are %v", gotRes, want)
	}

	moves := 0
	for _, c := range ov.Consumers {
		moves += len(c.Migrations)
	}
	if got := len(s.rows("migrations")); got != moves {
		return fmt.Sprintf("%d moves listed, the broker has %d", got, moves)
	}
	return ""
}

// expectChartsTruth: each chart of the 5-minute range ends at the broker's
// value for every provider (reserved chunks, price per chunk — no line for
// an unpriced provider —, weighted carbon), at a sample of the last
// seconds, and the legend names the broker's providers. The charts are
// sampled every 5 s, so they may trail. The hour's charts are drawn once a
// minute (web chartCadence): their last points are at most a minute and a
// sample old.
func expectChartsTruth(u *ui, tg *Target, dash playwright.Page) {
	u.t.Helper()
	pollTruth(u, tg, "the dashboard's charts", func(ov api.Overview) string {
		raw, err := dash.Evaluate(`() => {
			const out = {};
			document.querySelectorAll('[data-testid^="chart-"]').forEach((f) => {
				out[f.dataset.testid] = [...f.querySelectorAll('circle:not(.hover) title')].map((t) => t.textContent.trim());
			});
			out.legend = [...document.querySelectorAll('.legend span')].map((s) => s.textContent.trim());
			return JSON.stringify(out);
		}`)
		u.ok(err, "read the charts")
		var got map[string][]string
		u.ok(json.Unmarshal([]byte(raw.(string)), &got), "decode the charts")
		var reserved, price, co2, legend []string
		for _, a := range ov.Advertisements {
			legend = append(legend, a.ClusterID)
			reserved = append(reserved, fmt.Sprintf("%s: %d chunks", a.ClusterID, a.ReservedChunks))
			if p := priceText(a, ov.Capacity.ChunkSizes); p != "unpriced" {
				price = append(price, fmt.Sprintf("%s: %s", a.ClusterID, p))
			}
			c := a.CarbonWeighted
			if c == nil {
				c = a.CarbonIntensity
			}
			if c != nil {
				co2 = append(co2, fmt.Sprintf("%s: %s", a.ClusterID, gkwh(c)))
			}
		}
		for _, w := range []struct {
			id   string
			want []string
		}{{"chart-reserved-5m", reserved}, {"chart-price-5m", price}, {"chart-carbon-5m", co2}, {"legend", legend}} {
			var g []string
			for _, title := range got[w.id] {
				if w.id != "legend" {
					value, old := lastPoint(title, 20*time.Second)
					if old != "" {
						return w.id + ": " + old
					}
					title = value
				}
				g = append(g, title)
			}
			slices.Sort(g)
			slices.Sort(w.want)
			if !slices.Equal(g, w.want) {
				return fmt.Sprintf("%s ends at %v, the broker has %v", w.id, g, w.want)
			}
		}
		for _, id := range []string{"chart-reserved-1h", "chart-price-1h", "chart-carbon-1h"} {
			if len(got[id]) != len(got[strings.TrimSuffix(id, "1h")+"5m"]) {
				return fmt.Sprintf("%s has %d lines, the 5-minute range %d", id, len(got[id]), len(got[strings.TrimSuffix(id, "1h")+"5m"]))
			}
			for _, title := range got[id] {
				if _, old := lastPoint(title, 80*time.Second); old != "" {
					return id + ": " + old
				}
			}
		}
		return ""
	})
}

// lastPoint splits a chart line's last point's title ("paris: 2 chunks at
// 13:05:10") into its value ("paris: 2 chunks") and says why its time is
// not within maxAge of now ("" when it is).
func lastPoint(title string, maxAge time.Duration) (value, old string) {
	i := strings.LastIndex(title, " at ")
	if i < 0 {
		return title, fmt.Sprintf("the last point %q has no time", title)
	}
	at, err := time.Parse("15:04:05", title[i+4:])
	if err != nil {
		return title, fmt.Sprintf("the last point %q has no time: %v", title, err)
	}
	now := time.Now().UTC()
	day := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	age := now.Sub(day.Add(at.Sub(time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC))))
	if age < -12*time.Hour {
		age += 24 * time.Hour // the point is from before midnight
	}
	if age < -2*time.Second || age > maxAge {
		return title[:i], fmt.Sprintf("the last point %q is %v old, want at most %v", title, age.Round(time.Second), maxAge)
	}
	return title[:i], ""
}

// expectProviderConsoleFacts: provider id's console shows the location,
// coordinates, carbon and the capacity of the advertisement the broker
// holds, and each loan's phase (expectProviderConsoleTruth compares the
// loans, chunks and prices).
func expectProviderConsoleFacts(u *ui, tg *Target, p playwright.Page, id string) {
	u.t.Helper()
	expectProviderConsoleTruth(u, tg, p, id)
	pollTruth(u, tg, "the provider console's facts of "+id, func(ov api.Overview) string {
		s := readPage(u, p, "#provider-status")
		var a *api.AdvertisementSnapshot
		for i := range ov.Advertisements {
			if ov.Advertisements[i].ClusterID == id {
				a = &ov.Advertisements[i]
			}
		}
		if a == nil {
			return "the broker has no advertisement of " + id
		}
		coords := "—"
		if a.Topology != nil && a.Topology.HasCoordinates() {
			coords = fmt.Sprintf("%.4f, %.4f", a.Topology.Latitude, a.Topology.Longitude)
		}
		want := map[string]string{
			"Cluster":              id,
			"Coordinates":          coords,
			"Carbon intensity now": gkwh(a.CarbonIntensity),
			"Carbon, weighted 6 h": gkwh(a.CarbonWeighted),
		}
		for k, w := range want {
			if got := s.KV[k]; got != w {
				return fmt.Sprintf("%s reads %q, the broker holds %q", k, got, w)
			}
		}
		if loc := s.KV["Location"]; !strings.HasPrefix(loc, topoText(a.Topology)+" (") {
			return fmt.Sprintf("Location reads %q, the broker holds %q", loc, topoText(a.Topology))
		}
		if !ageOK(s.KV["Last advertisement"], a.LastSeen.Time, 10*time.Second) {
			return fmt.Sprintf("Last advertisement reads %q, the broker's is %v old", s.KV["Last advertisement"], time.Since(a.LastSeen.Time).Round(time.Second))
		}
		capShown := readPage(u, p, "#provider-status [data-testid=capacity]").KV
		capWant := map[string]string{}
		for k, q := range a.Resources {
			capWant[string(k)] = q.String()
		}
		if len(capWant) == 0 || !mapsEqual(capShown, capWant) {
			return fmt.Sprintf("Capacity advertised reads %v, the broker holds %v", capShown, capWant)
		}
		loans := readPage(u, p, "#provider-loans")
		for _, r := range loans.rows("loans") {
			for _, res := range ov.Reservations {
				if res.ReservationID != r.Data["reservation"] {
					continue
				}
				if len(r.Cells) < 5 || r.Cells[3] != string(res.Status) {
					return fmt.Sprintf("loan %s's phase reads %v, the broker's is %s", res.ReservationID, r.Cells, res.Status)
				}
				since := res.CreatedAt.Time
				if res.ActivatedAt != nil {
					since = res.ActivatedAt.Time
				}
				if !ageOK(r.Cells[4], since, 10*time.Second) {
					return fmt.Sprintf("loan %s is lent since %q, the broker's is %v ago", res.ReservationID, r.Cells[4], time.Since(since).Round(time.Second))
				}
			}
		}
		return ""
	})
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// agentView reads the consumer agent's local API: its masked node groups
// and its virtual nodes (ok false when the target has no local API).
func agentView(u *ui, tg *Target) (*api.NodeGroupListResponse, []localapi.VirtualNode, bool) {
	u.t.Helper()
	if tg.ConsumerLocalAPI == "" {
		return nil, nil, false
	}
	cl, err := localapi.NewClient(tg.ConsumerLocalAPI, nil)
	u.ok(err, "the consumer agent's local API client")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	groups, err := cl.NodeGroups(ctx)
	u.ok(err, "read the consumer agent's node groups")
	vns, err := cl.VirtualNodes(ctx)
	u.ok(err, "read the consumer agent's virtual nodes")
	return groups, vns, true
}

func useText(g api.NodeGroupView) string {
	switch {
	case g.MaxSize > g.CurrentReserved:
		return fmt.Sprintf("%d of %d chunks", g.CurrentReserved, g.MaxSize)
	case g.CurrentReserved > 0:
		return fmt.Sprintf("%d held · masked by policy", g.CurrentReserved)
	}
	return "masked by policy"
}

func nodeState(p localapi.Phase) string {
	switch p {
	case localapi.PhaseRunning:
		return "Ready"
	case localapi.PhaseDeleting:
		return "Terminating"
	case localapi.PhaseFailed:
		return "NotReady"
	}
	return "Pending"
}

// expectConsumerConsoleTruth: the consumer console's facts, RTTs, node
// groups (Used from the agent's masked view), reservations, virtual nodes,
// moves, budget and the providers that do not share with it are the
// broker's and the agent's (expectWhyTruth and expectConsoleTotalsTruth
// compare its explanation and totals).
func expectConsumerConsoleTruth(u *ui, tg *Target, consumer playwright.Page) {
	u.t.Helper()
	pollTruth(u, tg, "the consumer console", func(ov api.Overview) string {
		if len(ov.Consumers) != 1 {
			return fmt.Sprintf("the broker has %d consumers, want the demo's one", len(ov.Consumers))
		}
		c := ov.Consumers[0]
		s := readPage(u, consumer, "main")
		chosen := c.ChosenProvider
		if chosen == "" {
			chosen = "—"
		}
		for k, w := range map[string]string{"Cluster": c.ClusterID, "Policy": policyText(c), "Chosen provider": chosen} {
			if got := s.KV[k]; got != w {
				return fmt.Sprintf("the console's %s reads %q, the broker's %q", k, got, w)
			}
		}
		if loc := s.KV["Location"]; !strings.HasPrefix(loc, locationText(c.City, c.Region)+" (") {
			return fmt.Sprintf("the console's Location reads %q, the broker's %q", loc, locationText(c.City, c.Region))
		}
		if hb := s.KV["Last heartbeat"]; !ageOK(hb, c.LastSeen.Time, 10*time.Second) {
			return fmt.Sprintf("the console's last heartbeat reads %q, the broker's is %v old", hb, time.Since(c.LastSeen.Time).Round(time.Second))
		}
		// RTTs: the ones the agent's heartbeats report, as the dashboard.
		var gotRTT []string
		for _, r := range s.rows("rtts") {
			gotRTT = append(gotRTT, strings.Join(r.Cells, " "))
		}
		var wantRTT []string
		for p, ms := range c.MeasuredLatencies {
			w := fmt.Sprintf("%s %.1f ms", p, ms)
			if p == c.ChosenProvider {
				w = fmt.Sprintf("%s chosen %.1f ms", p, ms)
			}
			wantRTT = append(wantRTT, w)
		}
		slices.Sort(wantRTT)
		if !slices.Equal(gotRTT, wantRTT) {
			return fmt.Sprintf("the console's RTTs read %v, the broker has %v", gotRTT, wantRTT)
		}
		// Reservations: every live one of the broker's is listed with its
		// provider, chunks and phase; a listed one is the broker's.
		byID := map[string]api.OverviewReservation{}
		for _, r := range ov.Reservations {
			byID[r.ReservationID] = r
		}
		listed := map[string]bool{}
		for _, r := range s.rows("consumer-reservations") {
			id := r.Data["reservation"]
			listed[id] = true
			b, ok := byID[id]
			if !ok || b.ConsumerClusterID != c.ClusterID {
				return fmt.Sprintf("the console lists reservation %s, which the broker does not hold for %s", id, c.ClusterID)
			}
			if want := []string{id, b.ProviderClusterID, chunksText(b.ChunkCount, b.ChunkType), phaseText(b)}; !slices.Equal(r.Cells[:4], want) {
				return fmt.Sprintf("reservation %s reads %q, the broker says %q", id, r.Cells[:4], want)
			}
			if !ageOK(r.Cells[5], b.CreatedAt.Time, 10*time.Second) {
				return fmt.Sprintf("reservation %s was created %q, the broker's is %v old", id, r.Cells[5], time.Since(b.CreatedAt.Time).Round(time.Second))
			}
		}
		for _, r := range ov.Reservations {
			if r.ConsumerClusterID == c.ClusterID && !r.Status.Terminal() && !listed[r.ReservationID] {
				return fmt.Sprintf("the broker's live reservation %s is not listed", r.ReservationID)
			}
		}
		if got, want := s.IDs["consumer-saved"], "Saved by finished moves: —"; c.Savings == nil && got != want {
			return fmt.Sprintf("the console reads %q before any move", got)
		}
		if got := len(s.rows("consumer-migrations")); got != len(c.Migrations) {
			return fmt.Sprintf("the console lists %d moves, the broker %d", got, len(c.Migrations))
		}
		if _, shown := s.IDs["budget"]; shown != (c.Budget != nil) {
			return fmt.Sprintf("the console shows a budget: %v; the broker has one: %v", shown, c.Budget != nil)
		}
		// The agent's own view: Used follows its masked node groups, the
		// virtual nodes are its.
		groups, vns, ok := agentView(u, tg)
		if !ok {
			return ""
		}
		masked := map[string]api.NodeGroupView{}
		for _, g := range groups.NodeGroups {
			masked[g.ID] = g
		}
		seen := 0
		for _, r := range s.rows("groups") {
			g, ok := masked[r.Title]
			want := "masked by policy"
			if ok {
				seen++
				want = useText(g)
			}
			if ok && (r.Cells[0] != g.ProviderClusterID || r.Cells[1] != string(g.Type)) {
				return fmt.Sprintf("group %s reads %q, the agent has %s %s", r.Title, r.Cells, g.ProviderClusterID, g.Type)
			}
			if r.Cells[4] != want && !(want == "masked by policy" && strings.HasSuffix(r.Cells[4], "held · masked by policy")) {
				return fmt.Sprintf("group %s's Used reads %q, the agent's masked view says %q", r.Title, r.Cells[4], want)
			}
		}
		if seen != len(masked) {
			return fmt.Sprintf("the console shows %d of the agent's %d node groups", seen, len(masked))
		}
		var gotVN, wantVN []string
		for _, r := range s.rows("nodes") {
			gotVN = append(gotVN, strings.Join(r.Cells[:4], "|"))
		}
		for _, v := range vns {
			wantVN = append(wantVN, strings.Join([]string{v.Name, v.ReservationID, v.ProviderClusterID, nodeState(v.Phase)}, "|"))
		}
		slices.Sort(gotVN)
		slices.Sort(wantVN)
		if !slices.Equal(gotVN, wantVN) {
			return fmt.Sprintf("the virtual nodes read %v, the agent has %v", gotVN, wantVN)
		}
		return ""
	})
	expectNotSharingTruth(u, tg, consumer)
}

// expectNotSharingTruth: the consumer console counts the providers that
// do not share with it as the broker's explanation does.
func expectNotSharingTruth(u *ui, tg *Target, consumer playwright.Page) {
	u.t.Helper()
	if !servesExplanations(u, tg, "the not-sharing count is not checked") {
		return
	}
	pollTruth(u, tg, "the consumer console's not-sharing count", func(ov api.Overview) string {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		exs, _, err := tg.BrokerExplanations(ctx)
		cancel()
		u.ok(err, "read the broker's explanations")
		for _, ex := range exs {
			want := ""
			switch {
			case ex.NotSharing == 1:
				want = "1 provider does not share with this cluster"
			case ex.NotSharing > 1:
				want = fmt.Sprintf("%d provider(s) do not share with this cluster", ex.NotSharing)
			}
			got := cellText(u, consumer, "why-notsharing-"+ex.ConsumerClusterID)
			if got != want {
				return fmt.Sprintf("the console says %q of the providers not sharing, the broker counts %d", got, ex.NotSharing)
			}
		}
		return ""
	})
}

// expectAllTruth runs every page's field checks: the dashboard (tables and
// charts), the consumer console (when logged in: consumer not nil) and the
// provider console of id (when pc is not nil).
func expectAllTruth(u *ui, tg *Target, dash, consumer, pc playwright.Page, id string) {
	u.t.Helper()
	start := time.Now()
	expectDashboardTruth(u, tg, dash)
	expectChartsTruth(u, tg, dash)
	if consumer != nil {
		expectConsumerConsoleTruth(u, tg, consumer)
	}
	if pc != nil {
		expectProviderConsoleFacts(u, tg, pc, id)
	}
	u.t.Logf("every field of the pages equals the broker's and the agent's state (%v)", time.Since(start).Round(time.Millisecond))
}
