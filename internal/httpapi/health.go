package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/pgquectl/pgquectl/internal/broker"
)

func (s *Server) overallStatus(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := dbCtx(r)
	defer cancel()
	qs, err := broker.Queues(ctx, s.pool, "")
	if err != nil {
		return err
	}
	n := 0
	for _, q := range qs {
		if _, ok := clientName(r, q.Queue); ok {
			n++
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "queues": n, "parkedPops": s.gates.Waiting(),
		"uptimeSeconds": int64(time.Since(s.started).Seconds())})
	return nil
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := broker.Ping(ctx, s.pool); err != nil {
		s.log.Warn("health check failed", "err", err)
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "unhealthy", "database": "disconnected"})
		return nil
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "healthy", "database": "connected",
		"latencyMs": float64(time.Since(start).Microseconds()) / 1000})
	return nil
}

func (s *Server) liveness(w http.ResponseWriter, _ *http.Request) error {
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "uptimeSeconds": int64(time.Since(s.started).Seconds()),
		"parkedPops": s.gates.Waiting()})
	return nil
}
