package sql_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestTickerPlanLogsWhyItSkippedADueQueue: with the loop's debug setting
// on (the session setting pgque.ticker_debug_round_ms that ticker_loop()
// sets), a due queue that ticker_plan() leaves without a tick is LOGged
// with why - here another session holds its tick lock, named by pid and
// application. It is the evidence the slow-round log lacked: a 150 ms
// round that made 0 ticks said nothing about whether a queue was skipped.
// With the setting off, nothing is logged.
func TestTickerPlanLogsWhyItSkippedADueQueue(t *testing.T) {
	e := setup(t)
	e.exec(`SELECT pgque.create_queue('q')`)
	var qid int
	if err := e.conn.QueryRow(ctxT(t), `SELECT queue_id FROM pgque.queue WHERE queue_name = 'q'`).Scan(&qid); err != nil {
		t.Fatal(err)
	}

	holder, err := pgx.Connect(ctxT(t), e.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Close(context.Background()) })
	var holderPid int
	if err := holder.QueryRow(ctxT(t), `SELECT pg_backend_pid()`).Scan(&holderPid); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`SET application_name = 'tick-lock-holder'`, `BEGIN`} {
		if _, err := holder.Exec(ctxT(t), q); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := holder.Exec(ctxT(t), `SELECT pg_advisory_xact_lock(1885827446, $1)`, qid); err != nil {
		t.Fatal(err)
	}

	// The same lock key held in another database of the cluster (queue ids
	// repeat across databases) is not this queue's holder and must not be
	// named (CI: a ticker_loop of another test's database was).
	other, err := pgx.ParseConfig(e.dsn)
	if err != nil {
		t.Fatal(err)
	}
	other.Database = "postgres"
	stranger, err := pgx.ConnectConfig(ctxT(t), other)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stranger.Close(context.Background()) })
	var strangerPid int
	if err := stranger.QueryRow(ctxT(t), `SELECT pg_backend_pid()`).Scan(&strangerPid); err != nil {
		t.Fatal(err)
	}
	if _, err := stranger.Exec(ctxT(t), `SELECT pg_advisory_lock(1885827446, $1)`, qid); err != nil {
		t.Fatal(err)
	}

	ticker := newLogConn(t, e.dsn)
	tick := func() int {
		t.Helper()
		var n int
		if err := ticker.QueryRow(ctxT(t), `SELECT pgque.ticker()`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	planLines := func() []string { return ticker.take("ticker_plan()") }

	// Off: skipped silently (the queue is due: only its creation tick exists).
	if n := tick(); n != 0 {
		t.Fatalf("ticker() made %d ticks while another session held the tick lock, want 0", n)
	}
	if l := planLines(); len(l) != 0 {
		t.Fatalf("debug off, yet ticker_plan() logged: %q", l)
	}

	// On: the skip is logged with its holder.
	if _, err := ticker.Exec(ctxT(t), `SET pgque.ticker_debug_round_ms = '1000'`); err != nil {
		t.Fatal(err)
	}
	if n := tick(); n != 0 {
		t.Fatalf("ticker() made %d ticks while another session held the tick lock, want 0", n)
	}
	l := planLines()
	want := fmt.Sprintf("skipped: q: tick lock held by pid %d (tick-lock-holder, idle in transaction", holderPid)
	if len(l) != 1 || !strings.Contains(l[0], want) || !strings.Contains(l[0], "(1 queues due), 0 ticks prepared") {
		t.Fatalf("debug on: ticker_plan() logged %q, want one line containing %q and \"(1 queues due), 0 ticks prepared\"", l, want)
	}
	if stray := fmt.Sprintf("pid %d ", strangerPid); strings.Contains(l[0], stray) {
		t.Fatalf("debug on: ticker_plan() named a holder of the same key in another database (%s): %q", stray, l[0])
	}

	// The holder gone: the queue ticks, and a fast call with no skip logs nothing.
	if _, err := holder.Exec(ctxT(t), `COMMIT`); err != nil {
		t.Fatal(err)
	}
	if n := tick(); n != 1 {
		t.Fatalf("ticker() made %d ticks after the holder committed, want 1", n)
	}
	if l := planLines(); len(l) != 0 {
		t.Fatalf("a fast call that skipped nothing logged: %q", l)
	}

	// A malformed session value is treated as off, never an error.
	if _, err := ticker.Exec(ctxT(t), `SET pgque.ticker_debug_round_ms = 'lots'`); err != nil {
		t.Fatal(err)
	}
	e.exec(`SELECT pgque.force_next_tick('q')`)
	if n := tick(); n != 1 {
		t.Fatalf("ticker() with a malformed debug setting made %d ticks, want 1", n)
	}
}
