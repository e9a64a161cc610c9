package broker

import "context"

// DeleteQueue deletes a queue with its events, partitions, classic
// subscriptions, consumer groups and dead letters: one call of
// pgque.broker_delete_queue. An unknown queue is ErrNotFound.
func DeleteQueue(ctx context.Context, q Querier, queue string) error {
	if _, err := q.Exec(ctx, `SELECT pgque.broker_delete_queue($1)`, queue); err != nil {
		return wrap("delete queue", err)
	}
	return nil
}
