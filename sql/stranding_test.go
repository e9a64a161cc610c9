package sql_test

// Stranding: an event counted by a tick (ev_id <= tick_event_seq) but not
// visible in that tick's snapshot is carried by the next tick that sees it.
// The ticker must make that tick happen within a tick period of the
// producer's commit (docs/design/engine.md, "Visibility and re-ticks"), not at the
// next idle tick (ticker_idle_period, 1 minute). Each test sets a 10 ms
// period and counts ticker() calls (each in a later period slot) until the
// event arrives; before the fix, each of them waited for the idle tick.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgquectl/pgquectl/internal/pgtest"
)

// strandQueue makes queue q with consumer c, a 10 ms tick period and the
// post-creation tick done, and returns the engine.
func strandQueue(t *testing.T) *engine {
	e := setup(t)
	e.exec(`SELECT pgque.create_queue('q')`)
	e.exec(`SELECT pgque.subscribe('q', 'c')`)
	e.exec(`SELECT pgque.set_tick_period_ms(10)`)
	e.exec(`SELECT pgque.ticker()`)
	e.drain("q", "c", 100)
	return e
}

// nextSlot sleeps into the next 10 ms period slot.
func nextSlot() { time.Sleep(15 * time.Millisecond) }

// ticksUntil calls ticker() (one call per period slot) up to max times and
// returns after how many calls c has received want; 0 if it never did.
// Every payload received is appended to *got.
func (e *engine) ticksUntil(max int, want string, got *[]string) int {
	e.t.Helper()
	for i := 1; i <= max; i++ {
		nextSlot()
		e.exec(`SELECT pgque.ticker()`)
		found := false
		for _, p := range e.drain("q", "c", 100) {
			*got = append(*got, p)
			found = found || p == want
		}
		if found {
			return i
		}
	}
	return 0
}

func begin(t *testing.T, conn *pgx.Conn, iso pgx.TxIsoLevel) pgx.Tx {
	t.Helper()
	tx, err := conn.BeginTx(ctxT(t), pgx.TxOptions{IsoLevel: iso})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	return tx
}

