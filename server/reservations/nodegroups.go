package reservations

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// NodeGroupsCacheBytes bounds the encoded node-group views NodeGroupsBody
// keeps (64 MiB: a Standard view of a few groups is 1–2 KiB, a Choice view
// of 2 × 256 groups about 200 KiB). A view that does not fit is encoded
// again for every request, as if there were no cache.
const NodeGroupsCacheBytes = 64 << 20

// NodeGroups implements rest.Broker through the placement index, with the
// groups capped to what the consumer's budget affords.
//
// Everything it reads must move viewKey when it changes: NodeGroupsBody
// serves the encoding of an earlier call for as long as viewKey stays,
// except for a consumer with a budget (its cap and status move with its
// spend, that is with time: its views are never cached).
func (s *Service) NodeGroups(ctx context.Context, cn string, all bool) (api.NodeGroupListResponse, error) {
	v := s.idx.View(cn, all)
	if _, ok := s.budgeted.Load(cn); ok {
		s.mu.Lock()
		s.capToBudgetLocked(cn, &v, all, s.clock.Now())
		s.mu.Unlock()
	}
	if v.NodeGroups == nil {
		v.NodeGroups = []api.NodeGroupView{}
	}
	return v, nil
}

// viewKey is the generation of every node-group view: the placement
// index's epoch, which moves with each advertisement, availability,
// sharing rule, consumer state and usage the views read (see
// placement.Index.Epoch). It never goes back.
func (s *Service) viewKey() uint64 { return s.idx.Epoch() }

// NodeGroupsBody returns NodeGroups(ctx, cn, all) encoded as JSON, the
// body of GET /api/v1/nodegroups, with servedAt the service clock's now.
// The encoding is kept per consumer and all until viewKey moves, so the
// periodic list of an unchanged federation is not encoded again; the
// bytes are those json.Marshal gives for the same view. The caller owns
// the returned slice.
func (s *Service) NodeGroupsBody(ctx context.Context, cn string, all bool) ([]byte, error) {
	now, err := metav1.NewTime(s.clock.Now()).MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("encode servedAt: %w", err)
	}
	if _, ok := s.budgeted.Load(cn); ok {
		return s.encodeNodeGroups(ctx, cn, all)
	}
	k := viewCacheKey{cn: cn, all: all}
	// The key is read before the view is built: a change meanwhile moves
	// it again and the next call builds anew; a body is never kept under
	// a later key than the state it shows.
	gen := s.viewKey()
	if e, ok := s.views.get(k, gen); ok {
		return e.body(now), nil
	}
	b, err := s.encodeNodeGroups(ctx, cn, all)
	if err != nil {
		return nil, err
	}
	e, ok := splitServedAt(b)
	if !ok {
		return nil, fmt.Errorf("encode node groups: no servedAt in %.64q", b)
	}
	e.gen = gen
	s.views.put(k, e, NodeGroupsCacheBytes)
	return e.body(now), nil
}

// encodeNodeGroups is NodeGroups(ctx, cn, all) encoded by json.Marshal.
func (s *Service) encodeNodeGroups(ctx context.Context, cn string, all bool) ([]byte, error) {
	v, err := s.NodeGroups(ctx, cn, all)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode node groups: %w", err)
	}
	return b, nil
}

// viewCacheKey names one cached view.
type viewCacheKey struct {
	cn  string
	all bool
}

// encodedView is a view's JSON cut around its servedAt value.
type encodedView struct {
	gen            uint64
	prefix, suffix []byte
}

// viewEntryOverhead is what an entry costs besides its bytes (key, slice
// headers, map slot), counted against NodeGroupsCacheBytes.
const viewEntryOverhead = 128

func (e encodedView) size() int { return len(e.prefix) + len(e.suffix) + viewEntryOverhead }

// body joins the cut encoding around servedAt.
func (e encodedView) body(servedAt []byte) []byte {
	out := make([]byte, 0, len(e.prefix)+len(servedAt)+len(e.suffix))
	out = append(out, e.prefix...)
	out = append(out, servedAt...)
	return append(out, e.suffix...)
}

// servedAtKey is the response's top-level servedAt member. No nested
// object of a view has that member, and inside a JSON string the quotes
// would be escaped.
var servedAtKey = []byte(`"servedAt":`)

// splitServedAt cuts b, an encoded api.NodeGroupListResponse, around the
// value of servedAt (a quoted RFC 3339 time or null).
func splitServedAt(b []byte) (encodedView, bool) {
	i := bytes.LastIndex(b, servedAtKey)
	if i < 0 {
		return encodedView{}, false
	}
	start := i + len(servedAtKey)
	rest := b[start:]
	var n int
	switch {
	case bytes.HasPrefix(rest, []byte("null")):
		n = len("null")
	case len(rest) > 0 && rest[0] == '"':
		j := bytes.IndexByte(rest[1:], '"')
		if j < 0 {
			return encodedView{}, false
		}
		n = j + 2
	default:
		return encodedView{}, false
	}
	return encodedView{
		prefix: bytes.Clone(b[:start]),
		suffix: bytes.Clone(rest[n:]),
	}, true
}

// viewCache holds encoded views up to a byte budget.
type viewCache struct {
	mu      sync.Mutex
	entries map[viewCacheKey]encodedView
	bytes   int
	// swept is the generation whose stale entries were last dropped to
	// make room: at most one sweep per generation.
	swept uint64
}

// get returns k's entry if it was encoded at generation gen.
func (c *viewCache) get(k viewCacheKey, gen uint64) (encodedView, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[k]
	return e, ok && e.gen == gen
}

// put keeps e under k if it fits in budget bytes, dropping the entries of
// earlier generations first when it does not.
func (c *viewCache) put(k viewCacheKey, e encodedView, budget int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[viewCacheKey]encodedView{}
	}
	if old, ok := c.entries[k]; ok {
		if old.gen > e.gen {
			return // a newer view is kept already
		}
		c.bytes -= old.size()
		delete(c.entries, k)
	}
	if c.bytes+e.size() > budget && c.swept != e.gen {
		c.swept = e.gen
		for ok, old := range c.entries {
			if old.gen < e.gen {
				c.bytes -= old.size()
				delete(c.entries, ok)
			}
		}
	}
	if c.bytes+e.size() > budget {
		return
	}
	c.entries[k] = e
	c.bytes += e.size()
}
