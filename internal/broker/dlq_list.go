package broker

import (
	"context"
	"encoding/json"
	"time"

	"github.com/pgquectl/pgquectl/internal/db"
)

// DeadLetter is one dead-lettered message of a consumer group.
type DeadLetter struct {
	ID            int64
	MessageID     string
	TransactionID string
	PartitionUUID string
	Queue         string
	Partition     string
	Group         string
	Error         string
	RetryCount    int
	Data          json.RawMessage
	CreatedAt     time.Time
	FailedAt      time.Time
}

// ListDLQ is ListDLQIn over every tenant's queues (AnyTenant).
func ListDLQ(ctx context.Context, q Querier, queue, group string, limit, offset int) ([]DeadLetter, int64, error) {
	return ListDLQIn(ctx, q, AnyTenant, queue, group, limit, offset)
}

// ListDLQIn returns one page of dead letters (newest first) of scope's
// queues filtered by queue and group ("" = any) and the filter's total
// (scope's only): one call of pgque.group_dlq_list.
func ListDLQIn(ctx context.Context, q Querier, scope Scope, queue, group string, limit, offset int) ([]DeadLetter, int64, error) {
	rows, err := q.Query(ctx, `SELECT id, message_id::text, transaction_id, partition_uuid::text, queue_name,
		partition_name, group_name, error, retry_count, data, created_at, failed_at, total
		FROM pgque.group_dlq_list($1, $2, $3, $4, $5)`, strOrNil(queue), strOrNil(group), limit, offset,
		scope.arg())
	if err != nil {
		return nil, 0, wrap("list DLQ", err)
	}
	defer rows.Close()
	var out []DeadLetter
	var total int64
	for rows.Next() {
		var d DeadLetter
		var puuid, part, errText, data *string
		if err := rows.Scan(&d.ID, &d.MessageID, &d.TransactionID, &puuid, &d.Queue, &part, &d.Group, &errText,
			&d.RetryCount, &data, &d.CreatedAt, &d.FailedAt, &total); err != nil {
			return nil, 0, wrap("list DLQ", err)
		}
		d.PartitionUUID, d.Partition, d.Error = db.Deref(puuid), db.Deref(part), db.Deref(errText)
		if data != nil {
			d.Data = json.RawMessage(*data)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, wrap("list DLQ", err)
	}
	return out, total, nil
}
