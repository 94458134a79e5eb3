package uitest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/playwright-community/playwright-go"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/web"
)

// expectReleaseConfirmed: the console's page after a Release says the
// release was requested, so a release lost before it reached the console
// (#20) fails here and says so. The page is the console's render after the
// redirect, which reads the broker several times (node groups, the
// explanation, each manual reservation), within the consumer's rate limit
// (5 requests per second, shared with its heartbeats and polls, and the
// client waits out a 429's Retry-After): under -race at load 29 that page
// once took longer than one page assertion's 15 s, so it gets the
// scale-up's 60 s.
func expectReleaseConfirmed(u *ui, consumer playwright.Page) {
	u.t.Helper()
	throttled := playwright.NewPlaywrightAssertions(60000)
	u.ok(throttled.Locator(consumer.Locator("[data-testid=flash]")).ToContainText("Release requested"), "the console sent the release")
}

// expectReleasedEvent: a released reservation leaves the dashboard's
// reservations table and appears in the events log, within one page
// assertion.
func expectReleasedEvent(u *ui, dash playwright.Page, id string) {
	u.t.Helper()
	u.ok(u.expect.Locator(dash.Locator(fmt.Sprintf("[data-testid=events] tr[data-subject=%q][data-kind=%q]", id, "reservation Released"))).ToHaveCount(1), "the release of "+id+" is in the events log")
	u.ok(u.expect.Locator(dash.Locator(fmt.Sprintf("[data-testid=reservations] tr[data-reservation=%q]", id))).ToHaveCount(0), id+" left the live reservations")
}

// readWhy returns the rows of one explanation table as
// "provider|outcome" and the summary sentence.
const readWhy = `(args) => {
	const [testid, summary] = args;
	const rows = [];
	document.querySelectorAll('[data-testid="' + testid + '"] tbody tr[data-provider]').forEach((tr) => {
		const reason = tr.querySelector('[data-testid=why-reason]');
		rows.push(tr.dataset.provider + '|' + tr.dataset.outcome + '|' + tr.querySelector('[data-testid=why-metric]').textContent.trim() + '|' + (reason ? reason.textContent.trim() : ''));
	});
	const s = document.querySelector('[data-testid="' + summary + '"]');
	return JSON.stringify({rows: rows, summary: s ? s.textContent.trim() : ''});
}`

type whyShown struct {
	Rows    []string `json:"rows"`
	Summary string   `json:"summary"`
}

// whyProblem compares an explanation table with the broker's explanation
// (at most shown candidates).
func whyProblem(u *ui, p playwright.Page, where string, ex api.PlacementExplanation, shown int) string {
	for _, te := range ex.ChunkTypes {
		raw, err := p.Evaluate(readWhy, []string{"why-" + ex.ConsumerClusterID + "-" + string(te.ChunkType), "why-summary-" + ex.ConsumerClusterID + "-" + string(te.ChunkType)})
		u.ok(err, "read the explanation on "+where)
		var got whyShown
		u.ok(json.Unmarshal([]byte(raw.(string)), &got), "decode the explanation")
		var want []string
		reasons := map[string]string{}
		for i, c := range te.Candidates {
			if i == shown {
				break
			}
			want = append(want, c.ProviderClusterID+"|"+string(c.Outcome))
			reasons[c.ProviderClusterID] = filterWords[c.Filter]
			if c.Outcome == api.OutcomeBlocking {
				reasons[c.ProviderClusterID] = filterWords["blocking"]
			}
		}
		var gotPO []string
		for _, r := range got.Rows {
			parts := strings.SplitN(r, "|", 4)
			gotPO = append(gotPO, parts[0]+"|"+parts[1])
			if w, ok := reasons[parts[0]]; ok && parts[3] != w {
				return fmt.Sprintf("%s: %s's reason reads %q, the broker's filter says %q", where, parts[0], parts[3], w)
			}
			if ex.Metric == api.MetricCost && parts[2] != "unpriced" && !strings.HasSuffix(parts[2], " EUR/h") {
				return fmt.Sprintf("%s: %s's cost reads %q, not money per hour", where, parts[0], parts[2])
			}
		}
		if strings.Join(gotPO, " ") != strings.Join(want, " ") {
			return fmt.Sprintf("%s, %s chunks: shows %v, the broker explains %v", where, te.ChunkType, gotPO, want)
		}
		switch {
		case te.BlockedBy != "" && !strings.Contains(got.Summary, te.BlockedBy):
			return fmt.Sprintf("%s: summary %q does not name the blocking %s", where, got.Summary, te.BlockedBy)
		case len(te.Winners) > 0 && !strings.Contains(got.Summary, te.Winners[0]):
			return fmt.Sprintf("%s: summary %q does not name the winner %s", where, got.Summary, te.Winners[0])
		case te.RunnerUp != "" && !strings.Contains(got.Summary, "Runner-up "+te.RunnerUp):
			return fmt.Sprintf("%s: summary %q does not name the runner-up %s", where, got.Summary, te.RunnerUp)
		}
	}
	return ""
}

