package sql_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgquectl/pgquectl/internal/pgtest"
)

// broker_tick(queue, txids) makes no tick when the queue's latest tick
// already sees every given transaction (it returns that tick, ticked =
// false, and writes nothing), and ticks otherwise: a transaction committed
// after the latest tick's snapshot, one still running, or no txids at all.
// Before, the broker ticked after every push that committed while a tick
// was in flight, even when that tick (or the scheduled ticker's) had
// already covered it.
func TestBrokerTickSkipsCoveredTransactions(t *testing.T) {
	e := setup(t)
	e.exec(`SELECT pgque.create_queue('bc')`)
	qid := e.int64(`SELECT queue_id FROM pgque.queue WHERE queue_name = 'bc'`)
	ticks := func() int64 { return e.int64(`SELECT count(*) FROM pgque.tick WHERE tick_queue = $1`, qid) }
	push := func() int64 {
		t.Helper()
		return e.int64(`SELECT max(pg_current_xact_id()::text::bigint) FROM pgque.push(ARRAY['bc'], NULL, ARRAY['1'::jsonb], NULL)`)
	}
	type res struct {
		tick   *int64
		ticked *bool
	}
	call := func(txids any) res {
		t.Helper()
		var r res
		if err := e.conn.QueryRow(ctxT(t), `SELECT tick_id, ticked FROM pgque.broker_tick('bc', $1::bigint[])`, txids).Scan(&r.tick, &r.ticked); err != nil {
			t.Fatal(err)
		}
		return r
	}
	latest := func() int64 {
		return e.int64(`SELECT max(tick_id) FROM pgque.tick WHERE tick_queue = $1`, qid)
	}

	tx1 := push()
	n := ticks()
	r := call([]int64{tx1})
	if r.tick == nil || r.ticked == nil || !*r.ticked || ticks() != n+1 || *r.tick != latest() {
		t.Fatalf("first call for a push the latest tick does not see: %+v, %d ticks made; want a new tick", r, ticks()-n)
	}
	// The same call again: the latest tick sees tx1, nothing to do.
	first := *r.tick
	r = call([]int64{tx1})
	if r.tick == nil || *r.tick != first || r.ticked == nil || *r.ticked || ticks() != n+1 {
		t.Fatalf("second call for the same push: %+v, %d ticks made; want tick %d returned, ticked false, no new tick", r, ticks()-n, first)
	}
	// A push committed after that tick: not covered, even beside tx1.
	tx2 := push()
	r = call([]int64{tx1, tx2})
	if r.tick == nil || *r.tick == first || r.ticked == nil || !*r.ticked || ticks() != n+2 {
		t.Fatalf("call for a push committed after the latest tick: %+v, %d ticks made; want a new tick", r, ticks()-n)
	}
	if c := e.int64(`SELECT count(*) FROM pgque.tick t WHERE t.tick_queue = $1 AND t.tick_id = $2
	                   AND pg_visible_in_snapshot($3::bigint::text::xid8, t.tick_snapshot)`, qid, *r.tick, tx2); c != 1 {
		t.Fatalf("the new tick does not see the push it was made for")
	}
	// A transaction still running is never covered.
	ctx := ctxT(t)
	other := pgtest.Conn(t, e.dsn)
	open, err := other.BeginTx(ctx, pgx.TxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = open.Rollback(ctx) }()
	var tx3 int64
	if err := open.QueryRow(ctx, `SELECT pg_current_xact_id()::text::bigint`).Scan(&tx3); err != nil {
		t.Fatal(err)
	}
	r = call([]int64{tx3})
	if r.ticked == nil || !*r.ticked || ticks() != n+3 {
		t.Fatalf("call for a running transaction: %+v, %d ticks made; want a new tick", r, ticks()-n)
	}
	// No txids (or a NULL among them): tick whatever the snapshots say.
	for i, arg := range []any{nil, []int64{}, []*int64{&tx1, nil}} {
		r = call(arg)
		if r.ticked == nil || !*r.ticked || ticks() != n+4+int64(i) {
			t.Fatalf("call %d without usable txids (%v): %+v, %d ticks made; want a new tick each", i, arg, r, ticks()-n)
		}
	}
	if pe := e.sqlErr(`SELECT * FROM pgque.broker_tick('nope', ARRAY[1]::bigint[])`); pe.Code != "42704" {
		t.Fatalf("unknown queue: %s %s, want 42704", pe.Code, pe.Message)
	}
	if pe := e.sqlErr(`BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT * FROM pgque.broker_tick('bc', ARRAY[1]::bigint[]); COMMIT`); pe.Code != "25000" {
		t.Fatalf("REPEATABLE READ: %s %s, want 25000", pe.Code, pe.Message)
	}
	e.exec(`ROLLBACK`)
	if pe := e.sqlErr(`SELECT * FROM pgque.broker_tick('bc', ARRAY[1, -5]::bigint[])`); pe.Code != "22023" {
		t.Fatalf("negative txid: %s %s, want 22023", pe.Code, pe.Message)
	}
	if got := ticks(); got != n+6 {
		t.Fatalf("%d ticks made in all, want 6", got-n)
	}
}

// A broker tick that finds the queue's tick lock held waits for the
// holder; when the holder's tick (a scheduled ticker's, another broker's)
// covers the pushes, it returns that tick instead of ticking again after
// it. Before, it always ticked a second time.
func TestBrokerTickAfterWaitTakesTheHoldersTick(t *testing.T) {
	e := setup(t)
	e.exec(`SELECT pgque.create_queue('bw')`)
	qid := e.int64(`SELECT queue_id FROM pgque.queue WHERE queue_name = 'bw'`)
	ticks := func() int64 { return e.int64(`SELECT count(*) FROM pgque.tick WHERE tick_queue = $1`, qid) }
	tx1 := e.int64(`SELECT max(pg_current_xact_id()::text::bigint) FROM pgque.push(ARRAY['bw'], NULL, ARRAY['1'::jsonb], NULL)`)
	n := ticks()
	ctx := ctxT(t)
	// The holder takes the tick lock and ticks (seeing tx1), uncommitted.
	holder, err := pgtest.Conn(t, e.dsn).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Rollback(ctx) }()
	var held int64
	if err := holder.QueryRow(ctx, `SELECT pg_advisory_xact_lock(1885827446, $1::int), pgque.broker_tick('bw')`, qid).Scan(new(any), &held); err != nil {
		t.Fatal(err)
	}
	type out struct {
		tick   *int64
		ticked *bool
		err    error
	}
	done := make(chan out, 1)
	caller := pgtest.Conn(t, e.dsn)
	go func() {
		var o out
		o.err = caller.QueryRow(ctx, `SELECT tick_id, ticked FROM pgque.broker_tick('bw', $1::bigint[])`, []int64{tx1}).Scan(&o.tick, &o.ticked)
		done <- o
	}()
	for deadline := time.Now().Add(20 * time.Second); e.int64(`SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = 1885827446 AND objid = $1 AND NOT granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`, qid) != 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("broker_tick did not wait for the holder of the tick lock")
		}
	}
	if err := holder.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	o := <-done
	if o.err != nil || o.tick == nil || o.ticked == nil {
		t.Fatalf("broker_tick after the holder committed: %+v", o)
	}
	if *o.tick != held || *o.ticked {
		t.Errorf("broker_tick returned tick %d ticked %v; want the holder's tick %d, ticked false", *o.tick, *o.ticked, held)
	}
	if d := ticks() - n; d != 1 {
		t.Errorf("%d ticks made, want 1 (the holder's)", d)
	}
}
