package httpapi

import (
	"net/http"
	"strconv"

	"github.com/pgquectl/pgquectl/internal/broker"
)

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
