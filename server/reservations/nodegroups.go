package reservations

import (
	"context"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// NodeGroups implements rest.Broker through the placement index.
func (s *Service) NodeGroups(ctx context.Context, cn string, all bool) (api.NodeGroupListResponse, error) {
	v := s.idx.View(cn, all)
	if v.NodeGroups == nil {
		v.NodeGroups = []api.NodeGroupView{}
	}
	return v, nil
}
