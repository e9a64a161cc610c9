package sql_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pgquectl/pgquectl/internal/pgtest"
)

// sqlPlant puts look-alikes of what ticker_loop() calls into public; each
// records that it ran. ticker_loop() runs with the pg_cron job owner's (a
// superuser's) rights and cannot have a SET clause.
const sqlPlant = `
CREATE TABLE public.pwned (what text);
CREATE FUNCTION public.clock_timestamp() RETURNS timestamptz LANGUAGE sql VOLATILE AS
  $$INSERT INTO public.pwned VALUES ('clock_timestamp') RETURNING pg_catalog.clock_timestamp()$$;
CREATE FUNCTION public.pg_sleep(double precision) RETURNS void LANGUAGE sql AS
  $$INSERT INTO public.pwned VALUES ('pg_sleep')$$;
CREATE FUNCTION public.to_timestamp(double precision) RETURNS timestamptz LANGUAGE sql VOLATILE AS
  $$INSERT INTO public.pwned VALUES ('to_timestamp') RETURNING pg_catalog.to_timestamp($1)$$;
CREATE FUNCTION public.make_interval(years int DEFAULT 0, months int DEFAULT 0, weeks int DEFAULT 0, days int DEFAULT 0, hours int DEFAULT 0, mins int DEFAULT 0, secs double precision DEFAULT 0)
  RETURNS interval LANGUAGE sql VOLATILE AS
  $$INSERT INTO public.pwned VALUES ('make_interval') RETURNING pg_catalog.make_interval(years, months, weeks, days, hours, mins, secs)$$;
CREATE FUNCTION public.ts_ge(timestamptz, timestamptz) RETURNS boolean LANGUAGE sql VOLATILE AS
  $$INSERT INTO public.pwned VALUES ('>=') RETURNING pg_catalog.timestamptz_ge($1, $2)$$;
CREATE OPERATOR public.>= (LEFTARG = timestamptz, RIGHTARG = timestamptz, FUNCTION = public.ts_ge);
CREATE FUNCTION public.text_eq(text, text) RETURNS boolean LANGUAGE sql VOLATILE AS
  $$INSERT INTO public.pwned VALUES ('=') RETURNING pg_catalog.texteq($1, $2)$$;
CREATE OPERATOR public.= (LEFTARG = text, RIGHTARG = text, FUNCTION = public.text_eq);`

// TestTickerLoopResolvesNothingThroughPublic: with a database default
// search_path that puts public before pg_catalog and look-alikes planted
// there, a ticker_loop() run ticks and none of them runs.
func TestTickerLoopResolvesNothingThroughPublic(t *testing.T) {
	e := setup(t)
	e.exec(`SELECT pgque.create_queue('q')`)
	e.exec(`SELECT pgque.set_tick_period_ms(10)`)
	e.exec(`SELECT pgque.set_setting('ticker_slot_seconds', '1'), pgque.set_setting('ticker_overrun_ms', '0')`)
	e.exec(sqlPlant)
	e.exec(`DO $$BEGIN EXECUTE format('ALTER DATABASE %I SET search_path = public, pg_catalog', current_database()); END$$`)
	e.exec(`SELECT pgque.send('q', 'x'::text)`)
	loop := pgtest.Conn(t, e.dsn) // a new session: it gets the database's search_path
	var path string
	if err := loop.QueryRow(ctxT(t), `SHOW search_path`).Scan(&path); err != nil || path != "public, pg_catalog" {
		t.Fatalf("the loop's session has search_path %q (%v)", path, err)
	}
	before := e.int64(`SELECT count(*) FROM pgque.tick`)
	if _, err := loop.Exec(context.Background(), `CALL pgque.ticker_loop()`); err != nil {
		t.Fatalf("ticker_loop: %v", err)
	}
	if n := e.int64(`SELECT count(*) FROM public.pwned`); n != 0 {
		var what string
		_ = e.conn.QueryRow(ctxT(t), `SELECT string_agg(DISTINCT what, ', ') FROM public.pwned`).Scan(&what)
		t.Fatalf("ticker_loop ran %d planted calls: %s", n, what)
	}
	if after := e.int64(`SELECT count(*) FROM pgque.tick`); after <= before {
		t.Fatal("ticker_loop made no tick")
	}
}

