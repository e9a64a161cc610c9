package sql_test

import (
	"slices"
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
	// A classic consumer: with none, events do not end the idle state
	// (TestTickerPushIdle).
	e.exec(`SELECT pgque.subscribe('b', 'c1')`)
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
	// and the push state (no classic consumer): drop that, so that the
	// next call checks (a read-only statement leaves the snapshot as is)
	e.exec(`SELECT set_config('pgque.ticker_idle', split_part(current_setting('pgque.ticker_idle'), '|', 1) || '|' ||
	                                               split_part(current_setting('pgque.ticker_idle'), '|', 2) || '|', false)`)
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
	if !strings.HasPrefix(st, "seen|") || !strings.HasSuffix(st, "|") {
		t.Fatalf("pgque.ticker_idle after the locked round = %q, want seen|<snapshot>| (no idle time recorded)", st)
	}
}

// TestTickerPushIdle: with no classic consumer, events committed after a
// due check that found nothing due do not end the idle state: under a push
// load (the snapshot moves every round) rounds skip the due check until
// the first tick due by time (ticker_max_lag after the last tick), even
// past ticker_max_count; then a round checks and ticks. A committed queue
// change (a forced tick) ends the state at once, and so does a classic
// consumer's subscribe, which then gets its batch at the tick period.
func TestTickerPushIdle(t *testing.T) {
	e := setup(t)
	e.exec(`SELECT pgque.create_queue('g')`)
	e.exec(`SELECT pgque.set_tick_period_ms(10)`)
	e.exec(`SELECT pgque.set_queue_config('g', 'ticker_max_count', '3')`)
	e.exec(`SELECT pgque.set_queue_config('g', 'ticker_max_lag', '1 second')`)
	e.untilIdle()

	// A push load: an event committed before every round. Rounds more
	// than 0.5 s before the last tick's max_lag time must skip; one at or
	// after it checks and ticks g.
	lastTick := `(SELECT max(t.tick_time) FROM pgque.tick t JOIN pgque.queue q ON q.queue_id = t.tick_queue WHERE q.queue_name = 'g')`
	skipped, ticked := 0, false
	for deadline := time.Now().Add(10 * time.Second); !ticked && time.Now().Before(deadline); {
		e.exec(`SELECT pgque.send('g', 'x'::text)`)
		var early bool
		if err := e.conn.QueryRow(ctxT(t), `SELECT now() < `+lastTick+` + interval '500 milliseconds'`).Scan(&early); err != nil {
			t.Fatal(err)
		}
		r := e.tickerRound()
		switch {
		case !r.checked:
			skipped++
		case early:
			t.Fatalf("after %d skipped rounds, a round under the push load ran the due check well before ticker_max_lag", skipped)
		default:
			ticked = r.ticks == 1
			if !ticked {
				t.Fatalf("a round at ticker_max_lag checked and ticked %d queues, want g", r.ticks)
			}
		}
	}
	if !ticked || skipped < 3 {
		t.Fatalf("push load: %d rounds skipped, g ticked %v; want rounds skipped (past ticker_max_count 3) and then a tick at ticker_max_lag", skipped, ticked)
	}

	// A forced tick, committed: the next round checks and ticks.
	e.untilIdle()
	e.exec(`SELECT pgque.send('g', 'y'::text)`)
	if r := e.tickerRound(); r.checked {
		t.Fatal("the round after an event did not skip (premise of the forced-tick check)")
	}
	e.exec(`SELECT pgque.force_next_tick('g')`)
	if r := e.tickerRound(); !r.checked || r.ticks != 1 {
		t.Fatalf("the round after a committed force_next_tick: checked %v, %d ticks; want the forced tick", r.checked, r.ticks)
	}

	// A classic consumer subscribes: the very next round checks, and its
	// first event is ticked at the period and delivered.
	e.untilIdle()
	e.exec(`SELECT pgque.send('g', 'z'::text)`)
	if r := e.tickerRound(); r.checked {
		t.Fatal("the round after an event did not skip (premise of the subscribe check)")
	}
	e.exec(`SELECT pgque.subscribe('g', 'c1')`)
	if r := e.tickerRound(); !r.checked {
		t.Fatal("the round after a classic consumer subscribed skipped the due check")
	}
	e.exec(`SELECT pgque.send('g', 'after'::text)`)
	ticked = false
	for deadline := time.Now().Add(5 * time.Second); !ticked && time.Now().Before(deadline); {
		r := e.tickerRound()
		if !r.checked {
			t.Fatal("a round skipped the due check with a classic consumer subscribed and its event not ticked")
		}
		ticked = r.ticks == 1
	}
	if !ticked {
		t.Fatal("the classic consumer's event was not ticked within 5 s")
	}
	var got []string
	for _, m := range e.receive("g", "c1", 100) {
		got = append(got, m.Payload)
	}
	if !slices.Contains(got, "after") {
		t.Errorf("the consumer that subscribed received %q, want the event sent after it subscribed", got)
	}
}
