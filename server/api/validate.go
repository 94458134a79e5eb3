package api

import (
	"fmt"
	"maps"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
)

// Each request body validates itself here, once: the broker's REST layer
// calls Validate after decoding, the broker's domain calls it again for
// callers that do not come through REST, and the agents call it before they
// send. A failure is a 400 InvalidRequest *Error naming the field, the value
// and what is allowed (details: field, value, allowed).

func asError(fe *FieldError) error {
	if fe == nil {
		return nil
	}
	return fe.APIError()
}

// Validate checks an advertisement (docs/broker-api.md, route 2).
func (r *AdvertisementRequest) Validate() error { return asError(r.check()) }

func (r *AdvertisementRequest) check() *FieldError {
	if err := CheckClusterID("clusterId", r.ClusterID); err != nil {
		return err
	}
	if err := CheckLiqoClusterID("liqoClusterId", r.LiqoClusterID); err != nil {
		return err
	}
	if len(r.Resources) == 0 {
		return fieldErr("resources", "{}", "a list of at least one resource")
	}
	if err := CheckResourceList("resources", r.Resources, CheckQuantity); err != nil {
		return err
	}
	if err := r.Topology.Check("topology"); err != nil {
		return err
	}
	if err := CheckResourceList("unitPrices", r.UnitPrices, CheckUnitPrice); err != nil {
		return err
	}
	if err := CheckCarbonData(r.CarbonIntensity, r.CarbonForecast); err != nil {
		return err
	}
	for _, name := range sortedKeys(r.CapacityScalePercent) {
		f := Sub("capacityScalePercent", name)
		if err := CheckResourceName(f, corev1.ResourceName(name)); err != nil {
			return err
		}
		if err := CheckPercent(f, int64(r.CapacityScalePercent[name])); err != nil {
			return err
		}
	}
	if err := CheckResourceList("capacityFixed", r.CapacityFixed, CheckQuantity); err != nil {
		return err
	}
	if err := CheckText("probeEndpoint", r.ProbeEndpoint); err != nil {
		return err
	}
	return r.Sharing.Check("sharing")
}

// Validate checks a heartbeat (docs/broker-api.md, route 4), including the
// MaxHeartbeatReservations cap (checked first: it is the expensive part).
func (r *HeartbeatRequest) Validate() error {
	for _, l := range []struct {
		field string
		n     int
	}{{"reservations", len(r.Reservations)}, {"notReadyReservations", len(r.NotReadyReservations)}, {"startingReservations", len(r.StartingReservations)}} {
		if l.n > MaxHeartbeatReservations {
			return &Error{Code: CodeInvalidRequest, Message: fmt.Sprintf("%s lists %d ids; at most %d are accepted", l.field, l.n, MaxHeartbeatReservations),
				Details: map[string]any{"field": l.field, "value": strconv.Itoa(l.n) + " ids", "allowed": "at most " + strconv.Itoa(MaxHeartbeatReservations) + " ids"}}
		}
	}
	return asError(r.check())
}

func (r *HeartbeatRequest) check() *FieldError {
	if err := CheckClusterID("clusterId", r.ClusterID); err != nil {
		return err
	}
	if err := CheckLiqoClusterID("liqoClusterId", r.LiqoClusterID); err != nil {
		return err
	}
	if err := r.Placement.Check("placement"); err != nil {
		return err
	}
	if err := r.Lifecycle.Check("lifecycle"); err != nil {
		return err
	}
	if err := r.Budget.Check("budget"); err != nil {
		return err
	}
	if err := checkConsolidations("consolidations", r.Consolidations); err != nil {
		return err
	}
	if err := CheckText("region", r.Region); err != nil {
		return err
	}
	if err := CheckText("city", r.City); err != nil {
		return err
	}
	if r.Latitude != nil {
		if err := CheckLatitude("latitude", *r.Latitude); err != nil {
			return err
		}
	}
	if r.Longitude != nil {
		if err := CheckLongitude("longitude", *r.Longitude); err != nil {
			return err
		}
	}
	for _, id := range sortedKeys(r.MeasuredLatencies) {
		f := Sub("measuredLatencies", id)
		if err := CheckClusterID(f+" key", id); err != nil {
			return err
		}
		if err := CheckLatency(f, r.MeasuredLatencies[id]); err != nil {
			return err
		}
	}
	return CheckOptionalClusterID("chosenProvider", r.ChosenProvider)
}

// Validate checks a reservation request (docs/broker-api.md, route 6).
func (r *ReservationRequest) Validate() error { return asError(r.check()) }

func (r *ReservationRequest) check() *FieldError {
	if err := CheckClusterID("providerClusterId", r.ProviderClusterID); err != nil {
		return err
	}
	switch {
	case r.ChunkCount < 1:
		return fieldErr("chunkCount", showInt(int64(r.ChunkCount)), ">= 1")
	case r.ChunkCount > 1:
		return fieldErr("chunkCount", showInt(int64(r.ChunkCount)), "exactly 1: request one reservation per chunk")
	}
	if r.ChunkType != ChunkStandard && r.ChunkType != ChunkGPU {
		return fieldErr("chunkType", ShowString(string(r.ChunkType)), strconv.Quote(string(ChunkStandard))+" or "+strconv.Quote(string(ChunkGPU)))
	}
	if r.NodeGroupID != "" {
		if want := NodeGroupID(r.ProviderClusterID, r.ChunkType); r.NodeGroupID != want {
			return fieldErr("nodeGroupId", ShowString(r.NodeGroupID), "empty or "+strconv.Quote(want)+" (it must match providerClusterId and chunkType)")
		}
	}
	if err := CheckCount("namespaces", len(r.Namespaces), MaxNamespaces); err != nil {
		return err
	}
	for i, ns := range r.Namespaces {
		if err := CheckNamespace(Sub("namespaces", i), ns); err != nil {
			return err
		}
	}
	return nil
}

// payloadKinds are the accepted InstructionPayload.Kind values.
var payloadKinds = [...]string{"", PayloadKubeconfig, PayloadPeer, PayloadUnpeer, PayloadReconcile}

// Validate checks an instruction result (docs/broker-api.md, route 10).
func (r *InstructionResultRequest) Validate() error { return asError(r.check()) }

func (r *InstructionResultRequest) check() *FieldError {
	switch r.Status {
	case ResultSucceeded:
	case ResultFailed:
		if r.Error == nil || r.Error.Message == "" {
			return fieldErr("error.message", `""`, "set when status is "+ResultFailed)
		}
	default:
		return fieldErr("status", ShowString(r.Status), strconv.Quote(ResultSucceeded)+" or "+strconv.Quote(ResultFailed))
	}
	if r.Payload != nil {
		for _, k := range payloadKinds {
			if r.Payload.Kind == k {
				return nil
			}
		}
		return fieldErr("payload.kind", ShowString(r.Payload.Kind), "empty or one of "+PayloadKubeconfig+", "+PayloadPeer+", "+PayloadUnpeer+", "+PayloadReconcile)
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
