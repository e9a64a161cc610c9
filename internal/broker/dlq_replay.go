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
