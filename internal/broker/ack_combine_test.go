package broker_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgquectl/pgquectl/internal/broker"
	"github.com/pgquectl/pgquectl/internal/pgtest"
)

// ackCombEnv is an AckCombiner (one transaction at a time) on a test
// database, and a way to hold its first transaction inside
// pgque.group_ack: the test's own transaction holds the cursor row of
// (queue "q", partition "hold", group "g") FOR UPDATE, which an ack there
// must lock.
type ackCombEnv struct {
	*env
	pool *pgxpool.Pool
	c    *broker.AckCombiner
	msgs map[string]broker.Message // partition -> the message leased there to group g
	held chan error
}

// newAckCombEnv pushes one message to each of q's partitions "hold" and
// parts (two to each of twos), and leases each partition's messages to
// group g (one batch per partition).
func newAckCombEnv(t *testing.T, timeout time.Duration, parts []string, twos ...string) *ackCombEnv {
	t.Helper()
	e := &ackCombEnv{env: setup(t), msgs: map[string]broker.Message{}, held: make(chan error, 1)}
	pool, err := pgxpool.New(ctxT(t), e.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	e.pool = pool
	e.c = broker.NewAckCombiner(pool, 1, 0, timeout)
	all := append([]string{"hold"}, parts...)
	for _, p := range all {
		e.pushN("q", p, 0, 1)
	}
	for _, p := range twos {
		e.pushN("q", p, 0, 2)
	}
	e.tick("q")
	for _, p := range append(all, twos...) {
		r := e.pop(broker.Pop{Queue: "q", Group: "g", Batch: 2, SubscriptionMode: "all"}, p)
		if len(r.Messages) == 0 {
			t.Fatalf("pop %s: nothing", p)
		}
		for i, m := range r.Messages {
			e.msgs[fmt.Sprint(p, "#", i)] = m
		}
		e.msgs[p] = r.Messages[0]
	}
	return e
}

// hold starts an ack of partition "hold" that blocks on its cursor's row
// lock (until release) and returns once it waits there.
func (e *ackCombEnv) hold() (release func()) {
	e.t.Helper()
	conn := pgtest.Conn(e.t, e.dsn)
	ctx := ctxT(e.t)
	if _, err := conn.Exec(ctx, `BEGIN`); err != nil {
		e.t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `SELECT 1 FROM pgque.group_cursor gc JOIN pgque.partition p ON p.part_id = gc.gc_partition AND p.part_queue = gc.gc_queue
	                              WHERE p.part_name = 'hold' FOR UPDATE OF gc`); err != nil {
		e.t.Fatal(err)
	}
	go func() {
		res, err := e.c.Ack(context.Background(), broker.AnyTenant, []broker.AckPart{{Group: "g", Acks: []broker.Ack{ackOf(e.msgs["hold"], "")}}})
		if err == nil && (len(res) != 1 || len(res[0]) != 1 || !res[0][0].Success) {
			err = fmt.Errorf("held ack: %+v", res)
		}
		e.held <- err
	}()
	e.waitFor("the held ack to wait for its cursor", func() bool {
		return e.int(`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`) == 1
	})
	return func() {
		e.t.Helper()
		if _, err := conn.Exec(ctx, `ROLLBACK`); err != nil {
			e.t.Fatal(err)
		}
		if err := <-e.held; err != nil {
			e.t.Fatal(err)
		}
	}
}

func (e *ackCombEnv) waitFor(what string, cond func() bool) {
	e.t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for %s", what)
		}
	}
}

type ackReq struct {
	scope broker.Scope
	parts []broker.AckPart
}

type ackOutcome struct {
	res [][]broker.AckResult
	err error
}

// start sends each request in its own goroutine, in order (each queued
// before the next starts), and returns their outcomes' channels.
func (e *ackCombEnv) start(ctx context.Context, reqs ...ackReq) []chan ackOutcome {
	e.t.Helper()
	out := make([]chan ackOutcome, len(reqs))
	for i, r := range reqs {
		ch := make(chan ackOutcome, 1)
		out[i] = ch
		before := e.c.Waiting()
		go func() {
			res, err := e.c.Ack(ctx, r.scope, r.parts)
			ch <- ackOutcome{res, err}
		}()
		e.waitFor("the ack to queue", func() bool { return e.c.Waiting() == before+1 })
	}
	return out
}

func one(group string, acks ...broker.Ack) ackReq {
	return ackReq{scope: broker.AnyTenant, parts: []broker.AckPart{{Group: group, Acks: acks}}}
}

