package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/jackc/pgx/v5"

	"github.com/pgquectl/pgquectl/internal/broker"
)

type txOperation struct {
	Type string `json:"type"`
	ackItem
	Items *[]pushItem `json:"items"`
}

type txRequest struct {
	Operations     *[]txOperation `json:"operations"`
	RequiredLeases []string       `json:"requiredLeases"`
	// KV and Timers are Queen's key-value and timer riders: this broker has
	// neither, so a transaction carrying them is refused (ignored, its
	// once-gate would be dropped and the rest committed).
	KV     json.RawMessage `json:"kv"`
	Timers json.RawMessage `json:"timers"`
}

// emptyRider says whether a kv / timers rider carries nothing: absent,
// null or [].
func emptyRider(raw json.RawMessage) bool {
	var v []json.RawMessage
	return len(raw) == 0 || (json.Unmarshal(raw, &v) == nil && len(v) == 0)
}

type txResult struct {
	Index         int     `json:"index"`
	Type          string  `json:"type"`
	Success       bool    `json:"success"`
	TransactionID string  `json:"transactionId,omitempty"`
	MessageID     string  `json:"messageId,omitempty"`
	QueueName     string  `json:"queueName,omitempty"`
	Error         *string `json:"error,omitempty"`
	LeaseReleased *bool   `json:"leaseReleased,omitempty"`
	DLQ           *bool   `json:"dlq,omitempty"`
	Noop          *bool   `json:"noop,omitempty"`
}

// errTxRolledBack carries why a transaction was rolled back (answered 200
// success:false).
type errTxRolledBack struct{ reason, msg string }

func (e errTxRolledBack) Error() string { return e.msg }

func (s *Server) transaction(w http.ResponseWriter, r *http.Request) error {
	var req txRequest
	if err := decodeBody(r, &req, false); err != nil {
		return err
	}
	if !emptyRider(req.KV) || !emptyRider(req.Timers) {
		return badRequest("kv and timers are not supported by this broker (Queen's KV store and timers): nothing was run; send the transaction without them")
	}
	if req.Operations == nil {
		return badRequest("operations is required")
	}
	ops := *req.Operations
	// Validate everything before touching the database.
	n := 0
	for _, op := range ops {
		if op.Items != nil {
			n += len(*op.Items)
		}
	}
	if err := s.checkPushSize(n); err != nil {
		return err
	}
	pushes := make([][]broker.Item, len(ops))
	for i, op := range ops {
		switch op.Type {
		case "push":
			if op.Items == nil {
				return badRequest(fmt.Sprintf("operations[%d].items is required", i))
			}
			items, err := pushItems(r, *op.Items, fmt.Sprintf("operations[%d].items", i))
			if err != nil {
				return err
			}
			pushes[i] = items
		case "ack":
			if _, err := op.toBroker("operations", i); err != nil {
				return err
			}
		default:
			return badRequest(fmt.Sprintf("operations[%d].type must be push or ack", i))
		}
	}
	if err := s.refusePushes(w, r, pushes); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), dbTimeout)
	defer cancel()
	var results []txResult
	var pushed []broker.PushResult
	var acked []broker.AckResult
	var ackedItems []ackItem
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		results, pushed, acked, ackedItems = nil, nil, nil, nil
		for _, l := range req.RequiredLeases {
			live, err := broker.LeaseLiveIn(ctx, tx, scopeOf(r), l)
			if err != nil {
				return err
			}
			if !live {
				return errTxRolledBack{reason: "lease_invalid", msg: "required lease " + l + " is invalid or expired"}
			}
		}
		for i, op := range ops {
			if op.Type == "push" {
				res, err := broker.PushNotify(ctx, tx, pushes[i], s.pushNotify())
				if err != nil {
					return err
				}
				for _, p := range res {
					name, _ := clientName(r, p.Queue)
					results = append(results, txResult{Index: i, Type: "push", Success: p.Status != "failed",
						TransactionID: p.TransactionID, MessageID: p.MessageID, QueueName: name})
				}
				pushed = append(pushed, res...)
				continue
			}
			res, err := runAcks(ctx, tx, scopeOf(r), "", []ackItem{op.ackItem}, "operations")
			if err != nil {
				return err
			}
			a := res[0]
			if !a.Success {
				return errTxRolledBack{reason: "ack_failed", msg: fmt.Sprintf("operations[%d]: %s", i, a.Error)}
			}
			lr, dlq, noop := a.LeaseReleased, a.DLQ, a.Noop
			results = append(results, txResult{Index: i, Type: "ack", Success: true, TransactionID: a.TransactionID,
				LeaseReleased: &lr, DLQ: &dlq, Noop: &noop})
			acked = append(acked, a)
			ackedItems = append(ackedItems, op.ackItem)
		}
		return nil
	})
	var rb errTxRolledBack
	switch {
	case errors.As(err, &rb):
		writeJSON(w, http.StatusOK, map[string]any{"success": false, "reason": rb.reason, "error": rb.msg, "results": []any{}})
		return nil
	case err != nil:
		status, msg := statusOf(err)
		if status >= 500 {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]any{"success": false, "reason": "operation_failed", "error": msg, "results": []any{}})
		return nil
	}
	// Queues with pushes are told by afterPush (with their partitions);
	// queues with acks only get a bare commit event.
	pushedTo := map[string]bool{}
	for _, p := range pushed {
		pushedTo[p.Queue] = true
	}
	noted := map[string]bool{}
	for _, a := range acked {
		if a.Queue != "" && !pushedTo[a.Queue] && !noted[a.Queue] {
			noted[a.Queue] = true
			s.cands.Note(broker.Event{Kind: broker.EventCommitted, Queue: a.Queue})
		}
	}
	s.afterPush(pushed, broker.EventCommitted)
	s.afterAcks(acked, ackedItems, "")
	if results == nil {
		results = []txResult{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"transactionId": newID(), "success": true, "results": results})
	return nil
}

// newID is a random UUID (version 4) text.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
