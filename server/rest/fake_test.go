package rest

import (
	"context"
	"encoding/json"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// fakeBroker is a Broker of function fields; a nil field answers with the
// zero value.
type fakeBroker struct {
	AdvertiseFn     func(ctx context.Context, cn string, req api.AdvertisementRequest) (api.AdvertisementResponse, error)
	AdvertisementFn func(ctx context.Context, id string) (api.AdvertisementSnapshot, error)
	HeartbeatFn     func(ctx context.Context, cn string, req api.HeartbeatRequest) (api.HeartbeatResponse, error)
	NodeGroupsFn    func(ctx context.Context, cn string, all bool) (api.NodeGroupListResponse, error)
	ReserveFn       func(ctx context.Context, cn, id string, req api.ReservationRequest) (api.ReservationResponse, bool, error)
	ReservationFn   func(ctx context.Context, cn string, role api.Role, id string) (api.ReservationResponse, error)
	ReleaseFn       func(ctx context.Context, cn, id string, chunks int) (api.ReleaseResponse, error)
	InstructionsFn  func(ctx context.Context, cn string, role api.Role, wait time.Duration) ([]api.InstructionView, error)
	PostResultFn    func(ctx context.Context, cn string, role api.Role, id string, req api.InstructionResultRequest) error
	OverviewFn      func(ctx context.Context) (api.Overview, error)
	ExplanationFn   func(ctx context.Context, cn string) (api.PlacementExplanation, error)
}

var _ Broker = (*fakeBroker)(nil)

func (f *fakeBroker) Advertise(ctx context.Context, cn string, req api.AdvertisementRequest) (api.AdvertisementResponse, error) {
	if f.AdvertiseFn == nil {
		return api.AdvertisementResponse{Accepted: true}, nil
	}
	return f.AdvertiseFn(ctx, cn, req)
}

func (f *fakeBroker) Advertisement(ctx context.Context, id string) (api.AdvertisementSnapshot, error) {
	if f.AdvertisementFn == nil {
		return api.AdvertisementSnapshot{ClusterID: id}, nil
	}
	return f.AdvertisementFn(ctx, id)
}

func (f *fakeBroker) Heartbeat(ctx context.Context, cn string, req api.HeartbeatRequest) (api.HeartbeatResponse, error) {
	if f.HeartbeatFn == nil {
		return api.HeartbeatResponse{}, nil
	}
	return f.HeartbeatFn(ctx, cn, req)
}

func (f *fakeBroker) NodeGroupsBody(ctx context.Context, cn string, all bool) ([]byte, error) {
	var v api.NodeGroupListResponse
	if f.NodeGroupsFn != nil {
		var err error
		if v, err = f.NodeGroupsFn(ctx, cn, all); err != nil {
			return nil, err
		}
	}
	if v.NodeGroups == nil {
		v.NodeGroups = []api.NodeGroupView{}
	}
	return json.Marshal(v)
}

func (f *fakeBroker) Reserve(ctx context.Context, cn, id string, req api.ReservationRequest) (api.ReservationResponse, bool, error) {
	if f.ReserveFn == nil {
		return api.ReservationResponse{ReservationID: id, Status: api.PhasePending, ChunkCount: 1}, true, nil
	}
	return f.ReserveFn(ctx, cn, id, req)
}

func (f *fakeBroker) Reservation(ctx context.Context, cn string, role api.Role, id string) (api.ReservationResponse, error) {
	if f.ReservationFn == nil {
		return api.ReservationResponse{ReservationID: id}, nil
	}
	return f.ReservationFn(ctx, cn, role, id)
}

func (f *fakeBroker) Release(ctx context.Context, cn, id string, chunks int) (api.ReleaseResponse, error) {
	if f.ReleaseFn == nil {
		return api.ReleaseResponse{ReservationID: id, Status: api.PhaseUnpeering}, nil
	}
	return f.ReleaseFn(ctx, cn, id, chunks)
}

func (f *fakeBroker) Instructions(ctx context.Context, cn string, role api.Role, wait time.Duration) ([]api.InstructionView, error) {
	if f.InstructionsFn == nil {
		return nil, nil
	}
	return f.InstructionsFn(ctx, cn, role, wait)
}

func (f *fakeBroker) PostResult(ctx context.Context, cn string, role api.Role, id string, req api.InstructionResultRequest) error {
	if f.PostResultFn == nil {
		return nil
	}
	return f.PostResultFn(ctx, cn, role, id, req)
}

func (f *fakeBroker) Overview(ctx context.Context) (api.Overview, error) {
	if f.OverviewFn == nil {
		return api.Overview{}, nil
	}
	return f.OverviewFn(ctx)
}

func (f *fakeBroker) Explanation(ctx context.Context, cn string) (api.PlacementExplanation, error) {
	if f.ExplanationFn == nil {
		return api.PlacementExplanation{}, nil
	}
	return f.ExplanationFn(ctx, cn)
}
