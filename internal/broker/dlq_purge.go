package broker

import "context"

// PurgeDLQ deletes the dead letters of queue (of one group, or all when
// group is ""): one call of pgque.group_dlq_purge. It returns how many.
func PurgeDLQ(ctx context.Context, q Querier, queue, group string) (int, error) {
	var n int
	if err := q.QueryRow(ctx, `SELECT pgque.group_dlq_purge($1, $2)`, queue, strOrNil(group)).Scan(&n); err != nil {
		return 0, wrap("purge DLQ", err)
	}
	return n, nil
}
