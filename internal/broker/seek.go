package broker

import (
	"context"
	"time"
)

// Seek moves a consumer group on a queue: to the end (toEnd) or to the
// events created at or after at (toEnd false). Live leases are dropped.
// One call of pgque.group_seek; it returns the cursors moved.
func Seek(ctx context.Context, q Querier, queue, group string, toEnd bool, at time.Time) (int, error) {
	var ts *time.Time
	if !toEnd {
		ts = &at
	}
	var n int
	if err := q.QueryRow(ctx, `SELECT pgque.group_seek($1, $2, $3, $4)`, queue, group, toEnd, ts).Scan(&n); err != nil {
		return 0, wrap("seek", err)
	}
	return n, nil
}
