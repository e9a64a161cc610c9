package broker

import (
	"context"
	"time"

	"github.com/pgquectl/pgquectl/internal/db"
)

// GroupInfo describes one consumer group on one queue.
type GroupInfo struct {
	Queue            string
	Group            string
	SubscriptionMode string
	Partitions       int64
	Leased           int64
	DeadLetters      int64
	// OldestPartition holds the group's oldest range start; PinsRotation
	// says that this cursor holds back the queue's event-table rotation.
	OldestPartition string
	PinsRotation    bool
	LastActive      time.Time
}

// Groups lists consumer groups of queue ("" = all queues): one call of
// pgque.group_cursor_info.
func Groups(ctx context.Context, q Querier, queue string) ([]GroupInfo, error) {
	rows, err := q.Query(ctx, `SELECT queue_name, group_name, subscription_mode, partitions, leased, dead_letters,
		oldest_partition, pins_rotation, last_active FROM pgque.group_cursor_info($1)`, strOrNil(queue))
	if err != nil {
		return nil, wrap("list consumer groups", err)
	}
	defer rows.Close()
	var out []GroupInfo
	for rows.Next() {
		var g GroupInfo
		var part *string
		var active *time.Time
		if err := rows.Scan(&g.Queue, &g.Group, &g.SubscriptionMode, &g.Partitions, &g.Leased, &g.DeadLetters,
			&part, &g.PinsRotation, &active); err != nil {
			return nil, wrap("list consumer groups", err)
		}
		g.OldestPartition = db.Deref(part)
		if active != nil {
			g.LastActive = *active
		}
		out = append(out, g)
	}
	if err := rows.Err(); err != nil {
		return nil, wrap("list consumer groups", err)
	}
	return out, nil
}
