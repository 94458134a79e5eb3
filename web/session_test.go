package web_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/federation-autoscaler/federation-autoscaler/web"
	"github.com/federation-autoscaler/federation-autoscaler/web/auth"
	"github.com/federation-autoscaler/federation-autoscaler/web/live"
	"github.com/federation-autoscaler/federation-autoscaler/web/webfake"
)

// TestSessionEndIsExplained: GET /session tells a live session (204) from an
// ended one (401); a page or a form sent with an ended session goes to the
// login page, which says the session ended and returns to the page.
func TestSessionEndIsExplained(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC))
	tok, _ := auth.NewStaticToken(testToken)
	cc, err := web.NewConsumerConsole(webfake.New(clk.Now).Consumer(), web.ConsoleOptions{SiteOptions: web.SiteOptions{Token: tok, Clock: clk}})
	if err != nil {
		t.Fatal(err)
	}
	b := &browserSim{t: t, app: cc.App()}
	status := func(method, path string, form url.Values) (int, string, string) {
		t.Helper()
		resp, body := b.do(method, path, form)
		return resp.StatusCode, resp.Header.Get("Location"), body
	}

	// Never logged in: 401, and a plain login page (nothing ended).
	if code, _, _ := status(http.MethodGet, "/session", nil); code != http.StatusUnauthorized {
		t.Fatalf("GET /session without a session: %d, want 401", code)
	}
	if _, loc, _ := status(http.MethodGet, "/", nil); strings.Contains(loc, "ended=1") {
		t.Fatalf("a browser that never logged in is sent to %q: it must not be told its session ended", loc)
	}

	b.login(testToken)
	if code, _, _ := status(http.MethodGet, "/session", nil); code != http.StatusNoContent {
		t.Fatalf("GET /session with a live session: %d, want 204", code)
	}

	clk.Step(13 * time.Hour) // past the 12 h session lifetime; the cookie stays
	cases := []struct {
		name, method, path string
		form               url.Values
		wantNext           string
	}{
		{"a page", http.MethodGet, "/?ok=policy", nil, "/?ok=policy"},
		{"a form", http.MethodPost, "/policy", url.Values{"policy": {"Price"}}, "/"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, loc, _ := status(c.method, c.path, c.form)
			want := "/login?next=" + url.QueryEscape(c.wantNext) + "&ended=1"
			if code != http.StatusSeeOther || loc != want {
				t.Fatalf("%s %s with an ended session: %d to %q, want 303 to %q", c.method, c.path, code, loc, want)
			}
			code, _, page := status(http.MethodGet, loc, nil)
			if code != http.StatusOK || !strings.Contains(page, "Your session has ended") || !strings.Contains(page, `name="next" value="`+c.wantNext+`"`) {
				t.Fatalf("login page after an ended session: %d, missing the explanation or the return path %q:\n%s", code, c.wantNext, page)
			}
		})
	}
	if code, _, _ := status(http.MethodGet, "/session", nil); code != http.StatusUnauthorized {
		t.Fatalf("GET /session after the expiry: %d, want 401", code)
	}
}

// TestDashboardWithoutLoginHasNoSessionToLose: an open dashboard answers
// 204 so that its script reconnects instead of asking for a login.
func TestDashboardWithoutLoginHasNoSessionToLose(t *testing.T) {
	d, err := web.NewDashboard(webfake.New(nil), web.DashboardOptions{})
	if err != nil {
		t.Fatal(err)
	}
	app := web.NewApp()
	d.Mount(app)
	b := &browserSim{t: t, app: app}
	if resp, _ := b.do(http.MethodGet, "/session", nil); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("GET /session on an open dashboard: %d, want 204", resp.StatusCode)
	}
}

// TestWebsocketClosedWhenSessionEnds: a logout (in any tab) or the expiry
// closes the session's live socket with live.StatusSessionEnded, so the page
// says the session ended instead of reconnecting for ever.
func TestWebsocketClosedWhenSessionEnds(t *testing.T) {
	for _, end := range []string{"logout", "expiry"} {
		t.Run(end, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC))
			tok, _ := auth.NewStaticToken(testToken)
			cc, err := web.NewConsumerConsole(webfake.New(clk.Now).Consumer(), web.ConsoleOptions{SiteOptions: web.SiteOptions{Token: tok, Clock: clk}})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			served := make(chan error, 2)
			go func() { served <- web.Serve(ctx, cc.App(), ln) }()
			go func() { served <- cc.Run(ctx) }()
			defer func() { cancel(); _, _ = <-served, <-served }()
			base := "http://" + ln.Addr().String()

			noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
			resp, err := noRedirect.PostForm(base+"/login", url.Values{"token": {testToken}, "next": {"/"}})
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			var cookie string
			for _, c := range resp.Cookies() {
				cookie = c.Name + "=" + c.Value
			}
			if cookie == "" {
				t.Fatalf("login: no session cookie (status %d)", resp.StatusCode)
			}
			dctx, dcancel := context.WithTimeout(ctx, 10*time.Second)
			defer dcancel()
			ws, _, err := websocket.Dial(dctx, "ws"+strings.TrimPrefix(base, "http")+"/ws", &websocket.DialOptions{
				HTTPHeader: http.Header{"Origin": {base}, "Cookie": {cookie}},
			})
			if err != nil {
				t.Fatalf("dial the live socket: %v", err)
			}
			defer func() { _ = ws.CloseNow() }()

			switch end {
			case "logout":
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/", nil)
				req.Header.Set("Cookie", cookie)
				page, err := noRedirect.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(page.Body)
				page.Body.Close()
				m := csrfRE.FindStringSubmatch(string(body))
				if m == nil {
					t.Fatalf("no CSRF token on the console page (status %d)", page.StatusCode)
				}
				req, _ = http.NewRequestWithContext(ctx, http.MethodPost, base+"/logout", strings.NewReader(url.Values{"_csrf": {m[1]}}.Encode()))
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				req.Header.Set("Cookie", cookie)
				out, err := noRedirect.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				out.Body.Close()
				if out.StatusCode != http.StatusSeeOther {
					t.Fatalf("logout: %d, want 303", out.StatusCode)
				}
			case "expiry":
				// The socket arms its timer on the fake clock right after the
				// handshake; a timer armed after a step fires at the next one,
				// so keep stepping (by a second) until the socket ends.
				clk.Step(12*time.Hour + time.Second)
				stepping := make(chan struct{})
				defer close(stepping)
				go func() {
					t := time.NewTicker(20 * time.Millisecond)
					defer t.Stop()
					for {
						select {
						case <-stepping:
							return
						case <-t.C:
							clk.Step(time.Second)
						}
					}
				}()
			}
			for {
				_, _, err := ws.Read(dctx)
				if err == nil {
					continue // a live update pushed before the end
				}
				if got := websocket.CloseStatus(err); got != live.StatusSessionEnded {
					t.Fatalf("after the %s the socket ended with %v (status %d), want close status %d", end, err, got, live.StatusSessionEnded)
				}
				return
			}
		})
	}
}
