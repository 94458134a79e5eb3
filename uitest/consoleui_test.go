package uitest

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strings"
	"testing"

	"github.com/playwright-community/playwright-go"

	"github.com/federation-autoscaler/federation-autoscaler/deploy/testpoll"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// TestConsoleUI checks issue #12 items 8–10 as a user sees them: a session
// that ends is explained and the user comes back to an unsent form after the
// login; the consoles override a cluster's location and the broker sees
// it; at 390 px no page scrolls sideways and no column is cut.
func TestConsoleUI(t *testing.T) {
	b, tg, u := setUp(t)

	t.Run("a session that ends is explained and the unsent form comes back after the login", func(t *testing.T) {
		u := u.with(t)
		ctx, err := b.NewContext(playwright.BrowserNewContextOptions{Viewport: &playwright.Size{Width: 1366, Height: 900}})
		u.ok(err, "new browser context")
		t.Cleanup(func() { _ = ctx.Close() })
		a, err := ctx.NewPage()
		u.ok(err, "page A")
		login(u, a, tg.Consumer)
		before := consumerPlacement(u, tg)

		// Logging out in another tab ends the session: tab A's socket is
		// closed by the server and the page says so instead of "reconnecting…".
		other, err := ctx.NewPage()
		u.ok(err, "page B")
		_, err = other.Goto(tg.Consumer.URL + "/")
		u.ok(err, "open the console in tab B (same session)")
		u.ok(other.Locator("header form button[type=submit]").Click(), "log out in tab B")
		u.ok(u.expect.Locator(other.Locator("#token")).ToBeVisible(), "tab B is on the login page")

		state := a.Locator("[data-testid=conn-state]")
		u.ok(u.expect.Locator(state).ToHaveAttribute("data-state", "ended"), "tab A says the session ended")
		u.ok(u.expect.Locator(state).ToHaveText("session ended"), "conn state text")
		u.ok(u.expect.Locator(a.Locator("[data-testid=session-ended]")).ToBeVisible(), "session-ended notice shown")
		u.ok(u.expect.Locator(a.Locator("[data-testid=stale-since]")).ToHaveText(regexp.MustCompile(`^\d\d:\d\d:\d\d$`)), "notice says since when the page is stale")
		href, err := a.Locator("[data-testid=login-again]").GetAttribute("href")
		u.ok(err, "login link")
		if !strings.Contains(href, "/login?next=%2F") || !strings.Contains(href, "ended=1") {
			t.Fatalf("the login link is %q; want the login page returning to / and saying the session ended", href)
		}
		u.screenshot(a, "session-ended.png")

		// A form sent now does not land silently on the login page: it is
		// kept, the login page says why, and the login brings it back.
		want := api.PlacementEco
		if before == api.PlacementEco {
			want = api.PlacementLatency
		}
		u.ok(a.Locator("[data-testid=policy-"+string(want)+"]").Check(), "pick a policy")
		u.ok(a.Locator("[data-testid=apply-policy]").Click(), "apply it with the session ended")
		u.ok(u.expect.Locator(a.Locator("[data-testid=login-ended]")).ToContainText("Your session has ended"), "the login page says the session ended")
		u.screenshot(a, "login-session-ended.png")
		if got := consumerPlacement(u, tg); got != before {
			t.Fatalf("the broker has policy %q after a form sent without a session; want it unchanged (%q)", got, before)
		}
		u.ok(a.Locator("#token").Fill(tg.Consumer.Token), "type the token")
		u.ok(a.Locator("#token").Press("Enter"), "log in")
		u.ok(u.expect.Locator(state).ToHaveAttribute("data-state", "live"), "back on the console, live")
		u.ok(u.expect.Page(a).ToHaveURL(regexp.MustCompile(`/(\?.*)?$`)), "back on the console's page")
		u.ok(u.expect.Locator(a.Locator("[data-testid=client-notice]")).ToContainText("filled in again"), "the page says the form was kept")
		u.ok(u.expect.Locator(a.Locator("[data-testid=policy-"+string(want)+"]")).ToBeChecked(), "the policy picked before the login is filled in again")
		u.ok(a.Locator("[data-testid=apply-policy]").Click(), "send it again")
		u.ok(u.expect.Locator(a.Locator("[data-testid=flash]")).ToContainText("Policy applied"), "policy applied")
		pollConsumer(u, tg, "the broker's policy of the consumer", func(cons api.OverviewConsumer) string {
			if got := placementOf(cons); got != want {
				return fmt.Sprintf("the broker has policy %q, the form sent %q", got, want)
			}
			return ""
		})

		// A console that restarted knows no session: its cookie is stale.
		cookies, err := ctx.Cookies(tg.Consumer.URL)
		u.ok(err, "read the session cookie")
		if len(cookies) == 0 {
			t.Fatal("no session cookie after the login")
		}
		u.ok(ctx.ClearCookies(), "forget the session cookie")
		cookieURL := tg.Consumer.URL
		u.ok(ctx.AddCookies([]playwright.OptionalCookie{{Name: cookies[0].Name, Value: "from-before-the-restart", URL: &cookieURL}}), "a cookie the console does not know")
		u.ok(a.Locator("[data-testid=apply-policy]").Click(), "send a form with a session the console no longer has")
		u.ok(u.expect.Locator(a.Locator("[data-testid=login-ended]")).ToContainText("Your session has ended"), "the login page says the session ended")
	})

	t.Run("a release clicked while a live update replaces its row is still sent", func(t *testing.T) {
		expectReleaseSurvivesSwap(u.with(t), tg, newPage(u, b))
	})

	t.Run("at 390 px no page scrolls sideways and no column is cut", func(t *testing.T) {
		u := u.with(t)
		// One browser context per page: the consoles of the demo share the
		// host 127.0.0.1, and cookies do not tell ports apart.
		phone := func() playwright.Page {
			ctx, err := b.NewContext(playwright.BrowserNewContextOptions{Viewport: &playwright.Size{Width: phoneWidth, Height: 844}, IsMobile: playwright.Bool(true), HasTouch: playwright.Bool(true)})
			u.ok(err, "phone-sized browser context")
			t.Cleanup(func() { _ = ctx.Close() })
			p, err := ctx.NewPage()
			u.ok(err, "new page")
			return p
		}
		p := phone()
		_, err := p.Goto(tg.DashboardURL + "/")
		u.ok(err, "open the dashboard")
		u.ok(u.expect.Locator(p.Locator("[data-testid=conn-state]")).ToHaveAttribute("data-state", "live"), "dashboard live")
		expectFitsWidth(u, p, "the dashboard")
		u.screenshot(p, "dashboard-390.png")
		p = phone()
		login(u, p, tg.Providers[firstProvider(tg)])
		expectFitsWidth(u, p, "the provider console")
		u.screenshot(p, "provider-console-390.png")
		p = phone()
		login(u, p, tg.Consumer)
		expectFitsWidth(u, p, "the consumer console")
		u.screenshot(p, "consumer-console-390.png")
	})

	t.Run("both consoles set the location and the broker's Latency choice follows", func(t *testing.T) {
		u := u.with(t)
		if _, ok := tg.Providers["paris"]; !ok {
			t.Skip("the target has no paris provider to move")
		}
		c := newPage(u, b)
		login(u, c, tg.Consumer)
		if n, err := c.Locator("[data-testid=city]").Count(); err != nil || n == 0 {
			t.Skip("the target's consumer console has no location picker (the fake federation's has none)")
		}
		// The consumer moves to Sydney.
		_, err := c.Locator("[data-testid=city]").SelectOption(playwright.SelectOptionValues{Values: &[]string{"Sydney"}})
		u.ok(err, "pick Sydney")
		u.ok(c.Locator("[data-testid=apply-location]").Click(), "set the consumer's location")
		u.ok(u.expect.Locator(c.Locator("[data-testid=flash]")).ToContainText("Location set"), "location set")
		pollConsumer(u, tg, "the consumer's location at the broker", func(cons api.OverviewConsumer) string {
			if cons.City != "Sydney" || cons.Latitude == nil || math.Abs(*cons.Latitude-(-33.8688)) > 1e-6 {
				return fmt.Sprintf("the broker has the consumer in %q at latitude %v, want Sydney (-33.8688)", cons.City, cons.Latitude)
			}
			return ""
		})
		u.ok(u.expect.Locator(c.Locator("#consumer-status")).ToContainText("Sydney, NSW (set in this console)"), "the console says where the consumer is and why")

		// Paris moves to Tokyo: the broker gets the new topology.
		p := newPage(u, b)
		login(u, p, tg.Providers["paris"])
		_, err = p.Locator("[data-testid=city]").SelectOption(playwright.SelectOptionValues{Values: &[]string{"Tokyo"}})
		u.ok(err, "pick Tokyo")
		u.ok(p.Locator("[data-testid=apply-location]").Click(), "set the provider's location")
		u.ok(u.expect.Locator(p.Locator("[data-testid=flash]")).ToContainText("Location set"), "provider location set")
		pollTruth(u, tg, "paris's location at the broker", func(ov api.Overview) string {
			for _, a := range ov.Advertisements {
				if a.ClusterID == "paris" {
					if a.Topology == nil || a.Topology.City != "Tokyo" || math.Abs(a.Topology.Latitude-35.6762) > 1e-6 {
						return fmt.Sprintf("the broker has paris at %+v, want Tokyo", a.Topology)
					}
					return ""
				}
			}
			return "the broker has no advertisement of paris"
		})
		u.ok(u.expect.Locator(p.Locator("#provider-status")).ToContainText("Tokyo, 13 (set in this console)"), "the provider console says where it is and why")
		u.screenshot(p, "provider-location.png")

		// Under Latency the consumer now grows on Sydney, its nearest (the
		// demo's probe delays follow the distance once something moved).
		u.ok(c.Locator("[data-testid=policy-Latency]").Check(), "pick Latency")
		u.ok(c.Locator("[data-testid=apply-policy]").Click(), "apply Latency")
		u.ok(u.expect.Locator(c.Locator("[data-testid=flash]")).ToContainText("Policy applied"), "policy applied")
		pollConsumer(u, tg, "the Latency choice after the moves", func(cons api.OverviewConsumer) string {
			if cons.ChosenProvider != "sydney" {
				return fmt.Sprintf("the consumer grows on %q with RTTs %v, want sydney (the nearest to Sydney)", cons.ChosenProvider, cons.MeasuredLatencies)
			}
			if rs, rp := cons.MeasuredLatencies["sydney"], cons.MeasuredLatencies["paris"]; !(rs < rp) {
				return fmt.Sprintf("RTTs %v: sydney should be nearer than paris-in-Tokyo", cons.MeasuredLatencies)
			}
			return ""
		})
		dash := newPage(u, b)
		_, err = dash.Goto(tg.DashboardURL + "/")
		u.ok(err, "open the dashboard")
		expectDashboardConsumersTruth(u, tg, dash)
		u.screenshot(c, "consumer-location.png")

		// Back to the addresses' locations.
		_, err = p.Locator("[data-testid=city]").SelectOption(playwright.SelectOptionValues{Values: &[]string{""}})
		u.ok(err, "provider back to its address")
		u.ok(p.Locator("[data-testid=apply-location]").Click(), "clear the provider's location")
		u.ok(u.expect.Locator(p.Locator("#provider-status")).ToContainText("Paris, IDF (from the cluster's address)"), "paris is back in Paris")
		_, err = c.Locator("[data-testid=city]").SelectOption(playwright.SelectOptionValues{Values: &[]string{""}})
		u.ok(err, "consumer back to its address")
		u.ok(c.Locator("[data-testid=apply-location]").Click(), "clear the consumer's location")
		pollConsumer(u, tg, "the consumer back in London", func(cons api.OverviewConsumer) string {
			if cons.City != "London" {
				return fmt.Sprintf("the broker has the consumer in %q, want London", cons.City)
			}
			return ""
		})
	})
}

