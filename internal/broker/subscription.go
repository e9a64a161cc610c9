package broker

import (
	"context"
	"time"
)

// SetSubscription changes where group's subscriptions start on every queue
// it has subscribed to whose stored name starts with queuePrefix ("" =
// every queue): mode "new" or "all" (at zero), or the events created at or
// after at (mode "" or "from"). Cursors the group already has keep their
// position (Seek moves those); partitions it reaches later start there.
// A group with no matching subscription is ErrNotFound; a bad mode,
// group name or __QUEUE_MODE__ is ErrInvalidInput. One call of
// pgque.group_set_subscription; it returns the subscriptions changed.
func SetSubscription(ctx context.Context, q Querier, group, queuePrefix, mode string, at time.Time) (int, error) {
	var from *time.Time
	if !at.IsZero() {
		from = &at
	}
	var n int
	if err := q.QueryRow(ctx, `SELECT pgque.group_set_subscription($1, $2, $3, $4)`,
		group, strOrNil(queuePrefix), strOrNil(mode), from).Scan(&n); err != nil {
		return 0, wrap("set subscription", err)
	}
	return n, nil
}
