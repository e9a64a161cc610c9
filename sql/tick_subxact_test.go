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
	e.exec(`SELECT pgque.set_tick_period_ms(10)`)
	// No rotation during the run: every tick the loop makes stays readable.
	e.exec(`SELECT pgque.set_setting('meta_rotation_period_ms', '3600000')`)
	e.exec(`SELECT pgque.ticker()`) // the creation tick, outside the window
	before := e.int64(`SELECT coalesce(max(tick_id), 0) FROM pgque.tick`)
	var start, end string
	if err := e.conn.QueryRow(ctxT(t), `SELECT pg_current_wal_insert_lsn()::text`).Scan(&start); err != nil {
		t.Fatal(err)
	}

	// Producers all through one run (it ends at the next second boundary).
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
	if err := <-runLoop(t, e); err != nil {
		t.Fatalf("ticker_loop: %v", err)
	}
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
		t.Fatalf("ticker_loop made %d ticks in its run, want >= 3 (producers sent every 15 ms, period 10 ms)", n)
	}
	if len(bad) > 0 {
		t.Errorf("%d of %d ticks:\n%s", len(bad), n, strings.Join(bad, "\n"))
	}
}
