package sql_test

import (
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgquectl/pgquectl/internal/pgtest"
)

// partIndexBlocks is the number of blocks of the event tables'
// (ev_partition, ev_txid, ev_id) indexes read so far in this database
// (buffer hits and reads; the counters of this connection are flushed
// first).
func partIndexBlocks(t *testing.T, conn *pgx.Conn) int64 {
	t.Helper()
	pgtest.FlushStats(t, conn)
	return queryInt(t, conn, `SELECT coalesce(sum(coalesce(s.idx_blks_hit, 0) + coalesce(s.idx_blks_read, 0)), 0)
	    FROM pg_statio_user_indexes s WHERE s.schemaname = 'pgque' AND s.indexrelname ~ '^event_[0-9]+_[0-9]+_part_idx$'`)
}

// TestGroupRangeReadsStartAtPosition: a pop and an ack of 1 message in a
// partition whose 8,000 earlier events were consumed read a few index
// blocks, not the partition's consumed history. The range reads of
// group_range_sql bound the partition by equality and the position by a
// row comparison: written as one (ev_partition, ev_txid, ev_id) row
// comparison next to the equality, B-tree took the equality as the start
// key of its first column and could not use the row comparison for the
// later ones, so every range read started at the partition's first event
// and filtered its way up to the position - at every pop and every ack, a
// cost growing with the events retained (the latency benchmark's pops read
// ~20 index pages per range per partition and spent most of their time
// there).
func TestGroupRangeReadsStartAtPosition(t *testing.T) {
	e := setup(t)
	const history = 8000
	e.exec(`SELECT count(*) FROM pgque.push(array_fill('rr'::text, ARRAY[$1::int]), array_fill('p'::text, ARRAY[$1::int]),
	          array_fill('{"n":1}'::jsonb, ARRAY[$1::int]), NULL)`, history)
	e.exec(`SELECT pgque.broker_tick('rr')`)
	pid := e.int64(`SELECT part_id FROM pgque.partition p JOIN pgque.queue q ON q.queue_id = p.part_queue
	                 WHERE q.queue_name = 'rr' AND p.part_name = 'p'`)
	// The group consumes the history (auto-ack): its position is the last event.
	if n := e.int64(`SELECT count(*) FROM pgque.pop_list('rr', 'g', ARRAY[$1::int], $2, 1, NULL, true, 'all')
	                  WHERE message_id IS NOT NULL`, pid, history); n != history {
		t.Fatalf("the first pop took %d messages, want %d", n, history)
	}
	e.exec(`SELECT count(*) FROM pgque.push(ARRAY['rr'], ARRAY['p'], ARRAY['{"n":2}'::jsonb], NULL)`)
	e.exec(`SELECT pgque.broker_tick('rr')`)

	// Range reads probe each transaction in progress in their start
	// snapshot (one index descent per xid and table): the cursor's
	// snapshots are claim snapshots, which list every transaction in
	// progress in the cluster (other tests' on a shared one).
	xips := func() int64 {
		return e.int64(`SELECT count(*) FROM pgque.group_cursor gc
		    JOIN pgque.broker_group g ON g.grp_id = gc.gc_group AND g.grp_name = 'g'
		    CROSS JOIN LATERAL (SELECT pg_snapshot_xip(gc.gc_lo) UNION ALL SELECT pg_snapshot_xip(gc.gc_hi)) x
		    WHERE gc.gc_partition = $1`, pid)
	}
	popXips := xips()
	base := partIndexBlocks(t, e.conn)
	var txn, part, lease string
	if err := e.conn.QueryRow(ctxT(t), `SELECT transaction_id, partition_uuid::text, lease_id::text
	    FROM pgque.pop_list('rr', 'g', ARRAY[$1::int], 10, 1, 30, false) WHERE message_id IS NOT NULL`, pid).Scan(&txn, &part, &lease); err != nil {
		t.Fatalf("pop of the new message: %v", err)
	}
	popRead := partIndexBlocks(t, e.conn) - base

	ackXips := xips()
	base = partIndexBlocks(t, e.conn)
	if n := e.int64(`SELECT count(*) FILTER (WHERE success AND lease_released) FROM pgque.group_ack('g', ARRAY[$1], ARRAY[$2::uuid], NULL, ARRAY[$3::uuid], NULL)`,
		txn, part, lease); n != 1 {
		t.Fatalf("ack of the new message: %d successful releases, want 1", n)
	}
	ackRead := partIndexBlocks(t, e.conn) - base

	// Each range read descends the index once per event table (root and
	// leaf, and its in-progress-xid probes: none here): a pop reads two
	// ranges (the open one, exhausted, and the next one) in two tables, an
	// ack one or two. The history alone is ~30 leaf pages per read. An
	// ANALYZE of the event table (autovacuum's, whenever it comes round on
	// a slow run) changes the claim's generic plan: 14 blocks unanalyzed,
	// 23 analyzed, the same at 8,000 and 32,000 consumed events.
	// Plus up to 8 blocks per in-progress xid of the cursor's snapshots
	// (two reads per range start, two tables, root and leaf).
	const bound = 24
	if allow := bound + 8*popXips; popRead > allow {
		t.Errorf("a pop of 1 message after %d consumed events read %d blocks of the partition index, want at most %d (%d xids in progress in the cursor's snapshots)", history, popRead, allow, popXips)
	}
	if allow := bound + 8*ackXips; ackRead > allow {
		t.Errorf("an ack of 1 message after %d consumed events read %d blocks of the partition index, want at most %d (%d xids in progress in the cursor's snapshots)", history, ackRead, allow, ackXips)
	}
	t.Logf("partition index blocks read: pop %d, ack %d (xids in progress in the cursor's snapshots: %d, %d)", popRead, ackRead, popXips, ackXips)
}

// TestQueueDepthRestoresPlannerSettings: queue_depth switches sorts off
// for its range reads (like the generated functions) and restores them:
// the caller's session is left as it was.
func TestQueueDepthRestoresPlannerSettings(t *testing.T) {
	e := setup(t)
	e.exec(`SELECT count(*) FROM pgque.push(ARRAY['qd', 'qd'], ARRAY['a', 'b'], ARRAY['1'::jsonb, '2'::jsonb], NULL)`)
	e.exec(`SELECT pgque.broker_tick('qd')`)
	tx, err := e.conn.Begin(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctxT(t)) }()
	var n int64
	var sortOn, incOn string
	if err := tx.QueryRow(ctxT(t), `SELECT sum(pending) FROM pgque.queue_depth('qd')`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if err := tx.QueryRow(ctxT(t), `SELECT current_setting('enable_sort'), current_setting('enable_incremental_sort')`).Scan(&sortOn, &incOn); err != nil {
		t.Fatal(err)
	}
	if n != 2 || sortOn != "on" || incOn != "on" {
		t.Fatalf("queue_depth: %d pending (want 2); after it enable_sort = %s, enable_incremental_sort = %s (want on, on)", n, sortOn, incOn)
	}
}