func txExec(t *testing.T, tx pgx.Tx, sql string, args ...any) {
	t.Helper()
	if _, err := tx.Exec(ctxT(t), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func commit(t *testing.T, tx pgx.Tx) {
	t.Helper()
	if err := tx.Commit(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

// ticks returns how many ticks queue q has.
func (e *engine) ticks() int64 {
	e.t.Helper()
	return e.int64(`SELECT count(*) FROM pgque.tick WHERE tick_queue = 1`)
}

// (a) An open transaction with an xid in another database holds the xmin
// horizon of the whole cluster. A producer in flight at a tick must still be
// re-ticked as soon as it commits.
func TestStrandOldTransactionInAnotherDatabase(t *testing.T) {
	e := strandQueue(t)
	other := pgtest.Conn(t, pgtest.NewEmptyDB(t))
	old := begin(t, other, pgx.ReadCommitted)
	txExec(t, old, `SELECT pg_current_xact_id()`)

	producer := pgtest.Conn(t, e.dsn)
	var got []string
	for i, p := range []string{"a1", "a2", "a3"} { // sparse sends
		tx := begin(t, producer, pgx.ReadCommitted)
		txExec(t, tx, `SELECT pgque.send('q', $1::text)`, p)
		before := e.ticks()
		nextSlot()
		e.exec(`SELECT pgque.ticker()`) // new ids: ticks, the event is not visible yet
		if e.ticks() != before+1 {
			t.Fatalf("send %d: ticker() did not tick a queue with a new event id", i)
		}
		if ms := e.receive("q", "c", 100); len(ms) != 0 {
			t.Fatalf("send %d: an uncommitted event was delivered: %v", i, ms)
		}
		commit(t, tx)
		if n := e.ticksUntil(3, p, &got); n == 0 {
			t.Fatalf("send %d: event %q committed after a tick counted it was not delivered within 3 ticker() calls "+
				"(an open transaction in another database held it back)", i, p)
		}
	}
	exactlyOnce(t, got, []string{"a1", "a2", "a3"})
}

// (b) The producer got its xid after the ticking transaction got its own,
// so the producer's xid is at or above the tick snapshot's xmax, not in xip.
func TestStrandProducerXidAfterTickers(t *testing.T) {
	e := strandQueue(t)
	tickConn := pgtest.Conn(t, e.dsn)
	producer := pgtest.Conn(t, e.dsn)

	tk := begin(t, tickConn, pgx.ReadCommitted)
	txExec(t, tk, `SELECT pg_current_xact_id()`)
	p := begin(t, producer, pgx.ReadCommitted)
	txExec(t, p, `SELECT pgque.send('q', 'b'::text)`)
	nextSlot()
	var tick *int64
	if err := tk.QueryRow(ctxT(t), `SELECT pgque.ticker('q')`).Scan(&tick); err != nil || tick == nil {
		t.Fatalf("ticker('q') = %v, %v; want a tick (new event id)", tick, err)
	}
	commit(t, tk)
	commit(t, p)
	var got []string
	if n := e.ticksUntil(3, "b", &got); n == 0 {
		t.Fatal("event of a producer whose xid followed the ticker's was not delivered within 3 ticker() calls of its commit")
	}
	exactlyOnce(t, got, []string{"b"})
}

// (c) A producer transaction spans an idle tick (one that counted no new
// ids): it must still be re-ticked when it commits.
func TestStrandProducerSpanningIdleTick(t *testing.T) {
	e := strandQueue(t)
	producer := pgtest.Conn(t, e.dsn)
	p := begin(t, producer, pgx.ReadCommitted)
	txExec(t, p, `SELECT pgque.send('q', 'c1'::text)`)
	nextSlot()
	before := e.ticks()
	e.exec(`SELECT pgque.ticker()`) // counts the id
	e.tick("q")                     // an idle tick while the producer is open
	if e.ticks() != before+2 {
		t.Fatalf("want 2 ticks, got %d", e.ticks()-before)
	}
	// Nothing new: further calls do not tick while the producer is open.
	for i := 0; i < 3; i++ {
		nextSlot()
		e.exec(`SELECT pgque.ticker()`)
	}
	if e.ticks() != before+2 {
		t.Fatalf("an idle queue ticked %d times while a producer was open", e.ticks()-before-2)
	}
	commit(t, p)
	var got []string
	if n := e.ticksUntil(3, "c1", &got); n == 0 {
		t.Fatal("event of a transaction that spanned an idle tick was not delivered within 3 ticker() calls of its commit")
	}
	exactlyOnce(t, got, []string{"c1"})
}

// (d) send and ticker() in one transaction: the tick records the
// transaction as in flight and the queue ticks again after it commits.
// Both entry points: ticker('q') and ticker().
func TestStrandSendAndTickerInOneTransaction(t *testing.T) {
	e := strandQueue(t)
	other := pgtest.Conn(t, e.dsn)
	var got []string
	for _, call := range []string{`SELECT pgque.ticker('q')`, `SELECT pgque.ticker()`} {
		nextSlot() // now() is the transaction's start: a later period slot
		tx := begin(t, e.conn, pgx.ReadCommitted)
		txExec(t, tx, `SELECT pgque.send('q', $1::text)`, call)
		// A later transaction completes first, so this one's xid is below the
		// tick snapshot's xmax (PostgreSQL then leaves it out of xip).
		if _, err := other.Exec(ctxT(t), `SELECT pg_current_xact_id()`); err != nil {
			t.Fatal(err)
		}
		var n *int64
		if err := tx.QueryRow(ctxT(t), call).Scan(&n); err != nil || n == nil || *n < 1 {
			t.Fatalf("%s in the sending transaction = %v, %v; want a tick", call, n, err)
		}
		commit(t, tx)
		if n := e.ticksUntil(3, call, &got); n == 0 {
			t.Fatalf("%s: event sent in the ticking transaction was not delivered within 3 ticker() calls of its commit", call)
		}
	}
	exactlyOnce(t, got, []string{`SELECT pgque.ticker('q')`, `SELECT pgque.ticker()`})
}

// (e) Retried events keep their ev_id. ticker() moves due retries itself and
// a queue that received retried rows is due, so a nack with a 1 s delay
// comes back about a second later, not at the next cron minute.
func TestStrandRetryComesBackWithinASecond(t *testing.T) {
	e := strandQueue(t)
	e.exec(`SELECT pgque.send('q', 'e'::text)`)
	nextSlot()
	e.exec(`SELECT pgque.ticker()`)
	ms := e.receive("q", "c", 10)
	if len(ms) != 1 {
		t.Fatalf("receive = %v, want the event", ms)
	}
	e.exec(`SELECT pgque.nack($1, ROW($2, $1, 'default', 'e', 0, now(), NULL, NULL, NULL, NULL)::pgque.message, '1 second', 'r')`, ms[0].Batch, ms[0].ID)
	e.exec(`SELECT pgque.ack($1)`, ms[0].Batch)
	due := time.Now().Add(time.Second)
	// Only ticker() runs (no maint, no cron): every 20 ms for up to 6 s.
	for time.Now().Before(due.Add(5 * time.Second)) {
		time.Sleep(20 * time.Millisecond)
		e.exec(`SELECT pgque.ticker()`)
		if got := e.receive("q", "c", 10); len(got) > 0 {
			late := time.Since(due)
			if len(got) != 1 || got[0].Payload != "e" || got[0].Retry != 1 {
				t.Fatalf("got %v, want the retried event once with retry_count 1", got)
			}
			if late > 3*time.Second {
				t.Fatalf("retry came back %v after its due time", late)
			}
			e.exec(`SELECT pgque.ack($1)`, got[0].Batch)
			if rest := e.receive("q", "c", 10); len(rest) != 0 {
				t.Fatalf("extra deliveries: %v", rest)
			}
			return
		}
	}
	t.Fatal("a nack with a 1 s retry did not come back within 6 s of ticker() calls every 20 ms")
}

// (e, second half) Retries moved by maint_retry_events (the cron drain) keep
// their ev_id; the queue must tick for them without any new event.
func TestStrandRetryMovedByMaintIsTicked(t *testing.T) {
	e := strandQueue(t)
	e.exec(`SELECT pgque.send('q', 'e2'::text)`)
	nextSlot()
	e.exec(`SELECT pgque.ticker()`)
	ms := e.receive("q", "c", 10)
	if len(ms) != 1 {
		t.Fatalf("receive = %v, want the event", ms)
	}
	for i := 0; i < 3; i++ { // whatever re-ticks follow that tick, they are done
		nextSlot()
		e.exec(`SELECT pgque.ticker()`)
	}
	e.exec(`SELECT pgque.nack($1, ROW($2, $1, 'default', 'e2', 0, now(), NULL, NULL, NULL, NULL)::pgque.message, '0 seconds', 'r')`, ms[0].Batch, ms[0].ID)
	e.exec(`SELECT pgque.ack($1)`, ms[0].Batch)
	if n := e.int64(`SELECT pgque.maint_retry_events()`); n != 1 {
		t.Fatalf("maint_retry_events() = %d, want 1", n)
	}
	var got []string
	if n := e.ticksUntil(3, "e2", &got); n == 0 {
		t.Fatal("a retry moved back by maint_retry_events was not ticked within 3 ticker() calls")
	}
	exactlyOnce(t, got, []string{"e2"})
}

// An idle queue writes nothing: with a long transaction elsewhere holding
// the horizon, and after producers came and went, ticker() does not tick it.
func TestStrandIdleQueueDoesNotTick(t *testing.T) {
	e := strandQueue(t)
	other := pgtest.Conn(t, pgtest.NewEmptyDB(t))
	old := begin(t, other, pgx.ReadCommitted)
	txExec(t, old, `SELECT pg_current_xact_id()`)
	// A producer in flight at a tick, then committed and re-ticked.
	producer := pgtest.Conn(t, e.dsn)
	p := begin(t, producer, pgx.ReadCommitted)
	txExec(t, p, `SELECT pgque.send('q', 'x'::text)`)
	nextSlot()
	e.exec(`SELECT pgque.ticker()`)
	commit(t, p)
	var got []string
	if e.ticksUntil(3, "x", &got) == 0 {
		t.Fatal("event not delivered")
	}
	// Unrelated transactions commit all the time in the cluster.
	busy := pgtest.Conn(t, pgtest.NewEmptyDB(t))
	before := e.ticks()
	for i := 0; i < 20; i++ {
		if _, err := busy.Exec(ctxT(t), `SELECT pg_current_xact_id()`); err != nil {
			t.Fatal(err)
		}
		nextSlot()
		e.exec(`SELECT pgque.ticker()`)
	}
	if n := e.ticks() - before; n != 0 {
		t.Fatalf("an idle queue ticked %d times in 20 ticker() calls", n)
	}
}

// (7) A ticker inside REPEATABLE READ would record a snapshot older than the
// previous tick's, and the next batch would deliver events again. It is
// refused; the consumer receives every event exactly once.
func TestTickerRefusesRepeatableRead(t *testing.T) {
	e := setup(t)
	e.exec(`SELECT pgque.create_queue('q')`)
	e.exec(`SELECT pgque.subscribe('q', 'c')`)
	rrConn := pgtest.Conn(t, e.dsn)
	for _, iso := range []pgx.TxIsoLevel{pgx.RepeatableRead, pgx.Serializable} {
		rr := begin(t, rrConn, iso)
		txExec(t, rr, `SELECT count(*) FROM pgque.tick`) // takes the snapshot
		payload := "a-" + string(iso)
		e.exec(`SELECT pgque.send('q', $1::text)`, payload)
		e.tick("q")
		got := e.drain("q", "c", 10)
		exactlyOnce(t, got, []string{payload})

		before := e.ticks()
		_, err := rr.Exec(ctxT(t), `SELECT pgque.ticker()`)
		if err == nil || !strings.Contains(err.Error(), "READ COMMITTED") || !strings.Contains(err.Error(), "25000") {
			t.Fatalf("%s: ticker() = %v, want an error asking for READ COMMITTED (25000)", iso, err)
		}
		_ = rr.Rollback(ctxT(t))
		rr = begin(t, rrConn, iso)
		txExec(t, rr, `SELECT count(*) FROM pgque.tick`)
		if _, err := rr.Exec(ctxT(t), `SELECT pgque.ticker('q')`); err == nil || !strings.Contains(err.Error(), "READ COMMITTED") {
			t.Fatalf("%s: ticker('q') = %v, want an error asking for READ COMMITTED", iso, err)
		}
		_ = rr.Rollback(ctxT(t))
		if n := e.ticks() - before; n != 0 {
			t.Fatalf("%s: a refused ticker made %d ticks", iso, n)
		}
		e.exec(`SELECT pgque.send('q', 'b'::text)`)
		e.tick("q")
		exactlyOnce(t, e.drain("q", "c", 10), []string{"b"})
	}
}

// PgQue 0.2 compatibility: clients match "no such queue".
func TestTickerUnknownQueueSaysNoSuchQueue(t *testing.T) {
	e := setup(t)
	for _, q := range []string{`SELECT pgque.ticker('nope')`, `SELECT pgque.force_next_tick('nope')`, `SELECT pgque.force_tick('nope')`} {
		if err := e.sqlErr(q); !strings.Contains(err.Message, "no such queue") {
			t.Errorf("%s: error %q does not contain \"no such queue\"", q, err.Message)
		}
	}
	if n := e.int64(`SELECT count(*) FROM pgque.queue`); n != 0 {
		t.Fatalf("%d queues exist after calls on an unknown one", n)
	}
}

// drain_retry_events runs with pg_cron's rights and cannot pin search_path
// (it COMMITs): every function, operator and type it uses is
// schema-qualified, so look-alikes planted in public never run, even with
// public ahead of pg_catalog.
func TestDrainRetryEventsIgnoresPlantedFunctions(t *testing.T) {
	e := strandQueue(t)
	e.exec(`CREATE TABLE public.pwned (what text)`)
	e.exec(`CREATE FUNCTION public.make_interval(secs int) RETURNS interval LANGUAGE sql
	          AS $$ INSERT INTO public.pwned VALUES ('make_interval'); SELECT interval '1 second' $$`)
	e.exec(`CREATE FUNCTION public.clock_timestamp() RETURNS timestamptz LANGUAGE sql
	          AS $$ INSERT INTO public.pwned VALUES ('clock_timestamp'); SELECT pg_catalog.now() $$`)
	e.exec(`CREATE FUNCTION public.int_eq(int, int) RETURNS boolean LANGUAGE sql
	          AS $$ INSERT INTO public.pwned VALUES ('='); SELECT $1 OPERATOR(pg_catalog.=) $2 $$`)
	e.exec(`CREATE OPERATOR public.= (LEFTARG = int, RIGHTARG = int, FUNCTION = public.int_eq)`)
	e.exec(`CREATE FUNCTION public.ts_ge(timestamptz, timestamptz) RETURNS boolean LANGUAGE sql
	          AS $$ INSERT INTO public.pwned VALUES ('>='); SELECT $1 OPERATOR(pg_catalog.>=) $2 $$`)
	e.exec(`CREATE OPERATOR public.>= (LEFTARG = timestamptz, RIGHTARG = timestamptz, FUNCTION = public.ts_ge)`)
	// A due retry, so the loop body runs.
	e.exec(`SELECT pgque.send('q', 'r'::text)`)
	nextSlot()
	e.exec(`SELECT pgque.ticker()`)
	ms := e.receive("q", "c", 10)
	if len(ms) != 1 {
		t.Fatalf("receive = %v", ms)
	}
	e.exec(`SELECT pgque.nack($1, ROW($2, $1, 'default', 'r', 0, now(), NULL, NULL, NULL, NULL)::pgque.message, '0 seconds', 'x')`, ms[0].Batch, ms[0].ID)
	e.exec(`SELECT pgque.ack($1)`, ms[0].Batch)
	e.exec(`SET search_path = public, pg_catalog`)
	e.exec(`CALL pgque.drain_retry_events(1)`)
	e.exec(`RESET search_path`)
	if n := e.int64(`SELECT count(*) FROM pgque.retry_queue`); n != 0 {
		t.Fatalf("drain_retry_events left %d retries", n)
	}
	var ran []string
	rows, err := e.conn.Query(ctxT(t), `SELECT what FROM public.pwned`)
	if err != nil {
		t.Fatal(err)
	}
	ran, err = pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(ran) != 0 {
		t.Fatalf("drain_retry_events ran planted look-alikes: %v", ran)
	}
}

// Two tickers at once: each reads every queue's sequence in its own
// transaction, so each is a lock holder for the other's ticks. A ticker
// that inserted no events is not a producer: its commit must not re-tick a
// queue that has nothing new (else two tickers keep ticking idle queues).
func TestStrandOtherTickerIsNotAProducer(t *testing.T) {
	e := strandQueue(t)
	e.exec(`SELECT pgque.create_queue('q2')`)
	e.exec(`SELECT pgque.subscribe('q2', 'c')`) // a classic consumer: the 10 ms period applies
	e.exec(`SELECT pgque.ticker()`)
	e.exec(`SELECT pgque.send('q2', 'y'::text)`)
	nextSlot()
	other := pgtest.Conn(t, e.dsn)
	b := begin(t, other, pgx.ReadCommitted)
	var n int64
	if err := b.QueryRow(ctxT(t), `SELECT pgque.ticker()`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("the other ticker ticked %d queues (%v), want q2 only", n, err)
	}
	e.exec(`SELECT pgque.send('q', 'x'::text)`)
	nextSlot()
	if n := e.int64(`SELECT pgque.ticker('q')`); n < 0 {
		t.Fatal("q did not tick for its new event")
	}
	commit(t, b)
	before := e.ticks()
	for i := 0; i < 5; i++ {
		nextSlot()
		e.exec(`SELECT pgque.ticker()`)
	}
	if n := e.ticks() - before; n != 0 {
		t.Fatalf("q ticked %d times after the other ticker committed, with nothing new", n)
	}
	exactlyOnce(t, e.drain("q", "c", 10), []string{"x"})
}

// A re-tick that carries events left behind by the previous tick NOTIFYs
// like a tick with new ids, so LISTENing consumers do not wait for a poll.
func TestStrandReTickNotifies(t *testing.T) {
	e := strandQueue(t)
	listener := pgtest.Conn(t, e.dsn)
	if _, err := listener.Exec(ctxT(t), `LISTEN pgque_q`); err != nil {
		t.Fatal(err)
	}
	producer := pgtest.Conn(t, e.dsn)
	p := begin(t, producer, pgx.ReadCommitted)
	txExec(t, p, `SELECT pgque.send('q', 'n'::text)`)
	nextSlot()
	first := e.int64(`SELECT pgque.ticker('q')`) // counts the id, cannot see the event
	if first < 0 {
		t.Fatal("no tick for the new id")
	}
	waitNotify := func() string {
		ctx, cancel := context.WithTimeout(ctxT(t), 2*time.Second)
		defer cancel()
		n, err := listener.WaitForNotification(ctx)
		if err != nil {
			return ""
		}
		return n.Payload
	}
	if got := waitNotify(); got != fmt.Sprint(first) {
		t.Fatalf("notification %q, want tick %d", got, first)
	}
	commit(t, p)
	nextSlot()
	second := e.int64(`SELECT pgque.ticker('q')`)
	if second < 0 {
		t.Fatal("no re-tick after the producer committed")
	}
	if got := waitNotify(); got != fmt.Sprint(second) {
		t.Fatalf("re-tick %d carrying a committed event sent notification %q, want %q", second, got, fmt.Sprint(second))
	}
	exactlyOnce(t, e.drain("q", "c", 10), []string{"n"})
}
