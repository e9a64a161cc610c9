package httpapi

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"strconv"

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

// ackParts splits items by consumer group (each item's own, else group,
// else QueueMode), groups in order of first appearance; idx[k][j] is the
// request index of part k's ack j.
func ackParts(group string, items []ackItem, field string) ([]broker.AckPart, [][]int, error) {
	var parts []broker.AckPart
	var idx [][]int
	byGroup := map[string]int{}
	for i, it := range items {
		a, err := it.toBroker(field, i)
		if err != nil {
			return nil, nil, err
		}
		g := broker.GroupOrDefault(cmp.Or(it.ConsumerGroup, group))
		k, ok := byGroup[g]
		if !ok {
			k = len(parts)
			byGroup[g] = k
			parts = append(parts, broker.AckPart{Group: g})
			idx = append(idx, nil)
		}
		parts[k].Acks = append(parts[k].Acks, a)
		idx[k] = append(idx[k], i)
	}
	return parts, idx, nil
}

// mergeAcks puts the parts' results back in request order (n items).
func mergeAcks(n int, idx [][]int, res [][]broker.AckResult) []broker.AckResult {
	out := make([]broker.AckResult, n)
	for k, rs := range res {
		for j, r := range rs {
			r.Index = idx[k][j]
			out[r.Index] = r
		}
	}
	return out
}

// runAcks acknowledges items (each with its group, defaulting to group) on
// q, confined to scope's queues (another tenant's partition is an unknown
// one): one broker call per distinct group, results in request order. (The
// transaction route's; the ack routes go through the server's AckCombiner.)
func runAcks(ctx context.Context, q broker.Querier, scope broker.Scope, group string, items []ackItem, field string) ([]broker.AckResult, error) {
	parts, idx, err := ackParts(group, items, field)
	if err != nil {
		return nil, err
	}
	res := make([][]broker.AckResult, len(parts))
	for k, p := range parts {
		if res[k], err = broker.AckBatchIn(ctx, q, scope, p.Group, p.Acks); err != nil {
			return nil, err
		}
	}
	return mergeAcks(len(items), idx, res), nil
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

// doAcks runs a request's acks through the server's AckCombiner: with
// the acks of other requests arriving meanwhile, in one transaction (all of
// this request's groups in it: all or nothing for database errors).
func (s *Server) doAcks(w http.ResponseWriter, r *http.Request, group string, items []ackItem, field string) error {
	parts, idx, err := ackParts(group, items, field)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), dbTimeout)
	defer cancel()
	res, err := s.acker.Ack(ctx, scopeOf(r), parts)
	if err != nil {
		return err
	}
	out := mergeAcks(len(items), idx, res)
	s.afterAcks(out, items, group)
	rs := ackResults(out)
	writeEncoded(w, http.StatusOK, func(b []byte) ([]byte, bool) { return appendAckResults(b, rs), true },
		func() any { return rs })
	return nil
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
			g := broker.GroupOrDefault(cmp.Or(items[i].ConsumerGroup, group))
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
