package sql_test

import (
	"strings"
	"testing"
	"time"

	"github.com/pgquectl/pgquectl/internal/pgtest"
)

// idleRound is one ticker() call in its own transaction, and what it did:
// checked - it ran the due check (ticker_plan takes the shared advisory lock
// (1885827445, 6) for the transaction; the idle path takes nothing); xid -
// the transaction got a transaction id; ticks - its result.
type idleRound struct {
	checked, xid bool
	ticks        int64
}

func (e *engine) tickerRound(pre ...string) idleRound {
	e.t.Helper()
	tx, err := e.conn.Begin(ctxT(e.t))
	if err != nil {
		e.t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctxT(e.t)) }()
	for _, q := range pre {
		if _, err := tx.Exec(ctxT(e.t), q); err != nil {
			e.t.Fatalf("%s: %v", q, err)
		}
	}
	var r idleRound
	if err := tx.QueryRow(ctxT(e.t), `SELECT pgque.ticker()`).Scan(&r.ticks); err != nil {
		e.t.Fatalf("ticker(): %v", err)
	}
	if err := tx.QueryRow(ctxT(e.t), `
SELECT EXISTS (SELECT FROM pg_catalog.pg_locks l
                WHERE l.locktype = 'advisory' AND l.pid = pg_catalog.pg_backend_pid()
                  AND l.classid = 1885827445 AND l.objid = 6 AND l.objsubid = 2),
       pg_catalog.pg_current_xact_id_if_assigned() IS NOT NULL`).Scan(&r.checked, &r.xid); err != nil {
		e.t.Fatal(err)
	}
	if err := tx.Commit(ctxT(e.t)); err != nil {
		e.t.Fatal(err)
	}
	return r
}

// untilIdle calls ticker() until a call takes the idle path. A due check
// that finds nothing records the snapshot; the next one that sees the same
// snapshot records until when the queues stay idle; the call after that
// skips the check. Another test's commit anywhere in the cluster changes
// the snapshot and costs a few more calls: bounded.
func (e *engine) untilIdle() idleRound {
	e.t.Helper()
	for i := 0; i < 200; i++ {
		if r := e.tickerRound(); !r.checked {
			return r
		}
	}
	e.t.Fatal("200 ticker() calls with nothing to tick all ran the due check: the idle path never engaged")
	return idleRound{}
}

// TestTickerIdleRoundSkipsTheDueCheck: once a due check found nothing and
// nothing has been committed since, ticker() neither checks (no lock, no
// xid, no tick) - what keeps an idle 100 Hz ticker_loop cheap - and any
// commit (an event, a forced tick) brings the full check back at once.
func TestTickerIdleRoundSkipsTheDueCheck(t *testing.T) {
	e := setup(t)
	for _, q := range []string{"a", "b", "c"} {
		e.exec(`SELECT pgque.create_queue($1)`, q)
	}
	e.exec(`SELECT pgque.set_tick_period_ms(10)`)
	if r := e.tickerRound(); !r.checked || r.ticks != 3 {
		t.Fatalf("first ticker(): checked %v, %d ticks; want the creation ticks of 3 queues", r.checked, r.ticks)
	}
	if r := e.untilIdle(); r.xid || r.ticks != 0 {
		t.Fatalf("idle ticker(): xid assigned %v, %d ticks; want neither", r.xid, r.ticks)
	}

	// An event: every call checks until it is ticked (the queue's next
	// 10 ms slot).
	e.exec(`SELECT pgque.send('b', 'x'::text)`)
	ticked := false
	for deadline := time.Now().Add(5 * time.Second); !ticked && time.Now().Before(deadline); {
		r := e.tickerRound()
		if !r.checked {
			t.Fatal("ticker() took the idle path with an event committed and not ticked")
		}
		ticked = r.ticks == 1
	}
	if !ticked {
		t.Fatal("the committed event was not ticked within 5 s")
	}

	// A forced tick in the transaction that calls ticker(): its own write
	// is not in the snapshot, so the call must check.
	e.untilIdle()
	if r := e.tickerRound(`SELECT pgque.force_next_tick('c')`); !r.checked || r.ticks != 1 {
		t.Fatalf("ticker() after force_next_tick in its transaction: checked %v, %d ticks; want the forced tick", r.checked, r.ticks)
	}
}

