package httpapi

import (
	"errors"
	"net/http"

	"github.com/pgquectl/pgquectl/internal/broker"
)

// getQueue answers GET /api/v1/resources/queues/:queue in the shape of
// Queen's get_queue_v2: id, name, namespace, task, createdAt, partitions
// (an array: id, name, createdAt, stats {total, pending, processing,
// completed, failed, deadLetter}, oldestMessage, newestMessage) and totals;
// plus options (every option with its value) and notEnforced (the options
// set that the engine stores but does not act on). 404 for an unknown
// queue (or one of another tenant).
func (s *Server) getQueue(w http.ResponseWriter, r *http.Request) error {
	q, err := storeName(r, r.PathValue("queue"))
	if err != nil {
		return err
	}
	ctx, cancel := dbCtx(r)
	defer cancel()
	d, err := broker.QueueDetail(ctx, s.pool, q)
	if errors.Is(err, broker.ErrNotFound) {
		return &apiError{status: http.StatusNotFound, msg: "queue not found"}
	}
	if err != nil {
		return err
	}
	name, ok := clientName(r, q)
	if !ok {
		return &apiError{status: http.StatusNotFound, msg: "queue not found"}
	}
	tenant := tenantOf(r)
	ns, _ := d["namespace"].(string)
	task, _ := d["task"].(string)
	d["name"], d["namespace"], d["task"] = name, unlabel(tenant, ns), unlabel(tenant, task)
	writeJSON(w, http.StatusOK, d)
	return nil
}