// pollConsumer polls until check finds nothing wrong with the broker's
// view of the (one) consumer.
func pollConsumer(u *ui, tg *Target, what string, check func(api.OverviewConsumer) string) {
	u.t.Helper()
	pollTruth(u, tg, what, func(ov api.Overview) string {
		if len(ov.Consumers) == 0 {
			return "the broker knows no consumer"
		}
		return check(ov.Consumers[0])
	})
}

// consumerPlacement is the policy the broker holds for the demo consumer.
func consumerPlacement(u *ui, tg *Target) api.PlacementType {
	u.t.Helper()
	var got api.PlacementType
	pollConsumer(u, tg, "the broker's consumer", func(cons api.OverviewConsumer) string {
		got = placementOf(cons)
		return ""
	})
	return got
}

func placementOf(cons api.OverviewConsumer) api.PlacementType {
	if cons.Placement != "" {
		return cons.Placement
	}
	return api.PlacementStandard
}

// phoneWidth is the viewport width of the phone checks (an iPhone 12–15).
const phoneWidth = 390

// fitsWidth reports what sticks out of a page of the given width: the
// page's own width (a phone browser widens its layout viewport to fit
// content that overflows, so the check compares with the device width, not
// innerWidth), the elements reaching past it, and every header cell whose
// text is cut.
const fitsWidth = `(width) => {
	const doc = document.documentElement;
	const out = {page: doc.scrollWidth, view: window.innerWidth, wide: [], cut: []};
	const name = (el) => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') + (el.className && typeof el.className === 'string' ? '.' + el.className.trim().split(/\s+/).join('.') : '');
	document.querySelectorAll('body *').forEach((el) => {
		const r = el.getBoundingClientRect();
		if (r.width > 0 && r.right > width + 0.5 && out.wide.length < 8) {
			let inScroller = false;
			for (let p = el.parentElement; p; p = p.parentElement) {
				const ox = getComputedStyle(p).overflowX;
				if (ox === 'auto' || ox === 'scroll' || ox === 'hidden') { inScroller = true; break; }
			}
			if (!inScroller) { out.wide.push(name(el) + " to " + Math.round(r.right) + " px"); }
		}
	});
	document.querySelectorAll('th').forEach((th) => {
		if (th.offsetParent !== null && th.scrollWidth > th.clientWidth + 1) {
			out.cut.push(th.textContent.trim() + ' (' + th.clientWidth + ' of ' + th.scrollWidth + ' px)');
		}
	});
	return JSON.stringify(out);
}`

