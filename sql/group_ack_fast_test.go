package sql_test

import (
	"context"
	"strings"
	"testing"
)

// ackFastSetup pushes 3 messages to partition p of queue af (the second
// with a transactionId, so items are keyed by a transactionId and by
// message ids), ticks, and pops them in group g as one leased batch.
// Returns the items' transaction ids, the partition UUID and the lease.
func ackFastSetup(e *engine) (txns [3]string, part, lease string) {
	e.t.Helper()
	e.exec(`SELECT count(*) FROM pgque.push(ARRAY['af','af','af'], ARRAY['p','p','p'],
	          ARRAY['{"n":1}','{"n":2}','{"n":3}']::jsonb[], ARRAY[NULL,'tx-b',NULL])`)
	e.exec(`SELECT pgque.broker_tick('af')`)
	rows, err := e.conn.Query(ctxT(e.t), `SELECT transaction_id, partition_uuid::text, lease_id::text
	    FROM pgque.pop_list('af', 'g', ARRAY(SELECT part_id FROM pgque.partition WHERE part_name = 'p'), 10, 1)
	   WHERE message_id IS NOT NULL`)
	if err != nil {
		e.t.Fatal(err)
	}
	i := 0
	for rows.Next() {
		if i == 3 {
			e.t.Fatal("popped more than 3 messages")
		}
		if err := rows.Scan(&txns[i], &part, &lease); err != nil {
			e.t.Fatal(err)
		}
		i++
	}
	if rows.Err() != nil || i != 3 || txns[1] != "tx-b" {
		e.t.Fatalf("popped %d messages (%v), second %q: want 3, the second tx-b", i, rows.Err(), txns[1])
	}
	return txns, part, lease
}

