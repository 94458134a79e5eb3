// Package externalgrpc is the Cluster Autoscaler's externalgrpc cloud
// provider for Federation Autoscaler: a gRPC server (protocol in
// adapter/externalgrpc/protos) that maps CA's node-group calls onto the
// consumer agent's local API. One node group per provider × chunk type;
// one instance per single-chunk reservation; instance ids are the virtual
// nodes' providerIDs (liqo://<provider>/<reservation>).
//
// Reads are served from a short cache (one agent round-trip per CA loop);
// mutations (IncreaseSize, DeleteNodes, DecreaseTargetSize) go to the agent
// at once and invalidate it.
package externalgrpc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/clock"

	"github.com/federation-autoscaler/federation-autoscaler/adapter/externalgrpc/protos"
	"github.com/federation-autoscaler/federation-autoscaler/adapter/localapi"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// GPULabel is the node label CA reads the GPU type from.
const GPULabel = "nvidia.com/gpu"

// DefaultGPUType is reported for GPU groups whose view carries no
// GPULabel value.
const DefaultGPUType = "nvidia-gpu"

// Agent is what the adapter needs from the consumer agent's local API
// (reference §7.1); *localapi.Client implements it.
type Agent interface {
	// NodeGroups returns the consumer's policy-masked node-group view.
	NodeGroups(ctx context.Context) (*api.NodeGroupListResponse, error)
	// VirtualNodes lists the consumer's VirtualNodeStates.
	VirtualNodes(ctx context.Context) ([]localapi.VirtualNode, error)
	// Reserve creates (or replays) single-chunk reservation id; errors
	// carry the broker's HTTP status as a *localapi.Error.
	Reserve(ctx context.Context, id string, req api.ReservationRequest) (*api.ReservationResponse, error)
	// Release releases reservation id; a 404 means it no longer exists.
	Release(ctx context.Context, id string) (*api.ReleaseResponse, error)
}

// Config configures a Server. Agent is required; every other field has a
// default.
type Config struct {
	Agent  Agent
	Clock  clock.Clock  // default: the wall clock
	Logger *slog.Logger // default: discard
	// CacheTTL bounds the age of the node-group data reads are served from
	// (default 2 s: one agent round-trip per CA loop).
	CacheTTL time.Duration
	// NewReservationID mints reservation ids (default res-<uuid v4>).
	NewReservationID func() string
	// MaxParallel caps concurrent agent calls of one mutation (default 16).
	MaxParallel int
	// ReplyMargin is kept free before CA's deadline so that a mutation
	// answers (even with an error) before CA gives up (default 300 ms).
	ReplyMargin time.Duration
	// CallTimeout bounds mutations when CA sends no deadline and every
	// agent round-trip for reads (default 4.5 s, under CA's 5 s).
	CallTimeout time.Duration
	// DrainUtilization is the scale-down utilization threshold (CPU and
	// GPU) NodeGroupGetOptions answers for a group the consumer agent
	// drains in a consolidation (default 1.01: CA keeps a node whose
	// utilization is at or above the threshold, and a node may be fully
	// requested, utilization 1); DrainUnneededTime caps its scale-down
	// unneeded time (default 1 min; CA's defaults when shorter).
	DrainUtilization  float64
	DrainUnneededTime time.Duration
}

// Consolidation defaults (Config.DrainUtilization, DrainUnneededTime).
const (
	DefaultDrainUtilization  = 1.01
	DefaultDrainUnneededTime = time.Minute
)

// Server implements protos.CloudProviderServer.
type Server struct {
	protos.UnimplementedCloudProviderServer

	agent        Agent
	clock        clock.Clock
	log          *slog.Logger
	ttl          time.Duration
	newID        func() string
	parallel     int
	margin       time.Duration
	fetchTimeout time.Duration
	drainUtil    float64
	drainTime    time.Duration

	bgCtx    context.Context
	bgCancel context.CancelFunc
	bgWG     sync.WaitGroup

	// mutMu serializes mutations so that two of them never both pass the
	// max-size check on the same snapshot.
	mutMu sync.Mutex

	mu       sync.Mutex
	seq      uint64 // bumped by every mutation
	cached   *state
	inflight *fetchCall
	pending  map[string]*pendingReservation
	released map[string]*releasedReservation
	known    map[string]knownGroup
}

var _ protos.CloudProviderServer = (*Server)(nil)