func expectFitsWidth(u *ui, p playwright.Page, what string) {
	u.t.Helper()
	raw, err := p.Evaluate(fitsWidth, phoneWidth)
	u.ok(err, "measure "+what)
	var got struct {
		Page, View int
		Wide, Cut  []string
	}
	u.ok(json.Unmarshal([]byte(raw.(string)), &got), "decode the measure")
	if got.Page > phoneWidth || got.View > phoneWidth {
		u.t.Errorf("%s is %d px wide (layout viewport %d px) on a %d px phone: the page scrolls sideways; sticking out: %s",
			what, got.Page, got.View, phoneWidth, strings.Join(got.Wide, ", "))
	}
	if len(got.Cut) > 0 {
		u.t.Errorf("%s cuts column headers at %d px: %s", what, phoneWidth, strings.Join(got.Cut, "; "))
	}
}

// gateSession makes the page's session checks (GET <data-session>, asked
// before a form is sent) wait until window.__openSessionGate() is called,
// and remembers the first form submitted (window.__submitted).
const gateSession = `() => {
	const path = document.body.getAttribute('data-session');
	const fetch0 = window.fetch;
	let open;
	const gate = new Promise((r) => { open = r; });
	window.__openSessionGate = open;
	window.fetch = (u, o) => (String(u) === path ? gate.then(() => fetch0(u, o)) : fetch0(u, o));
	window.addEventListener('submit', (e) => { window.__submitted = window.__submitted || e.target; }, true);
}`

