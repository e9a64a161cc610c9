package broker

import (
	"context"
	"encoding/json"
)

// QueueDetail is one queue in the shape of Queen's get_queue_v2 (id, name,
// namespace, task, createdAt, partitions [{id, name, createdAt, stats,
// oldestMessage, newestMessage}], totals) plus options and notEnforced
// (the options set that the engine does not act on). ErrNotFound for an
// unknown queue. One call of pgque.broker_queue_detail.
func QueueDetail(ctx context.Context, q Querier, queue string) (map[string]any, error) {
	var raw []byte
	if err := q.QueryRow(ctx, `SELECT pgque.broker_queue_detail($1)`, queue).Scan(&raw); err != nil {
		return nil, wrap("queue detail", err)
	}
	if raw == nil {
		return nil, wrap("queue detail", ErrNotFound)
	}
	var d map[string]any
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, wrap("queue detail", err)
	}
	return d, nil
}
