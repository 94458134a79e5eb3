package rest

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// limiter holds one token bucket per client identity. Buckets idle long
// enough to be full again are evicted, so memory stays bounded by the
// number of recently active callers.
type limiter struct {
	rps   rate.Limit
	burst int
	// idle is how long a bucket must be unused before it is evicted; by
	// then it has refilled, so evicting it changes nothing for its owner.
	idle time.Duration

	mu        sync.Mutex
	buckets   map[string]*bucket
	lastSweep time.Time
}

type bucket struct {
	lim  *rate.Limiter
	last time.Time
}

func newLimiter(rps float64, burst int) *limiter {
	idle := time.Duration(float64(burst) / rps * float64(time.Second))
	if idle < time.Minute {
		idle = time.Minute
	}
	return &limiter{rps: rate.Limit(rps), burst: burst, idle: idle, buckets: map[string]*bucket{}}
}

// allow takes a token from key's bucket. When none is left it returns false
// and how long until one is.
func (l *limiter) allow(key string, now time.Time) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.lastSweep) >= l.idle {
		for k, b := range l.buckets {
			if now.Sub(b.last) >= l.idle {
				delete(l.buckets, k)
			}
		}
		l.lastSweep = now
	}
	b := l.buckets[key]
	if b == nil {
		b = &bucket{lim: rate.NewLimiter(l.rps, l.burst)}
		l.buckets[key] = b
	}
	b.last = now
	if b.lim.AllowN(now, 1) {
		return true, 0
	}
	r := b.lim.ReserveN(now, 1)
	wait := r.DelayFrom(now)
	r.CancelAt(now)
	return false, wait
}

// size is the number of buckets held (tests).
func (l *limiter) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}