// expectReleaseSurvivesSwap: a Release clicked on the consumer console
// reaches the broker even when a live update replaces the reservations
// table (and so the clicked form) while the page checks the session before
// sending it (#20: a release clicked right after a reload, as the first
// live update arrived, was never sent). The session check is held until the
// submitted form has been replaced, so the race is forced, not hoped for.
func expectReleaseSurvivesSwap(u *ui, tg *Target, c playwright.Page) {
	u.t.Helper()
	login(u, c, tg.Consumer)
	_, err := c.Locator("#provider").SelectOption(playwright.SelectOptionValues{Values: &[]string{firstProvider(tg)}})
	u.ok(err, "choose provider")
	u.ok(c.Locator("#count").Fill("1"), "one chunk")
	u.ok(c.Locator("[data-testid=reserve]").Click(), "reserve")
	u.ok(u.expect.Locator(c.Locator("[data-testid=flash]")).ToContainText("Reservation requested"), "reserved")
	row := c.Locator("[data-testid=consumer-reservations] tbody tr[data-reservation]", playwright.PageLocatorOptions{
		HasText: "manual", Has: c.Locator("button.danger"),
	}).First()
	u.ok(u.expect.Locator(row).ToBeVisible(), "a releasable manual reservation")
	id, err := row.GetAttribute("data-reservation")
	u.ok(err, "reservation id")

	_, err = c.Evaluate(gateSession)
	u.ok(err, "hold the session check")
	u.ok(c.Locator(fmt.Sprintf("[data-testid=consumer-reservations] tr[data-reservation=%q] button.danger", id)).Click(), "release")
	// The console re-renders its reservations at least every refresh.
	testpoll.UntilSeen(u.t, truthDeadline, "a live update replacing the submitted form", func() (bool, string) {
		v, err := c.Evaluate(`() => window.__submitted ? String(window.__submitted.isConnected) : 'nothing submitted'`)
		u.ok(err, "read the submitted form")
		return v == "false", fmt.Sprintf("submitted form connected: %v", v)
	})
	_, err = c.Evaluate(`() => window.__openSessionGate()`)
	u.ok(err, "answer the session check")
	expectReleaseConfirmed(u, c)
	pollTruth(u, tg, "the release at the broker", func(ov api.Overview) string {
		for _, r := range ov.Reservations {
			if r.ReservationID == id {
				if r.Status != api.PhaseUnpeering && !r.Status.Terminal() {
					return fmt.Sprintf("the broker holds %s as %s: the release was not sent", id, r.Status)
				}
				return ""
			}
		}
		return "the broker does not know " + id
	})
}
