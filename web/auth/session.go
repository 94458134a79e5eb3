package auth

import (
	"crypto/subtle"
	"errors"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
)

// CSRFField is the name of the hidden form field carrying the CSRF token.
const CSRFField = "_csrf"

// Session is one logged-in browser.
type Session struct {
	ID      string
	CSRF    string
	Expires time.Time
	// ended is closed when the session ends before Expires (logout, or
	// evicted by a newer one).
	ended chan struct{}
}

// Ended is closed when the session is logged out or evicted; its expiry is
// Expires (nothing is closed then: compare with the clock). A Session not
// made by an Authenticator never ends.
func (s Session) Ended() <-chan struct{} { return s.ended }

// Options configures an Authenticator.
type Options struct {
	// Verifier checks login tokens (required).
	Verifier Verifier
	// CookieName defaults to "fa_session". The port the browser used is
	// appended ("fa_session_9104"): browsers do not tell cookies of two
	// ports of one host apart, and two consoles on one host (the demo's,
	// all on 127.0.0.1) must not log each other out.
	CookieName string
	// Secure marks the cookie Secure; set it when the listener serves TLS.
	Secure bool
	// TTL is a session's lifetime (default 12h).
	TTL time.Duration
	// MaxSessions bounds the session table; the oldest is evicted (default 256).
	MaxSessions int
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Random is the entropy source (default crypto/rand).
	Random io.Reader
}

// Authenticator owns the sessions of one console.
type Authenticator struct {
	opts     Options
	mu       sync.Mutex
	sessions map[string]Session
}

// ErrBadToken is returned by Login for a wrong token.
var ErrBadToken = errors.New("the login token is not correct")

// NewAuthenticator validates opts and returns an Authenticator.
func NewAuthenticator(opts Options) (*Authenticator, error) {
	if opts.Verifier == nil {
		return nil, errors.New("auth: a token verifier is required")
	}
	if opts.CookieName == "" {
		opts.CookieName = "fa_session"
	}
	if opts.TTL <= 0 {
		opts.TTL = 12 * time.Hour
	}
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = 256
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Authenticator{opts: opts, sessions: make(map[string]Session)}, nil
}

// Login checks token and, when it is right, starts a session and sets its
// cookie (HttpOnly, SameSite=Strict, Secure when configured or on TLS).
func (a *Authenticator) Login(c *fiber.Ctx, token string) (Session, error) {
	if token == "" || !a.opts.Verifier.Verify(token) {
		return Session{}, ErrBadToken
	}
	id, err := GenerateToken(a.opts.Random)
	if err != nil {
		return Session{}, err
	}
	csrf, err := GenerateToken(a.opts.Random)
	if err != nil {
		return Session{}, err
	}
	now := a.opts.Now()
	s := Session{ID: id, CSRF: csrf, Expires: now.Add(a.opts.TTL), ended: make(chan struct{})}
	a.mu.Lock()
	a.gcLocked(now)
	if len(a.sessions) >= a.opts.MaxSessions {
		var oldest string
		for k, v := range a.sessions {
			if oldest == "" || v.Expires.Before(a.sessions[oldest].Expires) {
				oldest = k
			}
		}
		a.endLocked(oldest)
	}
	a.sessions[id] = s
	a.mu.Unlock()
	c.Cookie(&fiber.Cookie{
		Name:     a.cookieName(c),
		Value:    id,
		Path:     "/",
		Expires:  s.Expires,
		HTTPOnly: true,
		Secure:   a.opts.Secure || c.Protocol() == "https",
		SameSite: fiber.CookieSameSiteStrictMode,
	})
	return s, nil
}

// Logout ends the request's session and clears the cookie.
func (a *Authenticator) Logout(c *fiber.Ctx) {
	if id := c.Cookies(a.cookieName(c)); id != "" {
		a.mu.Lock()
		a.endLocked(id)
		a.mu.Unlock()
	}
	c.Cookie(&fiber.Cookie{
		Name: a.cookieName(c), Value: "", Path: "/", MaxAge: -1,
		HTTPOnly: true, Secure: a.opts.Secure || c.Protocol() == "https",
		SameSite: fiber.CookieSameSiteStrictMode,
	})
}

// cookieName is the session cookie's name for the port the request came
// to (from its Host header; the bare name without a port or with anything
// but digits there).
func (a *Authenticator) cookieName(c *fiber.Ctx) string {
	_, port, err := net.SplitHostPort(string(c.Request().Host()))
	if err != nil || port == "" || len(port) > 5 || strings.Trim(port, "0123456789") != "" {
		return a.opts.CookieName
	}
	return a.opts.CookieName + "_" + port
}

// Current returns the request's live session.
func (a *Authenticator) Current(c *fiber.Ctx) (Session, bool) {
	id := c.Cookies(a.cookieName(c))
	if id == "" {
		return Session{}, false
	}
	now := a.opts.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	s, ok := a.sessions[id]
	if !ok {
		return Session{}, false
	}
	if !now.Before(s.Expires) {
		a.endLocked(id)
		return Session{}, false
	}
	return s, true
}

// Stale reports whether the request carries a session cookie that names no
// live session: the session expired, was logged out, or the console
// restarted since (sessions live in memory). A request without the cookie
// never logged in and is not stale.
func (a *Authenticator) Stale(c *fiber.Ctx) bool {
	if c.Cookies(a.cookieName(c)) == "" {
		return false
	}
	_, ok := a.Current(c)
	return !ok
}

// endLocked forgets session id and closes its Ended channel.
func (a *Authenticator) endLocked(id string) {
	s, ok := a.sessions[id]
	if !ok {
		return
	}
	delete(a.sessions, id)
	if s.ended != nil {
		close(s.ended)
	}
}

func (a *Authenticator) gcLocked(now time.Time) {
	for k, v := range a.sessions {
		if !now.Before(v.Expires) {
			a.endLocked(k)
		}
	}
}

type sessionKey struct{}

// Require lets requests with a live session through (the session is then
// available through SessionOf). Others get onMissing, typically a redirect
// to the login page for pages and 401 for the websocket.
func (a *Authenticator) Require(onMissing fiber.Handler) fiber.Handler {
	return func(c *fiber.Ctx) error {
		s, ok := a.Current(c)
		if !ok {
			return onMissing(c)
		}
		c.Locals(sessionKey{}, s)
		return c.Next()
	}
}

// SessionOf returns the session Require stored on the request.
func SessionOf(c *fiber.Ctx) (Session, bool) {
	s, ok := c.Locals(sessionKey{}).(Session)
	return s, ok
}

// ErrCSRF explains a refused write.
var ErrCSRF = errors.New("the form's security token (CSRF) is missing or does not match your session; reload the page and submit again")

// CheckCSRF compares the form's CSRF field with the session's token, in
// constant time.
func CheckCSRF(c *fiber.Ctx, s Session) error {
	got := c.FormValue(CSRFField)
	if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(s.CSRF)) != 1 {
		return ErrCSRF
	}
	return nil
}

// SafeNext returns next when it is a local absolute path, else "/". It keeps
// the login redirect from sending the browser to another site.
func SafeNext(next string) string {
	if next == "" || !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") {
		return "/"
	}
	u, err := url.Parse(next)
	if err != nil || u.IsAbs() || u.Host != "" {
		return "/"
	}
	return next
}