// cursorTxn is the transaction that last wrote the cursor of (q,
// partition) for group.
func (e *ackCombEnv) cursorTxn(group, partition string) int64 {
	e.t.Helper()
	return e.int(`SELECT gc.xmin::text::bigint FROM pgque.group_cursor gc
	                JOIN pgque.partition p ON p.part_id = gc.gc_partition AND p.part_queue = gc.gc_queue
	                JOIN pgque.broker_group g ON g.grp_id = gc.gc_group
	               WHERE p.part_name = $1 AND g.grp_name = $2`, partition, group)
}

// leased says whether (q, partition)'s cursor for group still holds a lease.
func (e *ackCombEnv) leased(group, partition string) bool {
	e.t.Helper()
	return e.int(`SELECT count(*) FROM pgque.group_cursor gc
	                JOIN pgque.partition p ON p.part_id = gc.gc_partition AND p.part_queue = gc.gc_queue
	                JOIN pgque.broker_group g ON g.grp_id = gc.gc_group
	               WHERE p.part_name = $1 AND g.grp_name = $2 AND gc.gc_lease IS NOT NULL`, partition, group) == 1
}

// Ack requests that arrive while the transaction slot is busy go out in
// ONE transaction (every cursor they wrote carries its xmin): one
// group_ack per consumer group, each request getting its own answers.
func TestAckCombinerMergesWaitingAcks(t *testing.T) {
	var parts []string
	for i := range 10 {
		parts = append(parts, fmt.Sprintf("p%d", i))
	}
	e := newAckCombEnv(t, 30*time.Second, parts)
	// Group g2 leases p0 too: the last request acks in two groups.
	r := e.pop(broker.Pop{Queue: "q", Group: "g2", Batch: 1, SubscriptionMode: "all"}, "p0")
	release := e.hold()
	var reqs []ackReq
	for i := range 9 {
		reqs = append(reqs, one("g", ackOf(e.msgs[parts[i]], "")))
	}
	reqs = append(reqs, ackReq{scope: broker.AnyTenant, parts: []broker.AckPart{
		{Group: "g2", Acks: []broker.Ack{ackOf(r.Messages[0], "")}},
		{Group: "g", Acks: []broker.Ack{ackOf(e.msgs["p9"], "")}},
	}})
	outs := e.start(context.Background(), reqs...)
	release()
	for i, ch := range outs {
		o := <-ch
		if o.err != nil {
			t.Fatalf("request %d: %v", i, o.err)
		}
		if len(o.res) != len(reqs[i].parts) {
			t.Fatalf("request %d: %d answers for %d parts", i, len(o.res), len(reqs[i].parts))
		}
		for k, p := range reqs[i].parts {
			if len(o.res[k]) != len(p.Acks) {
				t.Fatalf("request %d part %d: %+v", i, k, o.res[k])
			}
			for j, a := range o.res[k] {
				if a.Index != j || a.TransactionID != p.Acks[j].TransactionID || !a.Success || a.Noop || !a.LeaseReleased || a.Queue != "q" {
					t.Errorf("request %d part %d result %d: %+v", i, k, j, a)
				}
			}
		}
	}
	txn := e.cursorTxn("g", "p0")
	for _, p := range parts {
		if x := e.cursorTxn("g", p); x != txn || e.leased("g", p) {
			t.Errorf("cursor (g, %s): written by txn %d (p0's: %d), leased %v; want one transaction for all, released",
				p, x, txn, e.leased("g", p))
		}
	}
	if x := e.cursorTxn("g2", "p0"); x != txn {
		t.Errorf("cursor (g2, p0) written by txn %d, want %d (the same transaction)", x, txn)
	}
	if x := e.cursorTxn("g", "hold"); x == txn {
		t.Errorf("the held ack shares the combined transaction %d", txn)
	}
	if st := e.c.Stats(); st != (broker.AckCombinerStats{Transactions: 2, Statements: 3, Requests: 11}) {
		t.Errorf("stats %+v, want 2 transactions (the held ack; the ten), 3 group_ack calls, 11 requests", st)
	}
}

