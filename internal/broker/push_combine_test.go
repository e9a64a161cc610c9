package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgquectl/pgquectl/internal/pgtest"
)

// combinerEnv is a Combiner (one call at a time) on a test database, and
// a way to hold its first call inside pgque.push: the test's connection
// holds the dedup advisory lock of (queue "c", partition "hold"), which a
// push with a transactionId there must take.
type combinerEnv struct {
	t    *testing.T
	db   *pgtest.EngineDB
	c    *Combiner
	held chan error // the held push's outcome
}

func newCombinerEnv(t *testing.T) *combinerEnv {
	t.Helper()
	d := pgtest.NewEngineDB(t)
	ctx := pgtest.Ctx(t)
	pool, err := pgxpool.New(ctx, d.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := Push(ctx, pool, []Item{{Queue: "c", Partition: "hold", Payload: json.RawMessage(`0`)}}); err != nil {
		t.Fatal(err)
	}
	return &combinerEnv{t: t, db: d, c: NewCombiner(pool, 1, 0, 30*time.Second), held: make(chan error, 1)}
}

// hold starts a push that blocks inside its call (until release) and
// returns once it is blocked there.
func (e *combinerEnv) hold() {
	e.t.Helper()
	e.db.Exec(`SELECT pg_advisory_lock(1885827449, hashtext(q.queue_id || '/' || p.part_id))
	             FROM pgque.queue q JOIN pgque.partition p ON p.part_queue = q.queue_id
	            WHERE q.queue_name = 'c' AND p.part_name = 'hold'`)
	go func() {
		res, err := e.c.Push(context.Background(), []Item{{Queue: "c", Partition: "hold", Payload: json.RawMessage(`1`), TransactionID: "h"}})
		if err == nil && (len(res) != 1 || res[0].Status != StatusQueued) {
			err = fmt.Errorf("held push: %+v", res)
		}
		e.held <- err
	}()
	// pg_locks lists every database of the cluster: tests running in
	// parallel in other databases wait on the same kind of lock (CI: the
	// count matched another test's wait before ours waited, and the next
	// push took the free call slot instead of queueing).
	e.waitFor("the held push to wait for its lock", func() bool {
		return e.db.Int(`SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`) == 1
	})
}

func (e *combinerEnv) release() {
	e.t.Helper()
	e.db.Exec(`SELECT pg_advisory_unlock_all()`)
	if err := <-e.held; err != nil {
		e.t.Fatal(err)
	}
}

func (e *combinerEnv) waiting() int {
	e.c.mu.Lock()
	defer e.c.mu.Unlock()
	return len(e.c.waiting)
}

func (e *combinerEnv) waitFor(what string, cond func() bool) {
	e.t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for %s", what)
		}
	}
}

type pushOutcome struct {
	res []PushResult
	err error
}

// start pushes each of pushes in its own goroutine, in order (each queued
// before the next starts), and returns their outcomes' channels.
func (e *combinerEnv) start(ctx context.Context, pushes ...[]Item) []chan pushOutcome {
	e.t.Helper()
	out := make([]chan pushOutcome, len(pushes))
	for i, items := range pushes {
		ch := make(chan pushOutcome, 1)
		out[i] = ch
		before := e.waiting()
		go func() {
			res, err := e.c.Push(ctx, items)
			ch <- pushOutcome{res, err}
		}()
		e.waitFor("the push to queue", func() bool { return e.waiting() == before+1 })
	}
	return out
}

// Pushes that arrive while the call slot is busy go out in ONE call: one
// transaction for all ten, each push getting its own results (index 0).
func TestCombinerMergesWaitingPushes(t *testing.T) {
	e := newCombinerEnv(t)
	e.hold()
	var pushes [][]Item
	for i := range 10 {
		pushes = append(pushes, []Item{{Queue: "c", Partition: fmt.Sprintf("k%d", i%3), Payload: json.RawMessage(fmt.Sprint(100 + i))}})
	}
	pushes = append(pushes, []Item{ // a push of two items, one to another queue
		{Queue: "c", Partition: "k0", Payload: json.RawMessage(`200`)},
		{Queue: "c2", Payload: json.RawMessage(`201`)},
	})
	outs := e.start(context.Background(), pushes...)
	e.release()
	ids := map[string]bool{}
	for i, ch := range outs {
		o := <-ch
		if o.err != nil {
			t.Fatalf("push %d: %v", i, o.err)
		}
		if len(o.res) != len(pushes[i]) {
			t.Fatalf("push %d: %d results, want %d", i, len(o.res), len(pushes[i]))
		}
		for j, r := range o.res {
			if r.Index != j || r.Status != StatusQueued || r.Queue != pushes[i][j].Queue || ids[r.MessageID] {
				t.Errorf("push %d result %d: %+v", i, j, r)
			}
			ids[r.MessageID] = true
			// The id is the one of the event holding this push's payload.
			if n := e.db.Int(`SELECT count(*) FROM pgque.event_1_0 WHERE pgque.message_uuid(1, ev_id, ev_time)::text = $1 AND ev_data = $2`,
				r.MessageID, string(pushes[i][j].Payload)); pushes[i][j].Queue == "c" && n != 1 {
				t.Errorf("push %d result %d: message id %s is not its payload's event (%d)", i, j, r.MessageID, n)
			}
		}
	}
	if n := e.db.Events("c"); n != 13 {
		t.Errorf("queue c holds %d events, want 13", n)
	}
	// The seed, the held push, and one transaction for the eleven waiting pushes.
	if n := e.db.Int(`SELECT count(DISTINCT ev_txid) FROM pgque.event_1_0`); n != 3 {
		t.Errorf("queue c's events came in %d transactions, want 3 (seed, held push, one combined call)", n)
	}
	if n := e.db.Int(`SELECT count(DISTINCT e.ev_txid) FROM pgque.event_1_0 e, pgque.event_2_0 f WHERE e.ev_txid = f.ev_txid`); n != 1 {
		t.Errorf("queue c2's event shares a transaction with %d of queue c's, want 1", n)
	}
}

