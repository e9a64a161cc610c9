package sql_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgquectl/pgquectl/internal/install"
	"github.com/pgquectl/pgquectl/internal/pgtest"
)

// planKinds are the statement kinds pgque.group_plan_sql generates a
// function for, per queue and current event table.
var planKinds = []string{"pop_list", "pop_list_w", "pop_one", "group_ack", "group_ack_below", "group_ack_fast", "group_pending", "group_advance_idle", "push_fresh", "push_dedup", "push_direct", "ack_direct"}

// directKinds are the generated kinds the broker calls itself: SECURITY
// DEFINER, search_path their only setting, executable by one pgque role.
var directKinds = map[string]string{"push_direct": "pgque_writer", "ack_direct": "pgque_reader"}

// generated lists the generated read functions of queue id (name order).
func (e *engine) generated(queueID int64) []string {
	e.t.Helper()
	rows, err := e.conn.Query(ctxT(e.t), `SELECT p.proname::text FROM pg_proc p
	  WHERE p.pronamespace = 'pgque'::regnamespace AND p.proname ~ ('_q' || $1::int || '_t[0-9]+$') ORDER BY 1`, queueID)
	if err != nil {
		e.t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

func wantGenerated(queueID int64) []string {
	var out []string
	for _, k := range planKinds {
		for c := 0; c < 3; c++ {
			out = append(out, fmt.Sprintf("%s_q%d_t%d", k, queueID, c))
		}
	}
	sort.Strings(out) // ORDER BY proname: type name sorts in C order
	return out
}

// TestGroupPlansLifecycle: create_queue generates the queue's read
// functions (planKinds x 3 event tables), owned by the engine's owner, not
// SECURITY DEFINER, pinned search_path and plan cache mode, executable by
// nobody else (not the pgque roles either) but the direct kinds
// (directKinds: SECURITY DEFINER, only search_path set, executable by
// their role); a re-install regenerates them
// for a queue that lacks them (a queue made by an older engine) and drops
// strays; drop_queue drops them.
func TestGroupPlansLifecycle(t *testing.T) {
	e := setup(t)
	e.exec(`SELECT pgque.create_queue('plans')`)
	id := e.int64(`SELECT queue_id FROM pgque.queue WHERE queue_name = 'plans'`)
	want := wantGenerated(id)
	if got := e.generated(id); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("after create_queue: generated %v, want %v", got, want)
	}
	if n := e.int64(`SELECT count(*) FROM pg_proc p
	    WHERE p.pronamespace = 'pgque'::regnamespace AND p.proname ~ ('_q' || $1::int || '_t[0-9]+$')
	      AND p.proname !~ '^(push|ack)_direct_'
	      AND NOT p.prosecdef AND p.prolang = (SELECT oid FROM pg_language WHERE lanname = 'plpgsql')
	      AND p.proowner = (SELECT proowner FROM pg_proc WHERE oid = 'pgque.pop_list(text, text, int[], int, int, int, boolean, text, timestamptz)'::regprocedure)
	      AND p.proconfig = ARRAY['jit=off', 'enable_bitmapscan=off', 'enable_seqscan=off', 'enable_sort=off', 'enable_incremental_sort=off', 'plan_cache_mode=force_generic_plan', 'search_path=pg_catalog, pgque, pg_temp']
	      AND p.prosrc NOT LIKE '%EXECUTE%'`, id); n != int64(len(want)-3*len(directKinds)) {
		t.Errorf("%d of %d generated functions are owned by the engine owner, static PL/pgSQL, not SECURITY DEFINER, with the pinned settings", n, len(want)-3*len(directKinds))
	}
	if n := e.int64(`SELECT count(*) FROM pg_proc p
	    WHERE p.pronamespace = 'pgque'::regnamespace AND p.proname ~ ('^(push|ack)_direct_q' || $1::int || '_t[0-9]+$')
	      AND p.prosecdef AND p.prolang = (SELECT oid FROM pg_language WHERE lanname = 'plpgsql')
	      AND p.proowner = (SELECT proowner FROM pg_proc WHERE oid = 'pgque.pop_list(text, text, int[], int, int, int, boolean, text, timestamptz)'::regprocedure)
	      AND p.proconfig = ARRAY['search_path=pg_catalog, pgque, pg_temp']
	      AND p.prosrc NOT LIKE '%EXECUTE%'`, id); n != int64(3*len(directKinds)) {
		t.Errorf("%d of %d direct generated functions are owned by the engine owner, static PL/pgSQL, SECURITY DEFINER, with search_path their only setting", n, 3*len(directKinds))
	}
	for _, role := range []string{"public", "pgque_reader", "pgque_writer", "pgque_admin"} {
		var wantN int64
		for _, r := range directKinds {
			if r == role || role == "pgque_admin" { // admin is a member of both
				wantN += 3
			}
		}
		if n := e.int64(`SELECT count(*) FROM pg_proc p
		    WHERE p.pronamespace = 'pgque'::regnamespace AND p.proname ~ ('_q' || $1::int || '_t[0-9]+$')
		      AND has_function_privilege($2, p.oid, 'EXECUTE')`, id, role); n != wantN {
			t.Errorf("%s may execute %d generated functions, want %d (the direct kinds its role may call)", role, n, wantN)
		}
	}
	// A reader (the role the broker pops as) cannot call one directly.
	reader := newRole(t, e.conn, "plr", "IN ROLE pgque_reader")
	rd := withUser(t, e.dsn, reader)
	_, err := rd.Exec(ctxT(t), fmt.Sprintf(`SELECT * FROM pgque.pop_list_q%d_t0(%d, 1, ARRAY[0], 10, 1, true, 1, pg_current_snapshot(),
	    interval '0', interval '0', gen_random_uuid(), interval '1 minute', NULL::timestamptz)`, id, id))
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
		t.Errorf("reader calling a generated function directly: %v, want permission denied (42501)", err)
	}
	// ... but pops through the entry point.
	if n := queryInt(t, rd, `SELECT count(*) FROM pgque.pop_list('plans', 'g', ARRAY[0], 10)`); n != 1 {
		t.Errorf("reader's pop_list returned %d rows, want 1 (the verdict)", n)
	}

	// A queue from an engine without them: its functions missing, and a
	// stray of a kind no longer generated. The re-install fixes both.
	e.exec(fmt.Sprintf(`DO $$ DECLARE r record; BEGIN
	    FOR r IN SELECT p.oid::regprocedure AS f FROM pg_proc p
	              WHERE p.pronamespace = 'pgque'::regnamespace AND p.proname ~ '_q%d_t[0-9]+$' LOOP
	        EXECUTE 'DROP FUNCTION ' || r.f;
	    END LOOP; END $$`, id))
	e.exec(fmt.Sprintf(`CREATE FUNCTION pgque.old_kind_q%d_t7() RETURNS int LANGUAGE sql AS 'SELECT 1'`, id))
	if pe := e.sqlErr(`SELECT * FROM pgque.pop_list('plans', 'g', ARRAY[0], 10)`); pe == nil || pe.Code != "42883" {
		t.Fatalf("pop_list without the generated functions: %v, want undefined_function (the test's premise)", pe)
	}
	if _, err := install.Install(ctxT(t), e.conn, install.Options{Reinstall: true}); err != nil {
		t.Fatalf("re-install: %v", err)
	}
	if got := e.generated(id); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("after the re-install: generated %v, want %v", got, want)
	}
	if n := e.int64(`SELECT count(*) FROM pgque.pop_list('plans', 'g', ARRAY[0], 10)`); n != 1 {
		t.Errorf("pop_list after the re-install returned %d rows, want 1", n)
	}
	// Re-installing again changes nothing (idempotent).
	if _, err := install.Install(ctxT(t), e.conn, install.Options{Reinstall: true}); err != nil {
		t.Fatalf("second re-install: %v", err)
	}
	if got := e.generated(id); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("after a second re-install: generated %v, want %v", got, want)
	}

	// Another queue's functions are left alone by drop_queue.
	e.exec(`SELECT pgque.create_queue('plans2')`)
	id2 := e.int64(`SELECT queue_id FROM pgque.queue WHERE queue_name = 'plans2'`)
	e.exec(`SELECT pgque.drop_queue('plans', true)`)
	if got := e.generated(id); len(got) != 0 {
		t.Errorf("after drop_queue: %v remain", got)
	}
	if got := e.generated(id2); len(got) != len(want) {
		t.Errorf("dropping queue %d left queue %d with %d generated functions, want %d", id, id2, len(got), len(want))
	}
}

