package agentcmd

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/deploy/testpoll"
)

// TestConsoles logs in to both agents' consoles: the provider's with the
// token it printed once on first start, the consumer's with the token from
// --console-token-file; a wrong token is refused and nothing is served
// without a session.
func TestConsoles(t *testing.T) {
	f := newFederation(t)
	if f.providerToken == "" {
		t.Fatal("the provider agent printed no console token on first start")
	}
	for _, tc := range []struct {
		name, addr, token, want string
	}{
		{"provider", f.providerConsole, f.providerToken, "provider-1"},
		{"consumer", f.consumerConsole, f.consumerToken, "consumer-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.addr == "" {
				t.Fatal("no console address")
			}
			base := "http://" + tc.addr
			jar, _ := cookiejar.New(nil)
			c := &http.Client{Jar: jar}

			resp, err := c.Get(base + "/")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if !strings.Contains(resp.Request.URL.Path, "/login") || strings.Contains(string(body), tc.want+"</") {
				t.Fatalf("without a session the console must show the login page, got %s", resp.Request.URL)
			}

			resp, err = c.PostForm(base+"/login", url.Values{"token": {"wrong-token-wrong-token-wrong"}})
			if err != nil {
				t.Fatal(err)
			}
			body, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), "not correct") {
				t.Fatalf("wrong token: status %d, want 401 with a reason", resp.StatusCode)
			}

			resp, err = c.PostForm(base+"/login", url.Values{"token": {tc.token}})
			if err != nil {
				t.Fatal(err)
			}
			body, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), tc.want) {
				t.Fatalf("after login: status %d, page does not name %s", resp.StatusCode, tc.want)
			}
			if tc.name == "consumer" {
				// The agent heartbeats at start: the console shows when.
				fresh := true // body is the page just after login
				testpoll.UntilSeen(t, 20*time.Second, "the consumer console to show the first heartbeat (not 'never')", func() (bool, string) {
					if !fresh {
						resp, err := c.Get(base + "/")
						if err != nil {
							t.Fatal(err)
						}
						body, _ = io.ReadAll(resp.Body)
						resp.Body.Close()
					}
					fresh = false
					if i := strings.Index(string(body), "never"); i >= 0 {
						return false, "…" + string(body)[max(0, i-200):i+10] + "…"
					}
					return true, ""
				})
			}
		})
	}
}
