package broker_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/pgquectl/pgquectl/internal/broker"
	"github.com/pgquectl/pgquectl/internal/pgtest"
)

// Each test here starts a reader of pgque.group_cursor while a rotation of
// it (pgtest.HoldRotation: rows moved to the next child, the old child
// TRUNCATEd) holds its lock uncommitted, waits until the reader waits for
// that lock, lets the rotation commit, and checks the reader saw the rows
// where they moved. A reader that read with a snapshot taken before its
// wait (a STABLE function reads with its caller's) saw the old child empty
// and the moved rows uncommitted.

// rotationSetup: queue q, queue mode; partition a leased (its one event
// popped, not acked), b with one pending event and no cursor, c done (its
// one event popped and acked). Returns a's pop.
func rotationSetup(t *testing.T) (*env, broker.PopResult) {
	e := setup(t)
	e.pushN("q", "a", 0, 1)
	e.pushN("q", "b", 10, 1)
	e.pushN("q", "c", 20, 1)
	e.tick("q")
	leased := e.pop(broker.Pop{Queue: "q", Batch: 1}, "a")
	done := e.pop(broker.Pop{Queue: "q", Batch: 1}, "c")
	if len(leased.Messages) != 1 || len(done.Messages) != 1 {
		t.Fatalf("pops: %+v, %+v", leased, done)
	}
	if r := e.ack("", ackOf(done.Messages[0], "completed")); !r[0].Success {
		t.Fatalf("ack: %+v", r)
	}
	return e, leased
}

func TestLeaseLiveBehindRotation(t *testing.T) {
	e, leased := rotationSetup(t)
	h := pgtest.HoldRotation(t, e.dsn, "group_cursor")
	live := pgtest.DuringRotation(t, h, "group_lease_live", func() (bool, error) {
		return broker.LeaseLive(ctxT(t), e.conn, leased.LeaseID)
	})
	if !live {
		t.Fatalf("lease %s read as not live behind a group-cursor rotation", leased.LeaseID)
	}
}

func TestGroupPendingBehindRotation(t *testing.T) {
	e, _ := rotationSetup(t)
	h := pgtest.HoldRotation(t, e.dsn, "group_cursor")
	// Leased partitions left out (pop_any's call): only b.
	got := pgtest.DuringRotation(t, h, "group_pending", func() ([]string, error) {
		var names []string
		err := e.conn.QueryRow(ctxT(t), `
			SELECT coalesce(array_agg(p.part_name ORDER BY p.part_name), '{}')
			  FROM pgque.queue q
			 CROSS JOIN LATERAL pgque.group_pending(q.queue_id,
			           (SELECT g.grp_id FROM pgque.broker_group g WHERE g.grp_name = '__QUEUE_MODE__'), NULL, NULL, false) x
			  JOIN pgque.partition p ON p.part_queue = q.queue_id AND p.part_id = x.partition_id
			 WHERE q.queue_name = 'q'`).Scan(&names)
		return names, err
	})
	if len(got) != 1 || got[0] != "b" {
		t.Fatalf("group_pending behind a rotation: %v, want [b] (a leased, c done)", got)
	}
}

func TestGroupReseedBehindRotation(t *testing.T) {
	e, leased := rotationSetup(t)
	h := pgtest.HoldRotation(t, e.dsn, "group_cursor")
	got := pgtest.DuringRotation(t, h, "group_reseed", func() ([]broker.Candidate, error) {
		return broker.Reseed(ctxT(t), e.conn, "q", "", -1, 100)
	})
	if len(got) != 2 || got[0].Partition != "a" || got[1].Partition != "b" {
		t.Fatalf("reseed behind a rotation: %+v, want a (leased) and b", got)
	}
	if want := leased.Messages[0].LeaseUntil; !got[0].LeaseUntil.Equal(want) {
		t.Fatalf("reseed behind a rotation: a's lease until %v, want %v (its live lease)", got[0].LeaseUntil, want)
	}
}

