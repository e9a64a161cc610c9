package sql_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestPushFastPath: a push of the common shape (one existing queue, no
// transactionId, partitions interned) gives exactly what the general path
// gives: rows in input order, ids derived from the events, the queue's
// event ids drawn in input order, payloads stored as normalized JSON text,
// no ev_extra1; a partition not interned yet, a NULL payload or an empty
// queue name in the same shape still go through the general path (interned,
// or an error that changes nothing).
func TestPushFastPath(t *testing.T) {
	e := setup(t)
	e.exec(`SELECT count(*) FROM pgque.push(ARRAY['fq','fq','fq'], ARRAY['p0','p1',NULL], array_fill('{}'::jsonb, ARRAY[3]), NULL)`)
	qid := e.int64(`SELECT queue_id FROM pgque.queue WHERE queue_name = 'fq'`)
	before := e.int64(`SELECT count(*) FROM pgque.event_1_0`)
	got := pushRows(t, e.conn, 4, `SELECT `+pushCols+`
	    FROM pgque.push(ARRAY['fq','fq','fq','fq'], ARRAY['p1',NULL,'p0','Default'],
	                    ARRAY['{"b": 2, "a": 1}','[1, 2]','"s"','null']::jsonb[], ARRAY['',NULL,'',NULL])`)
	wantPart := []int{2, 0, 1, 0} // Default 0, p0 1, p1 2 (interned in name order)
	wantData := []string{`{"a": 1, "b": 2}`, `[1, 2]`, `"s"`, `null`}
	var lastEv int64
	for i, r := range got {
		if r.Idx != i || r.Txn != r.Msg || r.Queue != "fq" || r.State != "queued" || r.Part != wantPart[i] {
			t.Errorf("row %d: %+v, want idx %d, partition %d, queued, transaction id = message id", i, r, i, wantPart[i])
		}
		var ev int64
		var data string
		var extra *string
		if err := e.conn.QueryRow(ctxT(t), `SELECT ev_id, ev_data, ev_extra1 FROM pgque.event_1_0
		        WHERE pgque.message_uuid($1, ev_id, ev_time)::text = $2 AND ev_partition = $3 AND ev_type = 'default'`,
			qid, r.Msg, r.Part).Scan(&ev, &data, &extra); err != nil {
			t.Fatalf("row %d: the event of message %s: %v", i, r.Msg, err)
		}
		if data != wantData[i] || extra != nil || ev <= lastEv {
			t.Errorf("row %d: event %d data %q extra1 %v (previous id %d), want data %q, no extra1, ids ascending in input order",
				i, ev, data, extra, lastEv, wantData[i])
		}
		lastEv = ev
	}
	// A new partition among known ones: interned (general path).
	if n := e.int64(`SELECT count(*) FROM pgque.push(ARRAY['fq','fq'], ARRAY['p0','p9'], array_fill('{}'::jsonb, ARRAY[2]), NULL)
	                  WHERE status = 'queued'`); n != 2 {
		t.Errorf("push with a new partition: %d queued, want 2", n)
	}
	if n := e.int64(`SELECT part_id FROM pgque.partition WHERE part_queue = $1 AND part_name = 'p9'`, qid); n != 3 {
		t.Errorf("partition p9 id %d, want 3", n)
	}
	// Bad input in the fast shape: an error, nothing stored.
	for _, bad := range []string{
		`SELECT count(*) FROM pgque.push(ARRAY['fq','fq'], ARRAY['p0','p0'], ARRAY['{}', NULL]::jsonb[], NULL)`,
		`SELECT count(*) FROM pgque.push(ARRAY['',''], NULL, array_fill('{}'::jsonb, ARRAY[2]), NULL)`,
		`SELECT count(*) FROM pgque.push(ARRAY['fq','fq'], NULL, array_fill('{}'::jsonb, ARRAY[2]), ARRAY[NULL])`,
	} {
		if pe := e.sqlErr(bad); pe == nil || pe.Code != "22023" {
			t.Errorf("%s: error %v, want invalid_parameter_value", bad, pe)
		}
	}
	if n := e.int64(`SELECT count(*) FROM pgque.event_1_0`); n != before+6 {
		t.Errorf("event table holds %d events, want %d", n, before+6)
	}
}

// TestPushFastPathStatements: a push of the common shape runs a fixed,
// small number of statements whatever its size: the push itself, its
// lookup of the queue and partitions, the call of the generated function
// and that function's INSERT (4). The general path ran ~10 (queue loop,
// queue lookup, partition EXISTS, dedup EXISTS, the CTE, the insert call,
// its INSERT, the result query, the validations): most of a one-item
// push's CPU. Counted with auto_explain, which logs every statement the
// executor runs, nested ones included (PL/pgSQL simple expressions do not
// go through the executor and are not counted).
func TestPushFastPathStatements(t *testing.T) {
	e := setup(t)
	e.exec(`SELECT count(*) FROM pgque.push(ARRAY['fs','fs'], ARRAY['a','b'], array_fill('{}'::jsonb, ARRAY[2]), NULL)`)
	conn := newStmtCounter(t, e.dsn)
	count := func(sql string) int {
		t.Helper()
		conn.reset()
		if _, err := conn.Exec(ctxT(t), sql); err != nil {
			t.Fatal(err)
		}
		return conn.count()
	}
	one := `SELECT count(*) FROM pgque.push(ARRAY['fs'], ARRAY['a'], ARRAY['{"n":1}'::jsonb], NULL)`
	ten := `SELECT count(*) FROM pgque.push(array_fill('fs'::text, ARRAY[10]), ARRAY['a','b','a','b','a','b','a','b','a',NULL],
	        array_fill('{"n":1}'::jsonb, ARRAY[10]), array_fill(''::text, ARRAY[10]))`
	for _, s := range []string{one, ten} {
		if got := count(s); got != 4 {
			t.Errorf("%s: %d statements executed, want 4", s, got)
		}
	}
	// With transactionIds (fresh, repeated within the push): the
	// transactionId check and the dedup locks add 2.
	dd := `SELECT count(*) FROM pgque.push(array_fill('fs'::text, ARRAY[4]), ARRAY['a','b','a','a'],
	       array_fill('{"n":1}'::jsonb, ARRAY[4]), ARRAY['t1-' || txid_current(), 't1-' || txid_current(), NULL, 't1-' || txid_current()])`
	if got := count(dd); got != 6 {
		t.Errorf("%s: %d statements executed, want 6", dd, got)
	}
	// Two queues, partitions interned, no transactionIds: the queue and
	// payload check (1; the transactionId check is skipped without any)
	// and the loop over the queues (1), then per queue its lookup, its
	// items' lookup, the call and its INSERT (4 each). The general path
	// ran ~18.
	e.exec(`SELECT count(*) FROM pgque.push(ARRAY['fs2'], NULL, ARRAY['{}']::jsonb[], NULL)`)
	two := `SELECT count(*) FROM pgque.push(ARRAY['fs','fs2','fs'], ARRAY['a',NULL,'b'], array_fill('{}'::jsonb, ARRAY[3]), NULL)`
	if got := count(two); got != 11 {
		t.Errorf("%s: %d statements executed, want 11", two, got)
	}
	// Control: the general path (a new partition) is counted too.
	if got := count(`SELECT count(*) FROM pgque.push(ARRAY['fs'], ARRAY['new'], ARRAY['{"n":1}']::jsonb[], NULL)`); got <= 6 {
		t.Errorf("control: a push to a new partition executed %d statements, want more than 6", got)
	}
}

// TestPushFastPathDedup: transactionIds on the fast path (one existing
// queue, partitions interned) behave as on the general path: a repeat
// inside the push and a recorded one inside the window are duplicates
// carrying the original's message id, the same id in another partition is
// not, one outside the window is queued again; one event and one dedup row
// per fresh item, none for a duplicate.
func TestPushFastPathDedup(t *testing.T) {
	e := setup(t)
	e.exec(`SELECT count(*) FROM pgque.push(ARRAY['fd','fd'], ARRAY['p0','p1'], array_fill('{}'::jsonb, ARRAY[2]), NULL)`)
	push := func(parts, txns []*string) []pushRow {
		t.Helper()
		return pushRows(t, e.conn, len(parts), `SELECT `+pushCols+`
		    FROM pgque.push(array_fill('fd'::text, ARRAY[cardinality($1::text[])]), $1::text[],
		                    array_fill('{"k":1}'::jsonb, ARRAY[cardinality($1::text[])]), $2::text[])`, parts, txns)
	}
	s := func(v string) *string { return &v }
	counts := func() (int64, int64) {
		return e.int64(`SELECT count(*) FROM pgque.event_1_0`), e.int64(`SELECT count(*) FROM pgque.dedup`)
	}
	ev0, dd0 := counts()
	// Default 0 (every queue has it), p0 1, p1 2
	r := push([]*string{s("p0"), s("p1"), s("p0"), s("p0"), s("p0")}, []*string{s("t1"), s("t1"), s("t1"), nil, s("t2")})
	want := []struct {
		state string
		part  int
		txn   string
	}{{"queued", 1, "t1"}, {"queued", 2, "t1"}, {"duplicate", 1, "t1"}, {"queued", 1, ""}, {"queued", 1, "t2"}}
	for i, w := range want {
		txn := w.txn
		if txn == "" {
			txn = r[i].Msg
		}
		if r[i].Idx != i || r[i].State != w.state || r[i].Part != w.part || r[i].Txn != txn {
			t.Errorf("push 1 row %d: %+v, want %s in partition %d, transaction id %s", i, r[i], w.state, w.part, txn)
		}
	}
	if r[2].Msg != r[0].Msg || r[1].Msg == r[0].Msg || r[4].Msg == r[0].Msg || r[3].Msg == r[0].Msg {
		t.Errorf("push 1 message ids %+v: want item 2 = item 0, the others distinct", r)
	}
	if n := e.int64(`SELECT count(*) FROM pgque.event_1_0 e JOIN unnest($1::text[], $2::text[]) u(m, x)
	                   ON pgque.message_uuid(1, e.ev_id, e.ev_time)::text = u.m AND e.ev_extra1 IS NOT DISTINCT FROM u.x`,
		[]string{r[0].Msg, r[1].Msg, r[3].Msg, r[4].Msg}, []*string{s("t1"), s("t1"), nil, s("t2")}); n != 4 {
		t.Errorf("push 1: %d of its 4 fresh messages found as events with their transactionId", n)
	}
	if ev, dd := counts(); ev != ev0+4 || dd != dd0+3 {
		t.Errorf("push 1: +%d events, +%d dedup rows, want +4, +3", ev-ev0, dd-dd0)
	}
	r2 := push([]*string{s("p0"), s("p1"), s("p0")}, []*string{s("t2"), s("t3"), s("t2")})
	if r2[0].State != "duplicate" || r2[0].Msg != r[4].Msg || r2[2].State != "duplicate" || r2[2].Msg != r[4].Msg ||
		r2[1].State != "queued" || r2[1].Txn != "t3" {
		t.Errorf("push 2: %+v, want items 0 and 2 duplicates of %s, item 1 queued", r2, r[4].Msg)
	}
	if ev, dd := counts(); ev != ev0+5 || dd != dd0+4 {
		t.Errorf("after push 2: +%d events, +%d dedup rows, want +5, +4", ev-ev0, dd-dd0)
	}
	// Outside the window (default 3600 s): queued again.
	e.exec(`UPDATE pgque.dedup SET dd_time = now() - interval '2 hours' WHERE dd_txn = 't1' AND dd_partition = 1`)
	r3 := push([]*string{s("p0")}, []*string{s("t1")})
	if r3[0].State != "queued" || r3[0].Msg == r[0].Msg {
		t.Errorf("push 3 (outside the window): %+v, want queued with a new id", r3)
	}
	// A bad transactionId: an error, nothing stored.
	if pe := e.sqlErr(`SELECT count(*) FROM pgque.push(ARRAY['fd','fd'], ARRAY['p0','p1'], array_fill('{}'::jsonb, ARRAY[2]), ARRAY['ok', E'a\nb'])`); pe == nil || pe.Code != "22023" {
		t.Errorf("control character in a transactionId: error %v, want invalid_parameter_value", pe)
	}
	if ev, dd := counts(); ev != ev0+6 || dd != dd0+5 {
		t.Errorf("at the end: +%d events, +%d dedup rows, want +6, +5", ev-ev0, dd-dd0)
	}
}

// TestPushMixedQueuesFastPerQueue: in a push to several queues, each queue
// whose partitions are all interned takes the fast path's generated
// function, the others the general path, and every row keeps its input
// position: a transactionId repeated in another queue is not a duplicate,
// in the same queue and partition it is (inside the push and on a later
// push), a new partition is interned.
func TestPushMixedQueuesFastPerQueue(t *testing.T) {
	e := setup(t)
	e.exec(`SELECT count(*) FROM pgque.push(ARRAY['ma','mb'], ARRAY['p0','p1'], array_fill('{}'::jsonb, ARRAY[2]), NULL)`)
	push := func() []pushRow {
		t.Helper()
		got := pushRows(t, e.conn, 6, `SELECT `+pushCols+`
		    FROM pgque.push(ARRAY['mb','ma','mb','mb','ma','ma'], ARRAY['p1','p0','p1','p1','new','p0'],
		                    array_fill('{}'::jsonb, ARRAY[6]), ARRAY['x','x',NULL,'x',NULL,'y'])`)
		byIdx := make([]pushRow, 6)
		for _, r := range got {
			byIdx[r.Idx] = r
		}
		return byIdx
	}
	r := push()
	// ma: Default 0, p0 1, new 2; mb: Default 0, p1 1
	want := []struct {
		queue, state string
		part         int
	}{{"mb", "queued", 1}, {"ma", "queued", 1}, {"mb", "queued", 1}, {"mb", "duplicate", 1}, {"ma", "queued", 2}, {"ma", "queued", 1}}
	for i, w := range want {
		if r[i].Queue != w.queue || r[i].State != w.state || r[i].Part != w.part {
			t.Errorf("push 1 item %d: %+v, want %s %s in partition %d", i, r[i], w.state, w.queue, w.part)
		}
	}
	if r[3].Msg != r[0].Msg || r[1].Msg == r[0].Msg || r[1].Txn != "x" || r[2].Txn != r[2].Msg {
		t.Errorf("push 1: %+v: want item 3 a duplicate of item 0 only", r)
	}
	// Again (all interned now: both queues take the fast path).
	r2 := push()
	for i, w := range []string{"duplicate", "duplicate", "queued", "duplicate", "queued", "duplicate"} {
		if r2[i].State != w || r2[i].Queue != want[i].queue || r2[i].Part != want[i].part {
			t.Errorf("push 2 item %d: %+v, want %s", i, r2[i], w)
		}
	}
	if r2[0].Msg != r[0].Msg || r2[3].Msg != r[0].Msg || r2[1].Msg != r[1].Msg || r2[5].Msg != r[5].Msg {
		t.Errorf("push 2: %+v: duplicates must carry push 1's ids %+v", r2, r)
	}
	if n := e.int64(`SELECT count(*) FROM pgque.event_1_0`) + e.int64(`SELECT count(*) FROM pgque.event_2_0`); n != 2+5+2 {
		t.Errorf("%d events, want 9", n)
	}
	if n := e.int64(`SELECT count(*) FROM pgque.dedup`); n != 3 {
		t.Errorf("%d dedup rows, want 3", n)
	}
}

// TestPushRepeatableRead: a REPEATABLE READ caller interns a new partition
// and pushes through it in one push (its own rows are visible to its
// snapshot), and a second push of the same transactionId in the same
// transaction is a duplicate.
func TestPushRepeatableRead(t *testing.T) {
	e := setup(t)
	e.exec(`SELECT count(*) FROM pgque.push(ARRAY['rr'], NULL, ARRAY['{}']::jsonb[], NULL)`)
	tx, err := e.conn.BeginTx(ctxT(t), pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	var first, second, status string
	if err := tx.QueryRow(ctxT(t), `SELECT message_id::text FROM pgque.push(ARRAY['rr'], ARRAY['new'], ARRAY['{}']::jsonb[], ARRAY['t'])`).Scan(&first); err != nil {
		t.Fatal(err)
	}
	if err := tx.QueryRow(ctxT(t), `SELECT message_id::text, status FROM pgque.push(ARRAY['rr'], ARRAY['new'], ARRAY['{}']::jsonb[], ARRAY['t'])`).Scan(&second, &status); err != nil {
		t.Fatal(err)
	}
	if second != first || status != "duplicate" {
		t.Errorf("second push in the transaction: %s %s, want duplicate of %s", second, status, first)
	}
	if err := tx.Commit(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if n := e.int64(`SELECT count(*) FROM pgque.event_1_0 WHERE ev_partition = 1`); n != 1 {
		t.Errorf("%d events in partition new, want 1", n)
	}
}

// pushCols are the columns of pgque.push's result that pushRow scans.
const pushCols = `idx, message_id::text, transaction_id, queue_name, status, partition_id`

// pushRow is one row of pgque.push's result (pushCols).
type pushRow struct {
	Idx   int
	Msg   string
	Txn   string
	Queue string
	State string
	Part  int
}

// pushRows runs a push query selecting pushCols and returns its rows,
// failing the test unless there are want of them.
func pushRows(t *testing.T, conn *pgx.Conn, want int, query string, args ...any) []pushRow {
	t.Helper()
	rows, err := conn.Query(ctxT(t), query, args...)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[pushRow])
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != want {
		t.Fatalf("%d rows, want %d: %+v", len(got), want, got)
	}
	return got
}