// planLog collects the plans PostgreSQL logs to the client while
// debug_print_plan is on: one LOG message per statement planned (not per
// execution of a cached plan).
type planLog struct {
	mu    sync.Mutex
	plans []string
}

func (p *planLog) conn(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		if n.Severity == "LOG" && strings.HasPrefix(n.Message, "plan") {
			p.mu.Lock()
			p.plans = append(p.plans, n.Detail)
			p.mu.Unlock()
		}
	}
	conn, err := pgx.ConnectConfig(ctxT(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// naming counts the plans logged since from that read relation oid.
func (p *planLog) naming(from int, oid uint32) (plans, total int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	re := regexp.MustCompile(fmt.Sprintf(`:relid %d\b`, oid))
	for _, pl := range p.plans[from:] {
		if re.MatchString(pl) {
			plans++
		}
	}
	return plans, len(p.plans) - from
}

func (p *planLog) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.plans)
}

// TestGroupPlansNotReplanned: once a session has run pop_list and
// group_ack, further calls plan no statement over the event tables (the
// ~15 KB pop statement used to be planned on every call: most of a pop's
// PostgreSQL time). Checked with debug_print_plan, which logs each plan
// when it is made; the positive control proves the check sees a plan
// over the event table.
func TestGroupPlansNotReplanned(t *testing.T) {
	e := setup(t)
	e.exec(`SELECT count(*) FROM pgque.push(array_fill('pl'::text, ARRAY[40]),
	          ARRAY(SELECT 'p' || (g % 4) FROM generate_series(1, 40) g), array_fill('{"n":1}'::jsonb, ARRAY[40]), NULL)`)
	e.exec(`SELECT pgque.broker_tick('pl')`)
	var cur, prev uint32
	if err := e.conn.QueryRow(ctxT(t), `SELECT pgque.event_table(q.queue_id, q.queue_cur_table)::regclass::oid,
	        pgque.event_table(q.queue_id, (q.queue_cur_table + 2) % 3)::regclass::oid FROM pgque.queue q WHERE q.queue_name = 'pl'`).Scan(&cur, &prev); err != nil {
		t.Fatal(err)
	}
	log := &planLog{}
	conn := log.conn(t, e.dsn)
	parts := `ARRAY(SELECT part_id FROM pgque.partition p JOIN pgque.queue q ON q.queue_id = p.part_queue
	                WHERE q.queue_name = 'pl' AND p.part_name ~ '^p' ORDER BY part_id)`
	type item struct {
		Txn   string
		Part  [16]byte
		Lease [16]byte
	}
	var acked *item // one acknowledged before: its ack reads below the position (group_ack_below)
	popAck := func(round int) {
		t.Helper()
		rows, err := conn.Query(ctxT(t), `SELECT transaction_id, partition_uuid, lease_id
		    FROM pgque.pop_list('pl', 'g', `+parts+`, 2, 1, NULL, false, 'all') WHERE message_id IS NOT NULL`)
		if err != nil {
			t.Fatal(err)
		}
		items, err := pgx.CollectRows(rows, pgx.RowToStructByPos[item])
		if err != nil {
			t.Fatal(err)
		}
		if len(items) != 2 {
			t.Fatalf("round %d: popped %d messages, want 2", round, len(items))
		}
		if acked != nil {
			items = append(items, *acked)
		}
		var txns []string
		var pus, ls [][16]byte
		for _, it := range items {
			txns = append(txns, it.Txn)
			pus = append(pus, it.Part)
			ls = append(ls, it.Lease)
		}
		n := queryInt(t, conn, `SELECT count(*) FILTER (WHERE success) FROM pgque.group_ack('g', $1, $2, NULL, $3, NULL)`, txns, pus, ls)
		if n != int64(len(items)) {
			t.Fatalf("round %d: %d of %d acks succeeded", round, n, len(items))
		}
		acked = &items[0]
	}
	// First calls: the session plans (and caches) everything.
	popAck(1)
	popAck(2)
	if _, err := conn.Exec(ctxT(t), `SET debug_print_plan = on`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctxT(t), `SET client_min_messages = log`); err != nil {
		t.Fatal(err)
	}
	from := log.len()
	popAck(3)
	popAck(4)
	nCur, total := log.naming(from, cur)
	nPrev, _ := log.naming(from, prev)
	if nCur != 0 || nPrev != 0 {
		t.Errorf("pop_list + group_ack, called again in the session, planned %d statements over the current and %d over the previous event table (of %d plans made), want 0",
			nCur, nPrev, total)
	}
	// Positive control: a statement over the event table is seen.
	from = log.len()
	if _, err := conn.Exec(ctxT(t), `SELECT count(*) FROM `+queryText(t, e.conn, `SELECT $1::oid::regclass::text`, cur)); err != nil {
		t.Fatal(err)
	}
	if n, _ := log.naming(from, cur); n != 1 {
		t.Errorf("control: a count(*) over the current event table logged %d plans naming it, want 1", n)
	}
}

