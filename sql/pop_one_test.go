package sql_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgquectl/pgquectl/internal/pgtest"
)

// TestPopOneSameAnswers: pop_list's single-candidate form (the generated
// pop_one_q<q>_t<c>) answers exactly as the general claim statement
// (pop_list_q<q>_t<c>) over a table of cases. Each case gets its own queue
// and committed setup; then, in one transaction (one now()), both
// functions run with the same arguments (the same next-range end, lease
// id, delay, expiry cutoff), each inside a savepoint rolled back
// afterwards, and give the same rows, the same cursor row and the same
// write-freedom (no transaction id assigned when the general form assigns
// none: a claim that finds nothing writes nothing).
func TestPopOneSameAnswers(t *testing.T) {
	e := setup(t)
	ctx := ctxT(t)
	type call struct {
		batch   int
		autoAck bool
		delay   string // interval
		expiry  string // "" = none, else an interval before now()
		part    string // "" = partition p; else a partition id (SQL)
	}
	cases := []struct {
		name   string
		setup  []string // committed, in order (queue $Q)
		prep   []string // in the compared transaction, before both calls
		locked bool     // a second session holds the cursor row FOR UPDATE
		call   call
	}{
		{name: "first contact: cursor seeded, next range", setup: []string{push3, subscribe},
			call: call{batch: 2}},
		{name: "first contact, auto-ack, batch covers all: drained", setup: []string{push3, subscribe},
			call: call{batch: 3, autoAck: true}},
		{name: "open range after the position, auto-ack 1", setup: []string{push3, popAuto1},
			call: call{batch: 1, autoAck: true}},
		{name: "open range rest, next range empty: drained", setup: []string{push3, popAuto1},
			call: call{batch: 2}},
		{name: "open range rest, next range has more: not drained", setup: []string{push3, popAuto1, push3},
			call: call{batch: 10}},
		{name: "batch smaller than the open range", setup: []string{push3, popAuto1},
			call: call{batch: 1}},
		{name: "transactionIds", setup: []string{pushTxn, popAuto1},
			call: call{batch: 10}},
		{name: "live lease", setup: []string{push3, popLease1},
			call: call{batch: 10}},
		{name: "expired lease: redelivery", setup: []string{push3, popLease1},
			prep: []string{`UPDATE pgque.group_cursor SET gc_lease_until = now() - interval '1 second'`},
			call: call{batch: 10}},
		{name: "expired lease, failed before", setup: []string{push3, popLease1},
			prep: []string{`UPDATE pgque.group_cursor SET gc_lease_until = now() - interval '1 second', gc_fails = 2, gc_attempts = 3`},
			call: call{batch: 1, autoAck: true}},
		{name: "drained: empty", setup: []string{push3, popAuto10},
			call: call{batch: 10}},
		{name: "seeded, nothing pushed since", setup: []string{push3, `SELECT pgque.broker_tick($Q)`}, prep: []string{subscribeNew, seed},
			call: call{batch: 10}},
		{name: "not a partition of the queue", setup: []string{push3, subscribe},
			call: call{batch: 10, part: "987654"}},
		{name: "delay: nothing ripe", setup: []string{push3, subscribe},
			call: call{batch: 10, delay: "1 hour"}},
		{name: "delay: a ripe prefix", setup: []string{push3, subscribe},
			prep: []string{`UPDATE ` + evTable + ` SET ev_time = now() - interval '2 hours' WHERE ev_data = '{"n": 1}'`,
				`UPDATE ` + evTable + ` SET ev_time = now() - interval '3 hours' WHERE ev_data = '{"n": 3}'`},
			call: call{batch: 10, delay: "1 hour"}},
		{name: "delay: all ripe", setup: []string{push3, subscribe},
			prep: []string{`UPDATE ` + evTable + ` SET ev_time = now() - interval '2 hours'`},
			call: call{batch: 2, delay: "1 hour", autoAck: true}},
		{name: "expiry: older events passed over", setup: []string{push3, subscribe},
			prep: []string{`UPDATE ` + evTable + ` SET ev_time = now() - interval '2 hours' WHERE ev_data <> '{"n": 3}'`},
			call: call{batch: 10, expiry: "1 hour"}},
		{name: "expiry: all expired", setup: []string{push3, popAuto1},
			prep: []string{`UPDATE ` + evTable + ` SET ev_time = now() - interval '2 hours'`},
			call: call{batch: 10, expiry: "1 hour"}},
		{name: "deleted message skipped", setup: []string{push3, popAuto1},
			prep: []string{`SELECT 1 / pgque.message_delete(NULL, pt.part_uuid, pgque.message_uuid(q.queue_id, e.ev_id, e.ev_time)::text) -- (fails unless deleted)
			                  FROM ` + evTable + ` e JOIN pgque.partition pt ON pt.part_id = e.ev_partition
			                  JOIN pgque.queue q ON q.queue_id = pt.part_queue AND q.queue_name = $Q
			                 WHERE e.ev_data = '{"n": 2}'`},
			call: call{batch: 10}},
		{name: "only deleted messages pending: empty, write-free", setup: []string{push9, subscribe, seed, deleteN9},
			call: call{batch: 10}},
		{name: "next range holds only a deleted message: drained", setup: []string{push3, popAuto1, push9, deleteN9},
			call: call{batch: 10}},
		{name: "next range holds a deleted and a live message: not drained", setup: []string{push3, popAuto1, push9, push3, deleteN9},
			call: call{batch: 10}},
		{name: "row held by a concurrent claim", setup: []string{push3, popAuto1}, locked: true,
			call: call{batch: 10}},
	}
	for i, c := range cases {
		q := fmt.Sprintf("po%d", i)
		for _, s := range c.setup {
			e.exec(strings.ReplaceAll(strings.ReplaceAll(s, "$Q", "'"+q+"'"), "$T", fmt.Sprintf("pgque.event_%d_0", i+1)))
		}
		var qid, gid, pid int
		var fnOne, fnList string
		if err := e.conn.QueryRow(ctx, `SELECT q.queue_id, (SELECT grp_id FROM pgque.broker_group WHERE grp_name = 'g'),
		        coalesce((SELECT part_id FROM pgque.partition WHERE part_queue = q.queue_id AND part_name = 'p'), -1),
		        format('pgque.pop_one_q%s_t%s', q.queue_id, q.queue_cur_table), format('pgque.pop_list_q%s_t%s', q.queue_id, q.queue_cur_table)
		   FROM pgque.queue q WHERE q.queue_name = $1`, q).Scan(&qid, &gid, &pid, &fnOne, &fnList); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if qid != i+1 {
			t.Fatalf("%s: queue id %d, want %d (the event table names assume it)", c.name, qid, i+1)
		}
		if c.locked {
			tx, err := pgtest.Conn(t, e.dsn).Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(ctx, `SELECT 1 FROM pgque.group_cursor WHERE gc_queue = $1 FOR UPDATE`, qid); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback(context.Background()) }()
		}
		part := fmt.Sprint(pid)
		if c.call.part != "" {
			part = c.call.part
		}
		delay := c.call.delay
		if delay == "" {
			delay = "0"
		}
		// begin starts a transaction and runs the case's prep in it.
		begin := func() pgx.Tx {
			t.Helper()
			tx, err := e.conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range c.prep {
				if _, err := tx.Exec(ctx, strings.ReplaceAll(strings.ReplaceAll(p, "$Q", "'"+q+"'"), "$T", fmt.Sprintf("pgque.event_%d_0", i+1))); err != nil {
					t.Fatalf("%s: %s: %v", c.name, p, err)
				}
			}
			return tx
		}
		var expiry *string
		if c.call.expiry != "" {
			expiry = &c.call.expiry
		}
		// run calls fn in tx (inside a savepoint rolled back afterwards)
		// with the snapshot snap as the next range's end; wrote: whether tx
		// had a transaction id after the call but none before.
		run := func(tx pgx.Tx, fn, snap string) (rows, cursor string, wrote bool) {
			t.Helper()
			var before, after *string
			if err := tx.QueryRow(ctx, `SELECT pg_current_xact_id_if_assigned()::text`).Scan(&before); err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(ctx, `SAVEPOINT cmp`); err != nil {
				t.Fatal(err)
			}
			if err := tx.QueryRow(ctx, fmt.Sprintf(`SELECT coalesce(string_agg(r::text, ';' ORDER BY n), '')
			    FROM %s($1, $2, ARRAY[%s], $3, 1, $4, NULL, $5::text::pg_snapshot, $6::interval, interval '0',
			            '00000000-0000-4000-8000-000000000001', interval '300 seconds', now() - $7::interval)
			         WITH ORDINALITY r(a, b, c, d, e, f, g, h, i, j, k, l, m, n)`, fn, part),
				qid, gid, c.call.batch, c.call.autoAck, snap, delay, expiry).Scan(&rows); err != nil {
				t.Fatalf("%s: %s: %v", c.name, fn, err)
			}
			if err := tx.QueryRow(ctx, `SELECT pg_current_xact_id_if_assigned()::text`).Scan(&after); err != nil {
				t.Fatal(err)
			}
			if err := tx.QueryRow(ctx, `SELECT coalesce(string_agg((to_jsonb(gc) - 'gc_active' - 'gc_moved_at' - 'gc_created' - 'gc_lease_until')::text
			                                           || ' active now: ' || (gc.gc_active = now())
			                                           || ' lease until: ' || coalesce((gc.gc_lease_until - now())::text, '-'), ';'), '')
			    FROM pgque.group_cursor gc WHERE gc.gc_queue = $1`, qid).Scan(&cursor); err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(ctx, `ROLLBACK TO SAVEPOINT cmp`); err != nil {
				t.Fatal(err)
			}
			return rows, cursor, before == nil && after != nil
		}
		snapOf := func(tx pgx.Tx) string {
			var snap string
			if err := tx.QueryRow(ctx, `SELECT pg_current_snapshot()::text`).Scan(&snap); err != nil {
				t.Fatal(err)
			}
			return snap
		}
		// rows and cursor: both forms in one transaction (one now())
		tx := begin()
		snap := snapOf(tx)
		gRows, gCur, _ := run(tx, fnList, snap)
		oRows, oCur, _ := run(tx, fnOne, snap)
		_ = tx.Rollback(ctx)
		// writes: each form in a transaction of its own
		tx = begin()
		_, _, gWrote := run(tx, fnList, snapOf(tx))
		_ = tx.Rollback(ctx)
		tx = begin()
		_, _, oWrote := run(tx, fnOne, snapOf(tx))
		_ = tx.Rollback(ctx)
		if gRows != oRows || gCur != oCur || gWrote != oWrote {
			t.Errorf("%s: general form:\n  rows   %s\n  cursor %s\n  wrote  %v\nsingle-candidate form:\n  rows   %s\n  cursor %s\n  wrote  %v",
				c.name, gRows, gCur, gWrote, oRows, oCur, oWrote)
		}
		if gRows == "" {
			t.Errorf("%s: no rows at all (want at least a verdict)", c.name)
		}
	}
}

