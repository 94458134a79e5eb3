package reservations

import (
	"context"
	"slices"
	"sync"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// Explanation implements rest.Broker: why consumer cn grows where it does,
// as cn may read it, with what its borrowed chunks cost and emit now and
// what it spent (the overview's spend of cn), so that its console shows
// the totals next to the alternatives they are compared with. It is
// computed on request (the consumer console asks while someone watches
// it), never on the agents' periodic paths.
func (s *Service) Explanation(_ context.Context, cn string) (api.PlacementExplanation, error) {
	ex := s.idx.Explain(cn, nil).ForConsumer()
	s.mu.Lock()
	sp := s.consumerSpendLocked(cn, s.clock.Now())
	s.mu.Unlock()
	ex.Spend = &sp
	return ex, nil
}

// explanationCache holds every consumer's explanation as computed at one
// epoch of the Placer. Explaining is O(consumers × providers); the
// periodic advertisements and heartbeats of an unchanged federation leave
// the epoch alone, so a watched dashboard recomputes only after a real
// change (a reservation, a new price, a policy switch).
type explanationCache struct {
	mu    sync.Mutex
	valid bool
	epoch uint64
	ids   []string
	list  []api.PlacementExplanation
}

// Explanations returns every known consumer's explanation, sorted by
// consumer id, with the providers that do not share with each listed (the
// operator's view, for the dashboard listener). Each explanation's
// GeneratedAt says when it was computed: the list is reused until the
// placement state or the set of consumers changes. The caller must not
// modify it.
func (s *Service) Explanations(_ context.Context) ([]api.PlacementExplanation, error) {
	s.mu.Lock()
	ids := sortedKeys(s.st.consumers)
	s.mu.Unlock()
	c := &s.explained
	c.mu.Lock()
	defer c.mu.Unlock()
	// The epoch is read before explaining: a change during the loop moves
	// it again, and the next call recomputes.
	epoch := s.idx.Epoch()
	if c.valid && c.epoch == epoch && slices.Equal(c.ids, ids) {
		return c.list, nil
	}
	out := make([]api.PlacementExplanation, 0, len(ids))
	for _, id := range ids {
		out = append(out, s.idx.Explain(id, nil))
	}
	c.valid, c.epoch, c.ids, c.list = true, epoch, ids, out
	return out, nil
}
