package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/pgquectl/pgquectl/internal/broker"
	"github.com/pgquectl/pgquectl/internal/db"
)

// errBadRequest marks a request error found by this package (validation):
// 400 with its message.
var errBadRequest = errors.New("bad request")

func badRequest(msg string) error { return &apiError{status: http.StatusBadRequest, msg: msg} }

// apiError is an error with its HTTP status and the message a client may
// read.
type apiError struct {
	status int
	msg    string
	// retryAfter, when > 0, is sent as Retry-After (seconds).
	retryAfter int
	// err, when set, is the cause (logged for a 5xx).
	err error
}

func (e *apiError) Error() string {
	if e.err != nil {
		return e.msg + ": " + e.err.Error()
	}
	return e.msg
}
func (e *apiError) Unwrap() error { return errBadRequest }

// statusOf is the one error → HTTP status map. It returns the status and
// the message for the client: the broker's own message for the request's
// fault (invalid input, not found), a fixed text otherwise (database
// details stay in the log). Bad input is 4xx, the database's trouble 503;
// 500 is left for the broker's own bugs (and a role lacking a privilege).
func statusOf(err error) (int, string) {
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		return ae.status, ae.msg
	case errors.Is(err, broker.ErrInvalidInput):
		return http.StatusBadRequest, clientMessage(err, broker.ErrInvalidInput)
	case errors.Is(err, broker.ErrNotFound):
		return http.StatusNotFound, clientMessage(err, broker.ErrNotFound)
	case db.IsDataException(err):
		// A value PostgreSQL refused (class 22: out of range, bad
		// encoding, NUL, a malformed literal) that validation let through.
		return http.StatusBadRequest, "invalid input: " + db.ServerMessage(err)
	case db.IsConnLost(err):
		return http.StatusServiceUnavailable, "database connection lost"
	case errors.Is(err, db.ErrUnreachable):
		return http.StatusServiceUnavailable, "database unavailable"
	case errors.Is(err, db.ErrNotInstalled):
		return http.StatusServiceUnavailable, "pgque engine not installed in the database"
	case errors.Is(err, db.ErrPrivilege), errors.Is(err, db.ErrAuth):
		return http.StatusInternalServerError, "the broker's database role lacks a privilege"
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable, "database timeout"
	case errors.Is(err, context.Canceled):
		return 499, "request cancelled"
	default:
		return http.StatusInternalServerError, "internal error"
	}
}

// clientMessage keeps the part of a broker error the request caused:
// "op: <server message>: <sentinel>" → "op: <server message>".
func clientMessage(err, sentinel error) string {
	return strings.TrimSuffix(err.Error(), ": "+sentinel.Error())
}

// writeError answers err with its status and {"error": msg}; server-side
// errors are logged with their detail.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	status, msg := statusOf(err)
	if status >= 500 {
		cause := err
		if ae := (*apiError)(nil); errors.As(err, &ae) && ae.err != nil {
			cause = ae.err
		}
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", db.Describe(cause))
	}
	var ae *apiError
	if errors.As(err, &ae) && ae.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(ae.retryAfter))
	} else if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, status, map[string]string{"error": msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		slog.Error("encoding a response", "err", err)
		status = http.StatusInternalServerError
		b = []byte(`{"error":"internal error"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// noContent answers 204 without a body (and so without Content-Length).
func noContent(w http.ResponseWriter) { w.WriteHeader(http.StatusNoContent) }
