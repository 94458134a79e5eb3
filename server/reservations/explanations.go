package reservations

import (
	"context"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// Explanation implements rest.Broker: why consumer cn grows where it does,
// as cn may read it. It is computed on request (the consumer console asks
// while someone watches it), never on the agents' periodic paths.
func (s *Service) Explanation(_ context.Context, cn string) (api.PlacementExplanation, error) {
	return s.idx.Explain(cn, nil).ForConsumer(), nil
}

// Explanations returns every known consumer's explanation, sorted by
// consumer id, with the providers that do not share with each listed (the
// operator's view, for the dashboard listener).
func (s *Service) Explanations(_ context.Context) ([]api.PlacementExplanation, error) {
	s.mu.Lock()
	ids := sortedKeys(s.st.consumers)
	s.mu.Unlock()
	out := make([]api.PlacementExplanation, 0, len(ids))
	for _, id := range ids {
		out = append(out, s.idx.Explain(id, nil))
	}
	return out, nil
}