// TestTickerLoopStandbyWarmsTheTickPathAndUndoesIt: a run that finds the
// loop lock held warms up before it can take over: it runs a real round on
// one queue forced due - so the tick path (due_queues, tick_in_flight,
// tick_queue's snapshot and INSERT) is planned in its backend before its
// first round as the holder - and rolls it back. The warm-up raises
// nothing (it LOGs a failure: before, it called tick_queue with two
// arguments, which does not exist, so the tick path stayed cold), draws
// exactly one tick id, and leaves no tick and no forced flag behind.
func TestTickerLoopStandbyWarmsTheTickPathAndUndoesIt(t *testing.T) {
	e := setup(t)
	e.exec(`SELECT pgque.create_queue('q')`)
	e.exec(`SELECT pgque.set_tick_period_ms(10)`)
	// 1 s slots: the standby warms up 250 ms in and gives up after 2 s.
	e.exec(`SELECT pgque.set_setting('ticker_slot_seconds', '1'), pgque.set_setting('ticker_overrun_ms', '0')`)
	e.exec(`SELECT pgque.force_next_tick('q')`)
	e.exec(`SELECT pgque.ticker()`) // the queue's first tick: nothing is due now
	const qSeq = `SELECT s.last_value FROM pg_sequences s JOIN pgque.queue q
	               ON format('%I.%I', s.schemaname, s.sequencename)::regclass = q.queue_tick_seq
	              WHERE q.queue_name = 'q'`
	ticks, seq := e.int64(`SELECT count(*) FROM pgque.tick`), e.int64(qSeq)

	// The running loop, as far as the standby can tell.
	holder := pgtest.Conn(t, e.dsn)
	if _, err := holder.Exec(ctxT(t), `SELECT pg_advisory_lock(1885827445, 5)`); err != nil {
		t.Fatal(err)
	}
	// LOG messages (the warm-up's failure report) reach this client too.
	standby := newLogConn(t, e.dsn)
	start := time.Now()
	if _, err := standby.Exec(ctxT(t), `CALL pgque.ticker_loop()`); err != nil {
		t.Fatalf("standby ticker_loop: %v", err)
	}
	if el := time.Since(start); el < 1500*time.Millisecond {
		t.Fatalf("the standby returned after %s: it did not wait for the held lock", el)
	}
	for _, m := range standby.take("") {
		if strings.Contains(m, "warm-up") {
			t.Errorf("the warm-up failed: %s", m)
		}
	}
	if got := e.int64(`SELECT count(*) FROM pgque.tick`); got != ticks {
		t.Errorf("ticks: %d after the standby's run, want %d (the warm-up's tick must be rolled back)", got, ticks)
	}
	if got := e.int64(qSeq); got != seq+1 {
		t.Errorf("tick sequence at %d after the standby's run, want %d: the warm-up must run the tick path to its INSERT exactly once", got, seq+1)
	}
	if n := e.int64(`SELECT count(*) FROM pgque.queue WHERE queue_force_tick`); n != 0 {
		t.Errorf("%d queues left forced by the warm-up", n)
	}
}

// TestTickerLoopCommitsAsynchronously: ticker_loop() runs its transactions
// with synchronous_commit = off (a tick's COMMIT does not wait for the WAL
// flush, which is on the delivery path); the setting is session-wide, so
// the session that ran it shows it afterwards. The session started with
// the server default (on).
func TestTickerLoopCommitsAsynchronously(t *testing.T) {
	e := setup(t)
	e.exec(`SELECT pgque.create_queue('q')`)
	e.exec(`SELECT pgque.set_tick_period_ms(10)`)
	e.exec(`SELECT pgque.set_setting('ticker_slot_seconds', '1'), pgque.set_setting('ticker_overrun_ms', '0')`)
	loop := pgtest.Conn(t, e.dsn)
	var v string
	if err := loop.QueryRow(ctxT(t), `SHOW synchronous_commit`).Scan(&v); err != nil || v != "on" {
		t.Fatalf("a new session has synchronous_commit %q (%v), want on", v, err)
	}
	if _, err := loop.Exec(ctxT(t), `CALL pgque.ticker_loop()`); err != nil {
		t.Fatalf("ticker_loop: %v", err)
	}
	if err := loop.QueryRow(ctxT(t), `SHOW synchronous_commit`).Scan(&v); err != nil || v != "off" {
		t.Fatalf("ticker_loop ran with synchronous_commit %q (%v), want off", v, err)
	}
}
