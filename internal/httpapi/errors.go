package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
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
}

func (e *apiError) Error() string { return e.msg }
func (e *apiError) Unwrap() error { return errBadRequest }

// statusOf is the one error → HTTP status map. It returns the status and
// the message for the client: the broker's own message for the request's
// fault (invalid input, not found), a fixed text otherwise (database
// details stay in the log).
func statusOf(err error) (int, string) {
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		return ae.status, ae.msg
	case errors.Is(err, broker.ErrInvalidInput):
		return http.StatusBadRequest, clientMessage(err, broker.ErrInvalidInput)
	case errors.Is(err, broker.ErrNotFound):
		return http.StatusNotFound, clientMessage(err, broker.ErrNotFound)
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
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", db.Describe(err))
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

// decodeBody reads the JSON body into v: 413 over the body limit, 400
// {"error":"bad body: ..."} when it does not parse. An empty body is
// allowed when optional.
func decodeBody(r *http.Request, v any, optional bool) error {
	dec := json.NewDecoder(r.Body)
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return &apiError{status: http.StatusRequestEntityTooLarge, msg: "request body too large"}
		}
		if optional && errors.Is(err, errEOF) {
			return nil
		}
		return badRequest("bad body: " + err.Error())
	}
	if dec.More() {
		return badRequest("bad body: trailing data after the JSON value")
	}
	// Read to the end so an oversized trailing part is noticed too.
	var rest [1]byte
	if _, err := r.Body.Read(rest[:]); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return &apiError{status: http.StatusRequestEntityTooLarge, msg: "request body too large"}
		}
	}
	return nil
}
