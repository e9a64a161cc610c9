package httpapi

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/pgquectl/pgquectl/internal/broker"
)

// newID is a random UUID (version 4) text.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

func dbCtx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), dbTimeout)
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

func (s *Server) groupsJSON(r *http.Request, gs []broker.GroupInfo, only string) []map[string]any {
	out := []map[string]any{}
	for _, g := range gs {
		name, ok := clientName(r, g.Queue)
		if !ok || (only != "" && g.Group != only) {
			continue
		}
		var active any
		if !g.LastActive.IsZero() {
			active = isoMillis(g.LastActive)
		}
		out = append(out, map[string]any{"name": g.Group, "queue": name, "subscriptionMode": g.SubscriptionMode,
			"partitions": g.Partitions, "leased": g.Leased, "deadLetters": g.DeadLetters,
			"pinsRotation": g.PinsRotation, "oldestPartition": g.OldestPartition, "lastActive": active})
	}
	return out
}

func (s *Server) listGroups(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := dbCtx(r)
	defer cancel()
	gs, err := broker.Groups(ctx, s.pool, "")
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.groupsJSON(r, gs, ""))
	return nil
}

func (s *Server) getGroup(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := dbCtx(r)
	defer cancel()
	gs, err := broker.Groups(ctx, s.pool, "")
	if err != nil {
		return err
	}
	out := s.groupsJSON(r, gs, r.PathValue("group"))
	if len(out) == 0 {
		return &apiError{status: http.StatusNotFound, msg: "consumer group not found"}
	}
	writeJSON(w, http.StatusOK, map[string]any{"name": r.PathValue("group"), "queues": out})
	return nil
}

func (s *Server) deleteGroup(w http.ResponseWriter, r *http.Request) error {
	meta := false
	if v := r.URL.Query().Get("deleteMetadata"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return badRequest("deleteMetadata must be true or false")
		}
		meta = b
	}
	if tenantOf(r) != "" {
		return &apiError{status: http.StatusForbidden, msg: "deleting a group from every queue is not tenant-scoped; delete it per queue"}
	}
	ctx, cancel := dbCtx(r)
	defer cancel()
	n, err := broker.DeleteGroup(ctx, s.pool, r.PathValue("group"), "", meta)
	if err != nil {
		return err
	}
	s.cands.Note(broker.Event{Kind: broker.EventGroupDeleted, Group: r.PathValue("group")})
	// Queen's fields (success, deletedPartitions, metadataDeleted) and ours.
	// metadataDeleted: the group's subscriptions are always deleted.
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "deleted": true, "consumerGroup": r.PathValue("group"),
		"deletedPartitions": n, "metadataDeleted": true, "cursors": n})
	return nil
}

func (s *Server) deleteGroupQueue(w http.ResponseWriter, r *http.Request) error {
	q, err := storeName(r, r.PathValue("queue"))
	if err != nil {
		return err
	}
	ctx, cancel := dbCtx(r)
	defer cancel()
	n, err := broker.DeleteGroup(ctx, s.pool, r.PathValue("group"), q, false)
	if err != nil {
		return err
	}
	s.cands.Note(broker.Event{Kind: broker.EventGroupDeleted, Queue: q, Group: r.PathValue("group")})
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "deleted": true, "consumerGroup": r.PathValue("group"),
		"queueName": r.PathValue("queue"), "queue": r.PathValue("queue"), "deletedPartitions": n,
		"metadataDeleted": true, "cursors": n})
	return nil
}

type subscriptionRequest struct {
	SubscriptionTimestamp *string `json:"subscriptionTimestamp"`
	SubscriptionMode      *string `json:"subscriptionMode"`
}

// groupSubscription changes where the group's subscriptions start on the
// caller's queues: {"subscriptionTimestamp"} (ISO-8601, Queen's body) or
// {"subscriptionMode"} with a pop's values and meaning (new / new-only: at
// the latest message, anything else: all; "": the server's default).
// Existing cursors keep their position.
func (s *Server) groupSubscription(w http.ResponseWriter, r *http.Request) error {
	var req subscriptionRequest
	if err := decodeBody(r, &req, false); err != nil {
		return err
	}
	var at time.Time
	mode := ""
	switch {
	case req.SubscriptionTimestamp != nil && req.SubscriptionMode != nil:
		return badRequest("give subscriptionTimestamp or subscriptionMode, not both")
	case req.SubscriptionTimestamp != nil:
		t, err := time.Parse(time.RFC3339Nano, *req.SubscriptionTimestamp)
		if err != nil {
			return badRequest("subscriptionTimestamp must be an ISO-8601 timestamp")
		}
		at = t
	case req.SubscriptionMode != nil:
		mode = s.requestMode(*req.SubscriptionMode)
	default:
		return badRequest("subscriptionTimestamp is required")
	}
	group := r.PathValue("group")
	if group == broker.QueueMode {
		return badRequest("the queue-mode group always reads every retained message; seek it per queue instead")
	}
	prefix := ""
	if t := tenantOf(r); t != "" {
		prefix = t + tenantSep
	}
	ctx, cancel := dbCtx(r)
	defer cancel()
	n, err := broker.SetSubscription(ctx, s.pool, group, prefix, mode, at)
	if err != nil {
		return err
	}
	s.cands.Note(broker.Event{Kind: broker.EventSeeked, Group: group})
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "consumerGroup": group, "queues": n})
	return nil
}

type seekRequest struct {
	ToEnd     bool    `json:"toEnd"`
	Timestamp *string `json:"timestamp"`
}

func (s *Server) seek(w http.ResponseWriter, r *http.Request) error {
	var req seekRequest
	if err := decodeBody(r, &req, false); err != nil {
		return err
	}
	var at time.Time
	switch {
	case req.ToEnd && req.Timestamp != nil:
		return badRequest("give toEnd or timestamp, not both")
	case req.Timestamp != nil:
		t, err := time.Parse(time.RFC3339Nano, *req.Timestamp)
		if err != nil {
			return badRequest("timestamp must be an ISO-8601 timestamp")
		}
		at = t
	case !req.ToEnd:
		return badRequest("toEnd: true or timestamp is required")
	}
	q, err := storeName(r, r.PathValue("queue"))
	if err != nil {
		return err
	}
	ctx, cancel := dbCtx(r)
	defer cancel()
	n, err := broker.Seek(ctx, s.pool, q, r.PathValue("group"), req.ToEnd, at)
	if err != nil {
		return err
	}
	s.cands.Note(broker.Event{Kind: broker.EventSeeked, Queue: q, Group: r.PathValue("group")})
	s.wakeLocal(q)
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "consumerGroup": r.PathValue("group"),
		"queue": r.PathValue("queue"), "cursors": n})
	return nil
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	start := time.Now()
	var one int
	if err := s.pool.QueryRow(ctx, `SELECT 1 FROM pgque.version() LIMIT 1`).Scan(&one); err != nil {
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
