package broker

import (
	"context"
	"fmt"
)

// Ping checks that the database answers and the engine is installed and
// readable by the caller's role: one call of pgque.version(). The HTTP
// health route calls it.
func Ping(ctx context.Context, q Querier) error {
	var one int
	if err := q.QueryRow(ctx, `SELECT 1 FROM pgque.version() LIMIT 1`).Scan(&one); err != nil {
		return fmt.Errorf("health check: %w", err)
	}
	return nil
}