// New returns a server; call Close when done.
func New(cfg Config) (*Server, error) {
	if cfg.Agent == nil {
		return nil, errors.New("externalgrpc: Config.Agent is required")
	}
	s := &Server{
		agent:        cfg.Agent,
		clock:        cfg.Clock,
		log:          cfg.Logger,
		ttl:          cfg.CacheTTL,
		newID:        cfg.NewReservationID,
		parallel:     cfg.MaxParallel,
		margin:       cfg.ReplyMargin,
		fetchTimeout: cfg.CallTimeout,
		drainUtil:    cfg.DrainUtilization,
		drainTime:    cfg.DrainUnneededTime,
		pending:      map[string]*pendingReservation{},
		released:     map[string]*releasedReservation{},
		known:        map[string]knownGroup{},
	}
	if s.clock == nil {
		s.clock = clock.RealClock{}
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.ttl <= 0 {
		s.ttl = 2 * time.Second
	}
	if s.newID == nil {
		s.newID = api.NewReservationID
	}
	if s.parallel <= 0 {
		s.parallel = 16
	}
	if s.margin <= 0 {
		s.margin = 300 * time.Millisecond
	}
	if s.fetchTimeout <= 0 {
		s.fetchTimeout = 4500 * time.Millisecond
	}
	if s.drainUtil <= 0 {
		s.drainUtil = DefaultDrainUtilization
	}
	if s.drainTime <= 0 {
		s.drainTime = DefaultDrainUnneededTime
	}
	s.bgCtx, s.bgCancel = context.WithCancel(context.Background())
	return s, nil
}

// Register attaches the server to gs.
func (s *Server) Register(gs *grpc.Server) { protos.RegisterCloudProviderServer(gs, s) }

// Close stops background work (agent fetches, compensating releases) and
// waits for it.
func (s *Server) Close() {
	s.bgCancel()
	s.bgWG.Wait()
}

// ---- reads ----

// Refresh always succeeds: an error would abort CA's whole loop. The cache
// expires by itself, so there is nothing to do.
func (s *Server) Refresh(context.Context, *protos.RefreshRequest) (*protos.RefreshResponse, error) {
	return &protos.RefreshResponse{}, nil
}

// Cleanup is called once when CA exits; nothing to release (reservations
// outlive CA on purpose).
func (s *Server) Cleanup(context.Context, *protos.CleanupRequest) (*protos.CleanupResponse, error) {
	return &protos.CleanupResponse{}, nil
}

// NodeGroups lists one group per provider × chunk type of the consumer's
// view, plus groups the consumer still holds reservations in.
func (s *Server) NodeGroups(ctx context.Context, _ *protos.NodeGroupsRequest) (*protos.NodeGroupsResponse, error) {
	st, err := s.read(ctx)
	if err != nil {
		return nil, s.readErr(err)
	}
	out := &protos.NodeGroupsResponse{NodeGroups: make([]*protos.NodeGroup, 0, len(st.groups))}
	for _, g := range st.groups {
		out.NodeGroups = append(out.NodeGroups, pbGroup(g))
	}
	return out, nil
}

// NodeGroupForNode resolves a node by providerID, then by name. Nodes that
// are not federation virtual nodes get an empty group (not an error, which
// would break CA's loop).
func (s *Server) NodeGroupForNode(ctx context.Context, req *protos.NodeGroupForNodeRequest) (*protos.NodeGroupForNodeResponse, error) {
	n := req.GetNode()
	if n == nil {
		return nil, status.Error(codes.InvalidArgument, "NodeGroupForNode: node is required")
	}
	st, err := s.read(ctx)
	if err != nil {
		return nil, s.readErr(err)
	}
	in := st.resolve(n.GetProviderID(), n.GetName())
	if in == nil {
		return &protos.NodeGroupForNodeResponse{NodeGroup: &protos.NodeGroup{}}, nil
	}
	return &protos.NodeGroupForNodeResponse{NodeGroup: pbGroup(in.group)}, nil
}

// NodeGroupTargetSize is the number of this consumer's live reservations in
// the group, counting those still peering.
func (s *Server) NodeGroupTargetSize(ctx context.Context, req *protos.NodeGroupTargetSizeRequest) (*protos.NodeGroupTargetSizeResponse, error) {
	g, err := s.group(ctx, "NodeGroupTargetSize", req.GetId())
	if err != nil {
		return nil, err
	}
	return &protos.NodeGroupTargetSizeResponse{TargetSize: g.target}, nil
}

// NodeGroupNodes lists the group's instances; ids are providerIDs.
func (s *Server) NodeGroupNodes(ctx context.Context, req *protos.NodeGroupNodesRequest) (*protos.NodeGroupNodesResponse, error) {
	g, err := s.group(ctx, "NodeGroupNodes", req.GetId())
	if err != nil {
		return nil, err
	}
	out := &protos.NodeGroupNodesResponse{Instances: make([]*protos.Instance, 0, len(g.instances))}
	for _, in := range g.instances {
		out.Instances = append(out.Instances, pbInstance(in))
	}
	return out, nil
}

// NodeGroupTemplateNodeInfo returns a complete chunk-sized Node, in both
// fields (CA ≤ 1.34 reads 1, CA ≥ 1.35 reads 2). Never an empty success.
func (s *Server) NodeGroupTemplateNodeInfo(ctx context.Context, req *protos.NodeGroupTemplateNodeInfoRequest) (*protos.NodeGroupTemplateNodeInfoResponse, error) {
	g, err := s.group(ctx, "NodeGroupTemplateNodeInfo", req.GetId())
	if err != nil {
		return nil, err
	}
	b, err := g.templateBytes()
	if err != nil {
		return nil, status.Errorf(codes.Internal, "NodeGroupTemplateNodeInfo %s: %v", g.id, err)
	}
	return &protos.NodeGroupTemplateNodeInfoResponse{NodeInfo: b, NodeBytes: b}, nil
}

// NodeGroupGetOptions echoes CA's defaults with every duration set in both
// shapes (CA ≤ 1.34 dereferences fields 3–5 unchecked); without defaults it
// answers UNIMPLEMENTED, which makes CA use its global options. A group the
// consumer agent drains in a consolidation answers the drain threshold and
// at most the drain unneeded time, so that CA's own scale-down removes its
// nodes; the group that grew for it answers thresholds 0, so that none of
// its nodes is unneeded until the move ends (docs/adapter.md).
func (s *Server) NodeGroupGetOptions(ctx context.Context, req *protos.NodeGroupAutoscalingOptionsRequest) (*protos.NodeGroupAutoscalingOptionsResponse, error) {
	if req.GetId() == "" {
		return nil, status.Error(codes.InvalidArgument, "NodeGroupGetOptions: node group id is required")
	}
	st, err := s.read(ctx)
	if err != nil {
		return nil, s.readErr(err)
	}
	if _, err := st.lookup("NodeGroupGetOptions", req.GetId()); err != nil {
		return nil, err
	}
	d := req.GetDefaults()
	if d == nil {
		return nil, status.Error(codes.Unimplemented, "NodeGroupGetOptions: no defaults sent; use the global options")
	}
	o := &protos.NodeGroupAutoscalingOptions{
		ScaleDownUtilizationThreshold:    d.GetScaleDownUtilizationThreshold(),
		ScaleDownGpuUtilizationThreshold: d.GetScaleDownGpuUtilizationThreshold(),
		ZeroOrMaxNodeScaling:             d.GetZeroOrMaxNodeScaling(),
		IgnoreDaemonSetsUtilization:      d.GetIgnoreDaemonSetsUtilization(),
	}
	unneeded, ok1 := pickDuration(d.GetScaleDownUnneededTime(), d.GetScaleDownUnneededDuration())
	unready, ok2 := pickDuration(d.GetScaleDownUnreadyTime(), d.GetScaleDownUnreadyDuration())
	provision, ok3 := pickDuration(d.GetMaxNodeProvisionTime(), d.GetMaxNodeProvisionDuration())
	if !ok1 || !ok2 || !ok3 {
		// Echoing a missing duration as 0 would turn e.g. the scale-down
		// unneeded time off; let CA use its global options instead.
		return nil, status.Error(codes.Unimplemented, "NodeGroupGetOptions: defaults lack a duration; use the global options")
	}
	switch st.consolidation[req.GetId()] {
	case api.RoleDrain:
		o.ScaleDownUtilizationThreshold, o.ScaleDownGpuUtilizationThreshold = s.drainUtil, s.drainUtil
		unneeded = min(unneeded, s.drainTime)
	case api.RoleKeep:
		o.ScaleDownUtilizationThreshold, o.ScaleDownGpuUtilizationThreshold = 0, 0
	}
	o.ScaleDownUnneededTime, o.ScaleDownUnneededDuration = &protos.K8SDuration{Duration: int64(unneeded)}, durationpb.New(unneeded)
	o.ScaleDownUnreadyTime, o.ScaleDownUnreadyDuration = &protos.K8SDuration{Duration: int64(unready)}, durationpb.New(unready)
	o.MaxNodeProvisionTime, o.MaxNodeProvisionDuration = &protos.K8SDuration{Duration: int64(provision)}, durationpb.New(provision)
	return &protos.NodeGroupAutoscalingOptionsResponse{NodeGroupAutoscalingOptions: o}, nil
}

// pickDuration prefers the old (meta/v1, nanoseconds) shape, then the new;
// ok is false when neither is set.
func pickDuration(old *protos.K8SDuration, cur *durationpb.Duration) (d time.Duration, ok bool) {
	if old != nil {
		return time.Duration(old.GetDuration()), true
	}
	if cur != nil {
		return cur.AsDuration(), true
	}
	return 0, false
}

// GPULabel names the label carrying the GPU type.
func (s *Server) GPULabel(context.Context, *protos.GPULabelRequest) (*protos.GPULabelResponse, error) {
	return &protos.GPULabelResponse{Label: GPULabel}, nil
}

// GetAvailableGPUTypes lists the GPU types of the GPU groups in view.
func (s *Server) GetAvailableGPUTypes(ctx context.Context, _ *protos.GetAvailableGPUTypesRequest) (*protos.GetAvailableGPUTypesResponse, error) {
	st, err := s.read(ctx)
	if err != nil {
		return nil, s.readErr(err)
	}
	out := &protos.GetAvailableGPUTypesResponse{GpuTypes: map[string]*anypb.Any{}}
	for _, g := range st.groups {
		if g.typ == api.ChunkGPU {
			out.GpuTypes[g.gpuType()] = &anypb.Any{}
		}
	}
	return out, nil
}

// gpuType is the GPU type of a GPU group.
func (g *group) gpuType() string {
	if g.view != nil && g.view.Labels[GPULabel] != "" {
		return g.view.Labels[GPULabel]
	}
	return DefaultGPUType
}

// PricingNodePrice is the view's per-chunk cost (per hour) times the
// period in hours; 0 for unpriced providers.
func (s *Server) PricingNodePrice(ctx context.Context, req *protos.PricingNodePriceRequest) (*protos.PricingNodePriceResponse, error) {
	n := req.GetNode()
	if n == nil {
		return nil, status.Error(codes.InvalidArgument, "PricingNodePrice: node is required")
	}
	start, end := req.GetStartTimestamp(), req.GetEndTimestamp()
	if start == nil && end == nil {
		start, end = req.GetStartTime(), req.GetEndTime()
	}
	hours, err := periodHours(start, end)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "PricingNodePrice: %v", err)
	}
	st, err := s.read(ctx)
	if err != nil {
		return nil, s.readErr(err)
	}
	g := st.groupOfNode(n)
	if g == nil {
		return nil, status.Errorf(codes.NotFound, "PricingNodePrice: node %q (providerID %q) is not a federation virtual node", n.GetName(), n.GetProviderID())
	}
	if g.view == nil || g.view.Cost == "" {
		return &protos.PricingNodePriceResponse{Price: 0}, nil
	}
	q, err := resource.ParseQuantity(g.view.Cost)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "PricingNodePrice: group %s has an unparsable cost %q: %v", g.id, g.view.Cost, err)
	}
	return &protos.PricingNodePriceResponse{Price: q.AsApproximateFloat64() * hours}, nil
}

