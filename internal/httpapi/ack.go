package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/pgquectl/pgquectl/internal/broker"
)

// ackItem is one acknowledgment (single ack body, batch element, or a
// transaction's ack operation).
type ackItem struct {
	TransactionID *string `json:"transactionId"`
	PartitionID   string  `json:"partitionId"`
	Status        string  `json:"status"`
	ConsumerGroup string  `json:"consumerGroup"`
	LeaseID       string  `json:"leaseId"`
	Error         string  `json:"error"`
}

type ackBatchRequest struct {
	ConsumerGroup   string     `json:"consumerGroup"`
	Acknowledgments *[]ackItem `json:"acknowledgments"`
}

type ackResult struct {
	Index         int     `json:"index"`
	TransactionID string  `json:"transactionId"`
	Success       bool    `json:"success"`
	Error         *string `json:"error"`
	LeaseReleased bool    `json:"leaseReleased"`
	DLQ           bool    `json:"dlq"`
	Noop          bool    `json:"noop"`
}

func (a ackItem) toBroker(field string, i int) (broker.Ack, error) {
	if a.TransactionID == nil || *a.TransactionID == "" {
		return broker.Ack{}, badRequest(fmt.Sprintf("%s[%d].transactionId is required", field, i))
	}
	return broker.Ack{TransactionID: *a.TransactionID, PartitionID: a.PartitionID, Status: a.Status,
		LeaseID: a.LeaseID, Error: a.Error}, nil
}

// runAcks acknowledges items (each with its group, defaulting to group) on
// q, confined to scope's queues (another tenant's partition is an unknown
// one): one broker call per distinct group, results in request order.
func runAcks(ctx context.Context, q broker.Querier, scope broker.Scope, group string, items []ackItem, field string) ([]broker.AckResult, error) {
	type part struct {
		idx  []int
		acks []broker.Ack
	}
	byGroup := map[string]*part{}
	var order []string
	for i, it := range items {
		a, err := it.toBroker(field, i)
		if err != nil {
			return nil, err
		}
		g := it.ConsumerGroup
		if g == "" {
			g = group
		}
		if g == "" {
			g = broker.QueueMode
		}
		if byGroup[g] == nil {
			byGroup[g] = &part{}
			order = append(order, g)
		}
		byGroup[g].idx = append(byGroup[g].idx, i)
		byGroup[g].acks = append(byGroup[g].acks, a)
	}
	out := make([]broker.AckResult, len(items))
	for _, g := range order {
		p := byGroup[g]
		res, err := broker.AckBatchIn(ctx, q, scope, g, p.acks)
		if err != nil {
			return nil, err
		}
		for j, r := range res {
			r.Index = p.idx[j]
			out[p.idx[j]] = r
		}
	}
	return out, nil
}

func (s *Server) ack(w http.ResponseWriter, r *http.Request) error {
	var it ackItem
	if err := decodeBody(r, &it, false); err != nil {
		return err
	}
	return s.doAcks(w, r, "", []ackItem{it}, "ack")
}

func (s *Server) ackBatch(w http.ResponseWriter, r *http.Request) error {
	var req ackBatchRequest
	if err := decodeBody(r, &req, false); err != nil {
		return err
	}
	if req.Acknowledgments == nil {
		return badRequest("acknowledgments is required")
	}
	return s.doAcks(w, r, req.ConsumerGroup, *req.Acknowledgments, "acknowledgments")
}

func (s *Server) doAcks(w http.ResponseWriter, r *http.Request, group string, items []ackItem, field string) error {
	for i, it := range items {
		if _, err := it.toBroker(field, i); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), dbTimeout)
	defer cancel()
	var res []broker.AckResult
	var err error
	if groupsOf(group, items) > 1 {
		// Several groups: one transaction, so the batch is all-or-nothing
		// for database errors like a single call.
		err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			res, err = runAcks(ctx, tx, scopeOf(r), group, items, field)
			return err
		})
	} else {
		res, err = runAcks(ctx, s.pool, scopeOf(r), group, items, field)
	}
	if err != nil {
		return err
	}
	s.afterAcks(res, items, group)
	writeJSON(w, http.StatusOK, ackResults(res))
	return nil
}

func groupsOf(group string, items []ackItem) int {
	seen := map[string]bool{}
	for _, it := range items {
		g := it.ConsumerGroup
		if g == "" {
			g = group
		}
		seen[g] = true
	}
	return len(seen)
}

func ackResults(res []broker.AckResult) []ackResult {
	out := make([]ackResult, len(res))
	for i, a := range res {
		out[i] = ackResult{Index: i, TransactionID: a.TransactionID, Success: a.Success, LeaseReleased: a.LeaseReleased, DLQ: a.DLQ, Noop: a.Noop}
		if a.Error != "" {
			e := a.Error
			out[i].Error = &e
		}
	}
	return out
}

// afterAcks tells the candidate source and wakes local waiters of queues
// whose lease was released (work may be claimable again). group is the
// request's default group (items may name their own).
func (s *Server) afterAcks(res []broker.AckResult, items []ackItem, group string) {
	released := map[string][]int32{}
	notes := map[string][]broker.AckNote{}
	for i, a := range res {
		status := ackStatusLabel(items[i].Status)
		s.metrics.acks.WithLabelValues(status, strconv.FormatBool(a.Success)).Inc()
		if a.LeaseReleased && a.Queue != "" {
			released[a.Queue] = append(released[a.Queue], a.PartitionID)
			g := items[i].ConsumerGroup
			if g == "" {
				g = group
			}
			if g == "" {
				g = broker.QueueMode
			}
			// (a completed ack may release the lease for a retry held
			// ahead of it: the SQL says which)
			notes[a.Queue] = append(notes[a.Queue], broker.AckNote{Group: g, PartitionID: a.PartitionID,
				LeaseReleased: true, Redeliver: a.Redeliver})
		}
	}
	for q, parts := range released {
		s.cands.Note(broker.Event{Kind: broker.EventAcked, Queue: q, Partitions: parts, Acks: notes[q]})
		s.wakeLocal(q)
	}
}

// ackStatusLabel normalises an ack status the way the SQL reads it.
func ackStatusLabel(st string) string {
	switch st {
	case "", "completed", "success", "acked", "ok":
		return broker.AckCompleted
	case broker.AckRetry, broker.AckDLQ:
		return st
	default:
		return broker.AckFailed
	}
}
