package web_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/web"
	"github.com/federation-autoscaler/federation-autoscaler/web/auth"
	"github.com/federation-autoscaler/federation-autoscaler/web/auth/authtest"
	"github.com/federation-autoscaler/federation-autoscaler/web/webfake"
)

const testToken = "correct-horse-battery-staple"

// browserSim drives a Fiber app through app.Test, keeping cookies.
type browserSim struct {
	t      *testing.T
	app    *fiber.App
	cookie string
}

func (b *browserSim) do(method, path string, form url.Values) (*http.Response, string) {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req := httptest.NewRequest(method, path, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if b.cookie != "" {
		req.Header.Set("Cookie", b.cookie)
	}
	resp, err := b.app.Test(req, 5000)
	if err != nil {
		b.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	for _, c := range resp.Cookies() {
		if c.MaxAge < 0 || c.Value == "" {
			b.cookie = ""
		} else {
			b.cookie = c.Name + "=" + c.Value
		}
	}
	out, _ := io.ReadAll(resp.Body)
	return resp, string(out)
}

var csrfRE = regexp.MustCompile(`name="csrf-token" content="([^"]+)"`)

func (b *browserSim) login(token string) string {
	b.t.Helper()
	resp, _ := b.do(http.MethodPost, "/login", url.Values{"token": {token}, "next": {"/"}})
	if resp.StatusCode != http.StatusSeeOther {
		b.t.Fatalf("login: status %d, want 303", resp.StatusCode)
	}
	_, page := b.do(http.MethodGet, "/", nil)
	m := csrfRE.FindStringSubmatch(page)
	if m == nil {
		b.t.Fatalf("no CSRF token on the page after login")
	}
	return m[1]
}

func consumerApp(t *testing.T, fed *webfake.Federation) *fiber.App {
	t.Helper()
	tok, err := auth.NewStaticToken(testToken)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := web.NewConsumerConsole(fed.Consumer(), web.ConsoleOptions{SiteOptions: web.SiteOptions{Token: tok}})
	if err != nil {
		t.Fatal(err)
	}
	return cc.App()
}

func providerApp(t *testing.T, fed *webfake.Federation, id string) *fiber.App {
	t.Helper()
	tok, err := auth.NewStaticToken(testToken)
	if err != nil {
		t.Fatal(err)
	}
	pc, err := web.NewProviderConsole(fed.Provider(id), web.ConsoleOptions{SiteOptions: web.SiteOptions{Token: tok}})
	if err != nil {
		t.Fatal(err)
	}
	return pc.App()
}

func TestConsoleRequiresLogin(t *testing.T) {
	b := &browserSim{t: t, app: consumerApp(t, webfake.New(nil))}
	resp, _ := b.do(http.MethodGet, "/", nil)
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/login") {
		t.Fatalf("anonymous GET /: %d %q, want a redirect to /login", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp, _ = b.do(http.MethodPost, "/policy", url.Values{"policy": {"Price"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("anonymous POST: %d, want a redirect to the login", resp.StatusCode)
	}
	resp, _ = b.do(http.MethodGet, "/ws", nil)
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("anonymous websocket: %d, want 401", resp.StatusCode)
	}
}

func TestLogin(t *testing.T) {
	cases := []struct {
		name       string
		token      string
		wantStatus int
		wantBody   string
	}{
		{"right token", testToken, http.StatusSeeOther, ""},
		{"wrong token", "not-the-token-at-all", http.StatusUnauthorized, "the access token is not correct"},
		{"empty token", "", http.StatusUnauthorized, "the access token is not correct"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := &browserSim{t: t, app: consumerApp(t, webfake.New(nil))}
			resp, body := b.do(http.MethodPost, "/login", url.Values{"token": {tc.token}, "next": {"//evil.example/"}})
			if resp.StatusCode != tc.wantStatus {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.wantStatus)
			}
			if !strings.Contains(body, tc.wantBody) {
				t.Fatalf("body lacks %q", tc.wantBody)
			}
			if tc.wantStatus == http.StatusSeeOther {
				if loc := resp.Header.Get("Location"); loc != "/" {
					t.Fatalf("redirect to %q, want / (open redirects refused)", loc)
				}
				set := resp.Header.Get("Set-Cookie")
				for _, want := range []string{"HttpOnly", "SameSite=Strict"} {
					if !strings.Contains(set, want) {
						t.Fatalf("session cookie %q lacks %s", set, want)
					}
				}
			} else if b.cookie != "" {
				t.Fatalf("a refused login set a cookie")
			}
		})
	}
}

func TestSecurityHeaders(t *testing.T) {
	b := &browserSim{t: t, app: consumerApp(t, webfake.New(nil))}
	for _, p := range []string{"/login", "/static/app.css"} {
		resp, _ := b.do(http.MethodGet, p, nil)
		want := map[string]string{
			"Content-Security-Policy": "script-src 'self'",
			"X-Content-Type-Options":  "nosniff",
			"X-Frame-Options":         "DENY",
			"Referrer-Policy":         "no-referrer",
		}
		for h, v := range want {
			if !strings.Contains(resp.Header.Get(h), v) {
				t.Errorf("%s: header %s = %q, want it to contain %q", p, h, resp.Header.Get(h), v)
			}
		}
		if csp := resp.Header.Get("Content-Security-Policy"); strings.Contains(csp, "unsafe-inline") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("%s: CSP %q must forbid inline script and framing", p, csp)
		}
	}
}

func TestCSRF(t *testing.T) {
	fed := webfake.New(nil)
	b := &browserSim{t: t, app: consumerApp(t, fed)}
	csrf := b.login(testToken)
	cases := []struct {
		name  string
		token string
	}{{"missing", ""}, {"wrong", "x" + csrf}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			form := url.Values{"policy": {"Price"}}
			if tc.token != "" {
				form.Set(auth.CSRFField, tc.token)
			}
			resp, body := b.do(http.MethodPost, "/policy", form)
			if resp.StatusCode != http.StatusForbidden {
				t.Fatalf("status %d, want 403", resp.StatusCode)
			}
			if !strings.Contains(body, "security token (CSRF) is missing or does not match") {
				t.Fatalf("the refusal page does not say why")
			}
			st, _ := fed.Consumer().Status(context.Background())
			if st.Placement.Type == api.PlacementPrice {
				t.Fatalf("the refused write was applied")
			}
		})
	}
}

