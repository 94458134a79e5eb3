package rest

import (
	"context"
	"errors"
	"net/http"

	"github.com/gofiber/fiber/v2"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

func (s *server) healthz(c *fiber.Ctx) error {
	return writeJSON(c, http.StatusOK, api.HealthResponse{Status: "ok"})
}

// POST /api/v1/advertisements: validation (400) before the CN check (403).
func (s *server) advertise(c *fiber.Ctx) error {
	return report(c, &s.ads, decodeAdvertisement,
		func(r api.AdvertisementRequest) string { return r.ClusterID },
		func(cn string, r api.AdvertisementRequest) (api.AdvertisementResponse, error) {
			return s.broker.Advertise(s.baseCtx(), cn, r)
		})
}

// report serves a periodic report (advertisement or heartbeat): decoded
// through the caller's cache and validated (400), then its clusterId
// checked against the client certificate (403), then handed to the
// domain.
func report[Req, Resp any](c *fiber.Ctx, cache *reportCache[Req], decode func([]byte) (Req, error),
	clusterID func(Req) string, handle func(cn string, req Req) (Resp, error)) error {
	cn := caller(c).cn
	req, err := cache.decode(cn, c.Body(), decode)
	if err != nil {
		return err
	}
	if got := clusterID(req); got != cn {
		return api.Errorf(api.CodeForbidden, "clusterId %q does not match the client certificate (%q)", got, cn)
	}
	resp, err := handle(cn, req)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, resp)
}

// GET /api/v1/advertisements/{clusterId}: a provider reads its own view.
func (s *server) getAdvertisement(c *fiber.Ctx) error {
	clusterID, err := pathID(c.Params("clusterId"), "cluster id")
	if err != nil {
		return err
	}
	if clusterID == "" {
		return invalid("cluster id is required in the path")
	}
	id := caller(c)
	if clusterID != id.cn {
		return api.Errorf(api.CodeForbidden, "cluster %q may only read its own advertisement, not %q", id.cn, clusterID)
	}
	resp, err := s.broker.Advertisement(s.baseCtx(), clusterID)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, resp)
}

// POST /api/v1/heartbeat: validation (400) before the CN check (403).
func (s *server) heartbeat(c *fiber.Ctx) error {
	return report(c, &s.beats, decodeHeartbeat,
		func(r api.HeartbeatRequest) string { return r.ClusterID },
		func(cn string, r api.HeartbeatRequest) (api.HeartbeatResponse, error) {
			return s.broker.Heartbeat(s.baseCtx(), cn, r)
		})
}

// GET /api/v1/nodegroups[?all=true].
func (s *server) nodeGroups(c *fiber.Ctx) error {
	all, err := parseAll(c.Query("all"))
	if err != nil {
		return err
	}
	body, err := s.broker.NodeGroupsBody(s.baseCtx(), caller(c).cn, all)
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderContentType, jsonContentType)
	return c.Status(http.StatusOK).Send(body)
}

// GET /api/v1/placement/explanation (extension): the caller's own.
func (s *server) explanation(c *fiber.Ctx) error {
	resp, err := s.broker.Explanation(s.baseCtx(), caller(c).cn)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, resp)
}

// POST /api/v1/reservations: X-Reservation-Id is validated before anything
// else; the domain looks a replay up before any capacity check.
func (s *server) reserve(c *fiber.Ctx) error {
	resID, err := reservationID(c.Get(api.HeaderReservationID), s.newID)
	if err != nil {
		return err
	}
	req, err := decodeReservation(c.Body())
	if err != nil {
		return err
	}
	resp, created, err := s.broker.Reserve(s.baseCtx(), caller(c).cn, resID, req)
	if err != nil {
		return err
	}
	c.Set(api.HeaderReservationID, resID)
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	return writeJSON(c, status, resp)
}

// GET /api/v1/reservations/{id}: consumer or provider of the reservation.
func (s *server) getReservation(c *fiber.Ctx) error {
	resID, err := pathID(c.Params("id"), "reservation id")
	if err != nil {
		return err
	}
	if resID == "" {
		return invalid("reservation id is required in the path")
	}
	id := caller(c)
	resp, err := s.broker.Reservation(s.baseCtx(), id.cn, id.role, resID)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, resp)
}

// DELETE /api/v1/reservations/{id}[?chunks=N]: 202 Accepted.
func (s *server) release(c *fiber.Ctx) error {
	resID, err := pathID(c.Params("id"), "reservation id")
	if err != nil {
		return err
	}
	if resID == "" {
		return invalid("reservation id is required in the path")
	}
	chunks, err := parseChunks(c.Query("chunks"))
	if err != nil {
		return err
	}
	resp, err := s.broker.Release(s.baseCtx(), caller(c).cn, resID, chunks)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusAccepted, resp)
}

// noInstructions is the JSON of an api.InstructionListResponse with an
// empty list (TestNoInstructionsBody).
const noInstructions = `{"instructions":[]}`

// GET /api/v1/instructions[?wait=D]: without wait exactly v1; with wait a
// long-poll that returns as soon as an instruction exists.
func (s *server) instructions(c *fiber.Ctx) error {
	wait, err := parseWait(c.Query("wait"))
	if err != nil {
		return err
	}
	ctx := s.baseCtx()
	if wait > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, wait)
		defer cancel()
	}
	id := caller(c)
	list, err := s.broker.Instructions(ctx, id.cn, id.role, wait)
	if err != nil && !(wait > 0 && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled))) {
		return err
	}
	if len(list) == 0 {
		// Most polls find nothing: their answer is always the same.
		c.Set(fiber.HeaderContentType, jsonContentType)
		return c.Status(http.StatusOK).SendString(noInstructions)
	}
	return writeJSON(c, http.StatusOK, api.InstructionListResponse{Instructions: list})
}

// POST /api/v1/instructions/{id}/result.
func (s *server) postResult(c *fiber.Ctx) error {
	insID, err := pathID(c.Params("id"), "instruction id")
	if err != nil {
		return err
	}
	if insID == "" {
		return invalid("instruction id is required in the path")
	}
	req, err := decodeResult(c.Body())
	if err != nil {
		return err
	}
	id := caller(c)
	if err := s.broker.PostResult(s.baseCtx(), id.cn, id.role, insID, req); err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, api.InstructionResultResponse{Accepted: true})
}