// filterWords is what the pages say of a candidate the broker filtered
// out (by its filter) or that blocks ("blocking"), docs/ui.md.
var filterWords = map[api.CandidateFilter]string{
	"":                   "",
	api.FilterDenied:     "denies this cluster",
	api.FilterNotAllowed: "lends only to other clusters",
	api.FilterQuota:      "this cluster holds the provider's per-consumer quota",
	api.FilterFull:       "no free chunk",
	api.FilterStale:      "stale: no recent advertisement",
	"blocking":           "full for this cluster, and a peering of it is in flight there: the autoscaler waits for it",
}

// servesExplanations reports whether the target's broker explains its
// placements (the fake federation does not: then it logs what is skipped).
func servesExplanations(u *ui, tg *Target, skipped string) bool {
	u.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	_, ok, err := tg.BrokerExplanations(ctx)
	cancel()
	u.ok(err, "read the broker's explanations")
	if !ok {
		u.t.Log("the target serves no explanations (fake federation): " + skipped)
	}
	return ok
}

// expectWhyTruth: the dashboard's "Why this provider" (opened) and the
// consumer console's show the broker's explanation of each consumer: the
// same candidates in the same order with the same outcomes, the winner and
// the runner-up; the console without the providers that do not share with
// it, and the winner is the provider the consumer grows on.
func expectWhyTruth(u *ui, tg *Target, dash, consumer playwright.Page) {
	u.t.Helper()
	if !servesExplanations(u, tg, "why-this-provider checks skipped") {
		return
	}
	ov, err := tg.BrokerOverview(context.Background())
	u.ok(err, "read the broker's state")
	for _, c := range ov.Consumers {
		details := dash.Locator(fmt.Sprintf("[data-testid=%q]", "why-details-"+c.ClusterID))
		isOpen, err := details.Evaluate("(d) => d.hasAttribute('open')", nil)
		u.ok(err, "read whether the explanation of "+c.ClusterID+" is open")
		if isOpen != true {
			u.ok(details.Locator("summary").Click(), "open the explanation of "+c.ClusterID)
		}
		u.ok(u.expect.Locator(dash.Locator(fmt.Sprintf("[data-testid=%q]", "why-details-"+c.ClusterID))).ToHaveAttribute("open", ""), "explanation open")
	}
	pollTruth(u, tg, "why this provider", func(ov api.Overview) string {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		exs, _, err := tg.BrokerExplanations(ctx)
		cancel()
		u.ok(err, "read the broker's explanations")
		if len(exs) == 0 {
			return "the broker explains no consumer"
		}
		for _, ex := range exs {
			if p := whyProblem(u, dash, "the dashboard", ex, web.DashboardWhyRows); p != "" {
				return p
			}
			if p := whyProblem(u, consumer, "the consumer console", ex.ForConsumer(), web.ConsoleWhyRows); p != "" {
				return p
			}
			for _, c := range ov.Consumers {
				for _, te := range ex.ChunkTypes {
					if c.ClusterID == ex.ConsumerClusterID && te.ChunkType == api.ChunkStandard && c.ChosenProvider != "" &&
						!slices.Contains(te.Winners, c.ChosenProvider) {
						return fmt.Sprintf("%s grows on %s but the explanation's winners are %v", c.ClusterID, c.ChosenProvider, te.Winners)
					}
				}
			}
		}
		// Opened explanations stay open across live updates.
		open, err := dash.Locator("details[data-testid^=why-details-][open]").Count()
		u.ok(err, "count open explanations")
		if open != len(ov.Consumers) {
			return fmt.Sprintf("%d of %d opened explanations are still open after updates", open, len(ov.Consumers))
		}
		return ""
	})
}

