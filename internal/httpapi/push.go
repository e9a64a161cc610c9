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
			if err := checkName(fmt.Sprintf("%s[%d].partition", field, i), *it.Partition); err != nil {
				return nil, err
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
	if err := decodeBody(r, &req, false); err != nil {
		return err
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
	t1 := time.Now()
	s.awaitTicks(r.Context(), s.afterPush(res, broker.EventPushed))
	setServerTiming(w, timing{"db", t1.Sub(t0)}, timing{"tick", time.Since(t1)})
	out := make([]pushResult, len(res))
	for i, p := range res {
		name, _ := clientName(r, p.Queue)
		out[i] = pushResult{Index: p.Index, MessageID: p.MessageID, TransactionID: p.TransactionID, QueueName: name, Status: p.Status}
	}
	writeJSON(w, http.StatusCreated, out)
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

// afterPush runs once pushes committed: metrics, the candidate source
// (kind: EventPushed for a push, EventCommitted for a transaction's), and
// a broker-driven tick per queue (which then wakes parked pops, here and
// on peer brokers). It returns the queues it asked to tick.
func (s *Server) afterPush(res []broker.PushResult, kind string) []string {
	byQueue := map[string][]int32{}
	txid := map[string]int64{} // one transaction stored them all
	for _, p := range res {
		s.metrics.pushes.WithLabelValues(p.Status).Inc()
		if p.Status == broker.StatusQueued {
			byQueue[p.Queue] = append(byQueue[p.Queue], p.PartitionID)
			txid[p.Queue] = p.Txid
		}
	}
	queues := make([]string, 0, len(byQueue))
	for q, parts := range byQueue {
		s.cands.Note(broker.Event{Kind: kind, Queue: q, Partitions: parts})
		s.requestTick(q, txid[q])
		queues = append(queues, q)
	}
	return queues
}

// timing is one entry of a Server-Timing response header.
type timing struct {
	name string
	dur  time.Duration
}

// setServerTiming sets the Server-Timing header (milliseconds): where a
// request's time went inside the broker - a push's database statement
// ("db") and its wait for the queue's tick ("tick"), a pop's database
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

// tickWait bounds how long a push's answer waits for its queues' ticks.
const tickWait = 2 * time.Second

// awaitTicks waits (at most tickWait) until the ticks requested for
// queues are done, so that a push is answered only once its messages are
// visible to pops on every broker: a broker killed right after answering
// must not leave an acknowledged push waiting for a tick that nothing
// else would make (no pg_cron, no daemon, no later push to the queue).
// With --no-auto-tick there is nothing to wait for.
func (s *Server) awaitTicks(ctx context.Context, queues []string) {
	if len(queues) == 0 {
		return
	}
	timer := time.NewTimer(tickWait)
	defer timer.Stop()
	for _, q := range queues {
		b := s.ticker.Barrier(q)
		if b == nil {
			continue
		}
		select {
		case <-b:
		case <-timer.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// requestTick makes q's new events, stored by the committed transaction
// txid (0: unknown), visible now (or, with auto-tick off, only wakes the
// local waiters, which re-check).
func (s *Server) requestTick(q string, txid int64) {
	if s.cfg.NoAutoTick {
		s.wakeLocal(q)
		return
	}
	s.ticker.Request(q, txid)
}