func TestConsumerWrites(t *testing.T) {
	fed := webfake.New(nil)
	b := &browserSim{t: t, app: consumerApp(t, fed)}
	csrf := b.login(testToken)
	ctx := context.Background()

	resp, _ := b.do(http.MethodPost, "/policy", url.Values{auth.CSRFField: {csrf}, "policy": {"Price"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("policy: %d", resp.StatusCode)
	}
	resp, _ = b.do(http.MethodPost, "/workload", url.Values{auth.CSRFField: {csrf}, "enabled": {"on"}, "replicas": {"4"}, "pod_cpu": {"1"}, "pod_memory": {"1Gi"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("workload: %d", resp.StatusCode)
	}
	st, _ := fed.Consumer().Status(ctx)
	if st.Placement.Type != api.PlacementPrice || len(st.Reservations) != 1 || st.Reservations[0].ProviderClusterID != "paris" {
		t.Fatalf("after Price + workload: policy %s, reservations %+v; want one on paris", st.Placement.Type, st.Reservations)
	}
	// Three chunks make three one-chunk reservations.
	resp, _ = b.do(http.MethodPost, "/reservations", url.Values{auth.CSRFField: {csrf}, "provider": {"milan"}, "chunk_type": {"standard"}, "count": {"3"}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/?ok=reserved&n=3" {
		t.Fatalf("reserve 3 chunks: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	st, _ = fed.Consumer().Status(ctx)
	manual := 0
	for _, r := range st.Reservations {
		if r.Manual {
			manual++
			if r.ChunkCount != 1 || r.ProviderClusterID != "milan" {
				t.Errorf("manual reservation %+v, want one chunk on milan", r)
			}
		}
	}
	if manual != 3 {
		t.Fatalf("%d manual reservations after asking for 3 chunks, want 3", manual)
	}
	_, body := b.do(http.MethodGet, "/?ok=reserved&n=3", nil)
	if !strings.Contains(body, "3 reservations requested, one per chunk.") {
		t.Errorf("the confirmation does not say three reservations were made")
	}
	// The workload summary counts in words: 4 replicas, 1 replica.
	_, body = b.do(http.MethodGet, "/", nil)
	if !strings.Contains(body, "Workload on: 4 replicas of 1 CPU") {
		t.Errorf("the workload summary does not say 4 replicas")
	}
	resp, _ = b.do(http.MethodPost, "/workload", url.Values{auth.CSRFField: {csrf}, "enabled": {"on"}, "replicas": {"1"}, "pod_cpu": {"1"}, "pod_memory": {"1Gi"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("workload: %d", resp.StatusCode)
	}
	if _, body = b.do(http.MethodGet, "/", nil); !strings.Contains(body, "Workload on: 1 replica of 1 CPU") {
		t.Errorf("one replica is not said in the singular")
	}
}

func TestValidationErrorsRendered(t *testing.T) {
	cases := []struct {
		name     string
		path     string
		form     url.Values
		wantMsgs []string
	}{
		{"bad policy and weights", "/policy", url.Values{"policy": {"Cheapest"}, "w_price": {"1001"}},
			[]string{"choose one of Standard, Price, Eco, Latency, Weighted or Choice", "Price weight: 1001 is not allowed: must be a finite number from 0 to 1000"}},
		{"weighted all zero", "/policy", url.Values{"policy": {"Weighted"}}, []string{"set at least one weight above 0"}},
		{"bad workload", "/workload", url.Values{"replicas": {"-1"}, "pod_cpu": {"lots"}, "pod_memory": {"0"}},
			[]string{"Replicas: a whole number from 0 to 500", "CPU per pod", "Memory per pod"}},
		{"bad reservation", "/reservations", url.Values{"provider": {"atlantis"}, "chunk_type": {"tpu"}, "count": {"0"}},
			[]string{"choose one of the providers the broker offers", "Chunks: a whole number from 1 to 64"}},
		{"chunk type nobody offers", "/reservations", url.Values{"provider": {"paris"}, "chunk_type": {"gpu"}, "count": {"1"}},
			[]string{"Chunk type: choose one the providers offer (standard)"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := &browserSim{t: t, app: consumerApp(t, webfake.New(nil))}
			tc.form.Set(auth.CSRFField, b.login(testToken))
			resp, body := b.do(http.MethodPost, tc.path, tc.form)
			if resp.StatusCode != http.StatusUnprocessableEntity {
				t.Fatalf("status %d, want 422", resp.StatusCode)
			}
			for _, m := range tc.wantMsgs {
				if !strings.Contains(body, m) {
					t.Errorf("page lacks %q", m)
				}
			}
			if !strings.Contains(body, `aria-invalid="true"`) && tc.path != "/policy" {
				t.Errorf("no field marked aria-invalid")
			}
		})
	}
}

func TestProviderSharingValidationAndApply(t *testing.T) {
	fed := webfake.New(nil)
	b := &browserSim{t: t, app: providerApp(t, fed, "milan")}
	csrf := b.login(testToken)
	bad := url.Values{auth.CSRFField: {csrf}, "price_cpu": {"abc"}, "price_memory": {"-1"},
		"cap_mode_cpu": {"percent"}, "cap_value_cpu": {"150"}, "cap_mode_memory": {"fixed"}, "cap_value_memory": {"lots"},
		"price_gpu": {"9e307"}, "cap_mode_gpu": {"fixed"}, "cap_value_gpu": {"1e30"},
		"allowed": {"Bad_ID"}, "denied": {"../p1"}, "quota": {"-3"}}
	resp, body := b.do(http.MethodPost, "/sharing", bad)
	if resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("status %d, want 422", resp.StatusCode)
	}
	for _, m := range []string{"CPU price: &#34;abc&#34; is not a number",
		"Memory price: &#34;-1&#34; is not allowed: must be a price from 0 to 1000000 per unit-hour",
		"GPU price: &#34;90e306&#34; is not allowed: must be a price from 0 to 1000000 per unit-hour",
		"CPU cap: 150 is not allowed: must be a whole percentage from 0 to 100", "a fixed cap must be an amount such as 8Gi",
		"GPU cap: &#34;1e30&#34; is not allowed: must be a quantity from 0 to 1E",
		"Allowed consumers: &#34;Bad_ID&#34; is not allowed: must be a cluster id",
		"Denied consumers: &#34;../p1&#34; is not allowed: must be a cluster id", "Chunks per consumer: a whole number"} {
		if !strings.Contains(body, m) {
			t.Errorf("page lacks %q", m)
		}
	}
	good := url.Values{auth.CSRFField: {csrf}, "price_cpu": {"0.05"}, "price_memory": {"0.004"},
		"cap_mode_cpu": {"percent"}, "cap_value_cpu": {"50"}, "cap_mode_memory": {"fixed"}, "cap_value_memory": {"8Gi"},
		"allowed": {"rome, naples\nrome"}, "denied": {"venice"}, "quota": {"3"}, "renewable": {"on"}}
	resp, _ = b.do(http.MethodPost, "/sharing", good)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("valid apply: status %d, want 303", resp.StatusCode)
	}
	cfg, _ := fed.Provider("milan").SharingConfig(context.Background())
	cpu, mem := cfg.UnitPrices["cpu"], cfg.CapacityFixed["memory"]
	if cpu.String() != "50m" || cfg.CapacityScalePercent["cpu"] != 50 || mem.String() != "8Gi" || !cfg.Renewable ||
		strings.Join(cfg.Sharing.AllowedConsumers, ",") != "rome,naples" || cfg.Sharing.DeniedConsumers[0] != "venice" ||
		cfg.Sharing.MaxChunksPerConsumer != 3 {
		t.Fatalf("applied config %+v", cfg)
	}
	ov, _ := fed.Overview(context.Background())
	for _, a := range ov.Advertisements {
		if a.ClusterID == "milan" && a.CostPerChunk != 0.116 {
			t.Fatalf("milan cost per chunk %v, want 0.116", a.CostPerChunk)
		}
	}
}

func TestDashboardTokenOptional(t *testing.T) {
	fed := webfake.New(nil)
	open, err := web.NewDashboard(fed, web.DashboardOptions{})
	if err != nil {
		t.Fatal(err)
	}
	app := web.NewApp()
	open.Mount(app)
	b := &browserSim{t: t, app: app}
	resp, body := b.do(http.MethodGet, "/", nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `data-provider="paris"`) {
		t.Fatalf("open dashboard: %d", resp.StatusCode)
	}

	tok, _ := auth.NewStaticToken(testToken)
	closed, err := web.NewDashboard(fed, web.DashboardOptions{SiteOptions: web.SiteOptions{Token: tok, Prefix: "/dash"}})
	if err != nil {
		t.Fatal(err)
	}
	app = web.NewApp()
	closed.Mount(app)
	b = &browserSim{t: t, app: app}
	resp, _ = b.do(http.MethodGet, "/dash/", nil)
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/dash/login") {
		t.Fatalf("token dashboard: %d %q, want a redirect to /dash/login", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp, _ = b.do(http.MethodPost, "/dash/login", url.Values{"token": {testToken}, "next": {"/dash/"}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/dash/" {
		t.Fatalf("login: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp, _ = b.do(http.MethodGet, "/dash/", nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("after login: %d", resp.StatusCode)
	}
}

func TestSessionExpires(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC))
	tok, _ := auth.NewStaticToken(testToken)
	cc, err := web.NewConsumerConsole(webfake.New(clk.Now).Consumer(), web.ConsoleOptions{SiteOptions: web.SiteOptions{Token: tok, Clock: clk}})
	if err != nil {
		t.Fatal(err)
	}
	b := &browserSim{t: t, app: cc.App()}
	b.login(testToken)
	if resp, _ := b.do(http.MethodGet, "/", nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("fresh session: %d", resp.StatusCode)
	}
	clk.Step(13 * time.Hour)
	if resp, _ := b.do(http.MethodGet, "/", nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("expired session: %d, want a redirect to the login", resp.StatusCode)
	}
}

func TestDashboardOwnsItsRoutes(t *testing.T) {
	d, err := web.NewDashboard(webfake.New(nil), web.DashboardOptions{SiteOptions: web.SiteOptions{Prefix: "/ui"}})
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]bool{"/ui/": true, "/ui/ws": true, "/ui/static/app.css": true, "/ui/login": true,
		"/api/v1/overview": false, "/metrics": false, "/": false} {
		if got := d.Owns(path); got != want {
			t.Errorf("Owns(%q) = %v, want %v", path, got, want)
		}
	}
}

func TestLoginAttemptsAreRateLimited(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC))
	tok, _ := auth.NewStaticToken(testToken)
	cc, err := web.NewConsumerConsole(webfake.New(clk.Now).Consumer(), web.ConsoleOptions{SiteOptions: web.SiteOptions{Token: tok, Clock: clk}})
	if err != nil {
		t.Fatal(err)
	}
	b := &browserSim{t: t, app: cc.App()}
	limited := 0
	for range 30 {
		resp, _ := b.do(http.MethodPost, "/login", url.Values{"token": {"wrong-wrong-wrong"}})
		if resp.StatusCode == http.StatusTooManyRequests {
			limited++
			if resp.Header.Get("Retry-After") == "" {
				t.Fatal("429 without Retry-After")
			}
		}
	}
	if limited != 30-auth.DefaultThrottleBurst {
		t.Fatalf("%d of 30 wrong logins in an instant limited, want all past the burst of %d", limited, auth.DefaultThrottleBurst)
	}
	clk.Step(10 * time.Second)
	if resp, _ := b.do(http.MethodPost, "/login", url.Values{"token": {testToken}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("after a pause the right token must work: %d", resp.StatusCode)
	}
}

// TestLoginFloodDoesNotLockTheOwnerOut: over real connections, a client
// flooding wrong tokens is throttled (429 + Retry-After) while the owner,
// from another address, logs in at once, every time.
func TestLoginFloodDoesNotLockTheOwnerOut(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC))
	tok, _ := auth.NewStaticToken(testToken)
	cc, err := web.NewConsumerConsole(webfake.New(clk.Now).Consumer(), web.ConsoleOptions{SiteOptions: web.SiteOptions{Token: tok, Clock: clk}})
	if err != nil {
		t.Fatal(err)
	}
	base := authtest.Serve(t, cc.App())
	attacker, owner := authtest.ClientFrom("127.0.0.2"), authtest.ClientFrom("127.0.0.3")
	post := func(c *http.Client, token string) *http.Response {
		t.Helper()
		resp, err := c.PostForm(base+"/login", url.Values{"token": {token}})
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	for round := range 5 {
		limited := 0
		for range 20 {
			if resp := post(attacker, "wrong-wrong-wrong"); resp.StatusCode == http.StatusTooManyRequests {
				limited++
				if ra, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || ra < 1 {
					t.Fatalf("429 with Retry-After %q, want whole seconds >= 1", resp.Header.Get("Retry-After"))
				}
			} else if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("wrong token: %d", resp.StatusCode)
			}
		}
		if limited == 0 {
			t.Fatalf("round %d: the attacker's flood was never throttled", round)
		}
		if resp := post(owner, testToken); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("round %d: the owner's login during the flood: %d, want 303", round, resp.StatusCode)
		}
	}
}

func TestRunTwiceIsRefused(t *testing.T) {
	d, err := web.NewDashboard(webfake.New(nil), web.DashboardOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	results := make(chan error, 2)
	for range 2 {
		go func() { results <- d.Run(ctx) }()
	}
	select {
	case err := <-results:
		if err == nil || !strings.Contains(err.Error(), "already") {
			t.Fatalf("one of two Runs must be refused at once, got %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("neither Run was refused")
	}
	cancel()
	if err := <-results; err != nil {
		t.Fatalf("the running Run: %v", err)
	}
}

// refusingConsumer is a consumer backend whose writes are refused as invalid
// by the agent behind it.
type refusingConsumer struct{ web.ConsumerBackend }

func (refusingConsumer) SetPolicy(context.Context, api.Placement) error {
	return web.Classify(web.ErrInvalid, errors.New("the agent refused the policy"))
}

// TestConsumerConsoleRefusals: non-finite, huge or out-of-range weights and
// malformed ids are refused by the console itself with a message naming the
// field, the value and the range (422, the console's answer for a form with
// invalid fields; they used to reach the agent and come back as 502); a
// refusal by the agent is 400 and an unknown reservation 404, never 502.
func TestConsumerConsoleRefusals(t *testing.T) {
	weighted := func(field, v string) url.Values {
		return url.Values{"policy": {"Weighted"}, "w_price": {"1"}, field: {v}}
	}
	cases := []struct {
		name    string
		backend func(*webfake.Federation) web.ConsumerBackend
		path    string
		form    url.Values
		status  int
		wantMsg string
	}{
		{"NaN weight", nil, "/policy", weighted("w_carbon", "NaN"), 422, "Carbon weight: NaN is not allowed: must be a finite number from 0 to 1000"},
		{"Inf weight", nil, "/policy", weighted("w_distance", "+Inf"), 422, "Distance weight: +Inf is not allowed: must be a finite number from 0 to 1000"},
		{"huge weight", nil, "/policy", weighted("w_free", "9e307"), 422, "Free capacity weight: 9e+307 is not allowed: must be a finite number from 0 to 1000"},
		{"negative weight", nil, "/policy", weighted("w_price", "-1"), 422, "Price weight: -1 is not allowed"},
		{"not a number", nil, "/policy", weighted("w_price", "lots"), 422, "Price weight: &#34;lots&#34; is not a number"},
		{"weight above 1 is fine (same rule as the broker)", nil, "/policy", weighted("w_price", "2.5"), 303, ""},
		{"agent refuses the policy", func(f *webfake.Federation) web.ConsumerBackend { return refusingConsumer{f.Consumer()} },
			"/policy", url.Values{"policy": {"Price"}}, 400, "Policy not applied: the agent refused the policy"},
		{"unknown reservation", nil, "/reservations/release", url.Values{"id": {"res-nope"}}, 404, "Release failed: reservation res-nope does not exist"},
		{"malformed reservation id", nil, "/reservations/release", url.Values{"id": {"../x"}}, 422, "Release: the reservation id &#34;../x&#34; is not allowed: must be a reservation id"},
		{"NUL in reservation id", nil, "/reservations/release", url.Values{"id": {"a\x00b"}}, 422, `&#34;a\x00b&#34; is not allowed`},
		{"empty reservation id", nil, "/reservations/release", url.Values{"id": {""}}, 422, "Release: the reservation id &#34;&#34; is not allowed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fed := webfake.New(nil)
			var backend web.ConsumerBackend = fed.Consumer()
			if tc.backend != nil {
				backend = tc.backend(fed)
			}
			tok, err := auth.NewStaticToken(testToken)
			if err != nil {
				t.Fatal(err)
			}
			cc, err := web.NewConsumerConsole(backend, web.ConsoleOptions{SiteOptions: web.SiteOptions{Token: tok}})
			if err != nil {
				t.Fatal(err)
			}
			b := &browserSim{t: t, app: cc.App()}
			tc.form.Set(auth.CSRFField, b.login(testToken))
			resp, body := b.do(http.MethodPost, tc.path, tc.form)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			if !strings.Contains(body, tc.wantMsg) {
				t.Errorf("page lacks %q", tc.wantMsg)
			}
		})
	}
}
