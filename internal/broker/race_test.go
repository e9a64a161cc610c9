package broker_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgquectl/pgquectl/internal/broker"
)

// pushAtOnce runs n pushes concurrently (push i sends items(i)) and returns
// the first result of each.
func pushAtOnce(t *testing.T, pool *pgxpool.Pool, n int, items func(i int) []broker.Item) []broker.PushResult {
	t.Helper()
	var wg sync.WaitGroup
	results := make([]broker.PushResult, n)
	for i := range results {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			res, err := broker.Push(ctxT(t), pool, items(i))
			if err != nil {
				t.Errorf("push %d: %v", i, err)
				return
			}
			results[i] = res[0]
		}(i)
	}
	wg.Wait()
	return results
}

// oneQueued checks that exactly one of results was queued and that every
// other is a duplicate naming the same message.
func oneQueued(t *testing.T, results []broker.PushResult) {
	t.Helper()
	queued := 0
	for _, r := range results {
		if r.Status == broker.StatusQueued {
			queued++
		}
		if r.MessageID != results[0].MessageID {
			t.Errorf("a duplicate names another message: %+v", results)
		}
	}
	if queued != 1 {
		t.Fatalf("%d pushes queued, want 1: %+v", queued, results)
	}
}

// Eight producers push the same transactionId at once: exactly one is
// queued, the others are duplicates of it.
func TestConcurrentDedup(t *testing.T) {
	e := setup(t)
	e.push(broker.Item{Queue: "q", Partition: "p", Payload: payload(0)}) // queue and partition exist
	oneQueued(t, pushAtOnce(t, pgxConn(t, e.dsn), 8, func(i int) []broker.Item {
		return []broker.Item{{Queue: "q", Partition: "p", Payload: payload(i), TransactionID: "same"}}
	}))
	if n := e.events("q"); n != 2 {
		t.Errorf("%d events, want 2", n)
	}
}

// TestConcurrentDedupNewPartition: eight pushes of one transactionId to a
// partition that does not exist yet, at once: they all intern it (one row),
// then serialize on the dedup lock: exactly one is queued, the others are
// its duplicates.
func TestConcurrentDedupNewPartition(t *testing.T) {
	e := setup(t)
	e.push(broker.Item{Queue: "q", Payload: payload(0)}) // the queue exists, partition "new" does not
	oneQueued(t, pushAtOnce(t, pgxConn(t, e.dsn), 8, func(i int) []broker.Item {
		return []broker.Item{
			{Queue: "q", Partition: "new", Payload: payload(i), TransactionID: "same"},
			{Queue: "q", Partition: "other", Payload: payload(i)},
		}
	}))
	if n := e.events("q"); n != 1+1+8 {
		t.Errorf("%d events, want 10", n)
	}
	if n := e.int(`SELECT count(*) FROM pgque.partition p JOIN pgque.queue q ON q.queue_id = p.part_queue
	                WHERE q.queue_name = 'q' AND p.part_name IN ('new', 'other')`); n != 2 {
		t.Errorf("%d partitions new / other, want 2", n)
	}
}

// Eight consumers of a new group reach a new partition at once: one cursor,
// one delivery of each message.
func TestConcurrentFirstContact(t *testing.T) {
	e := setup(t)
	e.pushN("q", "p", 0, 4)
	e.tick("q")
	pool := pgxConn(t, e.dsn)
	var wg sync.WaitGroup
	var mu sync.Mutex
	got := 0
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := broker.PopPartition(ctxT(t), pool, broker.Pop{Queue: "q", Group: "fresh", Batch: 10, SubscriptionMode: "all"}, "p")
			if err != nil {
				t.Errorf("pop: %v", err)
				return
			}
			mu.Lock()
			got += len(r.Messages)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if got != 4 {
		t.Errorf("%d messages delivered, want 4 (one lease)", got)
	}
	if n := e.int(`SELECT count(*) FROM pgque.group_cursor`); n != 1 {
		t.Errorf("%d cursor rows, want 1", n)
	}
	if n := e.int(`SELECT count(*) FROM pgque.group_subscription`); n != 1 {
		t.Errorf("%d subscriptions, want 1", n)
	}
}

// A push and an ack inside one caller's transaction: rollback leaves
// nothing pushed and nothing acked; the same in REPEATABLE READ commits.
func TestTransactionRollbackAndRepeatableRead(t *testing.T) {
	e := setup(t)
	e.pushN("q", "p", 0, 1)
	e.tick("q")
	r := e.pop(broker.Pop{Queue: "q", Batch: 1}, "p")
	pool := pgxConn(t, e.dsn)
	for _, iso := range []pgx.TxIsoLevel{pgx.ReadCommitted, pgx.RepeatableRead} {
		tx, err := pool.BeginTx(ctxT(t), pgx.TxOptions{IsoLevel: iso})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := broker.Push(ctxT(t), tx, []broker.Item{{Queue: "q", Partition: "p", Payload: payload(map[string]int{"n": 1}), TransactionID: "t1"}}); err != nil {
			t.Fatal(err)
		}
		if res, err := broker.AckBatch(ctxT(t), tx, "", []broker.Ack{ackOf(r.Messages[0], "")}); err != nil || !res[0].Success {
			t.Fatalf("ack in tx: %+v %v", res, err)
		}
		if err := tx.Rollback(context.Background()); err != nil {
			t.Fatal(err)
		}
		if n := e.events("q"); n != 1 {
			t.Fatalf("%s: rolled back push left %d events", iso, n)
		}
		if n := e.int(`SELECT count(*) FROM pgque.group_cursor WHERE gc_lease IS NOT NULL AND gc_pos IS NULL`); n != 1 {
			t.Fatalf("%s: rolled back ack changed the cursor", iso)
		}
	}
	tx, err := pool.BeginTx(ctxT(t), pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := broker.Push(ctxT(t), tx, []broker.Item{{Queue: "q", Partition: "p", Payload: payload(map[string]int{"n": 1}), TransactionID: "t1"}}); err != nil || res[0].Status != broker.StatusQueued {
		t.Fatalf("push in RR: %+v %v", res, err)
	}
	if res, err := broker.AckBatch(ctxT(t), tx, "", []broker.Ack{ackOf(r.Messages[0], "")}); err != nil || !res[0].Success || !res[0].LeaseReleased {
		t.Fatalf("ack in RR: %+v %v", res, err)
	}
	if err := tx.Commit(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	e.tick("q")
	// The committed ack moved the cursor past message 0; the committed
	// push (not a duplicate: the rolled-back ones left no dedup row) follows.
	if got := numbers(t, e.pop(broker.Pop{Queue: "q", Batch: 5, AutoAck: true}, "p").Messages); !slices.Equal(got, []int{1}) {
		t.Fatalf("after commit: %v", got)
	}
}