// TestTickerIdleUntil: ticker_idle_until gives the time a quiet queue falls
// due by time alone, as due_queues' rules: the idle period; with classic
// thresholds PgQ's back-off when it comes first; NULL while some queue is
// not quiet (an event not ticked yet).
func TestTickerIdleUntil(t *testing.T) {
	e := setup(t)
	e.exec(`SELECT pgque.create_queue('q')`)
	e.exec(`SELECT pgque.set_queue_config('q', 'ticker_idle_period', '10 minutes')`)
	e.exec(`SELECT pgque.set_tick_period_ms(10)`)
	e.tick("q")
	e.exec(`SELECT pgque.force_next_tick('q')`)
	e.tick("q")
	// Two ticks, 20 s and 5 s ago: the gap is 15 s.
	e.exec(`UPDATE pgque.tick SET tick_time = now() - CASE WHEN tick_id = (SELECT max(tick_id) FROM pgque.tick)
	                                                       THEN interval '5 seconds' ELSE interval '20 seconds' END`)
	check := func(what, want string) {
		t.Helper()
		var ok *bool
		var got *time.Time
		if err := e.conn.QueryRow(ctxT(t), `SELECT pgque.ticker_idle_until(), pgque.ticker_idle_until() IS NOT DISTINCT FROM (`+want+`)`).Scan(&got, &ok); err != nil {
			t.Fatal(err)
		}
		if ok == nil || !*ok {
			t.Errorf("%s: ticker_idle_until() = %v, want %s", what, got, want)
		}
	}
	last := `(SELECT max(tick_time) FROM pgque.tick)`
	check("tick period, quiet", last+` + interval '10 minutes'`)
	// Classic thresholds (ticker_max_lag 3 s): due at the lag of
	// max(max_lag / 2, 2 x the previous gap) = 30 s, before the idle period.
	e.exec(`SELECT pgque.set_setting('tick_period_ms', NULL)`)
	check("classic, quiet", last+` + interval '30 seconds'`)
	if n := e.int64(`SELECT count(*) FROM pgque.due_queues() WHERE queue_name = 'q'`); n != 0 {
		t.Fatalf("due_queues says q is due 5 s after its last tick (classic, quiet): the test's premise is wrong")
	}
	e.exec(`SELECT pgque.send('q', 'x'::text)`)
	check("an event not ticked", `NULL`)

	// A tick that waited for a producer in flight: quiet until the
	// producer commits (its commit ends ticker_idle's idle state too).
	e.exec(`SELECT pgque.set_tick_period_ms(10)`)
	e.tick("q")
	producer := pgtest.Conn(t, e.dsn)
	tx, err := producer.Begin(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctxT(t)) }()
	if _, err := tx.Exec(ctxT(t), `SELECT pgque.send('q', 'y'::text)`); err != nil {
		t.Fatal(err)
	}
	e.tick("q")
	if n := e.int64(`SELECT count(*) FROM pgque.tick WHERE tick_id = (SELECT max(tick_id) FROM pgque.tick) AND tick_wait IS NOT NULL`); n != 1 {
		t.Fatal("the tick did not record the producer in flight: the test's premise is wrong")
	}
	check("a tick waiting for a producer in flight", last+` + interval '10 minutes'`)
	if err := tx.Commit(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	check("the waited-for producer committed", `NULL`)
}

// TestRotateMetadataIdleCallSkips: a rotate_metadata() call that finds
// nothing to do records the snapshot; the next call with the same snapshot
// (nothing committed anywhere) returns at once, without its steps; a
// commit brings the full call back.
func TestRotateMetadataIdleCallSkips(t *testing.T) {
	e := setup(t)
	e.exec(`SELECT pgque.create_queue('q')`)
	e.exec(`SELECT pgque.subscribe('q', 'c')`)
	// Whether the call ran its steps: it resets the transaction's
	// pgque.rotation_until before them.
	full := func(pre string) bool {
		t.Helper()
		tx, err := e.conn.Begin(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctxT(t)) }()
		if pre != "" {
			if _, err := tx.Exec(ctxT(t), pre); err != nil {
				t.Fatal(err)
			}
		}
		var until string
		if err := tx.QueryRow(ctxT(t), `SELECT pgque.rotate_metadata(), coalesce(current_setting('pgque.rotation_until', true), '')`).Scan(new(int), &until); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		return until != ""
	}
	skipped := false
	for i := 0; i < 200 && !skipped; i++ {
		skipped = !full("")
	}
	if !skipped {
		t.Fatal("200 rotate_metadata() calls with nothing to do all ran their steps: the idle path never engaged")
	}
	e.exec(`SELECT pgque.send('q', 'x'::text)`)
	if !full("") {
		t.Fatal("rotate_metadata() skipped its steps after a commit")
	}
}

// TestTickerIdleUntilBehindRotationLock: the quiet round's
// ticker_idle_until reads the tick tables; when a rotation (here: a
// session holding the tick table's ACCESS EXCLUSIVE lock) holds them past
// the ticker's lock_timeout, ticker() records no idle time and returns -
// it raised 55P03, which ends a ticker_loop run (seen on CI as
// TestConcurrentRotateMetadataRaisesNothing failing).
func TestTickerIdleUntilBehindRotationLock(t *testing.T) {
	e := setup(t)
	e.exec(`SELECT pgque.create_queue('q')`)
	e.exec(`SELECT pgque.set_tick_period_ms(10)`)
	e.untilIdle()
	e.exec(`SELECT set_config('pgque.ticker_idle', '', false)`)
	e.exec(`SELECT pgque.ticker()`) // records the snapshot ('seen')
	locker := pgtest.Conn(t, e.dsn)
	tx, err := locker.Begin(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctxT(t)) }()
	if _, err := tx.Exec(ctxT(t), `LOCK TABLE pgque.tick IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := e.conn.QueryRow(ctxT(t), `SELECT pgque.ticker()`).Scan(&n); err != nil {
		t.Fatalf("ticker() behind a held tick-table lock: %v", err)
	}
	var st string
	if err := e.conn.QueryRow(ctxT(t), `SELECT current_setting('pgque.ticker_idle', true)`).Scan(&st); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(st, "seen|") {
		t.Fatalf("pgque.ticker_idle after the locked round = %q, want seen|<snapshot> (no idle time recorded)", st)
	}
}
