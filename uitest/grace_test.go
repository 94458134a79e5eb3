package uitest

import (
	"fmt"
	"testing"
	"time"

	"github.com/playwright-community/playwright-go"

	"github.com/federation-autoscaler/federation-autoscaler/mocks/demo"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// graceStaleAfter is the broker's staleness window in TestDisconnectGraceUI:
// a stopped provider agent is noticed this long after its last
// advertisement (5 s apart in the browser tests' demo), not after the
// default 90 s.
const graceStaleAfter = 15 * time.Second

// TestDisconnectGraceUI: when the agent of a provider lending a chunk
// stops, the broker keeps the loan for its disconnect grace, and the
// consumer console and the dashboard say so with the broker's deadline
// (the reservation "Peered, provider disconnected, grace until hh:mm:ss",
// the provider "disconnected, grace until hh:mm:ss"); when the agent comes
// back the label goes. Every label is compared with the broker's state,
// read through its overview.
func TestDisconnectGraceUI(t *testing.T) {
	b, tg, u := setUp(t, func(o *demo.Options) { o.ProviderStaleAfter = graceStaleAfter })
	if tg.StopProviderAgent == nil || tg.RestartProviderAgent == nil {
		t.Skip("the target cannot stop one provider's agent")
	}
	prov := firstProvider(tg)
	consumer := newPage(u, b)
	login(u, consumer, tg.Consumer)
	_, err := consumer.Locator("#provider").SelectOption(playwright.SelectOptionValues{Values: &[]string{prov}})
	u.ok(err, "choose provider")
	u.ok(consumer.Locator("#count").Fill("1"), "one chunk")
	u.ok(consumer.Locator("[data-testid=reserve]").Click(), "reserve")
	u.ok(u.expect.Locator(consumer.Locator("[data-testid=flash]")).ToContainText("Reservation requested"), "reserved")
	row := consumer.Locator("[data-testid=consumer-reservations] tbody tr[data-reservation]", playwright.PageLocatorOptions{HasText: "manual"}).First()
	u.ok(u.expect.Locator(row.Locator(".badge")).ToHaveText("Peered"), "the manual reservation is Peered")
	id, err := row.GetAttribute("data-reservation")
	u.ok(err, "reservation id")
	dash := newPage(u, b)
	_, err = dash.Goto(tg.DashboardURL + "/")
	u.ok(err, "open the dashboard")
	u.ok(u.expect.Locator(dash.Locator("[data-testid=conn-state]")).ToHaveAttribute("data-state", "live"), "dashboard live")

	labels := func(ov api.Overview) (reservation, provider string, graced bool) {
		for _, r := range ov.Reservations {
			if r.ReservationID == id {
				reservation = string(r.Status)
				if r.GraceUntil != nil {
					reservation += ", provider disconnected, grace until " + r.GraceUntil.UTC().Format("15:04:05")
					graced = true
				}
			}
		}
		for _, a := range ov.Advertisements {
			if a.ClusterID == prov {
				switch {
				case !a.Available && a.GraceUntil != nil:
					provider = "disconnected, grace until " + a.GraceUntil.UTC().Format("15:04:05")
				case !a.Available:
					provider = "unavailable"
				default:
					provider = "available"
				}
			}
		}
		return reservation, provider, graced
	}
	shown := func(want bool) func(api.Overview) string {
		return func(ov api.Overview) string {
			res, pv, graced := labels(ov)
			if graced != want {
				return fmt.Sprintf("the broker holds %s as %q (grace %v, want %v)", id, res, graced, want)
			}
			checks := []struct {
				where string
				page  playwright.Page
				sel   string
				want  string
			}{
				{"the consumer console", consumer, fmt.Sprintf("[data-testid=consumer-reservations] tr[data-reservation=%q] .badge", id), res},
				{"the dashboard's reservations", dash, fmt.Sprintf("[data-testid=reservations] tr[data-reservation=%q] td:nth-child(5) .badge", id), res},
				{"the dashboard's providers", dash, fmt.Sprintf("[data-testid=providers] tr[data-provider=%q] td:last-child .badge", prov), pv},
			}
			for _, c := range checks {
				got, err := c.page.Locator(c.sel).TextContent()
				u.ok(err, "read "+c.where)
				if got != c.want {
					return fmt.Sprintf("%s shows %q; the broker's state reads %q", c.where, got, c.want)
				}
			}
			return ""
		}
	}

	u.ok(tg.StopProviderAgent(prov), "stop the agent of "+prov)
	// Stale after graceStaleAfter, then the broker's sweep (≤ 1 s late).
	pollTruth(u, tg, "the grace label while "+prov+"'s agent is stopped", shown(true))
	u.screenshot(consumer, "consumer-grace.png")
	u.ok(tg.RestartProviderAgent(prov), "restart the agent of "+prov)
	pollTruth(u, tg, "no grace label once "+prov+"'s agent is back", shown(false))
}
