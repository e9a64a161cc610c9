package httpapi

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/pgquectl/pgquectl/internal/queuekey"
)

// access is who may call a route (auth on): one of the four role sets.
type access int

const (
	public   access = iota // no token needed (operations endpoints)
	readSet                // read-only, read-write, admin
	writeSet               // write-only, read-write, admin
	rwSet                  // read-write, admin
	adminSet               // admin
)

// route is one line of the route table.
type route struct {
	pattern string // Go ServeMux pattern: "METHOD /path/{var}"
	access  access
	handle  func(s *Server, w http.ResponseWriter, r *http.Request) error
}

// routeTable is every route of the Queen v1 API this broker serves.
var routeTable = []route{
	{"POST /api/v1/push", writeSet, (*Server).push},
	{"GET /api/v1/pop/queue/{queue}", rwSet, (*Server).popQueue},
	{"GET /api/v1/pop/queue/{queue}/partition/{partition}", rwSet, (*Server).popPartition},
	{"GET /api/v1/pop", rwSet, (*Server).popLabel},
	{"POST /api/v1/ack", rwSet, (*Server).ack},
	{"POST /api/v1/ack/batch", rwSet, (*Server).ackBatch},
	{"POST /api/v1/transaction", rwSet, (*Server).transaction},
	{"POST /api/v1/lease/{leaseId}/extend", rwSet, (*Server).leaseExtend},
	{"POST /api/v1/configure", rwSet, (*Server).configure},
	{"GET /api/v1/resources/queues", readSet, (*Server).listQueues},
	{"GET /api/v1/resources/queues/{queue}", readSet, (*Server).getQueue},
	{"DELETE /api/v1/resources/queues/{queue}", adminSet, (*Server).deleteQueue},
	{"GET /api/v1/status/queues/{queue}", readSet, (*Server).queueStatus},
	{"GET /api/v1/status", readSet, (*Server).overallStatus},
	{"GET /api/v1/consumer-groups", readSet, (*Server).listGroups},
	{"GET /api/v1/consumer-groups/{group}", readSet, (*Server).getGroup},
	{"DELETE /api/v1/consumer-groups/{group}", adminSet, (*Server).deleteGroup},
	{"DELETE /api/v1/consumer-groups/{group}/queues/{queue}", adminSet, (*Server).deleteGroupQueue},
	{"POST /api/v1/consumer-groups/{group}/subscription", adminSet, (*Server).groupSubscription},
	{"POST /api/v1/consumer-groups/{group}/queues/{queue}/seek", rwSet, (*Server).seek},
	{"GET /api/v1/dlq", readSet, (*Server).dlqList},
	{"POST /api/v1/dlq/{id}/replay", rwSet, (*Server).dlqReplay},
	{"DELETE /api/v1/dlq", adminSet, (*Server).dlqPurge},
	{"GET /api/v1/messages", readSet, (*Server).listMessages},
	{"GET /api/v1/messages/{partitionId}/{transactionId}", readSet, (*Server).getMessage},
	{"DELETE /api/v1/messages/{partitionId}/{transactionId}", adminSet, (*Server).deleteMessage},
	{"GET /api/v1/system/maintenance", adminSet, (*Server).getMaintenance},
	{"POST /api/v1/system/maintenance", adminSet, (*Server).postMaintenance},
	{"GET /api/v1/system/maintenance/pop", adminSet, (*Server).getPopMaintenance},
	{"POST /api/v1/system/maintenance/pop", adminSet, (*Server).postPopMaintenance},
	{"GET /health", public, (*Server).health},
	{"GET /status", public, (*Server).liveness},
	{"GET /metrics/prometheus", public, (*Server).prometheus},
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	for _, rt := range routeTable {
		mux.Handle(rt.pattern, s.wrap(rt))
	}
	// Everything else (unknown paths, and known paths with another method).
	mux.Handle("/", s.wrap(route{pattern: "unknown", access: public, handle: func(_ *Server, w http.ResponseWriter, _ *http.Request) error {
		writeJSON(w, http.StatusNotFound, struct {
			Error string `json:"error"`
			Code  string `json:"code"`
		}{"Not Found", "no_such_route"})
		return nil
	}}))
	return mux
}

// statusWriter remembers the status code for logs and metrics.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += n
	return n, err
}

type ctxKey int

const tenantKey ctxKey = 1

// tenantOf is the request's tenant ("" = the default tenant).
func tenantOf(r *http.Request) string {
	t, _ := r.Context().Value(tenantKey).(string)
	return t
}

// wrap is the middleware of every route: auth, the body (read whole
// within the body limit and budget, held until the answer), the text
// checks of path, query and body (valid UTF-8, no NUL), tenant, the
// handler, its error through the error map, access log and metrics.
func (s *Server) wrap(rt route) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		start := time.Now()
		w := &statusWriter{ResponseWriter: rw}
		tenant, err := s.authorize(r, rt.access)
		if err == nil {
			var body []byte
			var held int64
			body, held, err = s.readBody(r)
			defer s.bodies.put(held)
			if err == nil {
				r.Body = &heldBody{Reader: bytes.NewReader(body), b: body}
				err = checkRequestText(r, body)
			}
		}
		markBusy(r)
		if err == nil {
			if tenant == "" && s.cfg.TenantHeader != "" && len(s.cfg.AuthSecret) == 0 {
				tenant = r.Header.Get(s.cfg.TenantHeader)
				if strings.Contains(tenant, tenantSep) || strings.ContainsRune(tenant, queuekey.SepRune) {
					err = badRequest("the tenant header must not contain U+241F or 0x1f")
				} else {
					err = checkText("the tenant header", tenant)
				}
			}
		}
		if err == nil {
			err = checkTenant(tenant)
		}
		if err == nil {
			r = r.WithContext(context.WithValue(r.Context(), tenantKey, tenant))
			err = rt.handle(s, w, r)
		}
		if err != nil {
			s.writeError(w, r, err)
		}
		if w.status == 0 {
			w.status = http.StatusOK
		}
		d := time.Since(start)
		s.metrics.observe(rt.pattern, r.Method, w.status, d)
		level := slog.LevelInfo
		if w.status >= 500 {
			level = slog.LevelWarn
		}
		if s.log.Enabled(r.Context(), level) { // (its arguments allocate even when it logs nothing)
			s.log.Log(r.Context(), level, "http", "method", r.Method, "path", r.URL.Path, "route", rt.pattern,
				"status", w.status, "bytes", w.bytes, "duration_ms", float64(d.Microseconds())/1000, "remote", r.RemoteAddr)
		}
	})
}

func dbCtx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), dbTimeout)
}
