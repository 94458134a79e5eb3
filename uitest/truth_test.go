package uitest

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/playwright-community/playwright-go"

	"github.com/federation-autoscaler/federation-autoscaler/deploy/testpoll"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// truthDeadline bounds how long a page may take to show the broker's state
// (the provider agent re-reads it every 5 s at the latest).
const truthDeadline = 30 * time.Second

// providerConsoleShown is what a provider console shows: its loans and its
// chunk table, as comparable strings.
type providerConsoleShown struct {
	Loans  []string `json:"loans"`  // id|consumer|chunks
	Prices []string `json:"prices"` // id|price text
	Chunks []string `json:"chunks"` // type|total|reserved|free
	Broker string   `json:"broker"`
	LastAd string   `json:"lastAd"`
}

const readProviderConsole = `() => {
	const txt = (el) => (el ? el.textContent.trim() : '');
	const out = {loans: [], prices: [], chunks: [], broker: txt(document.querySelector('#ps-h .badge')), lastAd: ''};
	document.querySelectorAll('[data-testid=loan]').forEach((tr) => {
		const td = tr.querySelectorAll('td');
		out.loans.push([tr.dataset.reservation, txt(td[1]), txt(td[2])].join('|'));
		out.prices.push(tr.dataset.reservation + '|' + txt(tr.querySelector('[data-testid=loan-price]')));
	});
	document.querySelectorAll('#provider-status [data-testid=chunk-types] tbody tr').forEach((tr) => {
		const td = tr.querySelectorAll('td');
		if (td.length >= 4) { out.chunks.push([txt(td[0]), txt(td[1]), txt(td[2]), txt(td[3])].join('|')); }
	});
	document.querySelectorAll('#provider-status dt').forEach((dt) => {
		if (txt(dt) === 'Last advertisement') { out.lastAd = txt(dt.nextElementSibling); }
	});
	return JSON.stringify(out);
}`

// providerConsoleWant is what the broker says provider id's console must
// show.
func providerConsoleWant(ov api.Overview, id string) (providerConsoleShown, *api.AdvertisementSnapshot) {
	var w providerConsoleShown
	for _, r := range ov.Reservations {
		if r.ProviderClusterID != id || r.Status.Terminal() {
			continue
		}
		typ := r.ChunkType
		if typ == "" {
			typ = api.ChunkStandard
		}
		w.Loans = append(w.Loans, fmt.Sprintf("%s|%s|%d × %s", r.ReservationID, r.ConsumerClusterID, r.ChunkCount, typ))
	}
	var snap *api.AdvertisementSnapshot
	for i := range ov.Advertisements {
		a := &ov.Advertisements[i]
		if a.ClusterID != id {
			continue
		}
		snap = a
		for typ, c := range a.Chunks {
			w.Chunks = append(w.Chunks, fmt.Sprintf("%s|%d|%d|%d", typ, c.TotalChunks, c.ReservedChunks, c.AvailableChunks))
		}
	}
	slices.Sort(w.Loans)
	slices.Sort(w.Chunks)
	return w, snap
}

var firstNumber = regexp.MustCompile(`[0-9]+(\.[0-9]+)?`)

