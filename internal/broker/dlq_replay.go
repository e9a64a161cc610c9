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
	r, err := ReplayDLQInto(ctx, q, id)
	return r.MessageID, r.Queue, err
}

// Replayed is where a dead letter went back to.
type Replayed struct {
	MessageID   string // the new message id
	Queue       string // stored queue name
	PartitionID int32  // the partition it is pending in again
}

// ReplayDLQInto is ReplayDLQ that says where the message went (queue and
// partition id: the caller ticks the queue and marks the partition for
// the hot-list). An unknown id is ErrNotFound. One call of
// pgque.group_dlq_replay.
func ReplayDLQInto(ctx context.Context, q Querier, id int64) (Replayed, error) {
	return ReplayDLQIn(ctx, q, AnyTenant, id)
}

// ReplayDLQIn is ReplayDLQInto confined to scope's queues: another
// tenant's dead letter is ErrNotFound, as an unknown id.
func ReplayDLQIn(ctx context.Context, q Querier, scope Scope, id int64) (Replayed, error) {
	var r Replayed
	err := q.QueryRow(ctx, `SELECT message_id::text, queue_name, partition_id FROM pgque.group_dlq_replay($1, $2)`,
		id, scope.arg()).
		Scan(&r.MessageID, &r.Queue, &r.PartitionID)
	if errors.Is(err, pgx.ErrNoRows) {
		return Replayed{}, fmt.Errorf("replay DLQ: no dead letter %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Replayed{}, wrap("replay DLQ", err)
	}
	return r, nil
}
