package rest

import (
	"bytes"
	"sync"
)

// Limits of the decoded-report caches (one for advertisements, one for
// heartbeats): a body larger than MaxCachedReport is decoded every time;
// when the bodies kept reach ReportCacheBytes the cache starts over empty.
const (
	MaxCachedReport  = 16 << 10
	ReportCacheBytes = 32 << 20
)

// reportCache keeps, per caller, the last body of a periodic report that
// decoded and validated, and its decoded value. An agent re-sends the same
// advertisement every 30 s and the same heartbeat every 15 s while nothing
// changes; such a repeat is answered from the decoded value instead of
// being decoded and validated again. The value is shared with the domain,
// which must not modify what it references (see Broker).
type reportCache[T any] struct {
	mu    sync.Mutex
	last  map[string]decodedReport[T]
	bytes int
}

type decodedReport[T any] struct {
	body []byte
	v    T
}

// decode returns the decoded value of body sent by cn: the kept one when
// body repeats cn's last report byte for byte, else decode(body), kept when
// it succeeds (a copy of body is kept).
func (c *reportCache[T]) decode(cn string, body []byte, decode func([]byte) (T, error)) (T, error) {
	c.mu.Lock()
	r, ok := c.last[cn]
	c.mu.Unlock()
	if ok && bytes.Equal(r.body, body) {
		return r.v, nil
	}
	v, err := decode(body)
	if err != nil || len(body) > MaxCachedReport {
		return v, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last == nil || c.bytes+len(body) > ReportCacheBytes {
		c.last, c.bytes = map[string]decodedReport[T]{}, 0
	}
	c.bytes += len(body) - len(c.last[cn].body)
	c.last[cn] = decodedReport[T]{body: bytes.Clone(body), v: v}
	return v, nil
}
