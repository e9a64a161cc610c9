package broker_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/pgquectl/pgquectl/internal/broker"
	"github.com/pgquectl/pgquectl/internal/pgtest"
)

// curTable is the queue's current event table.
func (e *env) curTable(queue string) int64 {
	e.t.Helper()
	return e.int(`SELECT queue_cur_table FROM pgque.queue WHERE queue_name = $1`, queue)
}

// switchOnce confirms the pending switch (step 2), ticks, and tries step 1
// until the queue's current table changes (a switch needs a tick whose
// xmin is above the previous step 2: a transaction open elsewhere in the
// cluster holds that back for a while). Fails after the deadline.
func (e *env) switchOnce(queue string, between func()) {
	e.t.Helper()
	from := e.curTable(queue)
	e.exec(`SELECT pgque.maint_rotate_tables_step2()`)
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		e.exec(`SELECT pgque.broker_tick($1)`, queue)
		if between != nil {
			between()
			between = nil
		}
		e.exec(`SELECT pgque.maint_rotate_tables_step1($1)`, queue)
		if e.curTable(queue) != from {
			return
		}
	}
	var dbg string
	_ = e.conn.QueryRow(ctxT(e.t), `SELECT string_agg(gc_partition || ':' || gc_lo::text || '/' || gc_hi::text || ' pos ' || coalesce(gc_pos::text, '-'), '; ') FROM pgque.group_cursor`).Scan(&dbg)
	e.t.Fatalf("queue %s: no event-table switch from table %d: cursors %s", queue, from, dbg)
}

// Retention (retentionEnabled + retentionSeconds): a consumer group is not
// served events older than the retention, and the rotation moves its
// cursor past them (group_expire) - also when it has newer events pending
// - so the table holding them is switched out and truncated; the newer
// events are still delivered. No event row is deleted or updated.
//
// On a private cluster: an event-table switch waits for a tick whose xmin
// is above the previous switch, and other tests' transactions on a shared
// cluster held that back for seconds - long enough for the fresh event
// pushed during switch 2 to pass the retention too (CI: "after the
// expiry" popped nothing).
func TestRetentionExpiresEventsAndRotationReclaims(t *testing.T) {
	t.Parallel()
	dsn := pgtest.PrivateEngineDB(t, "retention")
	d := &pgtest.EngineDB{T: t, DSN: dsn, Conn: pgtest.Conn(t, dsn)}
	e := &env{EngineDB: d, t: t, dsn: dsn, conn: d.Conn}
	if _, err := broker.Configure(ctxT(t), e.conn, "q", nil, nil,
		json.RawMessage(`{"retentionEnabled": true, "retentionSeconds": 2}`)); err != nil {
		t.Fatal(err)
	}
	e.exec(`SELECT pgque.set_queue_config('q', 'rotation_period', '0')`)
	qid := e.int(`SELECT queue_id FROM pgque.queue WHERE queue_name = 'q'`)
	t0 := e.int(`SELECT queue_cur_table FROM pgque.queue WHERE queue_id = $1`, qid)
	old := func() int64 {
		return e.int(`SELECT pg_relation_size(format('pgque.%I', 'event_' || $1::int || '_' || $2::int)::regclass)`, qid, t0)
	}
	e.pushN("q", "a", 0, 50)
	e.tick("q")
	g := broker.Pop{Queue: "q", Group: "g", Batch: 1, AutoAck: true, SubscriptionMode: "all"}
	if r := e.pop(g, "a"); !slices.Equal(numbers(t, r.Messages), []int{0}) {
		t.Fatalf("first pop: %+v", r)
	}
	sizeBefore := old()
	if sizeBefore == 0 {
		t.Fatal("the event table holds no page before the rotation")
	}
	time.Sleep(2100 * time.Millisecond) // events 1..49 are now past the retention
	g.Batch = 10
	if r := e.pop(g, "a"); len(r.Messages) != 0 {
		t.Fatalf("expired events delivered: %v", numbers(t, r.Messages))
	}
	// Switch 1 (away from table t0). Then, once the tick a next switch
	// would move cursors to exists, a fresh event: pending for g, after
	// the expired ones. Switch 2 needs g past table t0: only expired
	// events of g are visible there, so the rotation moves g (it has a
	// pending event, so it is not idle).
	e.switchOnce("q", nil)
	e.switchOnce("q", func() { e.pushN("q", "a", 100, 1) })
	e.tick("q")
	if r := e.pop(g, "a"); !slices.Equal(numbers(t, r.Messages), []int{100}) {
		t.Fatalf("after the expiry: %+v", r)
	}
	// Switch 3 truncates table t0.
	e.switchOnce("q", nil)
	if n := e.int(fmt.Sprintf(`SELECT count(*) FROM pgque.event_%d_%d`, qid, t0)); n != 0 {
		t.Fatalf("table %d still holds %d events", t0, n)
	}
	if s := old(); s != 0 {
		t.Fatalf("table %d: %d bytes after its rotation (%d before)", t0, s, sizeBefore)
	}
}

// Retention never skips events younger than the retention: a group with
// an unread backlog inside the retention still pins the rotation.
func TestRetentionKeepsUnexpiredBacklog(t *testing.T) {
	e := setup(t)
	if _, err := broker.Configure(ctxT(t), e.conn, "q", nil, nil,
		json.RawMessage(`{"retentionEnabled": true, "retentionSeconds": 3600}`)); err != nil {
		t.Fatal(err)
	}
	e.exec(`SELECT pgque.set_queue_config('q', 'rotation_period', '0')`)
	e.pushN("q", "a", 0, 5)
	e.tick("q")
	g := broker.Pop{Queue: "q", Group: "g", Batch: 1, AutoAck: true, SubscriptionMode: "all"}
	if r := e.pop(g, "a"); !slices.Equal(numbers(t, r.Messages), []int{0}) {
		t.Fatalf("first pop: %+v", r)
	}
	switches := 0
	last := e.curTable("q")
	for i := 0; i < 8; i++ {
		e.tick("q")
		if cur := e.maintRound("q"); cur != last {
			switches++
			last = cur
		}
	}
	// The first switch (away from the table the events are in) may pass;
	// the second needs g past them.
	if switches > 1 {
		t.Fatalf("%d event-table switches while g has unexpired events pending", switches)
	}
	g.Batch = 10
	if r := e.pop(g, "a"); !slices.Equal(numbers(t, r.Messages), seq(1, 4)) {
		t.Fatalf("backlog after the rotation attempts: %v", numbers(t, r.Messages))
	}
}
