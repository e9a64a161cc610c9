package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgquectl/pgquectl/internal/pgtest"
)

// directEnv is a Combiner on a test database and a plain connection to
// compare with.
type directEnv struct {
	t    *testing.T
	db   *pgtest.EngineDB
	pool *pgxpool.Pool
	c    *Combiner
}

func newDirectEnv(t *testing.T) *directEnv {
	t.Helper()
	d := pgtest.NewEngineDB(t)
	pool, err := pgxpool.New(pgtest.Ctx(t), d.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return &directEnv{t: t, db: d, pool: pool, c: NewCombiner(pool, 1, 0, 30*time.Second)}
}

func (e *directEnv) push(items ...Item) []PushResult {
	e.t.Helper()
	res, err := e.c.Push(context.Background(), items)
	if err != nil {
		e.t.Fatal(err)
	}
	return res
}

// storedRow finds message m of queue in any of its event tables.
func (e *directEnv) storedRow(queue, m string) string {
	e.t.Helper()
	id := e.db.Int(`SELECT queue_id FROM pgque.queue WHERE queue_name = $1`, queue)
	var out string
	for n := 0; n < 3; n++ {
		var s string
		err := e.pool.QueryRow(pgtest.Ctx(e.t), fmt.Sprintf(`
		    SELECT p.part_name || ' ' || e.ev_type || ' ' || e.ev_data || ' ' || coalesce(e.ev_extra1, '-') || ' t%d'
		      FROM pgque.event_%d_%d e JOIN pgque.partition p ON p.part_queue = %d AND p.part_id = e.ev_partition
		     WHERE pgque.message_uuid(%d, e.ev_id, e.ev_time) = $1::uuid`, n, id, n, id, id), m).Scan(&s)
		if err == nil {
			if out != "" {
				e.t.Fatalf("message %s stored twice: %s and %s", m, out, s)
			}
			out = s
		}
	}
	return out
}

func (e *directEnv) curTable(queue string) int64 {
	e.t.Helper()
	return e.db.Int(`SELECT queue_cur_table FROM pgque.queue WHERE queue_name = $1`, queue)
}

// switchTables makes one event-table switch of queue (nobody reads it:
// step 1 runs once a tick is above the previous step 2).
func (e *directEnv) switchTables(queue string) {
	e.t.Helper()
	from := e.curTable(queue)
	e.db.Exec(`SELECT pgque.set_queue_config($1, 'rotation_period', '0')`, queue)
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		e.db.Exec(`SELECT pgque.maint_rotate_tables_step2()`)
		e.db.Exec(`SELECT pgque.broker_tick($1)`, queue)
		e.db.Exec(`SELECT pgque.maint_rotate_tables_step1($1)`, queue)
		if e.curTable(queue) != from {
			e.db.Exec(`SELECT pgque.maint_rotate_tables_step2()`)
			return
		}
	}
	e.t.Fatalf("queue %s: no event-table switch from table %d", queue, from)
}