// groupOfNode finds the group of a node for pricing: an instance first,
// then (template nodes) the Liqo remote-cluster-id label.
func (st *state) groupOfNode(n *protos.ExternalGrpcNode) *group {
	if in := st.resolve(n.GetProviderID(), n.GetName()); in != nil {
		return in.group
	}
	liqoID := n.GetLabels()[LabelRemoteClusterID]
	if liqoID == "" {
		return nil
	}
	want := api.ChunkStandard
	if _, gpu := n.GetLabels()[GPULabel]; gpu {
		want = api.ChunkGPU
	}
	var found *group
	for _, g := range st.groups {
		if g.liqoID != liqoID {
			continue
		}
		if found == nil || g.typ == want {
			found = g
		}
	}
	return found
}

func periodHours(start, end *timestamppb.Timestamp) (float64, error) {
	if start == nil || end == nil {
		return 0, errors.New("start and end time are required")
	}
	if err := start.CheckValid(); err != nil {
		return 0, fmt.Errorf("start time: %w", err)
	}
	if err := end.CheckValid(); err != nil {
		return 0, fmt.Errorf("end time: %w", err)
	}
	d := end.AsTime().Sub(start.AsTime())
	if d < 0 {
		return 0, fmt.Errorf("end time %s is before start time %s", end.AsTime(), start.AsTime())
	}
	return d.Hours(), nil
}

