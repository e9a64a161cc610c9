package sql_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pgquectl/pgquectl/internal/pgtest"
)

// TestTickerLoopTicksCommitWithoutSubtransactions: a tick made by
// ticker_loop is committed by a commit record of its own top-level xid that
// lists no subtransactions. Before, ticker_loop's per-round exception block,
// ticker()'s and the per-queue one each became a subtransaction with an xid
// (the tick's INSERT ran inside all three), so every tick's commit record
// carried three subxact xids: ~20 bytes of WAL a tick, ~2 KiB/s at 100 Hz,
// which 1 Hz ticking does not pay (issue 8's WAL ratio).
func TestTickerLoopTicksCommitWithoutSubtransactions(t *testing.T) {
	e := setup(t)
	if e.int64(`SELECT count(*) FROM pg_available_extensions WHERE name = 'pg_walinspect'`) == 0 {
		t.Skip("pg_walinspect is not available (PostgreSQL < 15)")
	}
	e.exec(`CREATE EXTENSION IF NOT EXISTS pg_walinspect`)
	e.exec(`SELECT pg_create_physical_replication_slot('pgque_subxprobe_' || pg_backend_pid(), true, true)`)
	e.exec(`SELECT pgque.create_queue('q')`)
	e.exec(`SELECT pgque.subscribe('q', 'c')`) // a classic consumer: the 10 ms period applies
	e.exec(`SELECT pgque.set_tick_period_ms(10)`)
	// No rotation during the run: every tick the loop makes stays readable.
	e.exec(`SELECT pgque.set_setting('meta_rotation_period_ms', '3600000')`)
	e.exec(`SELECT pgque.ticker()`) // the creation tick, outside the window
	before := e.int64(`SELECT coalesce(max(tick_id), 0) FROM pgque.tick`)
	var start, end string
	if err := e.conn.QueryRow(ctxT(t), `SELECT pg_current_wal_insert_lsn()::text`).Scan(&start); err != nil {
		t.Fatal(err)
	}

	// Producers all through the runs.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sender := pgtest.Conn(t, e.dsn)
	sent := make(chan int, 1)
	go func() {
		n := 0
		for ctx.Err() == nil {
			if _, err := sender.Exec(ctx, `SELECT pgque.send('q', 'x'::text)`); err == nil {
				n++
			}
			time.Sleep(15 * time.Millisecond)
		}
		sent <- n
	}()
	// Runs end at the next second boundary: one run may last a few ms.
	loopFor(t, e, 1200*time.Millisecond)
	cancel()
	<-sent
	// The loop commits asynchronously: read up to where its records are
	// flushed (pg_walinspect reads only flushed WAL).
	if err := e.conn.QueryRow(ctxT(t), `SELECT pg_current_wal_insert_lsn()::text`).Scan(&end); err != nil {
		t.Fatal(err)
	}
	for e.int64(`SELECT (pg_current_wal_flush_lsn() < $1::pg_lsn)::int`, end) == 1 {
		time.Sleep(10 * time.Millisecond)
	}

	// Each tick of the run and the commit record of its inserting xid.
	rows, err := e.conn.Query(ctxT(t), `
		WITH ticks AS (
		    SELECT t.tick_id, t.xmin::text::bigint AS x FROM pgque.tick t WHERE t.tick_id > $3)
		SELECT k.tick_id, k.x, coalesce(r.description, '')
		  FROM ticks k
		  LEFT JOIN pg_get_wal_records_info($1::pg_lsn, $2::pg_lsn) r
		    ON r.resource_manager = 'Transaction' AND r.record_type IN ('COMMIT', 'COMMIT_PREPARED')
		   AND r.xid::text::bigint = k.x
		 ORDER BY k.tick_id`, start, end, before)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	var bad []string
	for rows.Next() {
		var id, xid int64
		var desc string
		if err := rows.Scan(&id, &xid, &desc); err != nil {
			t.Fatal(err)
		}
		n++
		switch {
		case desc == "":
			bad = append(bad, fmt.Sprintf("tick %d: inserted by xid %d, which has no commit record of its own (a subtransaction's)", id, xid))
		case strings.Contains(desc, "subxacts"):
			bad = append(bad, fmt.Sprintf("tick %d: commit record lists subtransactions: %s", id, desc))
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n < 3 {
		t.Fatalf("ticker_loop made %d ticks in its runs, want >= 3 (producers sent every 15 ms, period 10 ms)", n)
	}
	if len(bad) > 0 {
		t.Errorf("%d of %d ticks:\n%s", len(bad), n, strings.Join(bad, "\n"))
	}
}

// TestQuietQueueTickReadsNoLocks: a tick of a queue whose latest tick
// waited for nobody and whose event sequence has not moved since (an
// idle-period or forced tick, a broker tick after the scheduled ticker
// already ticked the push) does not read pg_locks (tick_in_flight: ~0.1 ms
// of CPU with max_connections = 300, the largest part of a tick); a queue
// with new events still does. Before, every tick read it.
func TestQuietQueueTickReadsNoLocks(t *testing.T) {
	e := setup(t)
	e.exec(`SELECT pgque.create_queue('q')`)
	e.exec(`SELECT pgque.ticker()`)
	// calls runs stmt in one transaction with function tracking on and
	// returns how often it called tick_in_flight and how many ticks of q
	// it made.
	calls := func(stmt string) (int64, int64) {
		t.Helper()
		ctx := ctxT(t)
		tx, err := e.conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		if _, err := tx.Exec(ctx, `SET LOCAL track_functions = 'all'`); err != nil {
			t.Fatal(err)
		}
		// The view shows this backend's counts not yet flushed: a delta.
		const qCalls = `SELECT coalesce(sum(calls), 0) FROM pg_stat_xact_user_functions
		                 WHERE schemaname = 'pgque' AND funcname = 'tick_in_flight'`
		n0 := queryInt(t, tx.Conn(), qCalls)
		before := queryInt(t, tx.Conn(), `SELECT count(*) FROM pgque.tick`)
		if _, err := tx.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
		n := queryInt(t, tx.Conn(), qCalls) - n0
		ticks := queryInt(t, tx.Conn(), `SELECT count(*) FROM pgque.tick`) - before
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		return n, ticks
	}
	for _, c := range []struct {
		name, stmt string
		send       bool
		want       int64
	}{
		{"ticker(), forced, quiet", `SELECT pgque.force_next_tick('q'), pgque.ticker()`, false, 0},
		{"ticker(q), forced, quiet", `SELECT pgque.force_next_tick('q'), pgque.ticker('q')`, false, 0},
		{"broker_tick, quiet", `SELECT pgque.broker_tick('q')`, false, 0},
		{"ticker(), forced, new events", `SELECT pgque.force_next_tick('q'), pgque.ticker()`, true, 1},
		{"ticker(q), forced, new events", `SELECT pgque.force_next_tick('q'), pgque.ticker('q')`, true, 1},
		{"broker_tick, new events", `SELECT pgque.broker_tick('q')`, true, 1},
	} {
		if c.send {
			e.exec(`SELECT pgque.send('q', 'x'::text)`)
		}
		n, ticks := calls(c.stmt)
		if ticks != 1 {
			t.Fatalf("%s: %d ticks, want 1", c.name, ticks)
		}
		if n != c.want {
			t.Errorf("%s: tick_in_flight called %d times, want %d", c.name, n, c.want)
		}
	}
}
