package pgtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EngineDB is a parallel test's own database with the engine installed
// and one superuser connection to it, with the small helpers the broker
// and HTTP tests share.
type EngineDB struct {
	T    testing.TB
	DSN  string
	Conn *pgx.Conn
}

// NewEngineDB marks t parallel, creates its database (NewDB) and connects.
func NewEngineDB(t *testing.T) *EngineDB {
	t.Helper()
	t.Parallel()
	dsn := NewDB(t)
	return &EngineDB{T: t, DSN: dsn, Conn: Conn(t, dsn)}
}

// Ctx is a context for a test's database calls: 3 minutes, cancelled at
// cleanup.
func Ctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// Exec runs one statement on the connection, failing the test on error.
func (d *EngineDB) Exec(sql string, args ...any) {
	d.T.Helper()
	if _, err := d.Conn.Exec(Ctx(d.T), sql, args...); err != nil {
		d.T.Fatalf("%s: %v", sql, err)
	}
}

// Int runs a query of one integer (NULL: -1), failing the test on error.
func (d *EngineDB) Int(sql string, args ...any) int64 {
	d.T.Helper()
	var v *int64
	if err := d.Conn.QueryRow(Ctx(d.T), sql, args...).Scan(&v); err != nil {
		d.T.Fatalf("%s: %v", sql, err)
	}
	if v == nil {
		return -1
	}
	return *v
}

// Tick forces and makes a tick of queue, so its committed events become
// visible to consumers.
func (d *EngineDB) Tick(queue string) {
	d.T.Helper()
	d.Exec(`SELECT pgque.force_next_tick($1)`, queue)
	d.Exec(`SELECT pgque.ticker($1)`, queue)
}

// Events counts the events retained in queue's event tables (0 when the
// queue does not exist).
func (d *EngineDB) Events(queue string) int64 {
	d.T.Helper()
	var id, n int
	err := d.Conn.QueryRow(Ctx(d.T), `SELECT queue_id, queue_ntables FROM pgque.queue WHERE queue_name = $1`, queue).Scan(&id, &n)
	if err == pgx.ErrNoRows {
		return 0
	}
	if err != nil {
		d.T.Fatalf("queue %q: %v", queue, err)
	}
	var total int64
	for i := 0; i < n; i++ {
		total += d.Int(fmt.Sprintf(`SELECT count(*) FROM pgque.event_%d_%d`, id, i))
	}
	return total
}