// TestGroupAckFastPathSameAnswers: group_ack's fast path (a completed ack
// of the next events of the batch the caller holds, in order) answers
// exactly as the general path: for every case of a table, the ack runs in
// a transaction rolled back afterwards, once as given and once with its
// statuses upper-cased ('COMPLETED' means completed to the general path,
// but the fast path's shape test takes only the lower-case spellings), and
// both give the same result rows, the same cursor row (gc_active: now()
// both times) and the same dead letters. Which path answered is read from
// the transaction's function calls (track_functions): the fast path
// answered when its generated function was called and the general path's
// read (the queue's group_ack_q<q>_t<c>) was not; the cases the fast path
// must take and must leave are fixed.
func TestGroupAckFastPathSameAnswers(t *testing.T) {
	e := setup(t)
	txns, part, lease := ackFastSetup(e)
	t1, t2, t3 := txns[0], txns[1], txns[2]
	const other = "00000000-0000-0000-0000-0000000000aa"
	evOf := `(SELECT ev_id FROM pgque.event_1_0 WHERE ev_data = '{"n": 1}')`
	type ack struct {
		txns     []string
		statuses []*string
		lease    *string   // nil: no lease id
		leases   []*string // instead of lease: one per item
		part     string    // "": the batch's partition
		tenant   *string
	}
	s := func(v string) *string { return &v }
	L := &lease
	cases := []struct {
		name string
		prep []string // run first, in the same transaction
		ack  ack
		fast bool
	}{
		{name: "whole batch", ack: ack{txns: []string{t1, t2, t3}, lease: L}, fast: true},
		{name: "prefix", ack: ack{txns: []string{t1, t2}, lease: L}, fast: true},
		{name: "first, statuses spelled otherwise", ack: ack{txns: []string{t1, t2}, statuses: []*string{s("ok"), s("success")}, lease: L}, fast: true},
		{name: "first, no lease id, delivered once", ack: ack{txns: []string{t1}}, fast: true},
		{name: "own tenant", ack: ack{txns: []string{t1}, lease: L, tenant: s("")}, fast: true},
		{name: "redelivered, lease id given", prep: []string{`UPDATE pgque.group_cursor SET gc_attempts = 2`},
			ack: ack{txns: []string{t1}, lease: L}, fast: true},
		{name: "failed before, now completed", prep: []string{`UPDATE pgque.group_cursor SET gc_fail_ev = ` + evOf + `, gc_fails = 1`},
			ack: ack{txns: []string{t1, t2}, lease: L}, fast: true},
		{name: "redelivered, no lease id", prep: []string{`UPDATE pgque.group_cursor SET gc_attempts = 2`},
			ack: ack{txns: []string{t1}}},
		{name: "repeated ack", prep: []string{`SELECT count(*) FROM pgque.group_ack('g', ARRAY['` + t1 + `'], ARRAY['` + part + `'::uuid], NULL, ARRAY['` + lease + `'::uuid], NULL)`},
			ack: ack{txns: []string{t1}, lease: L}},
		{name: "repeated after the batch end", prep: []string{`SELECT count(*) FROM pgque.group_ack('g', ARRAY['` + t1 + `','` + t2 + `','` + t3 + `'], array_fill('` + part + `'::uuid, ARRAY[3]), NULL, array_fill('` + lease + `'::uuid, ARRAY[3]), NULL)`},
			ack: ack{txns: []string{t3}, lease: L}},
		{name: "wrong lease", ack: ack{txns: []string{t1}, lease: s(other)}},
		{name: "expired lease", prep: []string{`UPDATE pgque.group_cursor SET gc_lease_until = now() - interval '1 second'`},
			ack: ack{txns: []string{t1}, lease: L}},
		{name: "out of order", ack: ack{txns: []string{t2, t1}, lease: L}},
		{name: "not the next", ack: ack{txns: []string{t2}, lease: L}},
		{name: "acked ahead, then the prefix", prep: []string{`SELECT count(*) FROM pgque.group_ack('g', ARRAY['` + t3 + `'], ARRAY['` + part + `'::uuid], NULL, ARRAY['` + lease + `'::uuid], NULL)`},
			ack: ack{txns: []string{t1, t2}, lease: L}},
		{name: "twice in one call", ack: ack{txns: []string{t1, t1}, lease: L}},
		{name: "more than the batch", ack: ack{txns: []string{t1, t2, t3, "nope"}, lease: L}},
		{name: "other tenant", ack: ack{txns: []string{t1}, lease: L, tenant: s("x")}},
		{name: "unknown partition", ack: ack{txns: []string{t1}, lease: L, part: other}},
		{name: "two lease ids", ack: ack{txns: []string{t1, t2}, leases: []*string{L, s(other)}}},
		{name: "failed", ack: ack{txns: []string{t1}, statuses: []*string{s("failed")}, lease: L}},
		{name: "completed then dlq", ack: ack{txns: []string{t1, t2}, statuses: []*string{nil, s("dlq")}, lease: L}},
	}
	run := func(prep []string, a ack, upper bool) (res, cursor, dead string, tried, read int64) {
		t.Helper()
		tx, err := e.conn.Begin(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(context.Background()) }()
		if _, err := tx.Exec(ctxT(t), `SET LOCAL track_functions = 'all'`); err != nil {
			t.Fatal(err)
		}
		for _, p := range prep {
			if _, err := tx.Exec(ctxT(t), p); err != nil {
				t.Fatalf("%s: %v", p, err)
			}
		}
		calls := func(fn string) int64 {
			var n int64
			if err := tx.QueryRow(ctxT(t), `SELECT coalesce(sum(calls), 0) FROM pg_stat_xact_user_functions
			    WHERE schemaname = 'pgque' AND funcname ~ ('^' || $1 || '_q[0-9]+_t[0-9]+$')`, fn).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		fast0, read0 := calls("group_ack_fast"), calls("group_ack")
		n := len(a.txns)
		parts := make([]string, n)
		leases := a.leases
		if a.lease != nil {
			leases = make([]*string, n)
			for i := range leases {
				leases[i] = a.lease
			}
		}
		statuses := make([]*string, n)
		for i := range parts {
			parts[i] = part
			if a.part != "" {
				parts[i] = a.part
			}
			if a.statuses != nil {
				statuses[i] = a.statuses[i]
			}
			if upper {
				v := "completed"
				if statuses[i] != nil {
					v = *statuses[i]
				}
				statuses[i] = s(strings.ToUpper(v))
			}
		}
		if err := tx.QueryRow(ctxT(t), `SELECT string_agg(r::text, ';' ORDER BY r.idx)
		    FROM pgque.group_ack('g', $1::text[], $2::uuid[], $3::text[], $4::uuid[], NULL, $5) r`,
			a.txns, parts, statuses, leases, a.tenant).Scan(&res); err != nil {
			t.Fatal(err)
		}
		tried, read = calls("group_ack_fast")-fast0, calls("group_ack")-read0
		if err := tx.QueryRow(ctxT(t), `SELECT string_agg((to_jsonb(gc) - 'gc_active' - 'gc_moved_at' - 'gc_created' - 'gc_lease_until')::text
		                                               || ' active now: ' || (gc.gc_active = now())
		                                               || ' lease until: ' || CASE WHEN gc.gc_lease_until <= now() THEN 'past' ELSE coalesce(gc.gc_lease_until::text, '-') END, ';')
		    FROM pgque.group_cursor gc`).Scan(&cursor); err != nil {
			t.Fatal(err)
		}
		if err := tx.QueryRow(ctxT(t), `SELECT coalesce(string_agg(gdl_txn || '/' || gdl_ev_id || '/' || gdl_retries, ';' ORDER BY gdl_id), '')
		    FROM pgque.group_dead_letter`).Scan(&dead); err != nil {
			t.Fatal(err)
		}
		return res, cursor, dead, tried, read
	}
	for _, c := range cases {
		fRes, fCur, fDead, fTried, fRead := run(c.prep, c.ack, false)
		gRes, gCur, gDead, gTried, _ := run(c.prep, c.ack, true)
		if fRes != gRes || fCur != gCur || fDead != gDead {
			t.Errorf("%s: as given:\n  rows   %s\n  cursor %s\n  dlq    %s\nthrough the general path:\n  rows   %s\n  cursor %s\n  dlq    %s",
				c.name, fRes, fCur, fDead, gRes, gCur, gDead)
		}
		if gTried != 0 {
			t.Errorf("%s: the upper-cased ack tried the fast path", c.name)
		}
		if fast := fTried > 0 && fRead == 0; fast != c.fast {
			t.Errorf("%s: answered by the fast path: %v, want %v (rows %s)", c.name, fast, c.fast, fRes)
		}
	}
	// The premise of the comparisons: the fast path did ack (not noops).
	res, cur, _, _, _ := run(nil, ack{txns: []string{t1, t2, t3}, lease: L}, false)
	if !strings.HasSuffix(res, `(2,`+t3+`,t,,t,f,f,af,1,f)`) || !strings.Contains(cur, `"gc_lease": null`) {
		t.Errorf("whole batch: rows %s, cursor %s; want the last item to release the lease", res, cur)
	}
}

// TestGroupAckFastPathStatements: an ack on the fast path runs a fixed,
// small number of statements whatever its size: group_ack's lookup of the
// partition's queue and group, the call of the generated function, and
// that function's lock and its read-and-UPDATE (4). The general path ran
// 11 for one item. Counted with auto_explain, which logs every statement
// the executor runs, nested ones included.
func TestGroupAckFastPathStatements(t *testing.T) {
	e := setup(t)
	e.exec(`SELECT count(*) FROM pgque.push(array_fill('af'::text, ARRAY[40]), array_fill('p'::text, ARRAY[40]),
	          array_fill('{"n":1}'::jsonb, ARRAY[40]), NULL)`)
	e.exec(`SELECT pgque.broker_tick('af')`)
	conn := newStmtCounter(t, e.dsn)
	pop := func(k int) (txns []string, part, lease string) {
		t.Helper()
		rows, err := conn.Query(ctxT(t), `SELECT transaction_id, partition_uuid::text, lease_id::text
		    FROM pgque.pop_list('af', 'g', ARRAY(SELECT part_id FROM pgque.partition WHERE part_name = 'p'), $1, 1)
		   WHERE message_id IS NOT NULL`, k)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var txn string
			if err := rows.Scan(&txn, &part, &lease); err != nil {
				t.Fatal(err)
			}
			txns = append(txns, txn)
		}
		if rows.Err() != nil || len(txns) != k {
			t.Fatalf("popped %d, want %d (%v)", len(txns), k, rows.Err())
		}
		return txns, part, lease
	}
	count := func(txns []string, part, lease, status string) int {
		t.Helper()
		parts := make([]string, len(txns))
		leases := make([]string, len(txns))
		statuses := make([]string, len(txns))
		for i := range parts {
			parts[i], leases[i], statuses[i] = part, lease, status
		}
		conn.reset()
		var ok int
		if err := conn.QueryRow(ctxT(t), `SELECT count(*) FILTER (WHERE success AND NOT noop)
		    FROM pgque.group_ack('g', $1::text[], $2::uuid[], $3::text[], $4::uuid[], NULL)`, txns, parts, statuses, leases).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		if ok != len(txns) {
			t.Fatalf("ack: %d of %d acked", ok, len(txns))
		}
		return conn.count() - 1 // the top-level SELECT
	}
	for _, k := range []int{1, 10} {
		txns, part, lease := pop(k)
		if got := count(txns, part, lease, "completed"); got != 4 {
			t.Errorf("fast path, %d items: %d statements executed, want 4", k, got)
		}
	}
	// Control: the general path ('COMPLETED': same meaning, not the fast
	// path's shape) is counted too.
	txns, part, lease := pop(1)
	if got := count(txns, part, lease, "COMPLETED"); got <= 8 {
		t.Errorf("control: the general path executed %d statements, want more than 8", got)
	}
}
