package auth

import (
	"container/list"
	"math"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"golang.org/x/time/rate"
)

// Defaults of a Throttle: 2 failed attempts per second with a burst of 10
// per source, 4 096 sources tracked (848 KiB of heap when full). Tokens have at
// least 16 characters (generated ones 256 bits), so the throttle does not
// protect the token itself; it keeps one client's flood of wrong guesses
// from burning CPU and logs, and, being per source, from locking the owner
// out.
const (
	DefaultThrottleRate       = 2
	DefaultThrottleBurst      = 10
	DefaultThrottleMaxSources = 4096
)

// ThrottleOptions configures NewThrottle; zero fields take the defaults.
type ThrottleOptions struct {
	// Rate is the sustained number of failed attempts per second allowed
	// from one source; Burst how many may come at once.
	Rate  float64
	Burst int
	// MaxSources bounds how many sources are tracked; past it the source
	// seen least recently is forgotten (its next attempt starts with a
	// full burst).
	MaxSources int
}

// Throttle limits failed authentication attempts per source (a client IP,
// IPv6 clients by /64). Only failures cost: a source whose attempts keep
// succeeding is never slowed down, and a throttled source is refused before
// its credential is looked at, so the answer never tells a guess right or
// wrong. It is safe for concurrent use.
type Throttle struct {
	rate  rate.Limit
	burst int
	max   int

	mu      sync.Mutex
	sources map[string]*list.Element // of *throttleEntry
	lru     list.List                // front: most recently seen
}

type throttleEntry struct {
	key string
	lim *rate.Limiter
}

// NewThrottle returns a Throttle.
func NewThrottle(o ThrottleOptions) *Throttle {
	if !(o.Rate > 0) || math.IsInf(o.Rate, 0) {
		o.Rate = DefaultThrottleRate
	}
	if o.Burst <= 0 {
		o.Burst = DefaultThrottleBurst
	}
	if o.MaxSources <= 0 {
		o.MaxSources = DefaultThrottleMaxSources
	}
	return &Throttle{rate: rate.Limit(o.Rate), burst: o.Burst, max: o.MaxSources, sources: map[string]*list.Element{}}
}

// Attempt is one authentication attempt admitted by Begin.
type Attempt struct {
	r   *rate.Reservation
	now time.Time
}

// Succeeded gives the attempt's cost back: only failures count.
func (a Attempt) Succeeded() {
	if a.r != nil {
		a.r.CancelAt(a.now)
	}
}

// Begin admits an attempt from source at now. When the source has used its
// allowance, ok is false and retryAfter says when its next attempt is
// admitted; the caller answers 429 with RetryAfterSeconds(retryAfter) and
// does not check the credential. Otherwise the attempt is charged; call
// Succeeded when the credential was right.
func (t *Throttle) Begin(source string, now time.Time) (a Attempt, retryAfter time.Duration, ok bool) {
	lim := t.limiter(SourceKey(source))
	r := lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return Attempt{}, d, false
	}
	return Attempt{r: r, now: now}, 0, true
}

// Sources is the number of sources tracked.
func (t *Throttle) Sources() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.sources)
}

func (t *Throttle) limiter(key string) *rate.Limiter {
	t.mu.Lock()
	defer t.mu.Unlock()
	if el, ok := t.sources[key]; ok {
		t.lru.MoveToFront(el)
		return el.Value.(*throttleEntry).lim
	}
	for len(t.sources) >= t.max {
		oldest := t.lru.Back()
		t.lru.Remove(oldest)
		delete(t.sources, oldest.Value.(*throttleEntry).key)
	}
	e := &throttleEntry{key: key, lim: rate.NewLimiter(t.rate, t.burst)}
	t.sources[key] = t.lru.PushFront(e)
	return e.lim
}

// SourceKey is the throttling key of a client address (an IP, optionally
// with a port): the IP itself for IPv4, its /64 network for IPv6 (one host
// usually holds a whole /64), the input unchanged when it is no IP.
func SourceKey(addr string) string {
	host := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	}
	ip := net.ParseIP(host)
	switch {
	case ip == nil:
		return addr
	case ip.To4() != nil:
		return ip.To4().String()
	default:
		return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
	}
}

// RetryAfterSeconds is the value of a Retry-After header for a wait of d:
// whole seconds, rounded up, at least 1.
func RetryAfterSeconds(d time.Duration) string {
	s := int64(math.Ceil(d.Seconds()))
	if s < 1 {
		s = 1
	}
	return strconv.FormatInt(s, 10)
}

// SetRetryAfter sets the Retry-After header of a 429 answer.
func SetRetryAfter(c *fiber.Ctx, d time.Duration) {
	c.Set(fiber.HeaderRetryAfter, RetryAfterSeconds(d))
}
