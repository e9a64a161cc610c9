package httpapi

import (
	"errors"
	"net/http"
	"strings"

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

// unlabel strips the tenant scope of a label ("" → null).
func unlabel(tenant, label string) any {
	if label == "" {
		return nil
	}
	if tenant != "" && strings.HasPrefix(label, tenant+labelSep) {
		return label[len(tenant)+len(labelSep):]
	}
	return label
}

func queueJSON(r *http.Request, q broker.QueueInfo) (map[string]any, bool) {
	name, ok := clientName(r, q.Queue)
	if !ok {
		return nil, false
	}
	tenant := tenantOf(r)
	return map[string]any{"id": q.QueueID, "name": name, "namespace": unlabel(tenant, q.Namespace),
		"task": unlabel(tenant, q.Task), "createdAt": isoMillis(q.CreatedAt), "partitions": q.Partitions,
		"options": q.Options}, true
}

func (s *Server) listQueues(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := dbCtx(r)
	defer cancel()
	qs, err := broker.Queues(ctx, s.pool, "")
	if err != nil {
		return err
	}
	out := []map[string]any{}
	for _, q := range qs {
		if j, ok := queueJSON(r, q); ok {
			out = append(out, j)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"queues": out})
	return nil
}

func (s *Server) deleteQueue(w http.ResponseWriter, r *http.Request) error {
	q, err := storeName(r, r.PathValue("queue"))
	if err != nil {
		return err
	}
	ctx, cancel := dbCtx(r)
	defer cancel()
	if err := broker.DeleteQueue(ctx, s.pool, q); err != nil {
		if errors.Is(err, broker.ErrNotFound) {
			// Queen's answer: a delete is idempotent (clients delete before
			// they create, and a 404 would throw there). Another tenant's
			// queue is answered the same way.
			writeJSON(w, http.StatusOK, map[string]any{"deleted": false, "existed": false,
				"queue": r.PathValue("queue"), "message": "Queue not found, nothing was deleted"})
			return nil
		}
		return err
	}
	s.cands.Note(broker.Event{Kind: broker.EventGroupDeleted, Queue: q})
	writeJSON(w, http.StatusOK, map[string]any{"deleted": true, "existed": true, "queue": r.PathValue("queue")})
	return nil
}

// queueStatus answers the depth of a queue by partition for one consumer
// group (?consumerGroup=, default queue mode): "messages" is what the group
// has still to do (pending), "retained" what the event tables still hold.
func (s *Server) queueStatus(w http.ResponseWriter, r *http.Request) error {
	q, err := storeName(r, r.PathValue("queue"))
	if err != nil {
		return err
	}
	group := broker.GroupOrDefault(r.URL.Query().Get("consumerGroup"))
	ctx, cancel := dbCtx(r)
	defer cancel()
	parts, err := broker.QueueDepth(ctx, s.pool, q, group)
	if err != nil {
		return err
	}
	out := make([]map[string]any, len(parts))
	var pending, retained int64
	for i, p := range parts {
		out[i] = map[string]any{"partition": p.Partition, "partitionId": p.PartitionUUID, "messages": p.Pending,
			"pending": p.Pending, "retained": p.Retained}
		pending += p.Pending
		retained += p.Retained
	}
	writeJSON(w, http.StatusOK, map[string]any{"queue": r.PathValue("queue"), "consumerGroup": group,
		"messages": pending, "pending": pending, "retained": retained, "partitions": out})
	return nil
}