func TestQueueDepthBehindRotation(t *testing.T) {
	e, _ := rotationSetup(t)
	h := pgtest.HoldRotation(t, e.dsn, "group_cursor")
	got := pgtest.DuringRotation(t, h, "queue_depth", func() ([]broker.PartitionDepth, error) {
		return broker.QueueDepth(ctxT(t), e.conn, "q", "")
	})
	pending := map[string]int64{}
	for _, d := range got {
		pending[d.Partition] = d.Pending
	}
	if pa, ok := pending["a"]; !ok || pa != 1 || pending["b"] != 1 || pending["c"] != 0 {
		t.Fatalf("depth behind a rotation: %+v, want pending a 1 (leased), b 1, c 0 (acked)", got)
	}
}

func TestGroupCursorInfoBehindRotation(t *testing.T) {
	e, _ := rotationSetup(t)
	h := pgtest.HoldRotation(t, e.dsn, "group_cursor")
	got := pgtest.DuringRotation(t, h, "group_cursor_info", func() ([]broker.GroupInfo, error) {
		return broker.Groups(ctxT(t), e.conn, "q")
	})
	if len(got) != 1 || got[0].Partitions != 2 || got[0].Leased != 1 {
		t.Fatalf("group_cursor_info behind a rotation: %+v, want 1 group with 2 cursors (a, c), 1 leased", got)
	}
}

// group_rotation_xmin decides whether maint_rotate_tables_step1 may switch
// out an event table: a cursor it missed could lose its unread events. The
// group's subscription moved to 'new' after its cursor on a was made, so
// the subscription's xmin is above the cursor's: reading the subscription
// alone gives the wrong, higher answer.
func TestGroupRotationXminBehindRotation(t *testing.T) {
	e := setup(t)
	e.pushN("q", "a", 0, 2)
	e.tick("q")
	p := e.pop(broker.Pop{Queue: "q", Group: "g", Batch: 1, SubscriptionMode: "all"}, "a")
	if len(p.Messages) != 1 {
		t.Fatalf("pop: %+v", p)
	}
	e.pushN("q", "b", 10, 1)
	e.tick("q")
	e.exec(`SELECT pgque.group_set_subscription('g', 'q', 'new', NULL)`)
	e.tick("q")
	const q = `SELECT pgque.group_rotation_xmin(queue_id)::text FROM pgque.queue WHERE queue_name = 'q'`
	const sub = `SELECT pg_snapshot_xmin(gs_lo)::text FROM pgque.group_subscription gs
	               JOIN pgque.broker_group g ON g.grp_id = gs.gs_group WHERE g.grp_name = 'g'`
	var want, subXmin string
	if err := e.conn.QueryRow(ctxT(t), q).Scan(&want); err != nil {
		t.Fatal(err)
	}
	if err := e.conn.QueryRow(ctxT(t), sub).Scan(&subXmin); err != nil {
		t.Fatal(err)
	}
	if want == subXmin {
		t.Fatalf("setup: the cursor's xmin %s is the subscription's: the test would not tell them apart", want)
	}
	h := pgtest.HoldRotation(t, e.dsn, "group_cursor")
	got := pgtest.DuringRotation(t, h, "group_rotation_xmin", func() (string, error) {
		var x string
		err := e.conn.QueryRow(ctxT(t), q).Scan(&x)
		return x, err
	})
	if got != want {
		t.Fatalf("group_rotation_xmin behind a rotation: %s, want %s (the cursor's; the subscription's is %s)", got, want, subXmin)
	}
}