// Setup statements of TestPopOneSameAnswers ($Q: the case's queue name).
const (
	push3     = `SELECT count(*) FROM pgque.push(ARRAY[$Q, $Q, $Q], ARRAY['p', 'p', 'p'], ARRAY['{"n": 1}', '{"n": 2}', '{"n": 3}']::jsonb[], NULL)`
	pushTxn   = `SELECT count(*) FROM pgque.push(ARRAY[$Q, $Q, $Q], ARRAY['p', 'p', 'p'], ARRAY['{"n": 1}', '{"n": 2}', '{"n": 3}']::jsonb[], ARRAY['t1', NULL, 't3'])`
	subscribe = `SELECT count(*) FROM pgque.pop_list($Q, 'g', '{}', 1)`
	// (a group in mode new: its cursors start at the current snapshot)
	subscribeNew = `SELECT count(*) FROM pgque.pop_list($Q, 'g', '{}', 1, 1, NULL, false, 'new')`
	seed         = `SELECT pgque.group_seed(q.queue_id, (SELECT grp_id FROM pgque.broker_group WHERE grp_name = 'g'),
	                                     ARRAY(SELECT part_id FROM pgque.partition WHERE part_queue = q.queue_id))
	               FROM pgque.queue q WHERE q.queue_name = $Q`
	popAuto1  = `SELECT count(*) FROM pgque.pop_list($Q, 'g', ARRAY(SELECT p.part_id FROM pgque.partition p JOIN pgque.queue q ON q.queue_id = p.part_queue WHERE q.queue_name = $Q AND p.part_name = 'p'), 1, 1, NULL, true)`
	popAuto10 = `SELECT count(*) FROM pgque.pop_list($Q, 'g', ARRAY(SELECT p.part_id FROM pgque.partition p JOIN pgque.queue q ON q.queue_id = p.part_queue WHERE q.queue_name = $Q AND p.part_name = 'p'), 10, 1, NULL, true)`
	popLease1 = `SELECT count(*) FROM pgque.pop_list($Q, 'g', ARRAY(SELECT p.part_id FROM pgque.partition p JOIN pgque.queue q ON q.queue_id = p.part_queue WHERE q.queue_name = $Q AND p.part_name = 'p'), 1, 1)`
	evTable   = `$T`
	push9     = `SELECT count(*) FROM pgque.push(ARRAY[$Q], ARRAY['p'], ARRAY['{"n": 9}']::jsonb[], NULL)`
	deleteN9  = `SELECT 1 / pgque.message_delete(NULL, pt.part_uuid, pgque.message_uuid(q.queue_id, e.ev_id, e.ev_time)::text) -- (fails unless deleted)
	               FROM $T e JOIN pgque.partition pt ON pt.part_id = e.ev_partition
	               JOIN pgque.queue q ON q.queue_id = pt.part_queue AND q.queue_name = $Q
	              WHERE e.ev_data = '{"n": 9}'`
)

