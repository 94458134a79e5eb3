package experiment

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sync"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/agent/probe"
)

// simNetwork is the simulated network between one consumer and the
// providers (latency.network: simulated): a probe's round trip is the
// latency model's value for the pair at that instant (what the generator
// writes as the truth) plus a one-sided jitter, an exponential draw of
// mean latency.jitterMs; a probe over the timeout is lost. It answers at
// once, so the machine's load does not change what is measured; the
// consumer's Prober (cache, concurrency bound, estimator) is the real one.
type simNetwork struct {
	r      *runner
	c      int
	jitter float64 // ms
	mu     sync.Mutex
	rng    *rand.Rand
}

// network is what consumer c's probes travel over: the simulated network
// or UDP from the consumer's own loopback address.
func (r *runner) network(c int) probe.Network {
	if r.cfg.Latency.Network == NetworkUDP {
		return probe.UDP{Source: netip.MustParseAddr(r.fed.Consumers[c].Address)}
	}
	return r.simNetwork(c)
}

func (r *runner) simNetwork(c int) *simNetwork {
	return &simNetwork{r: r, c: c, jitter: *r.cfg.Latency.JitterMs, rng: rand.New(rand.NewPCG(r.cfg.Seed, 0x6e6574<<8|uint64(c)))}
}

// Probe implements probe.Network.
func (n *simNetwork) Probe(_ context.Context, ep string, count int, timeout time.Duration) ([]time.Duration, error) {
	p, ok := n.r.endpointProvider(ep)
	if !ok {
		return nil, fmt.Errorf("simulated network: no provider listens on %q", ep)
	}
	truth := n.r.cond.LatencyAt(n.r.cond.Tau(time.Now()), n.c, p)
	out := make([]time.Duration, 0, count)
	n.mu.Lock()
	defer n.mu.Unlock()
	for range count {
		d := time.Duration((truth + n.rng.ExpFloat64()*n.jitter) * float64(time.Millisecond))
		if d <= timeout {
			out = append(out, d)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("simulated network: no reply from %q within %s", ep, timeout)
	}
	return out, nil
}

// endpointProvider is the provider whose echo listens on ep (known once
// the federation started).
func (r *runner) endpointProvider(ep string) (int, bool) {
	m := r.endpoints.Load()
	if m == nil {
		return 0, false
	}
	p, ok := (*m)[ep]
	return p, ok
}
