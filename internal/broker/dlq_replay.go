package broker

import (
	"context"
	"fmt"
)

// ReplayDLQ moves dead letter id back into its partition, for its group
// only; it returns the new message id. An unknown id is ErrNotFound. One
// call of pgque.group_dlq_replay.
func ReplayDLQ(ctx context.Context, q Querier, id int64) (string, error) {
	var msg *string
	if err := q.QueryRow(ctx, `SELECT pgque.group_dlq_replay($1)::text`, id).Scan(&msg); err != nil {
		return "", wrap("replay DLQ", err)
	}
	if msg == nil {
		return "", fmt.Errorf("replay DLQ: no dead letter %d: %w", id, ErrNotFound)
	}
	return *msg, nil
}

// ReplayDLQQueue is ReplayDLQ that also returns the (stored) name of the
// dead letter's queue, so the caller can tick it: one statement.
func ReplayDLQQueue(ctx context.Context, q Querier, id int64) (msgID, queue string, err error) {
	var msg, qn *string
	if err := q.QueryRow(ctx, `SELECT pgque.group_dlq_replay($1)::text,
		(SELECT qu.queue_name FROM pgque.group_dead_letter d JOIN pgque.queue qu ON qu.queue_id = d.gdl_queue WHERE d.gdl_id = $1)`,
		id).Scan(&msg, &qn); err != nil {
		return "", "", wrap("replay DLQ", err)
	}
	if msg == nil {
		return "", "", fmt.Errorf("replay DLQ: no dead letter %d: %w", id, ErrNotFound)
	}
	return *msg, deref(qn), nil
}
