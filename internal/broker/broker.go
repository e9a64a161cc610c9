// Package broker is the partitioned log's reader and writer API in plain Go
// types: push, pop, ack, leases, dead letters, seek, group and queue
// administration. Each operation is one call of one pgque SQL function (one
// database round trip); PostgreSQL is the authority on claims, leases and
// cursors. The package knows no HTTP: the server maps its types to the
// Queen v1 wire format. See docs/design/broker.md.
package broker

import (
	"cmp"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgquectl/pgquectl/internal/db"
)

// Querier is what an operation runs on: a *pgx.Conn, a *pgxpool.Pool or a
// pgx.Tx (the transaction route runs several operations in one). It is
// internal/db's one Querier, named here for the broker's callers.
type Querier = db.Querier

// QueueMode is the reserved consumer group of competing consumers: one
// cursor per partition shared by every consumer that names no group.
// Its one home in Go (internal/queuekey's test fails on a second copy);
// the SQL's is pgque.queue_mode_group().
const QueueMode = "__QUEUE_MODE__"

// GroupOrDefault is the consumer group a request means: g, or QueueMode
// when g is "" (SQL: pgque.group_name_or_default).
func GroupOrDefault(g string) string { return cmp.Or(g, QueueMode) }

// ErrInvalidInput marks an error caused by the request (bad names, missing
// fields, out-of-range values): nothing was changed. The HTTP layer answers
// it with 400.
var ErrInvalidInput = errors.New("invalid input")

// ErrNotFound marks an error about a queue, group or message that does not
// exist. The HTTP layer answers it with 404.
var ErrNotFound = errors.New("not found")

// wrap turns a database error of operation op into one that says what
// failed and classifies bad input.
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "22023", "22P02", "22007", "22008", "23502", "22003", "22001":
			return fmt.Errorf("%s: %s: %w", op, pgErr.Message, ErrInvalidInput)
		case "42704":
			return fmt.Errorf("%s: %s: %w", op, pgErr.Message, ErrNotFound)
		case "P0001":
			// The PgQue-compatible create_queue (push, configure) refuses a
			// queue name with PgQue's plain exception; the broker's own
			// functions raise specific SQLSTATEs.
			return fmt.Errorf("%s: %s: %w", op, pgErr.Message, ErrInvalidInput)
		}
	}
	return fmt.Errorf("%s: %w", op, db.MapError(err))
}