// expectTotalsTruth: each consumer's spend and carbon per hour are the
// broker's, the federation's their sum.
func expectTotalsTruth(u *ui, tg *Target, dash playwright.Page) {
	u.t.Helper()
	pollTruth(u, tg, "spend and carbon", func(ov api.Overview) string {
		readAt := time.Now()
		var fed, fedCO2 float64
		for _, c := range ov.Consumers {
			s := c.Spend
			if s == nil {
				return c.ClusterID + " has no spend at the broker"
			}
			if p := ratesProblem(u, dash, "the dashboard", c.ClusterID, s); p != "" {
				return p
			}
			if p := spentProblem(u, dash, c.ClusterID, s, readAt); p != "" {
				return "the dashboard: " + p
			}
			if p := alternativesProblem(u, tg, dash, c.ClusterID); p != "" {
				return "the dashboard: " + p
			}
			fed += s.CostPerHour
			fedCO2 += s.CarbonPerHour
		}
		if got, want := cellText(u, dash, "spend-federation"), fmt.Sprintf("%.4f EUR/h", fed); !strings.HasPrefix(got, want) {
			return fmt.Sprintf("the federation spends %q on the dashboard, Σ at the broker %q", got, want)
		}
		if got, want := cellText(u, dash, "carbon-federation"), fmt.Sprintf("%.1f g/h", fedCO2); !strings.HasPrefix(got, want) {
			return fmt.Sprintf("the federation emits %q on the dashboard, Σ at the broker %q", got, want)
		}
		return ""
	})
}

// ratesProblem compares a page's spend and carbon per hour of consumer id
// with the broker's.
func ratesProblem(u *ui, p playwright.Page, where, id string, s *api.ConsumerSpend) string {
	want := fmt.Sprintf("%.4f EUR/h", s.CostPerHour)
	if s.UnpricedChunks > 0 {
		want += fmt.Sprintf(" + %d unpriced", s.UnpricedChunks)
	}
	if got := cellText(u, p, "spend-"+id); got != want {
		return fmt.Sprintf("%s spends %q on %s, %q at the broker", id, got, where, want)
	}
	wantCO2 := fmt.Sprintf("%.1f g/h", s.CarbonPerHour)
	if got := cellText(u, p, "carbon-"+id); !strings.HasPrefix(got, wantCO2) {
		return fmt.Sprintf("%s emits %q on %s, %q at the broker", id, got, where, wantCO2)
	}
	return ""
}

// moneyCell reads a cell of money ("1.2345 EUR" or "… EUR/h").
func moneyCell(u *ui, p playwright.Page, testid string) (float64, bool) {
	f := strings.Fields(cellText(u, p, testid))
	if len(f) < 2 || (f[1] != "EUR" && f[1] != "EUR/h") {
		return 0, false
	}
	v, err := strconv.ParseFloat(f[0], 64)
	return v, err == nil
}