// expectProviderConsoleTruth polls until provider id's console (page p,
// logged in) shows exactly the broker's live loans of id and its chunk
// counts, then checks each loan's price against the broker's cost per
// chunk.
func expectProviderConsoleTruth(u *ui, tg *Target, p playwright.Page, id string) providerConsoleShown {
	u.t.Helper()
	var got providerConsoleShown
	pollTruth(u, tg, "the provider console of "+id, func(ov api.Overview) string {
		want, snap := providerConsoleWant(ov, id)
		raw, err := p.Evaluate(readProviderConsole)
		u.ok(err, "read the provider console")
		got = providerConsoleShown{}
		u.ok(json.Unmarshal([]byte(raw.(string)), &got), "decode the provider console")
		slices.Sort(got.Loans)
		slices.Sort(got.Chunks)
		if !slices.Equal(got.Loans, want.Loans) || !slices.Equal(got.Chunks, want.Chunks) || len(want.Chunks) == 0 {
			return fmt.Sprintf("it shows loans %v and chunks %v; the broker has loans %v and chunks %v", got.Loans, got.Chunks, want.Loans, want.Chunks)
		}
		if got.Broker != "advertised" || got.LastAd == "never" || got.LastAd == "" {
			return fmt.Sprintf("it says %q, last advertisement %q, while the broker has its advertisement", got.Broker, got.LastAd)
		}
		if snap != nil && snap.CostPerChunk > 0 {
			for _, pr := range got.Prices {
				rid, text, _ := strings.Cut(pr, "|")
				n := loanChunks(ov, rid)
				v, err := strconv.ParseFloat(firstNumber.FindString(text), 64)
				if err != nil || math.Abs(v-snap.CostPerChunk*float64(n)) > 0.00005 {
					return fmt.Sprintf("loan %s shows price %q, the broker's cost is %d × %.4f per hour", rid, text, n, snap.CostPerChunk)
				}
			}
		}
		return ""
	})
	return got
}

func loanChunks(ov api.Overview, id string) int32 {
	for _, r := range ov.Reservations {
		if r.ReservationID == id {
			return r.ChunkCount
		}
	}
	return 0
}

const readConsumerGroups = `() => {
	const txt = (el) => (el ? el.textContent.trim() : '');
	const rows = [];
	document.querySelectorAll('[data-testid=groups] tbody tr[title]').forEach((tr) => {
		const td = tr.querySelectorAll('td');
		rows.push({provider: txt(td[0]), type: txt(td[1]), cost: txt(td[2]), metric: txt(td[3]), used: txt(td[4])});
	});
	return JSON.stringify({header: txt(document.querySelector('[data-testid=metric-header]')), rows: rows});
}`

type consumerGroupsShown struct {
	Header string `json:"header"`
	Rows   []struct {
		Provider, Type, Cost, Metric, Used string
	} `json:"rows"`
}

// expectConsumerGroupsUnits polls until the consumer console's node groups
// under the Price policy show each standard group's cost as the broker's
// cost per chunk in money per hour (or "unpriced"), the metric column named
// for the policy with the same money values, and no "0 / 0".
func expectConsumerGroupsUnits(u *ui, tg *Target, p playwright.Page, currency string) {
	u.t.Helper()
	pollTruth(u, tg, "the consumer console's node groups", func(ov api.Overview) string {
		raw, err := p.Evaluate(readConsumerGroups)
		u.ok(err, "read the consumer console")
		var got consumerGroupsShown
		u.ok(json.Unmarshal([]byte(raw.(string)), &got), "decode the consumer console")
		return consumerGroupsProblem(ov, got, currency)
	})
}

var quantityNotation = regexp.MustCompile(`^[0-9.]+[munk]$`)

func consumerGroupsProblem(ov api.Overview, got consumerGroupsShown, currency string) string {
	if got.Header != "Cost per chunk" {
		return fmt.Sprintf("the metric column is %q under Price, want \"Cost per chunk\"", got.Header)
	}
	if len(got.Rows) == 0 {
		return "no node group shown"
	}
	cost := map[string]float64{}
	for _, a := range ov.Advertisements {
		cost[a.ClusterID] = a.CostPerChunk
	}
	for _, r := range got.Rows {
		if quantityNotation.MatchString(r.Cost) || quantityNotation.MatchString(r.Metric) {
			return fmt.Sprintf("%s shows Kubernetes quantity notation: cost %q, metric %q", r.Provider, r.Cost, r.Metric)
		}
		if strings.Contains(r.Used, "0 / 0") {
			return fmt.Sprintf("%s shows %q", r.Provider, r.Used)
		}
		if r.Type != string(api.ChunkStandard) {
			continue
		}
		c, ok := cost[r.Provider]
		want := "unpriced"
		if ok && c > 0 {
			want = fmt.Sprintf("%.4f %s/h", c, currency)
		}
		if r.Cost != want {
			return fmt.Sprintf("%s's standard group costs %q, the broker says %q", r.Provider, r.Cost, want)
		}
		if want != "unpriced" && r.Metric != want {
			return fmt.Sprintf("%s's metric under Price is %q, want its cost %q", r.Provider, r.Metric, want)
		}
	}
	return ""
}