// A combined transaction that fails in a statement (a NUL in one
// request's transactionId: PostgreSQL text refuses it) acks nothing; each
// request then runs alone, so only the faulty one fails. Bad items that
// group_ack answers per item (a malformed lease id, an unknown group) fail
// alone within their request, as when it runs alone.
func TestAckCombinerFailedTransactionRetriesAlone(t *testing.T) {
	e := newAckCombEnv(t, 30*time.Second, []string{"a", "b", "c", "d"})
	release := e.hold()
	bad := ackOf(e.msgs["b"], "")
	bad.TransactionID = "bad\x00id"
	malformed := ackOf(e.msgs["c"], "")
	malformed.LeaseID = "not-a-uuid"
	outs := e.start(context.Background(),
		one("g", ackOf(e.msgs["a"], "")),
		one("g", ackOf(e.msgs["b"], ""), bad),
		ackReq{scope: broker.AnyTenant, parts: []broker.AckPart{
			{Group: "g", Acks: []broker.Ack{malformed}},
			{Group: "nosuchgroup", Acks: []broker.Ack{ackOf(e.msgs["c"], "")}},
		}},
		one("g", ackOf(e.msgs["d"], "")),
	)
	release()
	for i, ch := range outs {
		o := <-ch
		switch i {
		case 1:
			if o.err == nil {
				t.Errorf("request with a NUL in a transactionId: %+v, want an error", o.res)
			}
		case 2:
			if o.err != nil || len(o.res) != 2 || o.res[0][0].Success || o.res[0][0].Error != "invalid or expired lease" ||
				o.res[1][0].Success || o.res[1][0].Error != "invalid or expired lease" {
				t.Errorf("request with a malformed lease id and an unknown group: %+v, %v; want each item failed alone", o.res, o.err)
			}
		default:
			if o.err != nil || len(o.res) != 1 || len(o.res[0]) != 1 || !o.res[0][0].Success || o.res[0][0].Noop {
				t.Errorf("request %d: %+v, %v", i, o.res, o.err)
			}
		}
	}
	for p, want := range map[string]bool{"a": false, "b": true, "c": true, "d": false} {
		if got := e.leased("g", p); got != want {
			t.Errorf("partition %s leased: %v, want %v", p, got, want)
		}
	}
	// the held ack; the four together (rolled back); each alone
	if st := e.c.Stats(); st.Transactions != 6 {
		t.Errorf("stats %+v, want 6 transactions", st)
	}
}

// Two requests acking the same message in one transaction behave as if
// run one after the other in arrival order: the first wins (its status),
// the second is a noop.
func TestAckCombinerSameMessageFirstWins(t *testing.T) {
	e := newAckCombEnv(t, 30*time.Second, nil, "x")
	m0, m1 := e.msgs["x#0"], e.msgs["x#1"]
	release := e.hold()
	outs := e.start(context.Background(),
		one("g", ackOf(m0, "completed")),
		one("g", ackOf(m0, "failed"), ackOf(m1, "completed")),
	)
	release()
	a, b := <-outs[0], <-outs[1]
	if a.err != nil || b.err != nil {
		t.Fatal(a.err, b.err)
	}
	if r := a.res[0][0]; !r.Success || r.Noop || r.LeaseReleased {
		t.Errorf("first ack of #0: %+v, want completed (not a noop)", r)
	}
	if r := b.res[0][0]; !r.Success || !r.Noop || r.Index != 0 {
		t.Errorf("second ack of #0 (failed): %+v, want a noop", r)
	}
	if r := b.res[0][1]; !r.Success || r.Noop || !r.LeaseReleased || r.Redeliver || r.Index != 1 {
		t.Errorf("ack of #1: %+v, want the lease released at the batch end", r)
	}
	if n := e.int(`SELECT gc_fails FROM pgque.group_cursor gc JOIN pgque.partition p ON p.part_id = gc.gc_partition WHERE p.part_name = 'x'`); n != 0 {
		t.Errorf("retries spent on x: %d, want 0 (the failed ack came second)", n)
	}
	if st := e.c.Stats(); st.Transactions != 2 {
		t.Errorf("stats %+v, want 2 transactions (the held ack; the two)", st)
	}
}

// A request whose context ends while it waits is withdrawn: nothing of it
// is acked, the others go on.
func TestAckCombinerWithdrawsCancelledWaiter(t *testing.T) {
	e := newAckCombEnv(t, 30*time.Second, []string{"gone", "kept"})
	release := e.hold()
	ctx, cancel := context.WithCancel(context.Background())
	gone := e.start(ctx, one("g", ackOf(e.msgs["gone"], "")))
	kept := e.start(context.Background(), one("g", ackOf(e.msgs["kept"], "")))
	cancel()
	if o := <-gone[0]; !errors.Is(o.err, context.Canceled) {
		t.Errorf("cancelled ack: %+v, %v", o.res, o.err)
	}
	if w := e.c.Waiting(); w != 1 {
		t.Errorf("%d requests waiting after the cancel, want 1", w)
	}
	release()
	if o := <-kept[0]; o.err != nil || !o.res[0][0].Success {
		t.Fatal(o.res, o.err)
	}
	if !e.leased("g", "gone") {
		t.Error("the withdrawn ack released its lease")
	}
	if e.leased("g", "kept") {
		t.Error("the other ack did not release its lease")
	}
}

