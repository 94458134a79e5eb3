package rest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// HEAD on every GET route answers like GET without a body: same status,
// same headers (Content-Length of the GET body), also for refusals.
func TestHeadAnswersLikeGet(t *testing.T) {
	app := newTestApp(t, &fakeBroker{
		InstructionsFn: func(context.Context, string, api.Role, time.Duration) ([]api.InstructionView, error) {
			return []api.InstructionView{{ID: "peer-res-1", Kind: api.KindPeer}}, nil
		},
	})
	for _, tt := range []struct {
		name, path, cert string
		status           int
	}{
		{"healthz", "/healthz", prov, 200},
		{"own advertisement", "/api/v1/advertisements/prov-a", prov, 200},
		{"node groups", "/api/v1/nodegroups", cons, 200},
		{"reservation", "/api/v1/reservations/res-1", cons, 200},
		{"instructions", "/api/v1/instructions", cons, 200},
		{"wrong role", "/api/v1/nodegroups", prov, 403},
		{"other cluster's advertisement", "/api/v1/advertisements/prov-b", prov, 403},
		{"bad query", "/api/v1/nodegroups?all=perhaps", cons, 400},
		{"unknown path", "/api/v1/nope", cons, 404},
		{"no certificate", "/healthz", "", 401},
	} {
		t.Run(tt.name, func(t *testing.T) {
			get := do(t, app, "GET", tt.path, tt.cert, "", api.HeaderRequestID, "req-1")
			head := do(t, app, "HEAD", tt.path, tt.cert, "", api.HeaderRequestID, "req-1")
			if get.status != tt.status || head.status != tt.status {
				t.Fatalf("GET %d, HEAD %d, want %d (GET body %s)", get.status, head.status, tt.status, get.body)
			}
			if len(head.body) != 0 {
				t.Errorf("HEAD sent a body: %q", head.body)
			}
			for _, h := range []string{fiber.HeaderContentType, api.HeaderRequestID, api.HeaderBrokerAPI, api.HeaderLongPoll} {
				if g, hd := get.header.Get(h), head.header.Get(h); g != hd || g == "" {
					t.Errorf("%s: GET %q, HEAD %q", h, g, hd)
				}
			}
			// A success has the GET body's length; an error message names
			// the method, so its length differs.
			n, err := strconv.Atoi(head.header.Get(fiber.HeaderContentLength))
			if err != nil || n == 0 || (tt.status == 200 && n != len(get.body)) {
				t.Errorf("HEAD Content-Length %q, GET body %d bytes", head.header.Get(fiber.HeaderContentLength), len(get.body))
			}
		})
	}
	// HEAD is listed in Allow where GET is, and only there.
	for path, want := range map[string]string{
		"/api/v1/heartbeat":                "POST",
		"/api/v1/reservations/res-1":       "GET, HEAD, DELETE",
		"/api/v1/instructions/in-1/result": "POST",
	} {
		r := do(t, app, "HEAD", path, cons, "")
		if path == "/api/v1/reservations/res-1" {
			r = do(t, app, "PUT", path, cons, "")
		}
		if r.status != 405 || r.header.Get(fiber.HeaderAllow) != want {
			t.Errorf("%s: %d Allow %q, want 405 Allow %q", path, r.status, r.header.Get(fiber.HeaderAllow), want)
		}
	}
}

// A method Fiber does not know gets the same JSON answers as a known one
// (405 with Allow on a known path, 404 elsewhere), not a plain-text 400.
func TestUnknownMethodsAreJSON(t *testing.T) {
	app := newTestApp(t, &fakeBroker{})
	for _, tt := range []struct {
		method, path string
		status       int
		code, allow  string
	}{
		{"PROPFIND", "/api/v1/reservations/res-1", 405, api.CodeMethodNotAllowed, "GET, HEAD, DELETE"},
		{"FOO", "/healthz", 405, api.CodeMethodNotAllowed, "GET, HEAD"},
		{"FOO", "/api/v2/nope", 404, api.CodeNotFound, ""},
	} {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			r := do(t, app, tt.method, tt.path, cons, "", api.HeaderRequestID, "req-9")
			if r.status != tt.status || r.header.Get(fiber.HeaderAllow) != tt.allow {
				t.Fatalf("%d Allow %q, want %d Allow %q: %s", r.status, r.header.Get(fiber.HeaderAllow), tt.status, tt.allow, r.body)
			}
			e := r.errBody(t)
			if e.Code != tt.code || e.RequestID != "req-9" || !strings.Contains(e.Message, strconv.Quote(tt.method)) {
				t.Errorf("body %+v", e)
			}
			if r.header.Get(api.HeaderBrokerAPI) != BrokerAPI {
				t.Errorf("no %s header", api.HeaderBrokerAPI)
			}
		})
	}
}

// Requests the transport refuses get their own codes, each answered with
// the one status api.Status gives it.
func TestTransportErrorCodes(t *testing.T) {
	// A real one over a socket: headers beyond the read buffer.
	app := newTestApp(t, &fakeBroker{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- app.Listener(ln) }()
	t.Cleanup(func() {
		if err := app.Shutdown(); err != nil {
			t.Error(err)
		}
		t.Logf("listener ended: %v", <-served)
	})
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := fmt.Fprintf(conn, "GET /healthz HTTP/1.1\r\nHost: broker\r\n%s: %s\r\nX-Big: %s\r\n\r\n", testCertHeader, cons, strings.Repeat("x", 2*readBufferSize)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	r := response{status: resp.StatusCode, header: resp.Header, body: body}
	if r.status != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("oversized headers: %d %s", r.status, r.body)
	}
	if e := r.errBody(t); e.Code != api.CodeRequestHeadersTooLarge || !strings.Contains(e.Message, fmt.Sprint(readBufferSize)) || e.RequestID == "" {
		t.Fatalf("oversized headers: %+v", e)
	}
	// Fiber's errors as its serverErrorHandler and router raise them.
	s := newServer(Config{Broker: &fakeBroker{}})
	for _, tt := range []struct {
		err  *fiber.Error
		code string
	}{
		{fiber.ErrBadRequest, api.CodeInvalidRequest},
		{fiber.ErrNotFound, api.CodeNotFound},
		{fiber.ErrMethodNotAllowed, api.CodeMethodNotAllowed},
		{fiber.ErrRequestTimeout, api.CodeRequestTimeout},
		{fiber.ErrRequestEntityTooLarge, api.CodePayloadTooLarge},
		{fiber.ErrRequestHeaderFieldsTooLarge, api.CodeRequestHeadersTooLarge},
		{fiber.ErrBadGateway, api.CodeInvalidRequest}, // a network error while reading the request
		{fiber.ErrUnprocessableEntity, api.CodeInvalidRequest},
		{fiber.ErrServiceUnavailable, api.CodeInternalError},
	} {
		t.Run(tt.err.Message, func(t *testing.T) {
			code, msg := s.transportError(tt.err)
			if code != tt.code || msg == "" {
				t.Fatalf("%d: code %q message %q, want %q", tt.err.Code, code, msg, tt.code)
			}
		})
	}
	for status := 400; status < 600; status++ {
		code, _ := s.transportError(fiber.NewError(status))
		if got := api.Status(code); got == http.StatusInternalServerError && code != api.CodeInternalError {
			t.Errorf("status %d: code %q has no status of its own", status, code)
		}
	}
}