// spentProblem checks a page's spend so far (today-<id>, month-<id>)
// against the broker's book, which grows continuously at the consumer's
// rate: the page shows the book as it was at its last update, so its value
// must lie between the broker's now less the rate over the page's age and
// the broker's now (each side widened by the half unit of the rounding).
func spentProblem(u *ui, p playwright.Page, id string, s *api.ConsumerSpend, readAt time.Time) string {
	raw, err := p.Evaluate(`() => document.body.getAttribute('data-updated') || '0'`)
	u.ok(err, "read the page's last update")
	ms, _ := strconv.ParseInt(fmt.Sprint(raw), 10, 64)
	age := readAt.Sub(time.UnixMilli(ms)) + time.Second // and the render before the update
	if ms == 0 || age < 0 {
		return "the page was never updated live"
	}
	for _, c := range []struct {
		cell   string
		broker float64
	}{{"today-" + id, s.SpentToday}, {"month-" + id, s.SpentThisMonth}} {
		got, ok := moneyCell(u, p, c.cell)
		if !ok {
			return fmt.Sprintf("%s reads %q: not money", c.cell, cellText(u, p, c.cell))
		}
		low := c.broker - s.CostPerHour*age.Hours() - 0.00005
		if got < low || got > c.broker+0.00005 {
			return fmt.Sprintf("%s shows %.4f; the broker has %.6f now at %.4f per hour, and the page is %v old (so at least %.6f)",
				c.cell, got, c.broker, s.CostPerHour, age.Round(time.Millisecond), low)
		}
	}
	return ""
}

// alternativesWant is what the broker's explanation prices the consumer's
// held chunks at on the most expensive provider and on the Standard choice
// (ok false: some held type has that alternative unpriced).
func alternativesWant(ex api.PlacementExplanation) (dear, std float64, dearOK, stdOK, held bool) {
	dearOK, stdOK = true, true
	for _, te := range ex.ChunkTypes {
		if te.Held == 0 {
			continue
		}
		held = true
		if a := te.MostExpensive; a != nil && a.CostPerHour != nil {
			dear += *a.CostPerHour
		} else {
			dearOK = false
		}
		if a := te.StandardChoice; a != nil && a.CostPerHour != nil {
			std += *a.CostPerHour
		} else {
			stdOK = false
		}
	}
	return dear, std, dearOK, stdOK, held
}

// expectConsoleTotalsTruth: the consumer console's totals are the
// broker's: its chunks' spend and carbon per hour, what it spent today and
// this month (spentProblem), and the cost of the same chunks on the most
// expensive provider and on the Standard choice.
func expectConsoleTotalsTruth(u *ui, tg *Target, consumer playwright.Page) {
	u.t.Helper()
	if !servesExplanations(u, tg, "the consumer console's totals are not checked") {
		return
	}
	pollTruth(u, tg, "the consumer console's totals", func(ov api.Overview) string {
		readAt := time.Now()
		if len(ov.Consumers) != 1 || ov.Consumers[0].Spend == nil {
			return fmt.Sprintf("the broker has %d consumers, want the demo's one with its spend", len(ov.Consumers))
		}
		c := ov.Consumers[0]
		if p := ratesProblem(u, consumer, "the consumer console", c.ClusterID, c.Spend); p != "" {
			return p
		}
		if p := spentProblem(u, consumer, c.ClusterID, c.Spend, readAt); p != "" {
			return p
		}
		return alternativesProblem(u, tg, consumer, c.ClusterID)
	})
}

// alternativesProblem compares page p's cost of consumer id's chunks on
// the most expensive provider and on the Standard choice with the broker's
// explanation ("" when they agree or the target explains nothing).
func alternativesProblem(u *ui, tg *Target, p playwright.Page, id string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	exs, ok, err := tg.BrokerExplanations(ctx)
	cancel()
	u.ok(err, "read the broker's explanations")
	if !ok {
		return ""
	}
	for _, ex := range exs {
		if ex.ConsumerClusterID != id {
			continue
		}
		dear, std, dearOK, stdOK, held := alternativesWant(ex)
		if !held {
			return id + " holds no chunk: the alternatives are not priced"
		}
		for _, a := range []struct {
			cell string
			v    float64
			ok   bool
		}{{"dear-" + id, dear, dearOK}, {"std-" + id, std, stdOK}} {
			got := cellText(u, p, a.cell)
			if want := fmt.Sprintf("%.4f EUR/h", a.v); a.ok && !strings.HasPrefix(got, want) {
				return fmt.Sprintf("%s reads %q; the broker prices the same chunks at %s", a.cell, got, want)
			}
		}
		return ""
	}
	return "the broker does not explain " + id
}

