package broker

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pgquectl/pgquectl/internal/db"
)

// Ack statuses the SQL understands (anything else counts as failed).
const (
	AckCompleted = "completed"
	AckRetry     = "retry"
	AckFailed    = "failed"
	AckDLQ       = "dlq"
)

// Ack acknowledges one message of a consumer group.
type Ack struct {
	TransactionID string
	PartitionID   string // the partition's UUID
	Status        string // "" = completed
	LeaseID       string // optional
	Error         string // optional, kept with a dead letter
}

// AckResult is the outcome of one Ack, in request order.
type AckResult struct {
	Index         int
	TransactionID string
	Success       bool
	Error         string
	LeaseReleased bool
	DLQ           bool
	Noop          bool
	// Redeliver: the lease was released for a retry (this item's, or one
	// held ahead that this item reached): the batch comes back. False when
	// the lease was released at the batch end.
	Redeliver bool
	// Queue and PartitionID name the acked partition ("" / -1 when the
	// partition is unknown): what the hot-list promotes on a released lease.
	Queue       string
	PartitionID int32
}

// AckBatch acknowledges acks in order for group ("" = QueueMode) on any
// tenant's queues: AckBatchIn with AnyTenant.
func AckBatch(ctx context.Context, q Querier, group string, acks []Ack) ([]AckResult, error) {
	return AckBatchIn(ctx, q, AnyTenant, group, acks)
}

// AckBatchIn acknowledges acks in order for group ("" = QueueMode) with one
// call of pgque.group_ack, confined to scope's queues (another tenant's
// partition is an unknown partition). A bad item fails alone (Success
// false); err is only for database trouble.
func AckBatchIn(ctx context.Context, q Querier, scope Scope, group string, acks []Ack) ([]AckResult, error) {
	if len(acks) == 0 {
		return []AckResult{}, nil
	}
	rows, err := q.Query(ctx, groupAckSQL, groupAckArgs(scope, group, acks)...)
	if err != nil {
		return nil, wrap("ack", err)
	}
	out, err := scanAcks(rows, len(acks))
	if err != nil {
		return nil, wrap("ack", err)
	}
	return out, nil
}

// groupAckSQL is the pgque.group_ack call of AckBatchIn and the
// AckCombiner, with groupAckArgs.
const groupAckSQL = `SELECT idx, transaction_id, success, error, lease_released, dlq, noop, queue_name, partition_id, redeliver
		FROM pgque.group_ack($1, $2::text[], $3::uuid[], $4::text[], $5::uuid[], $6::text[], $7)`

// groupAckArgs are groupAckSQL's arguments for acks of group in scope.
func groupAckArgs(scope Scope, group string, acks []Ack) []any {
	txns := make([]string, len(acks))
	parts := make([]*string, len(acks))
	statuses := make([]*string, len(acks))
	leases := make([]*string, len(acks))
	errs := make([]*string, len(acks))
	for i, a := range acks {
		txns[i] = a.TransactionID
		parts[i] = uuidOrZero(a.PartitionID)
		statuses[i] = strOrNil(a.Status)
		if a.LeaseID != "" {
			leases[i] = uuidOrZero(a.LeaseID)
		}
		errs[i] = strOrNil(a.Error)
	}
	return []any{group, txns, parts, statuses, leases, errs, scope.arg()}
}

// scanAcks reads groupAckSQL's rows (closing them): one per item, in item
// order (idx 0 .. n-1).
func scanAcks(rows pgx.Rows, n int) ([]AckResult, error) {
	defer rows.Close()
	out := make([]AckResult, 0, n)
	for rows.Next() {
		var r AckResult
		var txn, e, queue *string
		var pid *int32
		if err := rows.Scan(&r.Index, &txn, &r.Success, &e, &r.LeaseReleased, &r.DLQ, &r.Noop, &queue, &pid, &r.Redeliver); err != nil {
			return nil, err
		}
		if r.Index != len(out) {
			return nil, fmt.Errorf("group_ack row %d has index %d (a bug: report it)", len(out), r.Index)
		}
		r.TransactionID, r.Error, r.Queue, r.PartitionID = db.Deref(txn), db.Deref(e), db.Deref(queue), -1
		if pid != nil {
			r.PartitionID = *pid
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(out) != n {
		return nil, fmt.Errorf("group_ack: %d results for %d items (a bug: report it)", len(out), n)
	}
	return out, nil
}

func strOrNil(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// uuidOrZero passes a well-formed UUID through and maps anything else to
// the nil UUID, which matches no partition and no lease: a malformed id is
// answered per item (unknown partition, invalid lease), not as an error.
func uuidOrZero(s string) *string {
	if !isUUID(s) {
		s = "00000000-0000-0000-0000-000000000000"
	}
	return &s
}

func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, c := range s {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}
