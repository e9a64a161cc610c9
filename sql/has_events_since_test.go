package sql_test

import (
	"fmt"
	"testing"

	"github.com/pgquectl/pgquectl/internal/pgtest"
)

// TestHasEventsSinceProbesTheIndex: the probe due_queues runs for a tick
// recorded with tick_wait_probe reads a few index entries, never every row
// - even where the event table has no statistics. Before, "LIMIT 1" over
// "ev_txid >= xmax OR ev_txid = ANY (ended)" was planned as a sequential
// scan of a never-analyzed table (and, with sequential scans off, as a
// scan of the whole ev_txid index with the OR as a filter): when nothing
// matched, the usual answer, it read every row - ~100 ms of CPU inside a
// ticker round for 400,000 events, a tick stall in the 10-minute benchmark
// under a held xmin. It also answers right both ways, and leaves the
// caller's enable_seqscan as it was.
func TestHasEventsSinceProbesTheIndex(t *testing.T) {
	e := setup(t)
	e.exec(`SELECT pgque.create_queue('q')`)
	qid := e.int64(`SELECT queue_id FROM pgque.queue WHERE queue_name = 'q'`)
	tbl := fmt.Sprintf("pgque.event_%d_0", qid)
	// No statistics, as a table fresh from rotation has until autovacuum
	// gets to it.
	e.exec(`ALTER TABLE ` + tbl + ` SET (autovacuum_enabled = false)`)
	e.exec(`SELECT pgque.send_batch('q', ARRAY(SELECT 'e' || g FROM generate_series(1, 20000) g))`)

	// A connection of its own: pg_stat_xact_user_tables also counts the
	// backend's earlier transactions until their stats are flushed.
	probe := pgtest.Conn(t, e.dsn)
	tx, err := probe.Begin(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctxT(t)) }()
	var found bool
	var seqScans, tupRead int64
	var seqOn string
	if err := tx.QueryRow(ctxT(t), `SELECT pgque.has_events_since($1, pg_current_snapshot())`, qid).Scan(&found); err != nil {
		t.Fatal(err)
	}
	if err := tx.QueryRow(ctxT(t), `SELECT coalesce(seq_scan, 0), coalesce(idx_tup_fetch, 0), current_setting('enable_seqscan')
		FROM pg_stat_xact_user_tables WHERE relid = $1::regclass`, tbl).Scan(&seqScans, &tupRead, &seqOn); err != nil {
		t.Fatal(err)
	}
	if found {
		t.Error("has_events_since found events that the current snapshot sees, want false")
	}
	if seqScans != 0 || tupRead > 100 {
		t.Errorf("the probe of %s: %d sequential scans, %d rows fetched through an index; want 0 and a few (20,000 rows, none all-visible: a scan of the whole index fetches each)", tbl, seqScans, tupRead)
	}
	if seqOn != "on" {
		t.Errorf("enable_seqscan after the probe: %s, want on (restored)", seqOn)
	}
	if err := tx.Rollback(ctxT(t)); err != nil {
		t.Fatal(err)
	}

	// A row committed after the snapshot is found.
	var snap string
	if err := e.conn.QueryRow(ctxT(t), `SELECT pg_current_snapshot()::text`).Scan(&snap); err != nil {
		t.Fatal(err)
	}
	e.exec(`SELECT pgque.send('q', 'late')`)
	if err := e.conn.QueryRow(ctxT(t), `SELECT pgque.has_events_since($1, $2::pg_snapshot)`, qid, snap).Scan(&found); err != nil {
		t.Fatal(err)
	}
	if !found {
		t.Error("has_events_since missed an event committed after the snapshot")
	}
}