// A push of one queue's items without transactionId goes through the
// queue's push_direct once its route is cached, and answers and stores
// exactly what pgque.push does: same result fields (index, status, queue,
// partition id, transactionId = message id), same event rows (partition,
// type, payload, no transactionId, current table). Other shapes (a
// transactionId, several queues, a partition not seen yet) take pgque.push.
func TestPushDirectSameAnswers(t *testing.T) {
	e := newDirectEnv(t)
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	cases := []struct {
		name   string
		items  []Item
		direct bool // the second push goes through push_direct
	}{
		{"one item, Default", []Item{{Queue: "d1", Payload: raw(`{"a": 1}`)}}, true},
		{"one item, named partition", []Item{{Queue: "d2", Partition: "p", Payload: raw(`"s"`)}}, true},
		{"three partitions mixed", []Item{
			{Queue: "d3", Partition: "b", Payload: raw(`1`)}, {Queue: "d3", Payload: raw(`[1, 2]`)},
			{Queue: "d3", Partition: "a", Payload: raw(`null`)}, {Queue: "d3", Partition: "b", Payload: raw(`{"x": "é 💥"}`)},
		}, true},
		{"quotes and spaces in names", []Item{{Queue: `d "4"`, Partition: `it's a p`, Payload: raw(`true`)}}, true},
		// queues whose routes are cached (the cases above)
		{"with a transactionId", []Item{{Queue: "d1", Payload: raw(`1`), TransactionID: "t"}}, false},
		{"two queues", []Item{{Queue: "d1", Payload: raw(`1`)}, {Queue: "d2", Partition: "p", Payload: raw(`2`)}}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e.t = t
			first := e.push(tc.items...) // pgque.push (no route yet), then the route is learnt
			before := e.c.routes.pushed.Load()
			items := tc.items
			if !tc.direct { // a retried transactionId would be a duplicate: fresh ones
				items = append([]Item(nil), tc.items...)
				for i := range items {
					if items[i].TransactionID != "" {
						items[i].TransactionID += "2"
					}
				}
			}
			second := e.push(items...)
			if got := e.c.routes.pushed.Load() - before; got != map[bool]int64{true: 1, false: 0}[tc.direct] {
				t.Fatalf("push_direct calls: %d, want direct %v", got, tc.direct)
			}
			for i := range tc.items {
				a, b := first[i], second[i]
				if b.Index != i || a.Index != i || b.Status != StatusQueued || b.Queue != a.Queue || b.PartitionID != a.PartitionID ||
					(items[i].TransactionID == "" && b.TransactionID != b.MessageID) || b.Txid == 0 || b.MessageID == a.MessageID {
					t.Errorf("item %d: general %+v, second %+v", i, a, b)
				}
				sa, sb := e.storedRow(a.Queue, a.MessageID), e.storedRow(b.Queue, b.MessageID)
				if tc.direct && (sa == "" || sa != sb) {
					t.Errorf("item %d stored: general %q, direct %q", i, sa, sb)
				}
			}
		})
	}
	// A partition not seen yet: pgque.push makes it (then it is cached).
	before := e.c.routes.pushed.Load()
	res := e.push(Item{Queue: "d1", Partition: "new", Payload: raw(`1`)})
	if e.c.routes.pushed.Load() != before || e.storedRow("d1", res[0].MessageID) != "new default 1 - t0" {
		t.Fatalf("push to a new partition: direct calls %d, stored %q", e.c.routes.pushed.Load()-before, e.storedRow("d1", res[0].MessageID))
	}
	res = e.push(Item{Queue: "d1", Partition: "new", Payload: raw(`2`)})
	if e.c.routes.pushed.Load() != before+1 || e.storedRow("d1", res[0].MessageID) != "new default 2 - t0" {
		t.Fatalf("second push to the new partition: direct calls %d, stored %q", e.c.routes.pushed.Load()-before, e.storedRow("d1", res[0].MessageID))
	}
}

// A cached route goes stale when the queue's event tables switch: the next
// push inserts nothing through it (its table is no longer current), goes
// through pgque.push into the new current table, and the route is looked
// up again. Each push is stored once, in the current table.
func TestPushDirectStaleAfterRotation(t *testing.T) {
	e := newDirectEnv(t)
	item := func(n int) Item { return Item{Queue: "r", Partition: "p", Payload: json.RawMessage(fmt.Sprint(n))} }
	e.push(item(0))
	e.push(item(1))
	if e.c.routes.pushed.Load() != 1 {
		t.Fatalf("push_direct calls %d, want 1", e.c.routes.pushed.Load())
	}
	e.switchTables("r")
	cur := e.curTable("r")
	res := e.push(item(2))
	if e.c.routes.pushed.Load() != 1 {
		t.Fatalf("after the switch: push_direct calls %d, want still 1 (stale route)", e.c.routes.pushed.Load())
	}
	if got, want := e.storedRow("r", res[0].MessageID), fmt.Sprintf("p default 2 - t%d", cur); got != want {
		t.Fatalf("after the switch: stored %q, want %q", got, want)
	}
	res = e.push(item(3))
	if e.c.routes.pushed.Load() != 2 {
		t.Fatalf("route looked up again: push_direct calls %d, want 2", e.c.routes.pushed.Load())
	}
	if got, want := e.storedRow("r", res[0].MessageID), fmt.Sprintf("p default 3 - t%d", cur); got != want {
		t.Fatalf("direct after the switch: stored %q, want %q", got, want)
	}
	if n := e.db.Events("r"); n != 4 {
		t.Fatalf("events of r: %d, want 4", n)
	}
	// The stale function itself, called directly: nothing.
	id := e.db.Int(`SELECT queue_id FROM pgque.queue WHERE queue_name = 'r'`)
	if n := e.db.Int(fmt.Sprintf(`SELECT count(*) FROM pgque.push_direct_q%d_t%d(ARRAY[1], ARRAY['1'::jsonb], 'r')`, id, (cur+2)%3)); n != 0 {
		t.Fatalf("push_direct of the previous table inserted %d rows", n)
	}
	if n := e.db.Events("r"); n != 4 {
		t.Fatalf("events of r: %d, want 4", n)
	}
}