// PricingPodPrice is always 0: a borrowed chunk is paid per node. The pod
// is read from field 4 (CA ≥ 1.35) or 1 (CA ≤ 1.34) and must decode.
func (s *Server) PricingPodPrice(_ context.Context, req *protos.PricingPodPriceRequest) (*protos.PricingPodPriceResponse, error) {
	raw := req.GetPodBytes()
	if len(raw) == 0 {
		raw = req.GetPod()
	}
	if len(raw) == 0 {
		return nil, status.Error(codes.InvalidArgument, "PricingPodPrice: pod is required (field pod_bytes or pod)")
	}
	var pod corev1.Pod
	if err := pod.Unmarshal(raw); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "PricingPodPrice: pod does not decode as a core/v1 Pod: %v", err)
	}
	return &protos.PricingPodPriceResponse{Price: 0}, nil
}

// ---- mutations ----

// NodeGroupIncreaseSize fans out delta single-chunk reservations
// concurrently and answers before CA's deadline. A partial failure is an
// error (CA backs the group off); the reservations that succeeded stay and
// count in the target size.
func (s *Server) NodeGroupIncreaseSize(ctx context.Context, req *protos.NodeGroupIncreaseSizeRequest) (*protos.NodeGroupIncreaseSizeResponse, error) {
	if req.GetDelta() <= 0 {
		return nil, status.Errorf(codes.InvalidArgument, "NodeGroupIncreaseSize %s: delta must be positive, got %d", req.GetId(), req.GetDelta())
	}
	s.mutMu.Lock()
	defer s.mutMu.Unlock()
	g, err := s.group(ctx, "NodeGroupIncreaseSize", req.GetId())
	if err != nil {
		return nil, err
	}
	delta := req.GetDelta()
	if g.view == nil {
		return nil, status.Errorf(codes.FailedPrecondition, "NodeGroupIncreaseSize %s: provider %s is no longer offered to this consumer; the group can only shrink", g.id, g.provider)
	}
	if g.target+delta > g.max {
		return nil, status.Errorf(codes.InvalidArgument, "NodeGroupIncreaseSize %s: size increase too large: target %d + delta %d exceeds max size %d", g.id, g.target, delta, g.max)
	}
	ctx, cancel := s.mutationContext(ctx)
	defer cancel()

	type result struct {
		id    string
		tried bool // false: never sent, so certainly not created
		err   error
	}
	results := make([]result, delta)
	sem := make(chan struct{}, s.parallel)
	var wg sync.WaitGroup
	body := api.ReservationRequest{ProviderClusterID: g.provider, NodeGroupID: g.id, ChunkCount: 1, ChunkType: g.typ}
	for i := range results {
		results[i].id = s.newID()
		wg.Add(1)
		go func(r *result) {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				r.err = ctx.Err()
				return
			}
			defer func() { <-sem }()
			r.tried = true
			_, r.err = s.agent.Reserve(ctx, r.id, body)
		}(&results[i])
	}
	wg.Wait()

	now := s.clock.Now()
	var ok []string
	var failed []error
	var uncertain []string
	s.mu.Lock()
	s.invalidateLocked()
	for _, r := range results {
		switch {
		case r.err == nil:
			ok = append(ok, r.id)
			s.pending[r.id] = &pendingReservation{seq: s.seq, groupID: g.id, provider: g.provider, liqoID: g.liqoID, typ: g.typ, createdAt: now}
		case !r.tried || isDefinite(r.err):
			failed = append(failed, r.err)
		default:
			// The agent may or may not have created it: report it as
			// Deleting and release it in the background, so nothing stays
			// reserved by mistake.
			failed = append(failed, r.err)
			uncertain = append(uncertain, r.id)
			s.released[r.id] = &releasedReservation{seq: s.seq, groupID: g.id, provider: g.provider, typ: g.typ, at: now}
		}
	}
	s.mu.Unlock()
	for _, id := range uncertain {
		s.compensate(id)
	}
	s.log.Info("Scaled up node group", "group", g.id, "delta", delta, "reserved", len(ok), "failed", len(failed), "reservations", ok)
	if len(failed) > 0 {
		return nil, status.Errorf(agentCode(failed[0]), "NodeGroupIncreaseSize %s: reserved %d of %d chunks; %d failed, first: %v",
			g.id, len(ok), delta, len(failed), failed[0])
	}
	return &protos.NodeGroupIncreaseSizeResponse{}, nil
}

