package broker_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgquectl/pgquectl/internal/broker"
	"github.com/pgquectl/pgquectl/internal/pgtest"
)

// maintRound confirms and attempts an event-table switch, each in its own
// transaction (as the ticker does), and returns the queue's current table.
func (e *env) maintRound(queue string) int64 {
	e.t.Helper()
	e.exec(`SELECT pgque.maint_rotate_tables_step2()`)
	e.exec(`SELECT pgque.maint_rotate_tables_step1($1)`, queue)
	return e.int(`SELECT queue_cur_table FROM pgque.queue WHERE queue_name = $1`, queue)
}

// Group cursors pin event-table rotation until the group has read the
// events; then idle cursors are advanced and rotation proceeds.
func TestGroupCursorsPinRotation(t *testing.T) {
	e := setup(t)
	e.pushN("q", "a", 0, 3)
	e.pushN("q", "b", 10, 3)
	e.exec(`SELECT pgque.set_queue_config('q', 'rotation_period', '0')`)
	e.tick("q")
	// Queue mode reaches partition a only; b is pinned by the subscription.
	r := e.pop(broker.Pop{Queue: "q", Batch: 1}, "a")
	if len(r.Messages) != 1 {
		t.Fatalf("pop %+v", r)
	}
	e.ack("", ackOf(r.Messages[0], ""))
	switches := 0
	last := e.int(`SELECT queue_cur_table FROM pgque.queue WHERE queue_name = 'q'`)
	for i := 0; i < 6; i++ {
		if cur := e.maintRound("q"); cur != last {
			switches++
			last = cur
		}
	}
	if switches != 0 {
		t.Fatalf("event tables switched %d times while a group still needs their events", switches)
	}
	var pins bool
	var part string
	if err := e.conn.QueryRow(ctxT(t), `SELECT pins_rotation, oldest_partition FROM pgque.group_cursor_info('q') WHERE group_name = '__QUEUE_MODE__'`).Scan(&pins, &part); err != nil {
		t.Fatal(err)
	}
	if !pins {
		t.Errorf("group_cursor_info does not say the group pins rotation")
	}
	// Everything is still there for the group.
	got := map[string][]int{}
	for _, p := range []string{"a", "b"} {
		for {
			r := e.pop(broker.Pop{Queue: "q", Batch: 2, LeaseSeconds: 1}, p)
			if len(r.Messages) == 0 {
				if len(r.Verdicts) == 1 && r.Verdicts[0].Kind == broker.VerdictLeased {
					time.Sleep(time.Until(r.Verdicts[0].Until) + 50*time.Millisecond)
					continue
				}
				break
			}
			got[p] = append(got[p], numbers(t, r.Messages)...)
			for _, m := range r.Messages {
				e.ack("", ackOf(m, ""))
			}
		}
	}
	if !slices.Equal(got["a"], seq(1, 2)) || !slices.Equal(got["b"], seq(10, 3)) {
		t.Fatalf("after held rotation the group read %v", got)
	}
	// Caught up: rotation proceeds, and keeps proceeding while idle (the
	// ticker ticks an idle queue now and then).
	// A switch needs a tick newer than the previous switch's step 2, so at
	// most every other round switches; a transaction held open anywhere in
	// the cluster (another test) also holds it back, so keep trying a while.
	for deadline := time.Now().Add(90 * time.Second); switches < 3 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		e.tick("q")
		if cur := e.maintRound("q"); cur != last {
			switches++
			last = cur
		}
	}
	if switches < 3 {
		var dbg string
		_ = e.conn.QueryRow(ctxT(t), `SELECT coalesce(q.queue_switch_step2::text, 'NULL') || ' gmin ' || coalesce(pgque.group_rotation_xmin(1)::text, 'NULL') || ' ' || (SELECT string_agg(gc_partition || ':' || gc_lo::text || '/' || gc_hi::text || ' ' || coalesce(gc_lease_until::text, '-') || ' pos ' || coalesce(gc_pos::text, '-'), '; ') FROM pgque.group_cursor) || ' tick ' || (SELECT max(tick_snapshot::text) FROM pgque.tick) FROM pgque.queue q`).Scan(&dbg)
		t.Fatalf("only %d switches after the group caught up: %s", switches, dbg)
	}
	// New events after the rotations are still delivered.
	e.pushN("q", "b", 20, 1)
	e.tick("q")
	if r := e.pop(broker.Pop{Queue: "q", Batch: 5}, "b"); !slices.Equal(numbers(t, r.Messages), []int{20}) {
		t.Fatalf("after rotation: %+v", r)
	}
}