// Requests of different tenants share a transaction but never a
// group_ack call: each is confined to its own tenant's queues (another
// tenant's partition is an unknown one, nothing acked there). A request
// confined to no tenant does not share a transaction with a tenant's of
// the same group.
func TestAckCombinerTenantsStayApart(t *testing.T) {
	e := newAckCombEnv(t, 30*time.Second, []string{"mine", "any"})
	e.pushN("a\u241fq", "p", 0, 1)
	e.tick("a\u241fq")
	ra := e.pop(broker.Pop{Queue: "a\u241fq", Group: "g", Batch: 1, SubscriptionMode: "all"}, "p")
	release := e.hold()
	outs := e.start(context.Background(),
		// the default tenant's request naming tenant a's message: unknown
		ackReq{scope: broker.InTenant(""), parts: []broker.AckPart{{Group: "g", Acks: []broker.Ack{ackOf(ra.Messages[0], "")}}}},
		ackReq{scope: broker.InTenant("a"), parts: []broker.AckPart{{Group: "g", Acks: []broker.Ack{ackOf(e.msgs["mine"], "")}}}},
		ackReq{scope: broker.InTenant(""), parts: []broker.AckPart{{Group: "g", Acks: []broker.Ack{ackOf(e.msgs["mine"], "")}}}},
		one("g", ackOf(e.msgs["any"], "")),
	)
	release()
	var got [4]broker.AckResult
	for i, ch := range outs {
		o := <-ch
		if o.err != nil {
			t.Fatalf("request %d: %v", i, o.err)
		}
		got[i] = o.res[0][0]
	}
	if got[0].Success || got[0].Error != "unknown partition" {
		t.Errorf("default tenant acking tenant a's message: %+v, want unknown partition", got[0])
	}
	if got[1].Success || got[1].Error != "unknown partition" {
		t.Errorf("tenant a acking the default tenant's message: %+v, want unknown partition", got[1])
	}
	if !got[2].Success || got[2].Noop || !got[2].LeaseReleased {
		t.Errorf("default tenant acking its message: %+v", got[2])
	}
	if !got[3].Success || got[3].Noop {
		t.Errorf("any-tenant ack: %+v", got[3])
	}
	if n := e.int(`SELECT count(*) FROM pgque.group_cursor gc JOIN pgque.queue q ON q.queue_id = gc.gc_queue
	                WHERE q.queue_name = $1 AND gc.gc_lease IS NOT NULL`, "a\u241fq"); n != 1 {
		t.Errorf("tenant a's lease was released by another tenant's ack")
	}
	// the held ack; the three tenant requests (two calls); the any-tenant one
	if st := e.c.Stats(); st != (broker.AckCombinerStats{Transactions: 3, Statements: 4, Requests: 5}) {
		t.Errorf("stats %+v, want 3 transactions, 4 group_ack calls, 5 requests", st)
	}
	if e.cursorTxn("g", "mine") == e.cursorTxn("g", "any") {
		t.Error("the any-tenant ack shared a transaction with the tenants' acks")
	}
}