// group_pending reads the queue's latest tick (the end of a cursor's next
// range) itself. Here the statement calling it takes its snapshot and
// waits (an advisory lock) before group_pending runs; meanwhile two ticks
// are made and the tick child holding the tick that was the latest in
// that snapshot is TRUNCATEd, as rotate_metadata truncates a child none of
// whose ticks tick_need still needs. Read with the caller's snapshot
// (STABLE), the tick table held no tick of the queue: no range end, and
// partition a's pending event went unlisted.
func TestGroupPendingTickBehindRotation(t *testing.T) {
	e := setup(t)
	e.pushN("q", "a", 0, 1)
	e.tick("q")
	var qid, gid int
	if err := e.conn.QueryRow(ctxT(t), `SELECT queue_id, pgque.group_subscribe(queue_id, '__QUEUE_MODE__', 'all', NULL)
	                                      FROM pgque.queue WHERE queue_name = 'q'`).Scan(&qid, &gid); err != nil {
		t.Fatal(err)
	}
	x := e.int(`SELECT (pgque.tick_gen(now()) + 1) % 3`)
	e.exec(`UPDATE pgque.tick SET tick_gen = $1 WHERE tick_gen <> $1`, x)
	oldTick := e.int(`SELECT max(tick_id) FROM pgque.tick WHERE tick_queue = $1`, qid)

	const key = 8675309
	locker := pgtest.Conn(t, e.dsn)
	w := pgtest.Conn(t, e.dsn)
	if _, err := locker.Exec(ctxT(t), `SELECT pg_advisory_lock($1)`, key); err != nil {
		t.Fatal(err)
	}
	type result struct {
		names []string
		err   error
	}
	ch := make(chan result, 1)
	go func() {
		var r result
		r.err = e.conn.QueryRow(ctxT(t), `
			SELECT coalesce(array_agg(p.part_name ORDER BY p.part_name), '{}')
			  FROM (SELECT 1 AS one FROM (SELECT pg_advisory_xact_lock($3)) s OFFSET 0) l
			 CROSS JOIN LATERAL pgque.group_pending($1, $2, NULL, NULL, l.one = 0) x
			  JOIN pgque.partition p ON p.part_queue = $1 AND p.part_id = x.partition_id`, qid, gid, key).Scan(&r.names)
		ch <- r
	}()
	wInt := func(sql string, args ...any) int64 {
		t.Helper()
		var v int64
		if err := w.QueryRow(ctxT(t), sql, args...).Scan(&v); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return v
	}
	for deadline := time.Now().Add(30 * time.Second); wInt(`SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
	        AND objid = $1 AND objsubid = 1 AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`, key) == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the reader does not wait for the advisory lock")
		}
	}
	for i := 0; i < 2; i++ {
		wInt(`SELECT count(*) FROM (SELECT pgque.force_next_tick('q')) f`)
		wInt(`SELECT count(*) FROM (SELECT pgque.ticker('q')) f`)
	}
	// The new ticks go to the current child; should the time slot have
	// moved on meanwhile, keep them out of the child truncated below.
	wInt(`WITH m AS (UPDATE pgque.tick SET tick_gen = ($1 + 1) % 3 WHERE tick_gen = $1 AND tick_id > $2 RETURNING 1)
	      SELECT count(*) FROM m`, x, oldTick)
	if n := wInt(fmt.Sprintf(`SELECT count(*) FROM pgque.tick_%d t JOIN pgque.tick_need() n ON n.queue_id = t.tick_queue
	                           WHERE t.tick_id >= n.min_tick`, x)); n != 0 {
		t.Fatalf("setup: tick_%d holds %d ticks a reader still needs", x, n)
	}
	if _, err := w.Exec(ctxT(t), fmt.Sprintf(`TRUNCATE pgque.tick_%d`, x)); err != nil {
		t.Fatal(err)
	}
	if _, err := locker.Exec(ctxT(t), `SELECT pg_advisory_unlock($1)`, key); err != nil {
		t.Fatal(err)
	}
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	if len(r.names) != 1 || r.names[0] != "a" {
		t.Fatalf("group_pending after its caller's snapshot lost the latest tick to a truncation: %v, want [a]", r.names)
	}
}

func TestMessageStateBehindRotation(t *testing.T) {
	e, leased := rotationSetup(t)
	m := leased.Messages[0]
	h := pgtest.HoldRotation(t, e.dsn, "group_cursor")
	got := pgtest.DuringRotation(t, h, "message_get", func() (broker.MessageDetail, error) {
		d, _, err := broker.GetMessage(ctxT(t), e.conn, "", m.PartitionUUID, m.TransactionID)
		return d, err
	})
	if got.Status != "processing" || got.QueueLease == nil || !got.QueueLease.Equal(m.LeaseUntil) {
		t.Fatalf("message behind a rotation: status %q, queue lease %v; want processing until %v", got.Status, got.QueueLease, m.LeaseUntil)
	}
}
