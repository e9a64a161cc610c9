package httpapi_test

import (
	"testing"
	"time"

	"github.com/pgquectl/pgquectl/internal/httpapi"
)

// Pushes through the broker make no tick and do not write the queue row:
// the broker used to tick the queue after each push (forced ticks, first
// with two UPDATEs of the queue row per push, then none of it: a tick
// row and its transaction per push). The messages are popped all the
// same, with a tick period of a minute.
func TestBrokerPushMakesNoTickNorQueueRowWrite(t *testing.T) {
	e := setup(t)
	b := e.start(httpapi.Config{})
	b.push(item("q", "p", map[string]int{"n": 1}, ""))
	if p := b.pop("/api/v1/pop/queue/q/partition/p?autoAck=true"); p == nil || len(p.Messages) != 1 {
		t.Fatalf("first pop: %+v", p)
	}
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
	if n := ticks() - beforeTicks; n != 0 {
		t.Fatalf("ticks made for 3 pushes: %d, want 0", n)
	}
	if after := version(); after != before {
		t.Fatalf("pushes wrote the queue row: version %s -> %s", before, after)
	}
}

// A broker tick that finds the queue's tick lock held (a scheduled ticker,
// another broker, a configuration change) waits for that transaction and
// ticks after it, so the pushed event becomes visible in one call; it used
// to return NULL at once and leave the broker to retry after a sleep.
func TestBrokerTickWaitsForConcurrentTicker(t *testing.T) {
	e := setup(t)
	e.exec(`SELECT pgque.create_queue('q')`)
	e.exec(`SELECT pgque.push(ARRAY['q'], NULL, ARRAY['1'::jsonb], NULL)`)
	qid := e.int(`SELECT queue_id FROM pgque.queue WHERE queue_name = 'q'`)
	ticks := e.int(`SELECT count(*) FROM pgque.tick WHERE tick_queue = $1`, qid)
	ctx := ctxT(t)
	holder := e.holdTickLock(t, qid)
	type out struct {
		tick *int64
		err  error
	}
	done := make(chan out, 1)
	p := e.pool()
	go func() {
		var o out
		o.err = p.QueryRow(ctx, `SELECT pgque.broker_tick('q')`).Scan(&o.tick)
		done <- o
	}()
	// The tick waits for the holder (it does not return while it holds).
	for deadline := time.Now().Add(20 * time.Second); e.int(`SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = $1 AND NOT granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`, qid) != 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			select {
			case o := <-done:
				t.Fatalf("broker_tick did not wait for the holder of the tick lock: returned %v, %v", o.tick, o.err)
			default:
				t.Fatal("broker_tick neither waited nor returned")
			}
		}
	}
	if err := holder.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	o := <-done
	if o.err != nil || o.tick == nil {
		t.Fatalf("broker_tick after the holder committed: %v, %v; want a tick", o.tick, o.err)
	}
	if n := e.int(`SELECT count(*) FROM pgque.tick WHERE tick_queue = $1`, qid) - ticks; n != 1 {
		t.Fatalf("%d ticks made, want 1", n)
	}
	if n := e.int(`SELECT tick_event_seq FROM pgque.tick WHERE tick_queue = $1 ORDER BY tick_id DESC LIMIT 1`, qid); n != 1 {
		t.Fatalf("the tick counts %d events, want 1", n)
	}
}
