package broker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgquectl/pgquectl/internal/broker"
	"github.com/pgquectl/pgquectl/internal/pgtest"
)

type env struct {
	t    *testing.T
	dsn  string
	conn *pgx.Conn
}

func setup(t *testing.T) *env {
	t.Helper()
	t.Parallel()
	dsn := pgtest.NewDB(t)
	return &env{t: t, dsn: dsn, conn: pgtest.Conn(t, dsn)}
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func (e *env) exec(sql string, args ...any) {
	e.t.Helper()
	if _, err := e.conn.Exec(ctxT(e.t), sql, args...); err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
}

func (e *env) int(sql string, args ...any) int64 {
	e.t.Helper()
	var v *int64
	if err := e.conn.QueryRow(ctxT(e.t), sql, args...).Scan(&v); err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
	if v == nil {
		return -1
	}
	return *v
}

// tick forces and makes a tick of queue, so pushed events become visible.
func (e *env) tick(queue string) {
	e.t.Helper()
	e.exec(`SELECT pgque.force_next_tick($1)`, queue)
	e.exec(`SELECT pgque.ticker($1)`, queue)
}

func payload(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func (e *env) push(items ...broker.Item) []broker.PushResult {
	e.t.Helper()
	res, err := broker.Push(ctxT(e.t), e.conn, items)
	if err != nil {
		e.t.Fatalf("push: %v", err)
	}
	return res
}

// pushN pushes n numbered messages to (queue, partition), one push.
func (e *env) pushN(queue, partition string, from, n int) {
	e.t.Helper()
	items := make([]broker.Item, n)
	for i := range items {
		items[i] = broker.Item{Queue: queue, Partition: partition, Payload: payload(map[string]any{"n": from + i, "p": partition})}
	}
	e.push(items...)
}

func (e *env) events(queue string) int64 {
	e.t.Helper()
	var id int
	if err := e.conn.QueryRow(ctxT(e.t), `SELECT queue_id FROM pgque.queue WHERE queue_name = $1`, queue).Scan(&id); err != nil {
		e.t.Fatalf("queue %q: %v", queue, err)
	}
	return e.int(fmt.Sprintf(`SELECT (SELECT count(*) FROM pgque.event_%d_0) + (SELECT count(*) FROM pgque.event_%d_1) + (SELECT count(*) FROM pgque.event_%d_2)`, id, id, id))
}
