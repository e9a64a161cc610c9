package sql_test

import (
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgquectl/pgquectl/internal/pgtest"
)

// Each test here starts a reader of pgque.subscription while a rotation of
// it (pgtest.HoldRotation: rows moved to the next child, the old child
// TRUNCATEd) holds its lock uncommitted, waits until the reader waits for
// that lock, lets the rotation commit, and checks the reader saw the
// subscription where it moved. A reader that read with a snapshot taken
// before its wait (a STABLE function reads with its caller's) saw the old
// child empty and the moved rows uncommitted.

// subscribedQueue: queue q, consumer c subscribed, 3 events sent and
// ticked, none read.
func subscribedQueue(t *testing.T) *engine {
	e := setup(t)
	e.exec(`SELECT pgque.create_queue('q')`)
	e.exec(`SELECT pgque.subscribe('q', 'c')`)
	for i := 0; i < 3; i++ {
		e.exec(`SELECT pgque.send('q', $1::text)`, "e")
	}
	e.tick("q")
	return e
}

// readInt reads one integer (NULL: -1) on conn.
func readInt(t *testing.T, conn *pgx.Conn, sql string, args ...any) func() (int64, error) {
	return func() (int64, error) {
		var v *int64
		if err := conn.QueryRow(ctxT(t), sql, args...).Scan(&v); err != nil || v == nil {
			return -1, err
		}
		return *v, nil
	}
}

// tick_need's cursor_tick keeps maint_rotate_tables_step1 from switching
// out an event table a consumer has not read: NULL there lost its events.
func TestTickNeedBehindRotation(t *testing.T) {
	e := subscribedQueue(t)
	want := e.int64(`SELECT sub_last_tick FROM pgque.subscription`)
	h := pgtest.HoldRotation(t, e.dsn, "subscription")
	got := pgtest.DuringRotation(t, h, "tick_need", readInt(t, e.conn,
		`SELECT n.cursor_tick FROM pgque.tick_need() n JOIN pgque.queue q ON q.queue_id = n.queue_id WHERE q.queue_name = 'q'`))
	if got != want {
		t.Fatalf("tick_need behind a subscription rotation: cursor tick %d, want %d (the consumer's)", got, want)
	}
}

// get_queue_info's pending_events is what the uninstall checks for unread
// events.
func TestGetQueueInfoBehindRotation(t *testing.T) {
	e := subscribedQueue(t)
	h := pgtest.HoldRotation(t, e.dsn, "subscription")
	got := pgtest.DuringRotation(t, h, "get_queue_info", readInt(t, e.conn,
		`SELECT pending_events FROM pgque.get_queue_info('q')`))
	if got != 3 {
		t.Fatalf("get_queue_info behind a subscription rotation: %d pending, want 3", got)
	}
}

func TestGetConsumerInfoBehindRotation(t *testing.T) {
	e := subscribedQueue(t)
	h := pgtest.HoldRotation(t, e.dsn, "subscription")
	got := pgtest.DuringRotation(t, h, "get_consumer_info", readInt(t, e.conn,
		`SELECT count(*) FROM pgque.get_consumer_info('q', 'c')`))
	if got != 1 {
		t.Fatalf("get_consumer_info behind a subscription rotation: %d rows, want 1", got)
	}
}

func TestStatusBehindRotation(t *testing.T) {
	e := subscribedQueue(t)
	h := pgtest.HoldRotation(t, e.dsn, "subscription")
	got := pgtest.DuringRotation(t, h, "pgque.status", func() (string, error) {
		var d string
		err := e.conn.QueryRow(ctxT(t), `SELECT detail FROM pgque.status() WHERE component = 'queues'`).Scan(&d)
		return d, err
	})
	if got != "1 queue(s), 1 subscription(s)" {
		t.Fatalf("status behind a subscription rotation: %q, want 1 queue(s), 1 subscription(s)", got)
	}
}

// A PgQ-style batch (next_batch) read in later transactions.
func TestBatchReadersBehindRotation(t *testing.T) {
	for _, c := range []struct{ name, sql string }{
		{"get_batch_events", `SELECT count(*) FROM pgque.get_batch_events($1)`},
		{"get_batch_info", `SELECT count(*) FROM pgque.get_batch_info($1)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := subscribedQueue(t)
			batch := e.int64(`SELECT pgque.next_batch('q', 'c')`)
			want := e.int64(c.sql, batch)
			if want < 1 {
				t.Fatalf("%s(%d) before any rotation: %d rows", c.name, batch, want)
			}
			h := pgtest.HoldRotation(t, e.dsn, "subscription")
			if got := pgtest.DuringRotation(t, h, c.name, readInt(t, e.conn, c.sql, batch)); got != want {
				t.Fatalf("%s(%d) behind a subscription rotation: %d rows, want %d", c.name, batch, got, want)
			}
		})
	}
}
