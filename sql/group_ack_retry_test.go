package sql_test

import (
	"testing"

	"github.com/pgquectl/pgquectl/internal/pgtest"
)

// TestGroupAckRepeatAfterRangeMoved: an ack repeated after the next pop
// moved the cursor to a new range is a noop success (docs/design/broker.md "The
// cursor model", Ack: "the same ack twice is a noop the second time"),
// whether the item is named by its message id or by a custom
// transactionId, and whatever lease id it carries; an ack of an event
// after the position under a wrong lease is still refused. ackFastSetup
// pops 3 messages (the second with transactionId tx-b) as one batch; they
// are acked, 5000 more are pushed and consumed (auto-ack), 2 more pushed
// and popped (a new range, a new lease), then the first ack is repeated as
// it was (its old lease id), item by item and as one call, at a cost of
// O(items) index blocks whatever the history behind it.
func TestGroupAckRepeatAfterRangeMoved(t *testing.T) {
	e := setup(t)
	txns, part, lease := ackFastSetup(e)
	type row struct {
		success, noop bool
		err           *string
	}
	str := func(p *string) string {
		if p == nil {
			return "<nil>"
		}
		return *p
	}
	ack := func(items []string, lease string) []row {
		t.Helper()
		rows, err := e.conn.Query(ctxT(t), `SELECT success, noop, error FROM pgque.group_ack('g', $1::text[],
		    array_fill($2::uuid, ARRAY[cardinality($1::text[])]), NULL,
		    array_fill($3::uuid, ARRAY[cardinality($1::text[])]), NULL) ORDER BY idx`, items, part, lease)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []row
		for rows.Next() {
			var r row
			if err := rows.Scan(&r.success, &r.noop, &r.err); err != nil {
				t.Fatal(err)
			}
			out = append(out, r)
		}
		if rows.Err() != nil {
			t.Fatal(rows.Err())
		}
		return out
	}
	first := txns[:]
	for i, r := range ack(first, lease) {
		if !r.success || r.noop {
			t.Fatalf("first ack, item %d: success %v noop %v error %s; want applied", i, r.success, r.noop, str(r.err))
		}
	}
	// History after it: 5000 events consumed (auto-ack) in a range of their
	// own; then the next claim opens the range after that (a new lease).
	e.exec(`SELECT count(*) FROM pgque.push(array_fill('af'::text, ARRAY[5000]), array_fill('p'::text, ARRAY[5000]),
	          array_fill('{"n":0}'::jsonb, ARRAY[5000]), NULL)`)
	e.exec(`SELECT pgque.broker_tick('af')`)
	if n := e.int64(`SELECT count(*) FROM pgque.pop_list('af', 'g', ARRAY(SELECT part_id FROM pgque.partition WHERE part_name = 'p'),
	        5000, 1, NULL, true) WHERE message_id IS NOT NULL`); n != 5000 {
		t.Fatalf("auto-ack pop of the history: %d messages, want 5000", n)
	}
	e.exec(`SELECT count(*) FROM pgque.push(ARRAY['af','af'], ARRAY['p','p'], ARRAY['{"n":4}','{"n":5}']::jsonb[], ARRAY[NULL,'tx-e'])`)
	e.exec(`SELECT pgque.broker_tick('af')`)
	var lease2, pending, pendingTxn string
	if err := e.conn.QueryRow(ctxT(t), `SELECT lease_id::text, min(transaction_id) FILTER (WHERE payload::jsonb->>'n' = '4'),
	        min(transaction_id) FILTER (WHERE payload::jsonb->>'n' = '5')
	    FROM pgque.pop_list('af', 'g', ARRAY(SELECT part_id FROM pgque.partition WHERE part_name = 'p'), 10, 1)
	   WHERE message_id IS NOT NULL GROUP BY lease_id`).Scan(&lease2, &pending, &pendingTxn); err != nil {
		t.Fatalf("second pop: %v", err)
	}
	if lease2 == lease {
		t.Fatal("the second pop kept the first lease")
	}
	moved := e.int64(`SELECT count(*) FROM pgque.group_cursor WHERE pg_visible_in_snapshot(
	    (SELECT ev_txid FROM pgque.event_1_0 WHERE ev_data = '{"n": 1}'), gc_lo)`)
	if moved != 1 {
		t.Fatal("the second pop did not move the range past the first batch")
	}
	for _, c := range []struct {
		name  string
		items []string
		lease string
	}{
		{"message id, old lease", []string{txns[0]}, lease},
		{"transactionId, old lease", []string{txns[1]}, lease},
		{"message id, current lease", []string{txns[2]}, lease2},
		{"transactionId, no such lease", []string{txns[1]}, "00000000-0000-0000-0000-0000000000aa"},
		{"the whole first ack again", first, lease},
	} {
		for i, r := range ack(c.items, c.lease) {
			if !r.success || !r.noop {
				t.Errorf("%s, item %d (%s): success %v noop %v error %s; want a noop success",
					c.name, i, c.items[i], r.success, r.noop, str(r.err))
			}
		}
	}
	// After the position, under a wrong (the old) lease: refused, by
	// message id and by transactionId; and nothing moved.
	for _, item := range []string{pending, pendingTxn} {
		r := ack([]string{item}, lease)
		if len(r) != 1 || r[0].success || r[0].err == nil || *r[0].err != "invalid or expired lease" {
			t.Errorf("ack of %s after the position under the old lease: %+v; want invalid or expired lease", item, r)
		}
	}
	// Unknown message ids and transactionIds stay refused under a wrong lease.
	for _, item := range []string{"nope", "00000000-0000-7000-8000-000000000001"} {
		r := ack([]string{item}, lease)
		if len(r) != 1 || r[0].success {
			t.Errorf("ack of unknown %s under the old lease: %+v; want refused", item, r)
		}
	}
	if n := e.int64(`SELECT count(*) FROM pgque.group_cursor WHERE gc_lease = $1::uuid AND gc_pos IS NULL`, lease2); n != 1 {
		t.Errorf("the refused and repeated acks moved the cursor (%d rows with the second lease and no position)", n)
	}
	// O(items): index probes, no read of the 5000 events since (a read of
	// the partition's entries in its (ev_partition, ev_txid, ev_id) index
	// costs ~25 blocks per item): the event tables' sequential scans and
	// index blocks accessed, the backend's counts flushed before and after
	// (pgtest.FlushStats). The second batch is acked
	// first, so no live lease makes the ack read a leased batch too (its
	// read probes each in-progress xid of gc_lo: other tests' load).
	for i, r := range ack([]string{pending, pendingTxn}, lease2) {
		if !r.success || r.noop {
			t.Fatalf("ack of the second batch, item %d: success %v noop %v error %s; want applied", i, r.success, r.noop, str(r.err))
		}
	}
	read := func() (seq, blks int64) {
		t.Helper()
		pgtest.FlushStats(t, e.conn)
		if err := e.conn.QueryRow(ctxT(t), `SELECT
		        (SELECT coalesce(sum(seq_scan), 0) FROM pg_stat_user_tables
		          WHERE schemaname = 'pgque' AND relname ~ '^event_[0-9]+_[0-9]+$'),
		        (SELECT coalesce(sum(idx_blks_hit + idx_blks_read), 0) FROM pg_statio_user_indexes
		          WHERE schemaname = 'pgque' AND relname ~ '^event_[0-9]+_[0-9]+$')`).Scan(&seq, &blks); err != nil {
			t.Fatal(err)
		}
		return seq, blks
	}
	seq0, blks0 := read()
	res := ack(first, lease)
	seq, blks := read()
	for i, r := range res {
		if !r.success || !r.noop {
			t.Errorf("the first ack once more, item %d: success %v noop %v error %s; want a noop success", i, r.success, r.noop, str(r.err))
		}
	}
	if seq != seq0 || blks-blks0 > int64(4+4*len(first)) {
		t.Errorf("the first ack once more read the event tables with %d sequential scans and %d index blocks; want 0 and O(items)",
			seq-seq0, blks-blks0)
	}
}
