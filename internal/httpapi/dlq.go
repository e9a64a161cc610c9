package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/pgquectl/pgquectl/internal/broker"
)

// Dead letters. Every call is confined to the caller's tenant in SQL
// (scopeOf): a list and its total count only the caller's dead letters,
// and another tenant's dead-letter id is answered as an unknown one.

func (s *Server) dlqList(w http.ResponseWriter, r *http.Request) error {
	limit, err := intParam(r, "limit", 100, 1)
	if err != nil {
		return err
	}
	offset, err := intParam(r, "offset", 0, 0)
	if err != nil {
		return err
	}
	q, err := storeName(r, r.URL.Query().Get("queue"))
	if err != nil {
		return err
	}
	ctx, cancel := dbCtx(r)
	defer cancel()
	dls, total, err := broker.ListDLQIn(ctx, s.pool, scopeOf(r), q, r.URL.Query().Get("consumerGroup"), limit, offset)
	if err != nil {
		return err
	}
	msgs := make([]map[string]any, 0, len(dls))
	for _, d := range dls {
		name, ok := clientName(r, d.Queue)
		if !ok {
			// Never: the SQL returns the caller's tenant's only. Skipped
			// rather than shown under a wrong name.
			continue
		}
		data := d.Data
		if len(data) == 0 {
			data = json.RawMessage("null")
		}
		msgs = append(msgs, map[string]any{"id": strconv.FormatInt(d.ID, 10), "messageId": d.MessageID,
			"transactionId": d.TransactionID, "partitionId": d.PartitionUUID, "queue": name, "partition": d.Partition,
			"consumerGroup": d.Group, "errorMessage": d.Error, "retryCount": d.RetryCount, "data": data,
			"createdAt": isoMillis(d.CreatedAt), "failedAt": isoMillis(d.FailedAt)})
	}
	writeJSON(w, http.StatusOK, map[string]any{"messages": msgs,
		"pagination": map[string]int{"limit": limit, "offset": offset}, "total": total})
	return nil
}

func (s *Server) dlqReplay(w http.ResponseWriter, r *http.Request) error {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id < 1 {
		return badRequest("the dead letter id must be a positive integer")
	}
	if err := s.refusePush(w, r); err != nil { // a replay writes an event
		return err
	}
	ctx, cancel := dbCtx(r)
	defer cancel()
	rp, err := broker.ReplayDLQIn(ctx, s.pool, scopeOf(r), id)
	if err != nil {
		return err
	}
	msg, queue := rp.MessageID, rp.Queue
	if queue != "" {
		s.cands.Note(broker.Event{Kind: broker.EventDLQReplayed, Queue: queue, Partitions: []int32{rp.PartitionID}})
		// Claimable now (committed); wake the parked pops here and, before
		// the answer, on the other brokers (as a push's NOTIFY would).
		s.wakeLocal(queue)
		s.notifyPeers(ctx, queue)
		if s.hot != nil {
			// The other brokers' warm rings learn of the partition before the
			// answer: the coalesced hint would die with this broker.
			if err := s.hot.HintPeersNow(ctx, queue, rp.PartitionID); err != nil {
				s.log.Warn("hot-list: telling the other brokers of a replayed dead letter failed; their reseed floor finds it", "queue", queue, "err", err)
			}
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "id": r.PathValue("id"), "messageId": msg})
	return nil
}

func (s *Server) dlqPurge(w http.ResponseWriter, r *http.Request) error {
	qn := r.URL.Query().Get("queue")
	if qn == "" {
		return badRequest("queue is required")
	}
	q, err := storeName(r, qn)
	if err != nil {
		return err
	}
	ctx, cancel := dbCtx(r)
	defer cancel()
	n, err := broker.PurgeDLQ(ctx, s.pool, q, r.URL.Query().Get("consumerGroup"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "deleted": n})
	return nil
}