// TestPopListDispatch: pop_list runs the single-candidate form for one
// candidate of a queue without windowBuffer, the general statement for
// several candidates, and the windowBuffer statement for a queue with one
// (read from the function calls the transaction added: track_functions).
func TestPopListDispatch(t *testing.T) {
	e := setup(t)
	ctx := ctxT(t)
	e.exec(`SELECT count(*) FROM pgque.push(ARRAY['d', 'd', 'w'], ARRAY['p', 'p2', 'p'], ARRAY['1', '2', '3']::jsonb[], NULL)`)
	e.exec(`UPDATE pgque.queue SET queue_options = coalesce(queue_options, '{}') || '{"window_buffer": 1}' WHERE queue_name = 'w'`)
	calls := func(tx pgx.Tx, kind string) int64 {
		var n int64
		if err := tx.QueryRow(ctx, `SELECT coalesce(sum(calls), 0) FROM pg_stat_xact_user_functions
		    WHERE schemaname = 'pgque' AND funcname ~ ('^' || $1 || '_q[0-9]+_t[0-9]+$')`, kind).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, c := range []struct {
		q, parts, want string
	}{
		{"d", `ARRAY(SELECT part_id FROM pgque.partition p JOIN pgque.queue q ON q.queue_id = p.part_queue WHERE q.queue_name = 'd' AND part_name = 'p')`, "pop_one"},
		{"d", `ARRAY(SELECT part_id FROM pgque.partition p JOIN pgque.queue q ON q.queue_id = p.part_queue WHERE q.queue_name = 'd' ORDER BY part_id)`, "pop_list"},
		{"w", `ARRAY(SELECT part_id FROM pgque.partition p JOIN pgque.queue q ON q.queue_id = p.part_queue WHERE q.queue_name = 'w' AND part_name = 'p')`, "pop_list_w"},
	} {
		tx, err := e.conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `SET LOCAL track_functions = 'all'`); err != nil {
			t.Fatal(err)
		}
		got := map[string]int64{}
		for _, k := range []string{"pop_one", "pop_list", "pop_list_w"} {
			got[k] = -calls(tx, k)
		}
		if _, err := tx.Exec(ctx, fmt.Sprintf(`SELECT count(*) FROM pgque.pop_list('%s', 'g', %s, 10)`, c.q, c.parts)); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"pop_one", "pop_list", "pop_list_w"} {
			got[k] += calls(tx, k)
		}
		_ = tx.Rollback(ctx)
		for k, n := range got {
			if want := int64(0); k == c.want {
				want = 1
				if n != want {
					t.Errorf("%s %s: %s called %d times, want once (%v)", c.q, c.parts, k, n, got)
				}
			} else if n != want {
				t.Errorf("%s %s: %s called %d times, want never (%v)", c.q, c.parts, k, n, got)
			}
		}
	}
}
