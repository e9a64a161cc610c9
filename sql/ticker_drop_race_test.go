package sql_test

import (
	"context"
	"testing"
	"time"

	"github.com/pgquectl/pgquectl/internal/pgtest"
)

// TestTickerRacingDropQueueTicksTheOthers: a ticker() round whose queue
// list was read before a concurrent drop_queue() committed waits on the
// dropped queue's locks and then finds its relations gone ("could not open
// relation with OID", XX000). Before, that error failed the whole round -
// no queue ticked (ticker_loop logged "ticker() failed this round" at
// every queue the bench recreated); now the round goes on queue by queue
// and ticks the others.
func TestTickerRacingDropQueueTicksTheOthers(t *testing.T) {
	e := setup(t)
	e.exec(`SELECT pgque.create_queue('a'), pgque.create_queue('b')`)
	e.exec(`SELECT pgque.ticker()`) // first ticks
	e.exec(`SELECT pgque.send('a', 'x'::text), pgque.send('b', 'y'::text)`)
	e.exec(`SELECT pgque.force_next_tick('a'), pgque.force_next_tick('b')`)
	bTicks := e.int64(`SELECT count(*) FROM pgque.tick t JOIN pgque.queue q ON q.queue_id = t.tick_queue WHERE q.queue_name = 'b'`)
	// Let the ticker wait on the drop's locks instead of skipping the queue.
	e.exec(`SELECT pgque.set_setting('ticker_lock_timeout_ms', '10000')`)

	dropper := pgtest.Conn(t, e.dsn)
	ctx := ctxT(t)
	if _, err := dropper.Exec(ctx, `BEGIN`); err != nil {
		t.Fatal(err)
	}
	if _, err := dropper.Exec(ctx, `SELECT pgque.drop_queue('a', true)`); err != nil {
		t.Fatal(err)
	}
	ticker := pgtest.Conn(t, e.dsn)
	var tpid int
	if err := ticker.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&tpid); err != nil {
		t.Fatal(err)
	}
	type res struct {
		n   int64
		err error
	}
	done := make(chan res, 1)
	go func() {
		c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var r res
		r.err = ticker.QueryRow(c, `SELECT pgque.ticker()`).Scan(&r.n)
		done <- r
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var waiting int64
		if err := e.conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock'`, tpid).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("ticker() never waited on the dropped queue's locks")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := dropper.Exec(ctx, `COMMIT`); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("ticker() racing drop_queue: %v", r.err)
	}
	if r.n != 1 {
		t.Errorf("ticker() ticked %d queues, want 1 (b)", r.n)
	}
	if n := e.int64(`SELECT count(*) FROM pgque.tick t JOIN pgque.queue q ON q.queue_id = t.tick_queue WHERE q.queue_name = 'b'`); n != bTicks+1 {
		t.Errorf("queue b has %d ticks, want %d", n, bTicks+1)
	}
}