func queryText(t *testing.T, conn *pgx.Conn, sql string, args ...any) string {
	t.Helper()
	var s string
	if err := conn.QueryRow(ctxT(t), sql, args...).Scan(&s); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return s
}

// TestPopReadsBoundedByBatch: a pop of 1 message from a partition with a
// backlog of 120 (12,000 events in 100 partitions: the planner's choice
// depends on the table's size) reads a handful of events, not the backlog. The range
// read's in-progress-xid branch (group_range_sql) once let the planner scan
// the partition's every event and join the xids to them (twice per pop:
// the open and the next range) - even with no xid in progress.
func TestPopReadsBoundedByBatch(t *testing.T) {
	e := setup(t)
	e.exec(`SELECT count(*) FROM pgque.push(array_fill('rb'::text, ARRAY[12000]), ARRAY(SELECT 'p' || (g % 100) FROM generate_series(0, 11999) g),
	          array_fill('{"n":1}'::jsonb, ARRAY[12000]), NULL)`)
	e.exec(`SELECT pgque.broker_tick('rb')`)
	// subscribe (mode all) and take one message: the cursor's open range now has a backlog
	e.exec(`SELECT count(*) FROM pgque.pop_list('rb', 'g', ARRAY(SELECT part_id FROM pgque.partition WHERE part_name = 'p0'), 1, 1, NULL, true, 'all')`)
	tx, err := e.conn.Begin(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	eventReads := func() int64 { return eventReads(t, tx) }
	// (a delta inside the transaction: PostgreSQL 15's pg_stat_xact_* also
	// show earlier transactions' counts not yet flushed)
	base := eventReads()
	var got int64
	if err := tx.QueryRow(ctxT(t), `SELECT count(*) FROM pgque.pop_list('rb', 'g', ARRAY(SELECT part_id FROM pgque.partition WHERE part_name = 'p0'), 1, 1, NULL, true)
	                                 WHERE message_id IS NOT NULL`).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got != 1 {
		t.Fatalf("popped %d messages, want 1", got)
	}
	read := eventReads() - base
	// Open range: at most batch + 1 = 2 events per event table; the next
	// range is read the same way: 8 at most.
	if read > 8 {
		t.Errorf("a pop of 1 message read %d events (its partition holds 120), want at most 8", read)
	}
}

// eventReads is the number of event-table rows the transaction has read
// so far (tableReads).
func eventReads(t *testing.T, tx pgx.Tx) int64 {
	t.Helper()
	return tableReads(t, tx, `^event_[0-9]+_[0-9]+$`)
}

// tableReads is the number of rows of the pgque tables named like the
// pattern the transaction has read so far (index fetches and sequential
// reads; take a delta inside one transaction: PostgreSQL 15's
// pg_stat_xact_* also show earlier transactions' counts not yet flushed).
func tableReads(t *testing.T, tx pgx.Tx, pattern string) int64 {
	t.Helper()
	var n int64
	if err := tx.QueryRow(ctxT(t), `SELECT coalesce(sum(coalesce(s.idx_tup_fetch, 0) + coalesce(s.seq_tup_read, 0)), 0)
	    FROM pg_stat_xact_user_tables s WHERE s.schemaname = 'pgque' AND s.relname ~ $1`, pattern).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPopAckCursorReadsBoundedByItems: a pop over 2 candidates and an ack
// of 1 message read the cursor rows of the partitions they name, not
// every cursor of the group (300 here): the cursor lookups are keyed by
// (queue, group, partition) whatever the planner's row estimates.
func TestPopAckCursorReadsBoundedByItems(t *testing.T) {
	e := setup(t)
	e.seedGroupCursors("cr", 600, 300)
	if n := e.int64(`SELECT count(*) FROM pgque.group_cursor`); n != 300 {
		t.Fatalf("%d cursors, want 300 (the premise: the group has a cursor per partition)", n)
	}
	cursorReads := func(tx pgx.Tx) int64 { return tableReads(t, tx, `^group_cursor`) }
	tx, err := e.conn.Begin(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	// (deltas inside the transaction: PostgreSQL 15's pg_stat_xact_* also
	// show earlier transactions' counts not yet flushed)
	base := cursorReads(tx)
	var txn string
	var part, lease [16]byte
	if err := tx.QueryRow(ctxT(t), `SELECT transaction_id, partition_uuid, lease_id
	    FROM pgque.pop_list('cr', 'g', ARRAY(SELECT part_id FROM pgque.partition WHERE part_name IN ('p7', 'p8') ORDER BY part_id), 1, 1)
	   WHERE message_id IS NOT NULL`).Scan(&txn, &part, &lease); err != nil {
		t.Fatal(err)
	}
	popReads := cursorReads(tx) - base
	var ok bool
	if err := tx.QueryRow(ctxT(t), `SELECT success FROM pgque.group_ack('g', ARRAY[$1], ARRAY[$2::uuid], NULL, ARRAY[$3::uuid], NULL)`,
		txn, part, lease).Scan(&ok); err != nil || !ok {
		t.Fatalf("ack: %v %v", ok, err)
	}
	ackReads := cursorReads(tx) - popReads - base
	// pop: 2 candidates, each cursor row read by a few lookups (seed check,
	// cur, l, the UPDATE); ack: 1 cursor (lock, batch read, apply, UPDATE).
	if popReads > 20 || ackReads > 10 {
		t.Errorf("cursor rows read: pop %d (want at most 20), ack %d (want at most 10); the group has 300", popReads, ackReads)
	}
}

// TestGroupPlansNeverJIT: the generated statements run with jit = off. A
// generic plan's cost estimate grows with the backlog, and past
// jit_above_cost every call compiled its expressions again (JIT code is
// not cached with the plan): 285 ms of a 440 ms pop over 200,000 queued
// events. The session makes every statement JIT-worthy (jit_above_cost 0)
// and auto_explain reports, for each statement that ran, whether it was
// compiled; the positive control proves the check sees a compiled
// statement over the event table.
func TestGroupPlansNeverJIT(t *testing.T) {
	e := setup(t)
	if e.int64(`SELECT pg_jit_available()::int`) == 0 {
		t.Skip("this server has no JIT provider (built without LLVM): nothing to switch off")
	}
	e.exec(`SELECT count(*) FROM pgque.push(array_fill('jq'::text, ARRAY[40]),
	          ARRAY(SELECT 'p' || (g % 4) FROM generate_series(1, 40) g), array_fill('{"n":1}'::jsonb, ARRAY[40]), NULL)`)
	e.exec(`SELECT pgque.broker_tick('jq')`)

	var mu sync.Mutex
	var compiled []string // query texts of statements over event tables that were JIT-compiled
	cfg, err := pgx.ParseConfig(e.dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		if strings.Contains(n.Message, "JIT:") && strings.Contains(n.Message, "pgque.event_") {
			mu.Lock()
			compiled = append(compiled, n.Message)
			mu.Unlock()
		}
	}
	conn, err := pgx.ConnectConfig(ctxT(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, s := range []string{`LOAD 'auto_explain'`, `SET auto_explain.log_min_duration = 0`, `SET auto_explain.log_analyze = on`,
		`SET auto_explain.log_nested_statements = on`, `SET auto_explain.log_level = notice`, `SET client_min_messages = notice`,
		`SET jit = on`, `SET jit_above_cost = 0`, `SET jit_inline_above_cost = -1`, `SET jit_optimize_above_cost = -1`} {
		if _, err := conn.Exec(ctxT(t), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(compiled)
	}
	// Positive control: a statement over the event table, outside the
	// generated functions, is compiled.
	if _, err := conn.Exec(ctxT(t), `SELECT count(*) FROM pgque.event_1_0`); err != nil {
		t.Fatal(err)
	}
	if count() == 0 {
		t.Fatal("control: a statement over pgque.event_1_0 was not reported as JIT-compiled: the check cannot see JIT")
	}
	base := count()
	var n int
	if err := conn.QueryRow(ctxT(t), `
	    WITH m AS (SELECT * FROM pgque.pop_any('jq', 'g', 5, 2, NULL, false, 'all') WHERE message_id IS NOT NULL)
	    SELECT (SELECT count(*) FROM m) + (SELECT count(*) FROM pgque.group_ack('g',
	            (SELECT array_agg(transaction_id) FROM m), (SELECT array_agg(partition_uuid) FROM m), NULL,
	            (SELECT array_agg(lease_id) FROM m), NULL) WHERE success)`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 10 {
		t.Fatalf("popped + acked %d, want 5 + 5", n)
	}
	if err := conn.QueryRow(ctxT(t), `SELECT count(*) FROM pgque.group_reseed('jq', 'g')`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("group_reseed listed no partition of a queue with pending events")
	}
	mu.Lock()
	defer mu.Unlock()
	if got := compiled[base:]; len(got) != 0 {
		t.Errorf("%d statements of the pop / ack / reseed path were JIT-compiled; the first:\n%.600s", len(got), got[0])
	}
}

// TestReseedReadsBoundedAfterAnalyze: the candidate scan (group_reseed,
// pop_any) reads a few events per partition even when each partition's
// range holds a long consumed prefix and the event table has been
// analyzed (as autovacuum does). Its range bounds used to be plain ev_txid
// comparisons, which let the generic plan pick the (ev_txid) index and read
// every partition's events of the range, filtering them by partition:
// 16 partitions over 200,000 consumed events took 4.7 s.
func TestReseedReadsBoundedAfterAnalyze(t *testing.T) {
	e := setup(t)
	e.exec(`SELECT count(*) FROM pgque.push(array_fill('ra'::text, ARRAY[8000]), ARRAY(SELECT 'p' || (g % 16) FROM generate_series(0, 7999) g),
	          array_fill('{"n":1}'::jsonb, ARRAY[8000]), NULL)`)
	e.exec(`SELECT pgque.broker_tick('ra')`)
	// Consume all but the last event of each partition (auto-ack): the
	// cursors' positions sit at the end of a 499-event consumed prefix.
	for p := 0; p < 16; p++ {
		if n := e.int64(`SELECT count(*) FROM pgque.pop_list('ra', 'g', ARRAY(SELECT part_id FROM pgque.partition WHERE part_name = $1), 499, 1, NULL, true, 'all')
		                  WHERE message_id IS NOT NULL`, fmt.Sprintf("p%d", p)); n != 499 {
			t.Fatalf("partition p%d: popped %d, want 499", p, n)
		}
	}
	e.exec(`ANALYZE pgque.event_1_0, pgque.event_1_1, pgque.event_1_2`)
	conn := pgtest.Conn(t, e.dsn) // a new session: its plans are made with these statistics
	tx, err := conn.Begin(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	eventReads := func() int64 { return eventReads(t, tx) }
	for round := 1; round <= 2; round++ { // the first call plans, the second runs the cached generic plan
		base := eventReads()
		var listed int64
		if err := tx.QueryRow(ctxT(t), `SELECT count(*) FROM pgque.group_reseed('ra', 'g')`).Scan(&listed); err != nil {
			t.Fatal(err)
		}
		if listed != 16 {
			t.Fatalf("round %d: group_reseed listed %d partitions, want 16 (each has one pending event)", round, listed)
		}
		// The candidate scan reads events above the cursors' floor up to
		// its cap (64 per partition + 1,000: here all 8,000 are in one
		// transaction, so it stops at the cap and every partition becomes
		// a candidate); then the exact probe per partition reads the open
		// range's first pending event (1 row) - not the consumed prefix.
		// A few rows of slack per partition.
		if read := eventReads() - base; read > 64*16+1000+1+16*8 {
			t.Errorf("round %d: group_reseed over 16 partitions read %d events (8,000 in the table, 7,984 consumed), want at most %d",
				round, read, 64*16+1000+1+16*8)
		}
	}
}

// TestAckReadsEachCursorThrice: an ack of messages from 10 partitions
// touches each cursor row 3 times - the lock (which also reads the row the
// items are applied to), the batch read, the one UPDATE of every changed
// cursor - and never scans the group's other cursors. Before, each cursor
// was read again for the apply and written by its own UPDATE (4 reads and
// 10 UPDATE statements).
func TestAckReadsEachCursorThrice(t *testing.T) {
	e := setup(t)
	e.seedGroupCursors("ar", 200, 100)
	tx, err := e.conn.Begin(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	rows, err := tx.Query(ctxT(t), `SELECT transaction_id, partition_uuid, lease_id
	    FROM pgque.pop_list('ar', 'g', ARRAY(SELECT part_id FROM pgque.partition WHERE part_name ~ '^p[0-9]$' ORDER BY part_id), 100, 10)
	   WHERE message_id IS NOT NULL`)
	if err != nil {
		t.Fatal(err)
	}
	var txns []string
	var parts, leases []string
	for rows.Next() {
		var txn, part, lease string
		if err := rows.Scan(&txn, &part, &lease); err != nil {
			t.Fatal(err)
		}
		txns, parts, leases = append(txns, txn), append(parts, part), append(leases, lease)
	}
	distinct := map[string]bool{}
	for _, p := range parts {
		distinct[p] = true
	}
	if rows.Err() != nil || len(txns) != 19 || len(distinct) != 10 {
		t.Fatalf("popped %d messages of %d partitions (%v), want 19 of 10 (two in each of p0..p9 but the one the seeding pop took)",
			len(txns), len(distinct), rows.Err())
	}
	base := tableReads(t, tx, `^group_cursor`)
	var n int64
	if err := tx.QueryRow(ctxT(t), `SELECT count(*) FILTER (WHERE success AND lease_released)
	    FROM pgque.group_ack('g', $1::text[], $2::uuid[], NULL, $3::uuid[], NULL)`, txns, parts, leases).Scan(&n); err != nil || n != 10 {
		t.Fatalf("ack: %d released, %v; want 10", n, err)
	}
	if reads := tableReads(t, tx, `^group_cursor`) - base; reads != 30 {
		t.Errorf("the ack of 10 cursors read %d cursor rows, want 30 (3 each)", reads)
	}
	if n := e.int64(`SELECT count(*) FROM pgque.group_cursor WHERE gc_lease IS NOT NULL`); n != 0 {
		t.Errorf("%d leases left after the ack, want 0", n)
	}
}

// TestPopAckOneItemNotReplanned: pops of one candidate and acks of one
// item - the shape of a broker at a low rate - plan nothing anew once the
// session has made its first calls. Under plan_cache_mode auto the
// one-element arrays priced custom plans below the generic one, so
// group_seed's missing-cursor probe (inside pop_list) and group_ack's
// cursor lock and queue loop were planned on every call (pg_stat_statements
// in bench/broker at 100 msg/s: plans = calls, ~0.3 ms per pop and per ack).
func TestPopAckOneItemNotReplanned(t *testing.T) {
	e := setup(t)
	e.exec(`SELECT count(*) FROM pgque.push(array_fill('pr'::text, ARRAY[40]),
	          ARRAY(SELECT 'p' || (g % 4) FROM generate_series(1, 40) g), array_fill('{"n":1}'::jsonb, ARRAY[40]), NULL)`)
	e.exec(`SELECT pgque.broker_tick('pr')`)
	var cursorOID, partOID uint32
	if err := e.conn.QueryRow(ctxT(t), `SELECT 'pgque.group_cursor_0'::regclass::oid, 'pgque.partition'::regclass::oid`).Scan(&cursorOID, &partOID); err != nil {
		t.Fatal(err)
	}
	log := &planLog{}
	conn := log.conn(t, e.dsn)
	popAck := func(round int) {
		t.Helper()
		var txn string
		var part, lease [16]byte
		if err := conn.QueryRow(ctxT(t), `SELECT transaction_id, partition_uuid, lease_id
		    FROM pgque.pop_list('pr', 'g', ARRAY(SELECT part_id FROM pgque.partition WHERE part_name = 'p' || ($1::int % 4)), 1, 1, NULL, false, 'all')
		   WHERE message_id IS NOT NULL`, round).Scan(&txn, &part, &lease); err != nil {
			t.Fatalf("round %d: pop: %v", round, err)
		}
		if n := queryInt(t, conn, `SELECT count(*) FILTER (WHERE success) FROM pgque.group_ack('g', ARRAY[$1], ARRAY[$2::uuid], NULL, ARRAY[$3::uuid], NULL)`,
			txn, part, lease); n != 1 {
			t.Fatalf("round %d: ack failed", round)
		}
	}
	// First calls: the session plans (and caches) everything; plan_cache_mode
	// auto tries 5 custom plans before it compares with the generic one.
	for r := 0; r < 8; r++ {
		popAck(r)
	}
	if _, err := conn.Exec(ctxT(t), `SET debug_print_plan = on`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctxT(t), `SET client_min_messages = log`); err != nil {
		t.Fatal(err)
	}
	from := log.len()
	for r := 8; r < 12; r++ {
		popAck(r)
	}
	nCur, total := log.naming(from, cursorOID)
	nPart, _ := log.naming(from, partOID)
	if nCur != 0 || nPart != 0 {
		t.Errorf("4 more pops and acks of one item planned %d statements over group_cursor and %d over partition (of %d plans made), want 0",
			nCur, nPart, total)
	}
}

// seedGroupCursors pushes n messages to queue q over parts partitions
// p0.., ticks it, and pops one message in group g from every partition, so
// that the group has a cursor per partition.
func (e *engine) seedGroupCursors(q string, n, parts int) {
	e.t.Helper()
	e.exec(`SELECT count(*) FROM pgque.push(array_fill($1::text, ARRAY[$2::int]), ARRAY(SELECT 'p' || (g % $3::int) FROM generate_series(0, $2::int - 1) g),
	          array_fill('{"n":1}'::jsonb, ARRAY[$2::int]), NULL)`, q, n, parts)
	e.exec(`SELECT pgque.broker_tick($1)`, q)
	e.exec(`SELECT count(*) FROM pgque.pop_list($1, 'g', ARRAY(SELECT part_id FROM pgque.partition p JOIN pgque.queue q ON q.queue_id = p.part_queue
	                                                         WHERE q.queue_name = $1 AND p.part_name ~ '^p'), 1, 1, NULL, true, 'all')`, q)
}
