package httpapi_test

import (
	"testing"

	"github.com/pgquectl/pgquectl/internal/httpapi"
)

// A broker tick of a queue that is not due (a long tick period) is a forced
// tick: it must not write the queue row (force_next_tick + ticker wrote it
// twice, setting and clearing the forced flag: WAL and dead tuples per push).
func TestBrokerTickWritesNoQueueRow(t *testing.T) {
	e := setup(t)
	b := e.start(httpapi.Config{})
	b.push(item("q", "p", map[string]int{"n": 1}, ""))
	if p := b.pop("/api/v1/pop/queue/q/partition/p?autoAck=true"); p == nil || len(p.Messages) != 1 {
		t.Fatalf("first pop: %+v", p)
	}
	// Not due again within the minute: only a forced tick makes the next push
	// visible.
	e.exec(`SELECT pgque.set_queue_config('q', 'tick_period_ms', '60000')`)
	version := func() string {
		var v string
		if err := e.conn.QueryRow(ctxT(t), `SELECT ctid::text || ' ' || xmin::text FROM pgque.queue WHERE queue_name = 'q'`).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	ticks := func() int64 {
		return e.int(`SELECT count(*) FROM pgque.tick t JOIN pgque.queue q ON q.queue_id = t.tick_queue WHERE q.queue_name = 'q'`)
	}
	before, beforeTicks := version(), ticks()
	for i := 2; i <= 4; i++ {
		b.push(item("q", "p", map[string]int{"n": i}, ""))
		if p := b.pop("/api/v1/pop/queue/q/partition/p?autoAck=true"); p == nil || len(p.Messages) != 1 || payloadN(p.Messages[0]) != i {
			t.Fatalf("pop after push %d: %+v", i, p)
		}
	}
	if n := ticks() - beforeTicks; n != 3 {
		t.Fatalf("ticks made for 3 pushes: %d, want 3", n)
	}
	if after := version(); after != before {
		t.Fatalf("broker ticks wrote the queue row: version %s -> %s", before, after)
	}
	if n := e.int(`SELECT count(*) FROM pgque.queue WHERE queue_force_tick`); n != 0 {
		t.Fatalf("a forced flag was left set: %d", n)
	}
}