// A combined transaction that times out gives the error to all its
// requests at once (retrying each alone would queue timeout after timeout).
func TestAckCombinerTimeoutFailsAllAtOnce(t *testing.T) {
	e := newAckCombEnv(t, 3*time.Second, []string{"a", "b"})
	e.held = make(chan error, 1)
	conn := pgtest.Conn(t, e.dsn)
	ctx := ctxT(t)
	if _, err := conn.Exec(ctx, `BEGIN`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `SELECT 1 FROM pgque.group_cursor gc JOIN pgque.partition p ON p.part_id = gc.gc_partition AND p.part_queue = gc.gc_queue
	                              WHERE p.part_name = 'hold' FOR UPDATE OF gc`); err != nil {
		t.Fatal(err)
	}
	go func() {
		_, err := e.c.Ack(context.Background(), broker.AnyTenant, []broker.AckPart{{Group: "g", Acks: []broker.Ack{ackOf(e.msgs["hold"], "")}}})
		e.held <- err
	}()
	e.waitFor("the held ack", func() bool { return e.c.Waiting() == 0 && e.c.Stats().Transactions == 1 })
	// Each waiting request names the held cursor too: their transaction times out.
	outs := e.start(context.Background(),
		one("g", ackOf(e.msgs["a"], ""), ackOf(e.msgs["hold"], "")),
		one("g", ackOf(e.msgs["b"], ""), ackOf(e.msgs["hold"], "")),
	)
	for i, ch := range outs {
		if o := <-ch; o.err == nil {
			t.Errorf("request %d behind the held cursor: %+v, want a timeout", i, o.res)
		}
	}
	if err := <-e.held; err == nil {
		t.Error("the held ack did not time out")
	}
	if _, err := conn.Exec(ctx, `ROLLBACK`); err != nil {
		t.Fatal(err)
	}
	if st := e.c.Stats(); st.Transactions != 2 {
		t.Errorf("stats %+v, want 2 transactions (the held ack, one combined)", st)
	}
	if !e.leased("g", "a") || !e.leased("g", "b") {
		t.Error("a timed-out ack released a lease")
	}
}

// Requests combined in one call answer exactly as the same requests run
// one after the other: a retry releasing the lease, acks held ahead, the
// same message acked again, an ack after the release. Partition x gets
// them combined, partition y (the same three messages) one by one.
func TestAckCombinerAnswersAsSequential(t *testing.T) {
	e := newAckCombEnv(t, 30*time.Second, nil)
	for _, p := range []string{"x", "y"} {
		e.pushN("q", p, 0, 3)
	}
	e.tick("q")
	batch := map[string][]broker.Message{}
	for _, p := range []string{"x", "y"} {
		batch[p] = e.pop(broker.Pop{Queue: "q", Group: "g", Batch: 3, SubscriptionMode: "all"}, p).Messages
		if len(batch[p]) != 3 {
			t.Fatalf("pop %s: %+v", p, batch[p])
		}
	}
	reqs := func(p string) [][]broker.Ack {
		m := batch[p]
		return [][]broker.Ack{
			{ackOf(m[1], "completed")},
			{ackOf(m[2], "completed"), ackOf(m[1], "failed")},
			{ackOf(m[0], "retry")},
			{ackOf(m[2], "completed"), ackOf(m[0], "completed")},
		}
	}
	var want [][]broker.AckResult
	for _, acks := range reqs("y") {
		res, err := broker.AckBatch(ctxT(t), e.conn, "g", acks)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, res)
	}
	release := e.hold()
	var combined []ackReq
	for _, acks := range reqs("x") {
		combined = append(combined, one("g", acks...))
	}
	outs := e.start(context.Background(), combined...)
	release()
	for i, ch := range outs {
		o := <-ch
		if o.err != nil {
			t.Fatalf("request %d: %v", i, o.err)
		}
		for j, r := range o.res[0] {
			w := want[i][j]
			r.TransactionID, r.PartitionID, w.TransactionID, w.PartitionID = "", 0, "", 0
			if r != w {
				t.Errorf("request %d ack %d combined: %+v; one by one: %+v", i, j, r, w)
			}
		}
	}
	if st := e.c.Stats(); st.Transactions != 2 {
		t.Errorf("stats %+v, want 2 transactions (the held ack; the four)", st)
	}
	// The cursors end alike: position (as an index in the batch), lease,
	// retries spent.
	cursor := func(p string) string {
		var pos *int64
		var free bool
		var fails, attempts int
		if err := e.conn.QueryRow(ctxT(t), `SELECT gc.gc_pos, gc.gc_lease IS NULL, gc.gc_fails, gc.gc_attempts
		      FROM pgque.group_cursor gc JOIN pgque.partition p ON p.part_id = gc.gc_partition AND p.part_queue = gc.gc_queue
		     WHERE p.part_name = $1`, p).Scan(&pos, &free, &fails, &attempts); err != nil {
			t.Fatal(err)
		}
		at := -1
		for k, m := range batch[p] {
			if pos != nil && m.EventID == *pos {
				at = k
			}
		}
		return fmt.Sprintf("position at #%d, lease released %v, %d retries spent, %d attempts", at, free, fails, attempts)
	}
	if x, y := cursor("x"), cursor("y"); x != y {
		t.Errorf("cursor combined: %s; one by one: %s", x, y)
	}
}
