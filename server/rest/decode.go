package rest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

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
		return invalid("decode body: %s", clip(err.Error()))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return invalid("decode body: unexpected data after the JSON value")
	}
	return nil
}

// maxDecodeMessage bounds the decode error echoed to the client: an unknown
// field's name can be as long as the body.
const maxDecodeMessage = 512

// clip makes a decode error short and valid UTF-8.
func clip(msg string) string {
	msg = strings.ToValidUTF8(msg, "\uFFFD")
	if len(msg) > maxDecodeMessage {
		msg = strings.ToValidUTF8(msg[:maxDecodeMessage], "") + "…"
	}
	return msg
}

// selfValidating is a request type of server/api: it validates itself
// (every rule of a request lives there; rest only decodes).
type selfValidating[Req any] interface {
	*Req
	Validate() error
}

// decodeValid decodes body strictly into a Req, then validates it.
func decodeValid[Req any, P selfValidating[Req]](body []byte) (Req, error) {
	var req Req
	if err := decodeStrict(body, &req); err != nil {
		return req, err
	}
	err := P(&req).Validate()
	return req, err
}

// decodeScreened is decodeValid for the bodies that carry an
// advertisement: api.ScreenAdvertisement checks the raw body first.
func decodeScreened[Req any, P selfValidating[Req]](body []byte) (Req, error) {
	if fe := api.ScreenAdvertisement(body); fe != nil {
		var zero Req
		return zero, fe.APIError()
	}
	return decodeValid[Req, P](body)
}

// decodeAdvertisement decodes and validates POST /api/v1/advertisements.
func decodeAdvertisement(body []byte) (api.AdvertisementRequest, error) {
	return decodeScreened[api.AdvertisementRequest](body)
}

// decodeHeartbeat decodes and validates POST /api/v1/heartbeat.
func decodeHeartbeat(body []byte) (api.HeartbeatRequest, error) {
	return decodeValid[api.HeartbeatRequest](body)
}

// decodeReservation decodes and validates POST /api/v1/reservations.
func decodeReservation(body []byte) (api.ReservationRequest, error) {
	return decodeValid[api.ReservationRequest](body)
}

// decodeResult decodes and validates POST /api/v1/instructions/{id}/result.
func decodeResult(body []byte) (api.InstructionResultRequest, error) {
	return decodeScreened[api.InstructionResultRequest](body)
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

// pathID decodes a path parameter exactly once: clients escape ids with
// url.PathEscape and Fiber hands the raw segment over. A malformed escape is
// 400 InvalidRequest.
func pathID(raw, what string) (string, error) {
	id, err := url.PathUnescape(raw)
	if err != nil {
		return "", invalid("%s %s in the path is not a valid URL path segment: %v", what, api.ShowString(raw), err)
	}
	return id, nil
}

// reservationID reads the X-Reservation-Id header (api.ReservationIDOr: a
// DNS-1123 subdomain, or res-<newID()> when it is missing).
func reservationID(header string, newID func() string) (string, error) {
	return api.ReservationIDOr(header, newID)
}