// Pop/ack traffic of 16 busy consumers in 4 groups (plus queue mode), for
// 2 minutes, with a REPEATABLE READ transaction holding the xmin horizon
// the whole time and the rotation running as the ticker loop runs it: dead
// tuples of the group-cursor tables stay within 500 at every sample, the
// dedup tables (insert-only) have none. On a private cluster: a held
// transaction id pins the event-table rotation of every database of its
// cluster, and 2 minutes of it would fail other tests' switches (skipped
// with -short).
func TestDeadTuplesBoundedUnderHeldXmin(t *testing.T) {
	t.Parallel()
	dsn := pgtest.PrivateEngineDB(t, "deadtuples")
	d := &pgtest.EngineDB{T: t, DSN: dsn, Conn: pgtest.Conn(t, dsn)}
	e := &env{EngineDB: d, t: t, dsn: dsn, conn: d.Conn}
	e.exec(`CREATE EXTENSION IF NOT EXISTS pgstattuple`)
	e.exec(`SELECT pgque.set_setting('meta_rotation_period_ms', '1000')`)
	const (
		parts     = 8
		consumers = 16
		bound     = 500
	)
	const load = 2 * time.Minute
	for p := 0; p < parts; p++ {
		e.pushN("q", fmt.Sprintf("p%d", p), 0, 1500)
	}
	e.tick("q")
	cfg, err := pgxpool.ParseConfig(e.dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = consumers + 4
	pool, err := pgxpool.NewWithConfig(ctxT(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	holder, err := pool.Begin(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback(context.Background())
	if _, err := holder.Exec(ctxT(t), `SET TRANSACTION ISOLATION LEVEL REPEATABLE READ`); err != nil {
		t.Fatal(err)
	}
	var xmin string
	if err := holder.QueryRow(ctxT(t), `SELECT pg_current_xact_id()::text`).Scan(&xmin); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(ctxT(t), load)
	defer cancel()
	var wg sync.WaitGroup
	var pops, acks, pushes atomic.Int64
	for w := 0; w < consumers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			group := broker.QueueMode
			if w%5 != 0 {
				group = fmt.Sprintf("g%d", w%4)
			}
			for i := 0; ctx.Err() == nil; i++ {
				part := fmt.Sprintf("p%d", (i+w)%parts)
				r, err := broker.PopPartition(ctx, pool, broker.Pop{Queue: "q", Group: group, Batch: 2, SubscriptionMode: "all", LeaseSeconds: 30}, part)
				if err == nil && len(r.Messages) > 0 {
					pops.Add(1)
					acksOf := make([]broker.Ack, len(r.Messages))
					for j, m := range r.Messages {
						acksOf[j] = ackOf(m, "")
					}
					if res, err := broker.AckBatch(ctx, pool, group, acksOf); err == nil && len(res) > 0 && res[len(res)-1].Success {
						acks.Add(1)
					}
				}
				if i%4 == 0 {
					if _, err := broker.Push(ctx, pool, []broker.Item{{Queue: "q", Partition: part, Payload: payload(i),
						TransactionID: fmt.Sprintf("w%d-%d", w, i)}}); err == nil {
						pushes.Add(1)
					}
				}
			}
		}(w)
	}
	// The ticker loop: one session that ticks, and rotates every 100 ms
	// (its back-off state is per session).
	ticker, err := pool.Acquire(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	var rounds, missed atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer ticker.Release()
		for i := 0; ctx.Err() == nil; i++ {
			_, _ = ticker.Exec(ctx, `SELECT pgque.ticker()`)
			if i%2 == 0 {
				var misses string
				if err := ticker.QueryRow(ctx, `SELECT pgque.rotate_metadata(), current_setting('pgque.rotation_misses', true)`).Scan(new(int), &misses); err == nil {
					rounds.Add(1)
					if misses != "" && misses != "0" {
						missed.Add(1)
					}
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	var peak, dedupPeak, samples int64
	for ctx.Err() == nil {
		time.Sleep(500 * time.Millisecond)
		var dead, dd int64
		err := pool.QueryRow(context.Background(), `
			SELECT (SELECT coalesce(sum((pgstattuple(c.oid)).dead_tuple_count), 0)::bigint FROM pg_class c
			         WHERE c.relname IN ('group_cursor_0', 'group_cursor_1', 'group_cursor_2')),
			       (SELECT coalesce(sum((pgstattuple(c.oid)).dead_tuple_count), 0)::bigint FROM pg_class c
			         WHERE c.relname IN ('dedup_0', 'dedup_1', 'dedup_2'))`).Scan(&dead, &dd)
		if err != nil {
			t.Fatal(err)
		}
		samples++
		peak = max(peak, dead)
		dedupPeak = max(dedupPeak, dd)
	}
	wg.Wait()
	// The xmin was held the whole time.
	var still bool
	if err := holder.QueryRow(context.Background(), `SELECT true`).Scan(&still); err != nil || !still {
		t.Fatalf("the xmin holder died: %v", err)
	}
	moves := e.int(`SELECT coalesce(pg_sequence_last_value('pgque.group_cursor_gen_seq'), 0)`)
	t.Logf("%v: %d pops, %d acks, %d pushes by %d consumers under held xmin %s; %d samples, peak dead tuples: group cursors %d, dedup %d; %d cursor rotations; %d of %d rotation calls gave up on a lock",
		load, pops.Load(), acks.Load(), pushes.Load(), consumers, xmin, samples, peak, dedupPeak, moves, missed.Load(), rounds.Load())
	if acks.Load() < 500 {
		t.Fatalf("only %d acks: the load did not happen", acks.Load())
	}
	if moves < 1 {
		t.Errorf("the group cursors were never moved to another child")
	}
	if peak > bound {
		t.Errorf("group cursor dead tuples peaked at %d, bound %d", peak, bound)
	}
	if dedupPeak != 0 {
		t.Errorf("dedup dead tuples %d, want 0 (insert-only)", dedupPeak)
	}
}

// Dedup children are truncated once all their rows are out of every
// queue's window, never before.
func TestDedupRotation(t *testing.T) {
	e := setup(t)
	e.push(broker.Item{Queue: "q", Payload: payload(1), TransactionID: "recent"})
	cur := e.int(`SELECT pgque.dedup_gen(now())`)
	old, older := (cur+1)%3, (cur+2)%3
	// Child "old": rows two hours old (out of the default 1 h window).
	e.exec(`INSERT INTO pgque.dedup (dd_gen, dd_queue, dd_partition, dd_txn, dd_msg, dd_time)
	        SELECT $1, 1, 0, 'old-' || g, gen_random_uuid(), now() - interval '2 hours' FROM generate_series(1, 50) g`, old)
	// Child "older": one row still inside a window.
	e.exec(`INSERT INTO pgque.dedup (dd_gen, dd_queue, dd_partition, dd_txn, dd_msg, dd_time)
	        VALUES ($1, 1, 0, 'kept', gen_random_uuid(), now() - interval '30 minutes')`, older)
	e.exec(`SELECT pgque.group_rotate()`)
	if n := e.int(fmt.Sprintf(`SELECT count(*) FROM pgque.dedup_%d`, old)); n != 0 {
		t.Errorf("out-of-window child kept %d rows", n)
	}
	if n := e.int(fmt.Sprintf(`SELECT count(*) FROM pgque.dedup_%d`, older)); n != 1 {
		t.Errorf("child with a row inside the window: %d rows, want 1", n)
	}
	if n := e.int(fmt.Sprintf(`SELECT count(*) FROM pgque.dedup_%d`, cur)); n != 1 {
		t.Errorf("current child: %d rows, want 1", n)
	}
	// A longer window of some queue keeps the older child.
	e.exec(`SELECT pgque.set_queue_config('q', 'dedup_window', '20000')`)
	e.exec(`INSERT INTO pgque.dedup (dd_gen, dd_queue, dd_partition, dd_txn, dd_msg, dd_time)
	        VALUES ($1, 1, 0, 'long', gen_random_uuid(), now() - interval '2 hours')`, old)
	e.exec(`SELECT pgque.group_rotate()`)
	if n := e.int(fmt.Sprintf(`SELECT count(*) FROM pgque.dedup_%d`, old)); n != 1 {
		t.Errorf("row inside a long window truncated (%d left)", n)
	}
	if res := e.push(broker.Item{Queue: "q", Payload: payload(2), TransactionID: "long"}); res[0].Status != broker.StatusDuplicate {
		t.Errorf("2 h old transactionId with a 20000 s window: %+v", res[0])
	}
}
