package broker_test

import (
	"testing"

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