// NodeGroupDeleteNodes releases the reservation behind each node. Every
// node must be an instance of the group, otherwise nothing is released.
func (s *Server) NodeGroupDeleteNodes(ctx context.Context, req *protos.NodeGroupDeleteNodesRequest) (*protos.NodeGroupDeleteNodesResponse, error) {
	if len(req.GetNodes()) == 0 {
		return nil, status.Errorf(codes.InvalidArgument, "NodeGroupDeleteNodes %s: no nodes given", req.GetId())
	}
	s.mutMu.Lock()
	defer s.mutMu.Unlock()
	st, err := s.read(ctx)
	if err != nil {
		return nil, s.readErr(err)
	}
	g, err := st.lookup("NodeGroupDeleteNodes", req.GetId())
	if err != nil {
		return nil, err
	}
	targets := make([]*instance, 0, len(req.GetNodes()))
	seen := map[string]bool{}
	for _, n := range req.GetNodes() {
		in := st.resolve(n.GetProviderID(), n.GetName())
		if in == nil {
			in = unlisted(g, n)
		}
		switch {
		case in == nil:
			return nil, status.Errorf(codes.InvalidArgument, "NodeGroupDeleteNodes %s: node %q (providerID %q) is not a federation virtual node; nothing deleted", g.id, n.GetName(), n.GetProviderID())
		case in.group.id != g.id:
			return nil, status.Errorf(codes.InvalidArgument, "NodeGroupDeleteNodes %s: node %q belongs to node group %s; nothing deleted", g.id, n.GetName(), in.group.id)
		}
		if !seen[in.reservationID] {
			seen[in.reservationID] = true
			targets = append(targets, in)
		}
	}
	if err := s.releaseAll(ctx, "NodeGroupDeleteNodes", g, targets); err != nil {
		return nil, err
	}
	return &protos.NodeGroupDeleteNodesResponse{}, nil
}