// expectEventsTruth: every reservation the broker holds as ended is in the
// events log, the instructions in flight are only the broker's un-enforced
// ones, and the provider filter hides every other provider's events.
func expectEventsTruth(u *ui, tg *Target, dash playwright.Page, provider string) {
	u.t.Helper()
	pollTruth(u, tg, "events and instructions in flight", func(ov api.Overview) string {
		for _, r := range ov.Reservations {
			sel := fmt.Sprintf("[data-testid=events] tr[data-subject=%q][data-kind=%q]", r.ReservationID, "reservation "+string(r.Status))
			n, err := dash.Locator(sel).Count()
			u.ok(err, "count events")
			if r.Status.Terminal() && n != 1 {
				return fmt.Sprintf("the ended reservation %s (%s) is not in the events log", r.ReservationID, r.Status)
			}
			live, err := dash.Locator(fmt.Sprintf("[data-testid=reservations] tr[data-reservation=%q]", r.ReservationID)).Count()
			u.ok(err, "count reservations")
			if r.Status.Terminal() == (live == 1) {
				return fmt.Sprintf("reservation %s (%s) is listed %d time(s) among the live ones", r.ReservationID, r.Status, live)
			}
		}
		inFlight := 0
		for _, l := range [][]api.OverviewInstruction{ov.ProviderInstructions, ov.ReservationInstructions} {
			for _, in := range l {
				if !in.Enforced {
					inFlight++
				}
			}
		}
		rows, err := dash.Locator("[data-testid=instructions] tbody tr:not(:has(td.empty))").Count()
		u.ok(err, "count instructions")
		if rows != inFlight {
			return fmt.Sprintf("%d instructions listed in flight, the broker has %d un-enforced", rows, inFlight)
		}
		return ""
	})
	u.ok(dash.Locator("#ev-provider").Fill(provider), "filter the events by provider")
	hidden, err := dash.Evaluate(`(p) => {
		const rows = [...document.querySelectorAll('[data-testid=events] tr[data-filterable]')];
		return JSON.stringify({shown: rows.filter(r => !r.hidden).map(r => r.dataset.provider), all: rows.length});
	}`, provider)
	u.ok(err, "read the filtered events")
	var got struct {
		Shown []string `json:"shown"`
		All   int      `json:"all"`
	}
	u.ok(json.Unmarshal([]byte(hidden.(string)), &got), "decode the filtered events")
	if len(got.Shown) == 0 {
		u.t.Fatalf("filtering the events by %s shows none of %d", provider, got.All)
	}
	for _, p := range got.Shown {
		if p != provider {
			u.t.Fatalf("filtering the events by %s still shows an event of %q", provider, p)
		}
	}
	u.ok(dash.Locator("#ev-provider").Fill(""), "clear the filter")
}

// expectChartRanges: the range labels switch the charts shown, and a
// line's points carry their values for hover.
func expectChartRanges(u *ui, dash playwright.Page) {
	u.t.Helper()
	u.ok(dash.Locator("[data-testid=range-5m]").Click(), "pick 5 minutes")
	u.ok(u.expect.Locator(dash.Locator("[data-testid=charts-5m]")).ToBeVisible(), "5-minute charts shown")
	u.ok(u.expect.Locator(dash.Locator("[data-testid=charts-1h]")).ToBeHidden(), "1-hour charts hidden")
	u.ok(dash.Locator("[data-testid=range-1h]").Click(), "pick 1 hour")
	u.ok(u.expect.Locator(dash.Locator("[data-testid=charts-1h]")).ToBeVisible(), "1-hour charts shown")
	titles, err := dash.Locator("[data-testid=chart-price-1h] circle.hover title").AllTextContents()
	u.ok(err, "read the hover values")
	if len(titles) == 0 || !strings.Contains(titles[0], " EUR/h at ") {
		u.t.Fatalf("price chart hover values %v, want \"<provider>: <price> EUR/h at <time>\"", titles)
	}
}
