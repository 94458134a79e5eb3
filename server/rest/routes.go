package rest

import (
	"slices"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// Route templates of the API (reference §2.0). They label metrics and logs.
const (
	routeHealthz        = "/healthz"
	routeAdvertisements = "/api/v1/advertisements"
	routeAdvertisement  = "/api/v1/advertisements/:clusterId"
	routeHeartbeat      = "/api/v1/heartbeat"
	routeNodeGroups     = "/api/v1/nodegroups"
	routeReservations   = "/api/v1/reservations"
	routeReservation    = "/api/v1/reservations/:id"
	routeInstructions   = "/api/v1/instructions"
	routeResult         = "/api/v1/instructions/:id/result"
	routeExplanation    = "/api/v1/placement/explanation"
	// routeUnmatched labels requests no route matched.
	routeUnmatched = "unmatched"
)

// route is one registered method × template.
type route struct {
	method   string
	template string
	segments []string
}

// routeTable matches paths to templates for labels, 405 and Allow.
type routeTable []route

func (t *routeTable) add(method, template string) {
	*t = append(*t, route{method: method, template: template, segments: splitPath(template)})
}

// match returns the template registered for method and path (routeUnmatched
// if none) and, when the path exists only under other methods, those methods.
func (t routeTable) match(method, path string) (template string, allow []string) {
	var other []string
	for _, r := range t {
		if !segmentsMatch(r.segments, path) {
			continue
		}
		if r.method == method || (method == fiber.MethodHead && r.method == fiber.MethodGet) {
			return r.template, nil
		}
		other = append(other, r.method)
		if r.method == fiber.MethodGet {
			other = append(other, fiber.MethodHead)
		}
	}
	return routeUnmatched, other
}

// template is match without the allowed methods: the label of a request's
// metrics and log line. It allocates nothing.
func (t routeTable) template(method, path string) string {
	for _, r := range t {
		if segmentsMatch(r.segments, path) && (r.method == method || (method == fiber.MethodHead && r.method == fiber.MethodGet)) {
			return r.template
		}
	}
	return routeUnmatched
}

func splitPath(p string) []string {
	p = strings.Trim(p, "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

// segmentsMatch reports whether path, split like splitPath, matches the
// template's segments (":name" matches any one segment). It walks path in
// place.
func segmentsMatch(tmpl []string, path string) bool {
	path = strings.Trim(path, "/")
	n := 0
	if path != "" {
		n = strings.Count(path, "/") + 1
	}
	switch {
	case len(tmpl) == n:
	case len(tmpl) == n+1 && strings.HasPrefix(tmpl[n], ":"):
		// An optional trailing parameter may be empty.
		tmpl = tmpl[:n]
	default:
		return false
	}
	for _, want := range tmpl {
		seg, rest, _ := strings.Cut(path, "/")
		path = rest
		if !strings.HasPrefix(want, ":") && want != seg {
			return false
		}
	}
	return true
}

func joinComma(s []string) string { return strings.Join(s, ", ") }

// knownMethods answers a request whose method Fiber does not know (it
// would send a plain-text 400 before any middleware) with the JSON 405
// MethodNotAllowed and Allow of the path, or 404 NotFound for an unknown
// path; everything else goes to next.
func (s *server) knownMethods(app *fiber.App, next fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(fctx *fasthttp.RequestCtx) {
		method := string(fctx.Method())
		if slices.Contains(fiber.DefaultMethods, method) {
			next(fctx)
			return
		}
		c := app.AcquireCtx(fctx)
		defer app.ReleaseCtx(c)
		_, allow := s.routes.match(method, string(fctx.Path()))
		err := api.Errorf(api.CodeNotFound, "no route for method %q on %s", method, fctx.Path())
		if len(allow) > 0 {
			c.Set(fiber.HeaderAllow, joinComma(allow))
			err = api.Errorf(api.CodeMethodNotAllowed, "method %q is not allowed on %s (allowed: %s)", method, fctx.Path(), joinComma(allow))
		}
		_ = s.handleError(c, err)
	}
}

// registerRoutes adds the ten routes of reference §2.0 and the extension
// route of the placement explanation. A route's role is
// checked before anything else it does. Every GET route answers HEAD too:
// the same status and headers, no body (fasthttp drops it).
func (s *server) registerRoutes(app *fiber.App) {
	add := func(method, template, fiberPath string, role api.Role, h fiber.Handler) {
		s.routes.add(method, template)
		app.Add(method, fiberPath, s.gate(role), h)
		if method == fiber.MethodGet {
			app.Add(fiber.MethodHead, fiberPath, s.gate(role), h)
		}
	}
	add(fiber.MethodGet, routeHealthz, routeHealthz, "", s.healthz)
	add(fiber.MethodPost, routeAdvertisements, routeAdvertisements, api.RoleProvider, s.advertise)
	add(fiber.MethodGet, routeAdvertisement, routeAdvertisement+"?", api.RoleProvider, s.getAdvertisement)
	add(fiber.MethodPost, routeHeartbeat, routeHeartbeat, api.RoleConsumer, s.heartbeat)
	add(fiber.MethodGet, routeNodeGroups, routeNodeGroups, api.RoleConsumer, s.nodeGroups)
	add(fiber.MethodPost, routeReservations, routeReservations, api.RoleConsumer, s.reserve)
	add(fiber.MethodGet, routeReservation, routeReservation+"?", "", s.getReservation)
	add(fiber.MethodDelete, routeReservation, routeReservation+"?", api.RoleConsumer, s.release)
	add(fiber.MethodGet, routeInstructions, routeInstructions, "", s.instructions)
	add(fiber.MethodPost, routeResult, routeResult, "", s.postResult)
	add(fiber.MethodGet, routeExplanation, routeExplanation, api.RoleConsumer, s.explanation)
}

// gate answers 403 when the caller's certificate is for the other role.
// role "" means the route is shared.
func (s *server) gate(role api.Role) fiber.Handler {
	return func(c *fiber.Ctx) error {
		if role != "" {
			if id := caller(c); !id.may(role) {
				return api.Errorf(api.CodeForbidden, "%s %s is a %s route; the client certificate of %q is for a %s",
					c.Method(), c.Path(), role, id.cn, id.role)
			}
		}
		return c.Next()
	}
}