// unlisted stands for a node of g's provider that the agent no longer (or
// not yet) lists: CA read the group before the reservation behind the node
// ended or failed over, and now removes the node. Its providerID (or its
// name, which CA may use as the id) names the reservation, so that is what
// is released: a reservation that already ended answers 404, which counts
// as released; one that is live but not listed yet is really released, so
// nothing leaks. A manual reservation's node is never the autoscaler's, and
// any other node is not ours to delete (nil).
func unlisted(g *group, n *protos.ExternalGrpcNode) *instance {
	for _, id := range []string{n.GetProviderID(), n.GetName()} {
		if provider, res, ok := api.ParseProviderID(id); ok && provider == g.provider && !api.IsManualReservation(res) {
			return &instance{reservationID: res, providerID: id, group: g}
		}
	}
	return nil
}

// NodeGroupDecreaseTargetSize drops |delta| reservations whose node never
// registered (not peered yet, or still Creating), newest first. It never
// touches a running node.
func (s *Server) NodeGroupDecreaseTargetSize(ctx context.Context, req *protos.NodeGroupDecreaseTargetSizeRequest) (*protos.NodeGroupDecreaseTargetSizeResponse, error) {
	if req.GetDelta() >= 0 {
		return nil, status.Errorf(codes.InvalidArgument, "NodeGroupDecreaseTargetSize %s: delta must be negative, got %d", req.GetId(), req.GetDelta())
	}
	s.mutMu.Lock()
	defer s.mutMu.Unlock()
	g, err := s.group(ctx, "NodeGroupDecreaseTargetSize", req.GetId())
	if err != nil {
		return nil, err
	}
	var cand []*instance
	for _, in := range g.instances {
		if in.state == stateCreating {
			cand = append(cand, in)
		}
	}
	n := int(-req.GetDelta())
	if n > len(cand) {
		return nil, status.Errorf(codes.InvalidArgument,
			"NodeGroupDecreaseTargetSize %s: attempt to delete existing nodes: target size %d, only %d not registered, delta %d",
			g.id, g.target, len(cand), req.GetDelta())
	}
	// Unpeered first, then newest first.
	sort.SliceStable(cand, func(i, j int) bool {
		if cand[i].peered != cand[j].peered {
			return !cand[i].peered
		}
		return cand[i].since.After(cand[j].since)
	})
	if err := s.releaseAll(ctx, "NodeGroupDecreaseTargetSize", g, cand[:n]); err != nil {
		return nil, err
	}
	return &protos.NodeGroupDecreaseTargetSizeResponse{}, nil
}