// A queue dropped and created again under the same name gets a new id: the
// cached route's function is gone, the push goes through pgque.push (which
// creates the queue), nothing is lost.
func TestPushDirectQueueRecreated(t *testing.T) {
	e := newDirectEnv(t)
	it := Item{Queue: "x", Partition: "p", Payload: json.RawMessage(`1`)}
	e.push(it)
	e.push(it)
	if e.c.routes.pushed.Load() != 1 {
		t.Fatalf("push_direct calls %d, want 1", e.c.routes.pushed.Load())
	}
	e.db.Exec(`SELECT pgque.broker_delete_queue('x')`)
	res := e.push(it)
	if e.c.routes.pushed.Load() != 1 || e.storedRow("x", res[0].MessageID) != "p default 1 - t0" || e.db.Events("x") != 1 {
		t.Fatalf("after drop: direct calls %d, stored %q, events %d", e.c.routes.pushed.Load(), e.storedRow("x", res[0].MessageID), e.db.Events("x"))
	}
	e.push(it)
	if e.c.routes.pushed.Load() != 2 || e.db.Events("x") != 2 {
		t.Fatalf("new route: direct calls %d, events %d", e.c.routes.pushed.Load(), e.db.Events("x"))
	}
}

// push_direct inserts nothing for input that is not its shape: a partition
// id that is not the queue's, a NULL payload, arrays of different length,
// another queue's name.
func TestPushDirectRefusesBadInput(t *testing.T) {
	e := newDirectEnv(t)
	e.push(Item{Queue: "b", Partition: "p", Payload: json.RawMessage(`1`)})
	e.push(Item{Queue: "o", Payload: json.RawMessage(`1`)})
	id := e.db.Int(`SELECT queue_id FROM pgque.queue WHERE queue_name = 'b'`)
	fn := fmt.Sprintf("pgque.push_direct_q%d_t0", id)
	for _, args := range []string{
		`ARRAY[1, 99], ARRAY['1', '2']::jsonb[], 'b'`,
		`ARRAY[1, 1], ARRAY['1', NULL]::jsonb[], 'b'`,
		`ARRAY[1, 1], ARRAY['1']::jsonb[], 'b'`,
		`ARRAY[1], ARRAY['1']::jsonb[], 'o'`,
		`ARRAY[NULL::int], ARRAY['1']::jsonb[], 'b'`,
		`ARRAY[]::int[], ARRAY[]::jsonb[], 'b'`,
	} {
		if n := e.db.Int(`SELECT count(*) FROM ` + fn + `(` + args + `)`); n != 0 {
			t.Errorf("%s(%s): %d rows", fn, args, n)
		}
	}
	if n := e.db.Events("b"); n != 1 {
		t.Fatalf("events of b: %d, want 1", n)
	}
	if n := e.db.Int(fmt.Sprintf(`SELECT count(*) FROM %s(ARRAY[1, 0, 1], ARRAY['1', '2', '3']::jsonb[], 'b')`, fn)); n != 3 {
		t.Fatalf("good input: %d rows, want 3", n)
	}
}
