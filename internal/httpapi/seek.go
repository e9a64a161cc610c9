package httpapi

import (
	"net/http"
	"time"

	"github.com/pgquectl/pgquectl/internal/broker"
)

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
