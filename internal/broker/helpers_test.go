package broker_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgquectl/pgquectl/internal/broker"
	"github.com/pgquectl/pgquectl/internal/pgtest"
)

// env is the test's database (pgtest.EngineDB, shared with the HTTP tests)
// under this package's short names.
type env struct {
	*pgtest.EngineDB
	t    *testing.T
	dsn  string
	conn *pgx.Conn
}

func setup(t *testing.T) *env {
	t.Helper()
	d := pgtest.NewEngineDB(t)
	return &env{EngineDB: d, t: t, dsn: d.DSN, conn: d.Conn}
}

func ctxT(t testing.TB) context.Context { return pgtest.Ctx(t) }

func (e *env) exec(sql string, args ...any)      { e.t.Helper(); e.Exec(sql, args...) }
func (e *env) int(sql string, args ...any) int64 { e.t.Helper(); return e.Int(sql, args...) }
func (e *env) tick(queue string)                 { e.t.Helper(); e.Tick(queue) }
func (e *env) events(queue string) int64         { e.t.Helper(); return e.Events(queue) }

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