// A combined call that fails (bad input in one push) stores nothing; each
// push is then run alone: only the bad one fails.
func TestCombinerFailedCallRetriesAlone(t *testing.T) {
	e := newCombinerEnv(t)
	e.hold()
	outs := e.start(context.Background(),
		[]Item{{Queue: "c", Partition: "a", Payload: json.RawMessage(`10`)}},
		[]Item{{Queue: "c", Partition: "a", Payload: json.RawMessage(`11`)}, {Queue: "c", Payload: json.RawMessage(`12`), TransactionID: "bad\x01id"}},
		[]Item{{Queue: "c", Partition: "b", Payload: json.RawMessage(`13`)}},
	)
	e.release()
	for i, ch := range outs {
		o := <-ch
		switch {
		case i == 1 && !errors.Is(o.err, ErrInvalidInput):
			t.Errorf("push with a bad transactionId: %+v, %v; want invalid input", o.res, o.err)
		case i != 1 && (o.err != nil || len(o.res) != 1 || o.res[0].Status != StatusQueued || o.res[0].Index != 0):
			t.Errorf("push %d: %+v, %v", i, o.res, o.err)
		}
	}
	if n := e.db.Int(`SELECT count(*) FROM pgque.event_1_0 WHERE ev_data IN ('10', '13')`); n != 2 {
		t.Errorf("the good pushes stored %d events, want 2", n)
	}
	if n := e.db.Int(`SELECT count(*) FROM pgque.event_1_0 WHERE ev_data IN ('11', '12')`); n != 0 {
		t.Errorf("the bad push stored %d events, want 0", n)
	}
}

// A transactionId repeated by a later push of the same call is that
// push's duplicate, as if they had run one after the other.
func TestCombinerDedupAcrossPushes(t *testing.T) {
	e := newCombinerEnv(t)
	e.hold()
	outs := e.start(context.Background(),
		[]Item{{Queue: "c", Partition: "x", Payload: json.RawMessage(`31`), TransactionID: "t"}},
		[]Item{{Queue: "c", Partition: "y", Payload: json.RawMessage(`32`)}, {Queue: "c", Partition: "x", Payload: json.RawMessage(`33`), TransactionID: "t"}},
	)
	e.release()
	a, b := <-outs[0], <-outs[1]
	if a.err != nil || b.err != nil {
		t.Fatal(a.err, b.err)
	}
	if a.res[0].Status != StatusQueued || b.res[0].Status != StatusQueued || b.res[1].Status != StatusDuplicate ||
		b.res[1].MessageID != a.res[0].MessageID || b.res[1].Index != 1 || b.res[1].TransactionID != "t" {
		t.Errorf("results %+v / %+v", a.res, b.res)
	}
	if n := e.db.Int(`SELECT count(*) FROM pgque.event_1_0 WHERE ev_data IN ('31', '32', '33')`); n != 2 {
		t.Errorf("%d events stored, want 2", n)
	}
}

// A push whose context ends while it waits for a call is withdrawn:
// nothing of it is stored, the others go on.
func TestCombinerWithdrawsCancelledWaiter(t *testing.T) {
	e := newCombinerEnv(t)
	e.hold()
	ctx, cancel := context.WithCancel(context.Background())
	gone := e.start(ctx, []Item{{Queue: "c", Payload: json.RawMessage(`"gone"`)}})
	kept := e.start(context.Background(), []Item{{Queue: "c", Payload: json.RawMessage(`"kept"`)}})
	cancel()
	if o := <-gone[0]; !errors.Is(o.err, context.Canceled) {
		t.Errorf("cancelled push: %+v, %v", o.res, o.err)
	}
	if w := e.waiting(); w != 1 {
		t.Errorf("%d pushes waiting after the cancel, want 1", w)
	}
	e.release()
	if o := <-kept[0]; o.err != nil {
		t.Fatal(o.err)
	}
	if n := e.db.Int(`SELECT count(*) FROM pgque.event_1_0 WHERE ev_data::jsonb ? 'gone'`); n != 0 {
		t.Errorf("the cancelled push stored %d events", n)
	}
	if n := e.db.Int(`SELECT count(*) FROM pgque.event_1_0 WHERE ev_data::jsonb ? 'kept'`); n != 1 {
		t.Errorf("the other push stored %d events, want 1", n)
	}
}

