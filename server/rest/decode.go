package rest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// maxListedReservations bounds HeartbeatRequest.Reservations.
const maxListedReservations = api.MaxHeartbeatReservations

func invalid(format string, args ...any) *api.Error {
	return api.Errorf(api.CodeInvalidRequest, format, args...)
}

// decodeStrict decodes exactly one JSON value into v: unknown fields
// (at any depth), an empty body and trailing data after the value are
// rejected with 400 InvalidRequest "decode body: …".
func decodeStrict(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return invalid("decode body: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return invalid("decode body: unexpected data after the JSON value")
	}
	return nil
}

func checkClusterID(field, id string) error {
	if id == "" {
		return invalid("%s is required", field)
	}
	if errs := validation.IsDNS1123Label(id); len(errs) > 0 {
		return invalid("%s %q is not a DNS-1123 label: %s", field, id, strings.Join(errs, "; "))
	}
	return nil
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// decodeAdvertisement decodes and validates POST /api/v1/advertisements.
func decodeAdvertisement(body []byte) (api.AdvertisementRequest, error) {
	var req api.AdvertisementRequest
	if err := decodeStrict(body, &req); err != nil {
		return req, err
	}
	if err := checkClusterID("clusterId", req.ClusterID); err != nil {
		return req, err
	}
	if req.LiqoClusterID == "" {
		return req, invalid("liqoClusterId is required")
	}
	if len(req.Resources) == 0 {
		return req, invalid("resources must list at least one resource")
	}
	for name, q := range req.Resources {
		if q.Sign() < 0 {
			return req, invalid("resources[%s] is negative (%s)", name, q.String())
		}
	}
	if req.CarbonIntensity != nil && (*req.CarbonIntensity < 0 || !finite(*req.CarbonIntensity)) {
		return req, invalid("carbonIntensity must be >= 0, got %v", *req.CarbonIntensity)
	}
	if sh := req.Sharing; sh != nil {
		if sh.MaxChunksPerConsumer < 0 {
			return req, invalid("sharing.maxChunksPerConsumer must be >= 0, got %d", sh.MaxChunksPerConsumer)
		}
		for _, list := range []struct {
			name string
			ids  []string
		}{{"sharing.allowedConsumers", sh.AllowedConsumers}, {"sharing.deniedConsumers", sh.DeniedConsumers}} {
			for _, id := range list.ids {
				if err := checkClusterID(list.name+" entry", id); err != nil {
					return req, err
				}
			}
		}
	}
	return req, nil
}

// decodeHeartbeat decodes and validates POST /api/v1/heartbeat.
func decodeHeartbeat(body []byte) (api.HeartbeatRequest, error) {
	var req api.HeartbeatRequest
	if err := decodeStrict(body, &req); err != nil {
		return req, err
	}
	if err := checkClusterID("clusterId", req.ClusterID); err != nil {
		return req, err
	}
	if req.LiqoClusterID == "" {
		return req, invalid("liqoClusterId is required")
	}
	if p := req.Placement; p != nil && p.Weights != nil {
		w := p.Weights
		for _, f := range []struct {
			name string
			v    float64
		}{{"price", w.Price}, {"carbon", w.Carbon}, {"distance", w.Distance}, {"freeCapacity", w.FreeCapacity}} {
			if f.v < 0 || !finite(f.v) {
				return req, invalid("placement.weights.%s must be >= 0, got %v", f.name, f.v)
			}
		}
	}
	if len(req.Reservations) > maxListedReservations {
		return req, invalid("reservations lists %d ids; at most %d are accepted", len(req.Reservations), maxListedReservations)
	}
	return req, nil
}

// decodeReservation decodes and validates POST /api/v1/reservations.
func decodeReservation(body []byte) (api.ReservationRequest, error) {
	var req api.ReservationRequest
	if err := decodeStrict(body, &req); err != nil {
		return req, err
	}
	if req.ProviderClusterID == "" {
		return req, invalid("providerClusterId is required")
	}
	switch {
	case req.ChunkCount < 1:
		return req, invalid("chunkCount must be >= 1, got %d", req.ChunkCount)
	case req.ChunkCount > 1:
		return req, invalid("chunkCount must be exactly 1, got %d: request one reservation per chunk", req.ChunkCount)
	}
	if req.ChunkType != api.ChunkStandard && req.ChunkType != api.ChunkGPU {
		return req, invalid("chunkType must be %q or %q, got %q", api.ChunkStandard, api.ChunkGPU, req.ChunkType)
	}
	if req.NodeGroupID != "" {
		if want := api.NodeGroupID(req.ProviderClusterID, req.ChunkType); req.NodeGroupID != want {
			return req, invalid("nodeGroupId %q does not match providerClusterId and chunkType (want %q)", req.NodeGroupID, want)
		}
	}
	return req, nil
}

// decodeResult decodes and validates POST /api/v1/instructions/{id}/result.
func decodeResult(body []byte) (api.InstructionResultRequest, error) {
	var req api.InstructionResultRequest
	if err := decodeStrict(body, &req); err != nil {
		return req, err
	}
	switch req.Status {
	case api.ResultSucceeded:
		if req.Payload != nil {
			switch req.Payload.Kind {
			case "", api.PayloadKubeconfig, api.PayloadPeer, api.PayloadUnpeer, api.PayloadReconcile:
			default:
				return req, invalid("payload.kind %q is not one of %s, %s, %s, %s or empty",
					req.Payload.Kind, api.PayloadKubeconfig, api.PayloadPeer, api.PayloadUnpeer, api.PayloadReconcile)
			}
		}
	case api.ResultFailed:
		if req.Error == nil || req.Error.Message == "" {
			return req, invalid("error.message is required when status is %s", api.ResultFailed)
		}
	default:
		return req, invalid("status must be %q or %q, got %q", api.ResultSucceeded, api.ResultFailed, req.Status)
	}
	return req, nil
}

// parseWait parses the ?wait= query of GET /api/v1/instructions: a Go
// duration between 0 and MaxWait; empty means no wait.
func parseWait(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 || d > MaxWait {
		return 0, invalid("wait=%q: must be a Go duration between 0s and 60s, e.g. wait=30s", s)
	}
	return d, nil
}

// parseChunks parses the ?chunks= query of DELETE /api/v1/reservations/{id}:
// a non-negative integer; empty means 0 (everything).
func parseChunks(s string) (int, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil || n < 0 {
		return 0, invalid("chunks=%q: must be a non-negative integer", s)
	}
	return int(n), nil
}

// parseAll parses the ?all= query of GET /api/v1/nodegroups.
func parseAll(s string) (bool, error) {
	if s == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return false, invalid("all=%q: must be true or false", s)
	}
	return b, nil
}

// reservationID validates the X-Reservation-Id header (a DNS-1123
// subdomain: it names the reservation) or, when it is missing, generates
// res-<uuid> (the call is then not idempotent).
func reservationID(header string, newID func() string) (string, error) {
	if header == "" {
		return "res-" + newID(), nil
	}
	if errs := validation.IsDNS1123Subdomain(header); len(errs) > 0 {
		return "", invalid("%s %q is not a DNS-1123 subdomain: %s", api.HeaderReservationID, header, strings.Join(errs, "; "))
	}
	return header, nil
}
