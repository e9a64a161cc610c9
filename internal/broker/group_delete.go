package broker

import "context"

// DeleteGroup deletes a consumer group from one queue, or from all queues
// when queue is "" (deleteMetadata then forgets its name too): one call of
// pgque.group_delete. It returns the cursors deleted.
func DeleteGroup(ctx context.Context, q Querier, group, queue string, deleteMetadata bool) (int, error) {
	var n int
	if err := q.QueryRow(ctx, `SELECT pgque.group_delete($1, $2, $3)`, group, strOrNil(queue), deleteMetadata).Scan(&n); err != nil {
		return 0, wrap("delete consumer group", err)
	}
	return n, nil
}