// pollTruth reads the broker's state and the page until check finds
// nothing wrong, failing after truthDeadline with the last problem.
func pollTruth(u *ui, tg *Target, what string, check func(api.Overview) string) {
	u.t.Helper()
	testpoll.UntilSeen(u.t, truthDeadline, what, func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ov, err := tg.BrokerOverview(ctx)
		cancel()
		u.ok(err, "read the broker's state")
		problem := check(ov)
		return problem == "", problem
	})
}

func cellText(u *ui, p playwright.Page, testid string) string {
	u.t.Helper()
	loc := p.Locator(fmt.Sprintf("[data-testid=%q]", testid))
	if n, err := loc.Count(); err != nil || n == 0 {
		return ""
	}
	s, err := loc.TextContent()
	u.ok(err, "read "+testid)
	return strings.TrimSpace(s)
}

// expectDashboardConsumersTruth: every consumer row's "Grows on" is the
// broker's chosen provider and its RTT cell lists exactly the RTTs the
// consumer measured.
func expectDashboardConsumersTruth(u *ui, tg *Target, dash playwright.Page) {
	u.t.Helper()
	pollTruth(u, tg, "dashboard consumers", func(ov api.Overview) string {
		if len(ov.Consumers) == 0 {
			return "the broker knows no consumer"
		}
		for _, c := range ov.Consumers {
			want := c.ChosenProvider
			if want == "" {
				want = "none growable now"
			}
			if got := cellText(u, dash, "chosen-"+c.ClusterID); got != want {
				return fmt.Sprintf("%s grows on %q on the dashboard, %q at the broker", c.ClusterID, got, want)
			}
			rtt := cellText(u, dash, "rtt-"+c.ClusterID)
			if len(c.MeasuredLatencies) == 0 && rtt != "not measured" {
				return fmt.Sprintf("%s shows RTTs %q, the broker has none", c.ClusterID, rtt)
			}
			for p, ms := range c.MeasuredLatencies {
				if w := fmt.Sprintf("%s %.1f ms", p, ms); !strings.Contains(rtt, w) {
					return fmt.Sprintf("%s shows RTTs %q, lacking the broker's %q", c.ClusterID, rtt, w)
				}
			}
		}
		return ""
	})
}

// expectDashboardSharingTruth: provider id's Sharing cell shows the rules
// the broker holds, and they are the ones applied (denied, quota).
func expectDashboardSharingTruth(u *ui, tg *Target, dash playwright.Page, id string, denied []string, quota int32) {
	u.t.Helper()
	pollTruth(u, tg, "dashboard sharing of "+id, func(ov api.Overview) string {
		for _, a := range ov.Advertisements {
			if a.ClusterID != id {
				continue
			}
			if a.Sharing == nil || !slices.Equal(a.Sharing.DeniedConsumers, denied) || a.Sharing.MaxChunksPerConsumer != quota {
				return fmt.Sprintf("the broker holds rules %+v, not the applied denied %v quota %d", a.Sharing, denied, quota)
			}
			got := cellText(u, dash, "sharing-"+id)
			for _, d := range a.Sharing.DeniedConsumers {
				if !strings.Contains(got, d) {
					return fmt.Sprintf("the dashboard's sharing %q lacks the denied %s", got, d)
				}
			}
			if w := fmt.Sprintf("≤%d chunks each", a.Sharing.MaxChunksPerConsumer); quota > 0 && !strings.Contains(got, w) {
				return fmt.Sprintf("the dashboard's sharing %q lacks the quota %q", got, w)
			}
			if quota == 0 && strings.Contains(got, "chunks each") {
				return fmt.Sprintf("the dashboard's sharing %q shows a quota the broker does not hold", got)
			}
			if got == "everyone" {
				return "the dashboard says everyone"
			}
			return ""
		}
		return "the broker has no advertisement of " + id
	})
}
