package auth

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gofiber/fiber/v2"
)

// TestSessionCookiePerPort: two consoles on one host (the demo runs every
// console on 127.0.0.1) get differently named cookies, so logging in to one
// does not end the session of the other; a session ended by a logout closes
// its Ended channel, and its cookie is then stale.
func TestSessionCookiePerPort(t *testing.T) {
	tok, err := NewStaticToken("correct-horse-battery-staple")
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewAuthenticator(Options{Verifier: tok})
	if err != nil {
		t.Fatal(err)
	}
	var ended <-chan struct{}
	app := fiber.New()
	app.Post("/login", func(c *fiber.Ctx) error {
		s, err := a.Login(c, "correct-horse-battery-staple")
		if err != nil {
			return err
		}
		ended = s.Ended()
		return c.SendStatus(http.StatusNoContent)
	})
	app.Get("/", a.Require(func(c *fiber.Ctx) error {
		if a.Stale(c) {
			return c.SendStatus(http.StatusGone)
		}
		return c.SendStatus(http.StatusUnauthorized)
	}), func(c *fiber.Ctx) error { return c.SendStatus(http.StatusOK) })
	app.Post("/logout", func(c *fiber.Ctx) error { a.Logout(c); return c.SendStatus(http.StatusNoContent) })
	do := func(method, path, host, cookie string) *http.Response {
		t.Helper()
		req := httptest.NewRequest(method, "http://"+host+path, nil)
		if cookie != "" {
			req.Header.Set("Cookie", cookie)
		}
		resp, err := app.Test(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := do(http.MethodPost, "/login", "127.0.0.1:9104", "")
	cs := resp.Cookies()
	if len(cs) != 1 || cs[0].Name != "fa_session_9104" {
		t.Fatalf("login on port 9104 set cookies %v, want one named fa_session_9104", cs)
	}
	cookie := cs[0].Name + "=" + cs[0].Value
	cases := []struct {
		name, host string
		want       int
	}{
		{"same port", "127.0.0.1:9104", http.StatusOK},
		{"another console's port", "127.0.0.1:9110", http.StatusUnauthorized}, // never logged in there: not stale
		{"no port", "127.0.0.1", http.StatusUnauthorized},
	}
	for _, c := range cases {
		if got := do(http.MethodGet, "/", c.host, cookie).StatusCode; got != c.want {
			t.Errorf("%s (%s): %d, want %d", c.name, c.host, got, c.want)
		}
	}
	do(http.MethodPost, "/logout", "127.0.0.1:9104", cookie)
	select {
	case <-ended:
	default:
		t.Fatal("the logout did not close the session's Ended channel")
	}
	if got := do(http.MethodGet, "/", "127.0.0.1:9104", cookie).StatusCode; got != http.StatusGone {
		t.Fatalf("the logged-out cookie: %d, want it stale (410 here)", got)
	}
}
