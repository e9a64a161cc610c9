package broker_test

import (
	"sync"
	"testing"

	"github.com/pgquectl/pgquectl/internal/broker"
)

// TestConcurrentDedupNewPartition: eight pushes of one transactionId to a
// partition that does not exist yet, at once: they all intern it (one row),
// then serialize on the dedup lock: exactly one is queued, the others are
// its duplicates.
func TestConcurrentDedupNewPartition(t *testing.T) {
	e := setup(t)
	e.push(broker.Item{Queue: "q", Payload: payload(0)}) // the queue exists, partition "new" does not
	pool := pgxConn(t, e.dsn)
	var wg sync.WaitGroup
	results := make([]broker.PushResult, 8)
	for i := range results {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			res, err := broker.Push(ctxT(t), pool, []broker.Item{
				{Queue: "q", Partition: "new", Payload: payload(i), TransactionID: "same"},
				{Queue: "q", Partition: "other", Payload: payload(i)},
			})
			if err != nil {
				t.Errorf("push %d: %v", i, err)
				return
			}
			results[i] = res[0]
		}(i)
	}
	wg.Wait()
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
	if n := e.events("q"); n != 1+1+8 {
		t.Errorf("%d events, want 10", n)
	}
	if n := e.int(`SELECT count(*) FROM pgque.partition p JOIN pgque.queue q ON q.queue_id = p.part_queue
	                WHERE q.queue_name = 'q' AND p.part_name IN ('new', 'other')`); n != 2 {
		t.Errorf("%d partitions new / other, want 2", n)
	}
}
