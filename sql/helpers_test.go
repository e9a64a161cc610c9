package sql_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgquectl/pgquectl/internal/pgtest"
)

// engine is what an engine test needs: a database with pgque installed and a
// connection to it.
type engine struct {
	t    *testing.T
	dsn  string
	conn *pgx.Conn
}

func setup(t *testing.T) *engine {
	t.Helper()
	t.Parallel()
	dsn := pgtest.NewDB(t)
	return &engine{t: t, dsn: dsn, conn: pgtest.Conn(t, dsn)}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// exec runs a statement and fails the test on error.
func (e *engine) exec(sql string, args ...any) {
	e.t.Helper()
	if _, err := e.conn.Exec(ctxT(e.t), sql, args...); err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
}

// int64 runs a query returning one integer (NULL = -1).
func (e *engine) int64(sql string, args ...any) int64 {
	e.t.Helper()
	return queryInt(e.t, e.conn, sql, args...)
}

func queryInt(t *testing.T, conn *pgx.Conn, sql string, args ...any) int64 {
	t.Helper()
	var v *int64
	if err := conn.QueryRow(ctxT(t), sql, args...).Scan(&v); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	if v == nil {
		return -1
	}
	return *v
}

// sqlErr runs a statement that must fail and returns its SQLSTATE and message.
func (e *engine) sqlErr(sql string, args ...any) *pgconn.PgError {
	e.t.Helper()
	_, err := e.conn.Exec(ctxT(e.t), sql, args...)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		e.t.Fatalf("%s: want a PostgreSQL error, got %v", sql, err)
	}
	return pgErr
}

// tick forces and makes one tick of queue q in its own transaction.
func (e *engine) tick(q string) int64 {
	e.t.Helper()
	e.exec(`SELECT pgque.force_next_tick($1)`, q)
	id := e.int64(`SELECT pgque.ticker($1)`, q)
	if id < 0 {
		e.t.Fatalf("forced tick of %q made no tick", q)
	}
	return id
}

type msg struct {
	ID      int64
	Batch   int64
	Payload string
	Retry   int32
}

// receive calls pgque.receive and returns its rows.
func receive(t *testing.T, conn *pgx.Conn, q, c string, max int) []msg {
	t.Helper()
	rows, err := conn.Query(ctxT(t), `SELECT msg_id, batch_id, payload, retry_count FROM pgque.receive($1, $2, $3)`, q, c, max)
	if err != nil {
		t.Fatalf("receive(%s, %s): %v", q, c, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (msg, error) {
		var m msg
		err := r.Scan(&m.ID, &m.Batch, &m.Payload, &m.Retry)
		return m, err
	})
	if err != nil {
		t.Fatalf("receive(%s, %s): %v", q, c, err)
	}
	return out
}

func (e *engine) receive(q, c string, max int) []msg {
	e.t.Helper()
	return receive(e.t, e.conn, q, c, max)
}

// drain receives and acks until receive returns nothing, returning payloads.
func (e *engine) drain(q, c string, max int) []string {
	e.t.Helper()
	var got []string
	for i := 0; i < 1000; i++ {
		ms := e.receive(q, c, max)
		if len(ms) == 0 {
			return got
		}
		for _, m := range ms {
			got = append(got, m.Payload)
		}
		if n := e.int64(`SELECT pgque.ack($1)`, ms[0].Batch); n != 1 {
			e.t.Fatalf("ack(%d) = %d, want 1", ms[0].Batch, n)
		}
	}
	e.t.Fatal("drain did not finish in 1000 rounds")
	return nil
}

// exactlyOnce checks that got holds every one of want exactly once.
func exactlyOnce(t *testing.T, got []string, want []string) {
	t.Helper()
	seen := map[string]int{}
	for _, g := range got {
		seen[g]++
	}
	for _, w := range want {
		if seen[w] != 1 {
			t.Errorf("payload %q delivered %d times, want once", w, seen[w])
		}
		delete(seen, w)
	}
	for g, n := range seen {
		t.Errorf("unexpected payload %q delivered %d times", g, n)
	}
}

// logConn is a connection that receives the server's LOG messages
// (client_min_messages = log) and keeps them, "<severity>: <message>".
type logConn struct {
	*pgx.Conn
	mu   sync.Mutex
	msgs []string
}

func newLogConn(t *testing.T, dsn string) *logConn {
	t.Helper()
	lc := &logConn{}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		lc.mu.Lock()
		lc.msgs = append(lc.msgs, n.Severity+": "+n.Message)
		lc.mu.Unlock()
	}
	if lc.Conn, err = pgx.ConnectConfig(ctxT(t), cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lc.Close(context.Background()) })
	if _, err := lc.Exec(ctxT(t), `SET client_min_messages = log`); err != nil {
		t.Fatal(err)
	}
	return lc
}

// take returns the messages containing sub received so far and forgets
// every message received so far.
func (lc *logConn) take(sub string) []string {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	var out []string
	for _, m := range lc.msgs {
		if strings.Contains(m, sub) {
			out = append(out, m)
		}
	}
	lc.msgs = nil
	return out
}

// stmtCounter is a connection on which auto_explain logs every statement
// the executor runs, nested ones included, as a LOG notice (PL/pgSQL simple
// expressions do not go through the executor and are not counted): reset,
// run something, count.
type stmtCounter struct {
	*pgx.Conn
	mu sync.Mutex
	n  int
}

func newStmtCounter(t *testing.T, dsn string) *stmtCounter {
	t.Helper()
	c := &stmtCounter{}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.OnNotice = func(_ *pgconn.PgConn, m *pgconn.Notice) {
		if m.Severity == "LOG" && strings.HasPrefix(m.Message, "duration:") {
			c.mu.Lock()
			c.n++
			c.mu.Unlock()
		}
	}
	if c.Conn, err = pgx.ConnectConfig(ctxT(t), cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	for _, s := range []string{`LOAD 'auto_explain'`, `SET auto_explain.log_min_duration = 0`,
		`SET auto_explain.log_nested_statements = on`, `SET client_min_messages = log`} {
		if _, err := c.Exec(ctxT(t), s); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

func (c *stmtCounter) reset() { c.mu.Lock(); c.n = 0; c.mu.Unlock() }

func (c *stmtCounter) count() int { c.mu.Lock(); defer c.mu.Unlock(); return c.n }
