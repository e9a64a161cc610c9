package broker

import (
	"context"
	"fmt"
)

// SendNotify sends n for queue (its stored name) on its own: payload
// n.Prefix + queue on n.Channel, for a write that could not send it in its
// own transaction (a DLQ replay; a push sends it with PushNotify). Run it
// after the write committed. A zero Notify sends nothing.
func SendNotify(ctx context.Context, q Querier, n Notify, queue string) error {
	if n.Channel == "" {
		return nil
	}
	if _, err := q.Exec(ctx, `SELECT pg_notify($1, $2)`, n.Channel, n.Prefix+queue); err != nil {
		return fmt.Errorf("notify %s: %w", n.Channel, err)
	}
	return nil
}
