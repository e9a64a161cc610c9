package sql_test

import (
	"slices"
	"testing"
)

// TestFastTicksFollowClassicConsumers: a tick period makes ticker() tick a
// queue with new events once per period slot only while a classic consumer
// (a subscription) reads it. A queue without one - consumer groups need no
// ticks - is ticked by the classic thresholds (ticker_max_lag,
// ticker_max_count); a consumer that subscribes later makes the very next
// check use the period again and gets its batch.
// Deterministic: instead of waiting, the test moves every tick back in time
// (a later period slot, or past ticker_max_lag).
func TestFastTicksFollowClassicConsumers(t *testing.T) {
	e := setup(t)
	e.exec(`SELECT pgque.create_queue('g')`)
	e.exec(`SELECT pgque.create_queue('c')`)
	e.exec(`SELECT pgque.subscribe('c', 'c1')`)
	e.exec(`SELECT pgque.set_tick_period_ms(10)`)
	if n := e.int64(`SELECT pgque.ticker()`); n != 2 {
		t.Fatalf("ticker() after create_queue ticked %d queues, want 2 (the post-creation ticks)", n)
	}
	age := func(by string) {
		t.Helper()
		e.exec(`UPDATE pgque.tick SET tick_time = tick_time - $1::interval`, by)
	}
	ticks := func(q string) int64 {
		t.Helper()
		return e.int64(`SELECT count(*) FROM pgque.tick t JOIN pgque.queue q ON q.queue_id = t.tick_queue WHERE q.queue_name = $1`, q)
	}
	tickOf := func(q string) *int64 {
		t.Helper()
		var id *int64
		if err := e.conn.QueryRow(ctxT(t), `SELECT pgque.ticker($1)`, q).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}

	// New events in both, the last ticks a period slot (and more) ago:
	// the classic consumer's queue is due, the other is not.
	e.exec(`SELECT pgque.send('g', 'g1'::text), pgque.send('c', 'c1'::text)`)
	age("100 milliseconds")
	gBefore := ticks("g")
	if n := e.int64(`SELECT pgque.ticker()`); n != 1 {
		t.Errorf("ticker() ticked %d queues, want 1 (c, which a classic consumer reads)", n)
	}
	if got := ticks("g") - gBefore; got != 0 {
		t.Errorf("the queue without a classic consumer got %d ticks at the fast rate", got)
	}
	if id := tickOf("g"); id != nil {
		t.Errorf("ticker('g') ticked (%d) 100 ms after its last tick: no classic consumer, below ticker_max_lag", *id)
	}
	// ticker_max_lag (3 s) since its last tick: due.
	age("3 seconds")
	if id := tickOf("g"); id == nil {
		t.Error("ticker('g') made no tick with an event waiting for ticker_max_lag")
	}
	// ticker_max_count new events: due.
	e.exec(`SELECT pgque.set_queue_config('g', 'ticker_max_count', '3')`)
	e.exec(`SELECT pgque.send('g', 'g2'::text)`)
	age("100 milliseconds")
	if id := tickOf("g"); id != nil {
		t.Errorf("ticker('g') ticked (%d) one event and 100 ms after its last tick (ticker_max_count 3)", *id)
	}
	e.exec(`SELECT pgque.send('g', 'g3'::text), pgque.send('g', 'g4'::text), pgque.send('g', 'g5'::text)`)
	if id := tickOf("g"); id == nil {
		t.Error("ticker('g') made no tick with ticker_max_count events waiting")
	}

	// A classic consumer subscribes: the next check ticks at the period,
	// and the consumer gets its batch.
	e.exec(`SELECT pgque.subscribe('g', 'late')`)
	e.exec(`SELECT pgque.send('g', 'after'::text)`)
	age("100 milliseconds")
	gBefore = ticks("g")
	if n := e.int64(`SELECT pgque.ticker()`); n != 1 {
		t.Errorf("ticker() after a classic consumer subscribed to g ticked %d queues, want 1", n)
	}
	if got := ticks("g") - gBefore; got != 1 {
		t.Fatalf("g got %d ticks after a classic consumer subscribed, want 1", got)
	}
	var got []string
	for _, m := range e.receive("g", "late", 100) {
		got = append(got, m.Payload)
	}
	if !slices.Contains(got, "after") {
		t.Errorf("the consumer that subscribed later received %q, want the event sent after it subscribed", got)
	}
}
