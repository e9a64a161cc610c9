package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/pgquectl/pgquectl/internal/broker"
	"github.com/pgquectl/pgquectl/internal/db"
)

// pushItem is one item of POST /api/v1/push (and of a transaction's push).
type pushItem struct {
	Queue         *string         `json:"queue"`
	Partition     *string         `json:"partition"`
	Payload       json.RawMessage `json:"payload"`
	TransactionID *string         `json:"transactionId"`
}

type pushRequest struct {
	Items *[]pushItem `json:"items"`
}

// pushResult is one element of the push response.
type pushResult struct {
	Index         int    `json:"index"`
	MessageID     string `json:"message_id"`
	TransactionID string `json:"transaction_id"`
	QueueName     string `json:"queueName"`
	Status        string `json:"status"`
}

// pushItems validates items and maps them to the broker's.
func pushItems(r *http.Request, items []pushItem, field string) ([]broker.Item, error) {
	out := make([]broker.Item, len(items))
	for i, it := range items {
		if it.Partition != nil {
			if checkName("", *it.Partition) != nil { // (the field's name formatted only then)
				return nil, checkName(fmt.Sprintf("%s[%d].partition", field, i), *it.Partition)
			}
		}
		if it.Queue == nil || *it.Queue == "" {
			return nil, badRequest(fmt.Sprintf("%s[%d].queue is required", field, i))
		}
		if len(it.Payload) == 0 {
			return nil, badRequest(fmt.Sprintf("%s[%d].payload is required", field, i))
		}
		q, err := storeName(r, *it.Queue)
		if err != nil {
			return nil, err
		}
		out[i] = broker.Item{Queue: q, Payload: it.Payload}
		if it.Partition != nil {
			out[i].Partition = *it.Partition
		}
		if it.TransactionID != nil {
			out[i].TransactionID = *it.TransactionID
		}
	}
	return out, nil
}

func (s *Server) push(w http.ResponseWriter, r *http.Request) error {
	if err := s.refusePush(w, r); err != nil {
		return err
	}
	var req pushRequest
	ok := false
	if b, read := bodyBytes(r); read {
		req, ok = decodePush(b)
	}
	if !ok {
		if err := decodeBody(r, &req, false); err != nil {
			return err
		}
	}
	if req.Items == nil {
		return badRequest("items is required")
	}
	if err := s.checkPushSize(len(*req.Items)); err != nil {
		return err
	}
	items, err := pushItems(r, *req.Items, "items")
	if err != nil {
		return err
	}
	t0 := time.Now()
	res, err := s.pusher.Push(r.Context(), items)
	if err != nil {
		return maybeStored(err)
	}
	setServerTiming(w, timing{"db", time.Since(t0)})
	s.afterPush(res, broker.EventPushed)
	out := make([]pushResult, len(res))
	for i, p := range res {
		name, _ := clientName(r, p.Queue)
		out[i] = pushResult{Index: p.Index, MessageID: p.MessageID, TransactionID: p.TransactionID, QueueName: name, Status: p.Status}
	}
	writeEncoded(w, http.StatusCreated, func(b []byte) ([]byte, bool) { return appendPushResults(b, out), true },
		func() any { return out })
	return nil
}

// checkPushSize refuses a push (the pushes of a transaction together) of
// more than PushMaxItems items: 413, not retryable as it is.
func (s *Server) checkPushSize(n int) error {
	if n > s.cfg.PushMaxItems {
		return &apiError{status: http.StatusRequestEntityTooLarge,
			msg: fmt.Sprintf("a push holds at most %d items (got %d; --push-max-items): split it into several pushes", s.cfg.PushMaxItems, n)}
	}
	return nil
}

// maybeStored answers a write whose outcome is unknown - its database
// connection died under the statement, or its deadline passed while the
// statement ran - with 503 saying so: it may have committed.
func maybeStored(err error) error {
	if db.IsConnLost(err) || errors.Is(err, context.DeadlineExceeded) {
		return &apiError{status: http.StatusServiceUnavailable, retryAfter: 1, err: err,
			msg: "the database connection failed during the write: it may have been stored; retry it - with a transactionId on each item the retry is safe (an item already stored answers \"duplicate\")"}
	}
	return err
}

// afterPush runs once pushes committed (their messages are claimable
// then: a group claim closes its range at its own snapshot, no tick is
// needed): metrics, the candidate source (kind: EventPushed for a push,
// EventCommitted for a transaction's) and the local gates of each queue.
// The other brokers were told by the push's own NOTIFY (pushNotify),
// delivered at its commit.
func (s *Server) afterPush(res []broker.PushResult, kind string) {
	byQueue := map[string][]int32{}
	for _, p := range res {
		s.metrics.pushes.WithLabelValues(p.Status).Inc()
		if p.Status == broker.StatusQueued {
			byQueue[p.Queue] = append(byQueue[p.Queue], p.PartitionID)
		}
	}
	for q, parts := range byQueue {
		s.cands.Note(broker.Event{Kind: kind, Queue: q, Partitions: parts})
		s.wakeLocal(q)
	}
}

// notifyChannel is the PostgreSQL NOTIFY channel brokers on one database
// use to wake each other's parked pops (payload: the sender's id, 0x1e,
// the stored queue name). The engine's own channels are pgque_<queue>; a
// dot cannot appear after that prefix's underscore form, so no queue name
// collides with it.
const notifyChannel = "pgque.broker"

// pushNotify is the NOTIFY a push sends in its own transaction: the other
// brokers open the queue's gate when it commits, i.e. when its messages
// are claimable (it costs no extra statement or transaction: a NOTIFY
// after the commit, alone, would assign a transaction id and flush a
// commit record of its own).
func (s *Server) pushNotify() broker.Notify {
	return broker.Notify{Channel: notifyChannel, Prefix: s.origin + "\x1e"}
}

// notifyPeers tells the other brokers that queue (its stored name) has new
// claimable messages, for a write that could not send the NOTIFY in its
// own transaction (a DLQ replay). The statement runs after the write
// committed; an error is logged (the peers' parked pops re-check on their
// own within a second).
func (s *Server) notifyPeers(ctx context.Context, queue string) {
	if err := broker.SendNotify(ctx, s.pool, s.pushNotify(), queue); err != nil {
		s.log.Warn("telling the other brokers of new messages failed; their parked pops re-check within a second", "queue", queue, "err", err)
	}
}

// timing is one entry of a Server-Timing response header.
type timing struct {
	name string
	dur  time.Duration
}

// setServerTiming sets the Server-Timing header (milliseconds): where a
// request's time went inside the broker - a push's database statement
// ("db", including the wait for a combined call slot), a pop's database
// statements ("db") and its time parked ("park") - so a client or a
// benchmark can split its latency without the broker's logs.
func setServerTiming(w http.ResponseWriter, ts ...timing) {
	b := make([]byte, 0, 64)
	for i, t := range ts {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, t.name...)
		b = append(b, ";dur="...)
		b = strconv.AppendFloat(b, float64(t.dur.Microseconds())/1000, 'f', 3, 64)
	}
	w.Header().Set("Server-Timing", string(b))
}