// releaseAll releases the reservations of targets concurrently; a 404 (the
// reservation is already gone) counts as released.
func (s *Server) releaseAll(ctx context.Context, rpc string, g *group, targets []*instance) error {
	ctx, cancel := s.mutationContext(ctx)
	defer cancel()
	errs := make([]error, len(targets))
	sem := make(chan struct{}, s.parallel)
	var wg sync.WaitGroup
	for i, in := range targets {
		s.mu.Lock()
		_, done := s.released[in.reservationID]
		s.mu.Unlock()
		if done {
			continue // already released: idempotent
		}
		wg.Add(1)
		go func(i int, id string) {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				errs[i] = ctx.Err()
				return
			}
			defer func() { <-sem }()
			if _, err := s.agent.Release(ctx, id); err != nil && localapi.StatusOf(err) != 404 {
				errs[i] = err
			}
		}(i, in.reservationID)
	}
	wg.Wait()

	now := s.clock.Now()
	var released []string
	var failed []error
	s.mu.Lock()
	s.invalidateLocked()
	for i, in := range targets {
		if errs[i] != nil {
			failed = append(failed, errs[i])
			continue
		}
		released = append(released, in.reservationID)
		delete(s.pending, in.reservationID)
		if _, ok := s.released[in.reservationID]; !ok {
			s.released[in.reservationID] = &releasedReservation{seq: s.seq, groupID: g.id, provider: g.provider, typ: g.typ, at: now}
		}
	}
	s.mu.Unlock()
	s.log.Info("Released reservations", "rpc", rpc, "group", g.id, "released", released, "failed", len(failed))
	if len(failed) > 0 {
		return status.Errorf(agentCode(failed[0]), "%s %s: released %d of %d reservations; %d failed, first: %v",
			rpc, g.id, len(released), len(targets), len(failed), failed[0])
	}
	return nil
}

// compensate releases a reservation whose creation has an unknown outcome,
// in the background.
func (s *Server) compensate(id string) {
	// The waits before each release attempt. A 404 may only mean that the
	// create is still on its way (the agent or broker finishing a request
	// the adapter gave up on), so the release is repeated after it;
	// releasing is idempotent.
	delays := [...]time.Duration{0, 2 * time.Second, 10 * time.Second, 30 * time.Second}
	s.bgWG.Add(1)
	go func() {
		defer s.bgWG.Done()
		for attempt, d := range delays {
			if d > 0 {
				select {
				case <-s.bgCtx.Done():
					return
				case <-s.clock.After(d):
				}
			}
			ctx, cancel := context.WithTimeout(s.bgCtx, s.fetchTimeout)
			_, err := s.agent.Release(ctx, id)
			cancel()
			switch {
			case err == nil:
				s.log.Info("Released a reservation whose creation had an unknown outcome", "reservation", id)
				return
			case localapi.StatusOf(err) == 404:
				// Not there (yet): look again later.
			default:
				s.log.Warn("Releasing a reservation whose creation had an unknown outcome failed", "reservation", id, "attempt", attempt+1, "err", err)
			}
		}
	}()
}

// mutationContext leaves ReplyMargin before CA's deadline so the answer
// reaches CA; without a deadline it applies CallTimeout.
func (s *Server) mutationContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); ok {
		return context.WithDeadline(ctx, dl.Add(-s.margin))
	}
	return context.WithTimeout(ctx, s.fetchTimeout)
}

// ---- helpers ----

// group looks up a group by id in the current state.
func (s *Server) group(ctx context.Context, rpc, id string) (*group, error) {
	if id == "" {
		return nil, status.Errorf(codes.InvalidArgument, "%s: node group id is required", rpc)
	}
	st, err := s.read(ctx)
	if err != nil {
		return nil, s.readErr(err)
	}
	return st.lookup(rpc, id)
}

