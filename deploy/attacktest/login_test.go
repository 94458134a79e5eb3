package attacktest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/federation-autoscaler/federation-autoscaler/deploy/testpoll"
)

// Issue #11 item 6: login throttling is per source. A client flooding
// wrong tokens from one address (127.0.0.2) is answered 429 with
// Retry-After, while the owner on another address (127.0.0.1) logs in
// every time: on a console, on the broker's dashboard and with the
// overview's Bearer token.

// guessFlood sends wrong tokens with send from several goroutines until
// stopped, and checks every answer: 401, or 429 with a Retry-After of
// whole seconds.
type guessFlood struct {
	sent, throttled atomic.Int64
	mu              sync.Mutex
	bad             []string
	cancel          context.CancelFunc
	wg              sync.WaitGroup
}

func startGuessFlood(t *testing.T, send func(c *http.Client, guess string) (*http.Response, error)) *guessFlood {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	g := &guessFlood{cancel: cancel}
	for w := range 4 {
		c := clientFrom("127.0.0.2", nil)
		g.wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				resp, err := send(c, fmt.Sprintf("wrong-guess-%d-%d-0123456789abcdef", w, i))
				if err != nil {
					continue // the flood's own connection trouble: not what is tested
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				g.sent.Add(1)
				switch resp.StatusCode {
				case http.StatusUnauthorized:
				case http.StatusTooManyRequests:
					g.throttled.Add(1)
					if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || s < 1 {
						g.fail(fmt.Sprintf("429 with Retry-After %q", resp.Header.Get("Retry-After")))
					}
				default:
					g.fail(fmt.Sprintf("a wrong token answered %d", resp.StatusCode))
				}
			}
		})
	}
	t.Cleanup(g.stop)
	return g
}

func (g *guessFlood) fail(msg string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.bad) < 10 {
		g.bad = append(g.bad, msg)
	}
}

// stop ends the flood and returns what was wrong with its answers.
func (g *guessFlood) stop() {
	g.cancel()
	g.wg.Wait()
}

// check stops the flood and fails the test if it was never throttled or an
// answer was wrong.
func (g *guessFlood) check(t *testing.T, what string) {
	t.Helper()
	g.stop()
	t.Logf("%s: %d wrong tokens from 127.0.0.2, %d answered 429", what, g.sent.Load(), g.throttled.Load())
	if g.throttled.Load() == 0 {
		t.Errorf("%s: %d wrong tokens from one address were never throttled", what, g.sent.Load())
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, b := range g.bad {
		t.Errorf("%s: %s", what, b)
	}
}

// awaitThrottled waits until the flood has been throttled at least once,
// so that the owner logs in while the flood's address is locked out.
func (g *guessFlood) awaitThrottled(t *testing.T) {
	t.Helper()
	testpoll.UntilNil(t, patience, "the flood throttled", func() error {
		if g.throttled.Load() == 0 {
			return fmt.Errorf("%d wrong tokens sent, none throttled", g.sent.Load())
		}
		return nil
	})
}

func postLogin(base string) func(c *http.Client, guess string) (*http.Response, error) {
	return func(c *http.Client, guess string) (*http.Response, error) {
		return c.PostForm(base+"/login", url.Values{"token": {guess}})
	}
}

// ownerLogins logs in n times from 127.0.0.1; each must land on the page
// behind the login.
func ownerLogins(t *testing.T, base, token string, n int) {
	t.Helper()
	for i := range n {
		s := login(t, base, token, "127.0.0.1")
		if s.csrf == "" {
			t.Fatalf("owner login %d/%d at %s did not open a session", i+1, n, base)
		}
	}
}

func TestOwnerLogsInDuringAConsoleLoginFlood(t *testing.T) {
	b := startBroker(t, 1024)
	a := startAgent(t, b, 1024)
	base := "http://" + a.console
	g := startGuessFlood(t, postLogin(base))
	g.awaitThrottled(t)
	ownerLogins(t, base, a.consoleToken, 20)
	g.check(t, "consumer console")
}

func TestOwnerLogsInDuringADashboardLoginFlood(t *testing.T) {
	const token = "attack-suite-dashboard-token-0123456789"
	b := startBroker(t, 1024, "--dashboard-token", token)
	base := "http://" + b.dashboard
	t.Run("login page", func(t *testing.T) {
		g := startGuessFlood(t, postLogin(base))
		g.awaitThrottled(t)
		ownerLogins(t, base, token, 20)
		g.check(t, "dashboard login")
	})
	t.Run("overview Bearer token", func(t *testing.T) {
		overview := func(c *http.Client, tok string) (*http.Response, error) {
			req, _ := http.NewRequest("GET", base+"/api/v1/overview", nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			return c.Do(req)
		}
		g := startGuessFlood(t, overview)
		g.awaitThrottled(t)
		owner := clientFrom("127.0.0.1", nil)
		for i := range 50 {
			resp, err := overview(owner, token)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"capacity"`) {
				t.Fatalf("the owner's overview %d/50 during the flood: %d %s", i+1, resp.StatusCode, body)
			}
		}
		g.check(t, "overview token guard")
	})
}