// countingDB counts the pgque.push calls made through it.
type countingDB struct {
	Querier
	calls atomic.Int64
}

func (d *countingDB) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	d.calls.Add(1)
	return d.Querier.Query(ctx, sql, args...)
}

// A combined call that times out gives the error to all its pushes at
// once: retrying each alone would only queue one timeout after the other.
func TestCombinerTimeoutFailsAllAtOnce(t *testing.T) {
	e := newCombinerEnv(t)
	cdb := &countingDB{Querier: e.c.db}
	e.c = NewCombiner(cdb, 1, 0, 5*time.Second)
	e.hold()
	// Each waiting push needs the held lock too, so their call times out.
	var pushes [][]Item
	for i := range 3 {
		pushes = append(pushes, []Item{{Queue: "c", Partition: "hold", Payload: json.RawMessage(fmt.Sprint(50 + i)), TransactionID: fmt.Sprintf("w%d", i)}})
	}
	outs := e.start(context.Background(), pushes...)
	for i, ch := range outs {
		if o := <-ch; o.err == nil {
			t.Errorf("push %d behind the held lock: %+v, want a timeout", i, o.res)
		}
	}
	if err := <-e.held; err == nil {
		t.Error("the held push did not time out")
	}
	e.db.Exec(`SELECT pg_advisory_unlock_all()`)
	if n := cdb.calls.Load(); n != 2 {
		t.Errorf("%d pgque.push calls, want 2 (the held push, one combined call)", n)
	}
	if n := e.db.Int(`SELECT count(*) FROM pgque.event_1_0`); n != 1 {
		t.Errorf("%d events stored, want 1 (the seed)", n)
	}
}

// A push promoted to run the next call whose context ends before it runs
// stores nothing and passes the slot to the next waiting push (else the
// slot would be lost and the waiting pushes would wait for ever).
func TestCombinerPromotedPushWithdrawnPassesTheSlotOn(t *testing.T) {
	c := NewCombiner(nil, 1, 0, time.Second)
	promoted := &pushCall{items: []Item{{Queue: "a"}}, lead: true}
	next := &pushCall{items: []Item{{Queue: "b"}}, done: make(chan struct{})}
	c.running, c.waiting = 1, []*pushCall{next}
	err := c.withdraw(promoted, context.Canceled)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "nothing was stored") {
		t.Fatalf("withdraw: %v", err)
	}
	select {
	case <-next.done:
	default:
		t.Fatal("the next waiting push was not promoted")
	}
	if !next.lead || c.running != 1 || len(c.waiting) != 0 {
		t.Errorf("after the withdrawal: next.lead %v, running %d, waiting %d; want true, 1, 0", next.lead, c.running, len(c.waiting))
	}
	// Nothing waits: the slot is freed.
	if err := c.withdraw(&pushCall{lead: true}, context.Canceled); err == nil || c.running != 0 {
		t.Errorf("withdraw with no waiter: %v, running %d, want an error and 0", err, c.running)
	}
}

// A request promoted to run the next transaction whose context ended
// before it ran acks nothing and passes the slot to the next waiting
// request (the transactions run on their requests' goroutines: without the
// pass the slot would be lost and the waiters stuck).
func TestAckCombinerPromotedRequestWithdrawnPassesTheSlotOn(t *testing.T) {
	c := NewAckCombiner(nil, 1, 0, time.Second)
	promoted := &ackCall{items: 1, lead: true}
	next := &ackCall{items: 1, done: make(chan struct{})}
	c.running, c.waiting = 1, []*ackCall{next}
	err := c.withdraw(promoted, context.Canceled)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "nothing was acknowledged") {
		t.Fatalf("withdraw: %v", err)
	}
	select {
	case <-next.done:
	default:
		t.Fatal("the next waiting request was not promoted")
	}
	if !next.lead || c.running != 1 || len(c.waiting) != 0 {
		t.Errorf("after the withdrawal: next.lead %v, running %d, waiting %d; want true, 1, 0", next.lead, c.running, len(c.waiting))
	}
	// Nothing waits: the slot is freed.
	if err := c.withdraw(&ackCall{lead: true}, context.Canceled); err == nil || c.running != 0 {
		t.Errorf("withdraw with no waiter: %v, running %d, want an error and 0", err, c.running)
	}
}
