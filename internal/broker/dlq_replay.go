package broker

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// ReplayDLQ moves dead letter id back into its partition, for its group
// only; it returns the new message id. An unknown id is ErrNotFound. One
// call of pgque.group_dlq_replay.
func ReplayDLQ(ctx context.Context, q Querier, id int64) (string, error) {
	msg, _, err := ReplayDLQQueue(ctx, q, id)
	return msg, err
}

// ReplayDLQQueue is ReplayDLQ that also returns the (stored) name of the
// dead letter's queue, so the caller can tick it: one call of
// pgque.group_dlq_replay.
func ReplayDLQQueue(ctx context.Context, q Querier, id int64) (msgID, queue string, err error) {
	err = q.QueryRow(ctx, `SELECT message_id::text, queue_name FROM pgque.group_dlq_replay($1)`, id).Scan(&msgID, &queue)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", "", fmt.Errorf("replay DLQ: no dead letter %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return "", "", wrap("replay DLQ", err)
	}
	return msgID, queue, nil
}