// lookup finds group id or answers NotFound.
func (st *state) lookup(rpc, id string) (*group, error) {
	if id == "" {
		return nil, status.Errorf(codes.InvalidArgument, "%s: node group id is required", rpc)
	}
	g, ok := st.byID[id]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "%s: node group %q not found (known: %s)", rpc, id, st.groupIDs())
	}
	return g, nil
}

func (st *state) groupIDs() string {
	if len(st.groups) == 0 {
		return "none"
	}
	ids := make([]string, len(st.groups))
	for i, g := range st.groups {
		ids[i] = g.id
	}
	return strings.Join(ids, ", ")
}

func pbGroup(g *group) *protos.NodeGroup {
	debug := fmt.Sprintf("provider=%s type=%s target=%d", g.provider, g.typ, g.target)
	if g.view == nil {
		debug += " (not offered anymore)"
	}
	if g.gone {
		debug += " (gone)"
	}
	return &protos.NodeGroup{Id: g.id, MinSize: 0, MaxSize: g.max, Debug: debug}
}

func pbInstance(in *instance) *protos.Instance {
	st := &protos.InstanceStatus{}
	switch in.state {
	case stateRunning:
		st.InstanceState = protos.InstanceStatus_instanceRunning
	case stateDeleting:
		st.InstanceState = protos.InstanceStatus_instanceDeleting
	case stateFailed:
		// Creating + errorInfo is what CA treats as a failed creation: it
		// backs the group off and deletes the instance.
		st.InstanceState = protos.InstanceStatus_instanceCreating
		msg := in.message
		if msg == "" {
			msg = "peering of reservation " + in.reservationID + " failed"
		}
		st.ErrorInfo = &protos.InstanceErrorInfo{ErrorCode: "PeeringFailed", ErrorMessage: msg, InstanceErrorClass: 99}
	default:
		st.InstanceState = protos.InstanceStatus_instanceCreating
	}
	return &protos.Instance{Id: in.providerID, Status: st}
}

// readErr maps a failed agent read to a gRPC status.
func (s *Server) readErr(err error) error {
	if _, ok := status.FromError(err); ok && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		return err
	}
	s.log.Warn("Reading the consumer agent's local API failed", "err", err)
	return status.Errorf(agentCode(err), "reading node groups from the consumer agent: %v", err)
}

// isDefinite reports whether err is an answer that proves the reservation
// was not created (a 4xx from the agent/broker).
func isDefinite(err error) bool {
	st := localapi.StatusOf(err)
	return st >= 400 && st < 500
}

// agentCode maps an agent error to the gRPC code CA sees.
func agentCode(err error) codes.Code {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		return codes.Canceled
	}
	var e *localapi.Error
	if !errors.As(err, &e) {
		return codes.Unavailable // transport failure: the agent is down
	}
	switch e.Status {
	case 400:
		return codes.InvalidArgument
	case 401:
		return codes.Unauthenticated
	case 403:
		return codes.PermissionDenied
	case 404:
		return codes.NotFound
	case 409:
		if e.Code == api.CodeInsufficientCapacity || e.Code == api.CodeBudgetExceeded {
			return codes.ResourceExhausted // CA backs the group off
		}
		return codes.Aborted
	case 412:
		return codes.FailedPrecondition
	case 429:
		return codes.ResourceExhausted
	case 501:
		return codes.Unimplemented
	case 502, 503:
		return codes.Unavailable
	case 504:
		return codes.DeadlineExceeded
	default:
		return codes.Internal
	}
}

// LogCalls is a unary interceptor that logs every call at debug level and
// failed calls with a server-side cause (Internal, Unknown, Unavailable)
// at warn level, once, at the edge.
func (s *Server) LogCalls(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	start := s.clock.Now()
	resp, err := handler(ctx, req)
	code := status.Code(err)
	attrs := []any{"method", info.FullMethod, "code", code.String(), "duration", s.clock.Since(start)}
	switch code {
	case codes.Internal, codes.Unknown, codes.Unavailable, codes.DeadlineExceeded:
		s.log.Warn("gRPC call failed", append(attrs, "err", err)...)
	default:
		s.log.Debug("gRPC call", attrs...)
	}
	return resp, err
}
