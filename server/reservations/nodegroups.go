package reservations

import (
	"context"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// NodeGroups implements rest.Broker through the placement index, with the
// groups capped to what the consumer's budget affords.
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
