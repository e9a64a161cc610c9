package httpapi

import (
	"encoding/json"
	"net/http"

	"github.com/pgquectl/pgquectl/internal/broker"
)

// configureRequest is Queen's POST /api/v1/configure body. Every option
// Queen takes is accepted (pgque.configure_queue validates them); the ones
// the engine does not act on are listed by the queue detail route
// (notEnforced).
type configureRequest struct {
	Queue     *string         `json:"queue"`
	Namespace *string         `json:"namespace"`
	Task      *string         `json:"task"`
	Options   json.RawMessage `json:"options"`
}

func (s *Server) configure(w http.ResponseWriter, r *http.Request) error {
	var req configureRequest
	if err := decodeBody(r, &req, false); err != nil {
		return err
	}
	if req.Queue == nil || *req.Queue == "" {
		return badRequest("queue is required")
	}
	q, err := storeName(r, *req.Queue)
	if err != nil {
		return err
	}
	tenant := tenantOf(r)
	var ns, task *string
	if req.Namespace != nil {
		if err := checkName("namespace", *req.Namespace); err != nil {
			return err
		}
		v := labelFor(tenant, *req.Namespace)
		ns = &v
	}
	if req.Task != nil {
		if err := checkName("task", *req.Task); err != nil {
			return err
		}
		v := labelFor(tenant, *req.Task)
		task = &v
	}
	if string(req.Options) == "null" {
		req.Options = nil
	}
	ctx, cancel := dbCtx(r)
	defer cancel()
	c, err := broker.Configure(ctx, s.pool, q, ns, task, req.Options)
	if err != nil {
		return err
	}
	s.cands.Note(broker.Event{Kind: broker.EventConfigured, Queue: q})
	// Queen's answer: partitionId is null there too (its configure creates
	// no partition); options holds every option with its value.
	writeJSON(w, http.StatusOK, map[string]any{"configured": true, "queueId": c.QueueID, "partitionId": nil,
		"queue": *req.Queue, "namespace": unlabel(tenant, c.Namespace), "task": unlabel(tenant, c.Task),
		"options": c.Options})
	return nil
}
