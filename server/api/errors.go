package api

import (
	"errors"
	"fmt"
	"net/http"
)

// Error is a broker error with a wire code. Domain packages return it; the
// REST layer turns it into an ErrorResponse with the status from Status.
type Error struct {
	Code    string
	Message string
	Details map[string]any
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Errorf builds an *Error.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// WithDetails returns a copy of e carrying details.
func (e *Error) WithDetails(d map[string]any) *Error {
	c := *e
	c.Details = d
	return &c
}

// CodeOf returns the wire code of err: the Code of the first *Error in its
// chain, or InternalError.
func CodeOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternalError
}

// IsCode reports whether err carries the wire code.
func IsCode(err error, code string) bool { return err != nil && CodeOf(err) == code }

// codesByStatus are the wire codes CodeForStatus names, one per status:
// where several codes share a status (409) the general one.
var codesByStatus = [...]string{
	CodeInvalidRequest, CodeUnauthenticated, CodeForbidden, CodeNotFound, CodeMethodNotAllowed,
	CodeRequestTimeout, CodeRequestHeadersTooLarge, CodeConflict, CodeReservationExpired,
	CodePreconditionFailed, CodePayloadTooLarge, CodeTooManyRequests, CodeNotImplemented,
	CodeUpstreamError, CodeServiceUnavailable, CodeTimeout, CodeInternalError,
}

// CodeForStatus is Status read backwards: the wire code for an HTTP status
// whose body carried none (a transport error of a listener, a plain-text
// answer of a proxy), and false for a status no code has. For a status
// several codes share (409) it names the general one (Conflict).
func CodeForStatus(status int) (string, bool) {
	for _, c := range codesByStatus {
		if Status(c) == status {
			return c, true
		}
	}
	return "", false
}

// Status is the one table from wire code to HTTP status. Every code maps to
// exactly one status (the reference reuses codes across statuses, bug #27).
func Status(code string) int {
	switch code {
	case CodeInvalidRequest:
		return http.StatusBadRequest
	case CodeUnauthenticated:
		return http.StatusUnauthorized
	case CodeForbidden:
		return http.StatusForbidden
	case CodeNotFound:
		return http.StatusNotFound
	case CodeMethodNotAllowed:
		return http.StatusMethodNotAllowed
	case CodeRequestTimeout:
		return http.StatusRequestTimeout
	case CodeRequestHeadersTooLarge:
		return http.StatusRequestHeaderFieldsTooLarge
	case CodeConflict, CodeInsufficientCapacity, CodeBudgetExceeded:
		return http.StatusConflict
	case CodeReservationExpired:
		return http.StatusGone
	case CodePreconditionFailed:
		return http.StatusPreconditionFailed
	case CodePayloadTooLarge:
		return http.StatusRequestEntityTooLarge
	case CodeTooManyRequests:
		return http.StatusTooManyRequests
	case CodeNotImplemented:
		return http.StatusNotImplemented
	case CodeUpstreamError:
		return http.StatusBadGateway
	case CodeServiceUnavailable:
		return http.StatusServiceUnavailable
	case CodeTimeout:
		return http.StatusGatewayTimeout
	default:
		return http.StatusInternalServerError
	}
}
