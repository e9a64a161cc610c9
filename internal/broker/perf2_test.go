package broker_test

import (
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgquectl/pgquectl/internal/broker"
)

// eventFetches returns the heap tuples fetched by index scans of queue's
// event tables in tx so far (pg_stat_xact_user_tables: this transaction's
// counts, not yet flushed included).
func eventFetches(t *testing.T, tx pgx.Tx, queue string) int64 {
	t.Helper()
	var n int64
	if err := tx.QueryRow(ctxT(t), `SELECT coalesce(sum(s.idx_tup_fetch), 0) FROM pg_stat_xact_user_tables s
		WHERE s.schemaname = 'pgque'
		  AND s.relname ~ ('^event_' || (SELECT q.queue_id FROM pgque.queue q WHERE q.queue_name = $1) || '_[0-9]+$')`,
		queue).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// pop_list probes each candidate (one event per range) and reads a full
// batch only for the partitions it takes: a pop of 100 from 1 of 16
// backlogged candidates reads about 100 + 2 x 16 events, not 16 x 101.
func TestPopListReadsFullBatchOnlyForTakenPartitions(t *testing.T) {
	e := setup(t)
	e.backlog("q", 16, 200, 800)
	var ids []int32
	var names []string
	if err := e.conn.QueryRow(ctxT(t), `SELECT array_agg(p.part_id ORDER BY p.part_name), array_agg(p.part_name ORDER BY p.part_name)
		FROM pgque.partition p JOIN pgque.queue q ON q.queue_id = p.part_queue WHERE q.queue_name = 'q' AND p.part_name <> 'Default'`).Scan(&ids, &names); err != nil || len(ids) != 16 {
		t.Fatalf("partitions %v %v (%v), want 16", ids, names, err)
	}
	// First contact: subscribes the group and seeds every cursor.
	first, err := broker.PopList(ctxT(t), e.conn, broker.Pop{Queue: "q", Group: "g", Batch: 1, SubscriptionMode: "all"}, ids)
	if err != nil || len(first.Messages) != 1 {
		t.Fatalf("first pop: %d messages (%v), want 1", len(first.Messages), err)
	}
	tx, err := e.conn.Begin(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctxT(t)) }()
	before := eventFetches(t, tx, "q")
	res, err := broker.PopList(ctxT(t), tx, broker.Pop{Queue: "q", Group: "g", Batch: 100, MaxPartitions: 1}, ids)
	if err != nil {
		t.Fatal(err)
	}
	read := eventFetches(t, tx, "q") - before
	if len(res.Messages) != 100 {
		t.Fatalf("pop of 100: %d messages, want 100", len(res.Messages))
	}
	// The first candidate is leased (by the first pop); the second is taken.
	if len(res.Verdicts) != 2 || res.Verdicts[0].Kind != broker.VerdictLeased || res.Verdicts[1].Kind != broker.VerdictTook ||
		res.Verdicts[1].Drained {
		t.Fatalf("verdicts %+v, want leased, took (not drained)", res.Verdicts)
	}
	// 15 candidates probed (at most 2 events each), one batch + 1 read.
	if read > 15*2+101 {
		t.Fatalf("pop_list of 100 from 1 of 16 candidates read %d events, want <= %d", read, 15*2+101)
	}
}

// A push to an existing partition without transactionIds calls no helper
// function (intern_partitions, broker_options): the fixed cost per push is
// its own statements only.
func TestPushKnownPartitionCallsNoHelpers(t *testing.T) {
	e := setup(t)
	e.pushN("q", "p", 0, 1)
	e.exec(`SET track_functions = 'all'`)
	tx, err := e.conn.Begin(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctxT(t)) }()
	calls := func() (intern, opts int64) {
		t.Helper()
		if err := tx.QueryRow(ctxT(t), `SELECT coalesce(sum(calls) FILTER (WHERE funcname = 'intern_partitions'), 0),
			coalesce(sum(calls) FILTER (WHERE funcname = 'broker_options'), 0)
			FROM pg_stat_xact_user_functions WHERE schemaname = 'pgque'`).Scan(&intern, &opts); err != nil {
			t.Fatal(err)
		}
		return intern, opts
	}
	i0, o0 := calls()
	res, err := broker.Push(ctxT(t), tx, []broker.Item{{Queue: "q", Partition: "p", Payload: payload(1)},
		{Queue: "q", Partition: "p", Payload: payload(2)}})
	if err != nil || len(res) != 2 || res[0].Status != broker.StatusQueued || res[1].Status != broker.StatusQueued {
		t.Fatalf("push: %+v, %v", res, err)
	}
	if i, o := calls(); i-i0 != 0 || o-o0 != 0 {
		t.Fatalf("push to a known partition called intern_partitions %d and broker_options %d times, want 0 and 0", i-i0, o-o0)
	}
	// A new partition is interned once; a transactionId reads the options once.
	if _, err := broker.Push(ctxT(t), tx, []broker.Item{{Queue: "q", Partition: "new", Payload: payload(3), TransactionID: "t1"},
		{Queue: "q", Partition: "new", Payload: payload(4), TransactionID: "t1"}}); err != nil {
		t.Fatal(err)
	}
	if i, o := calls(); i-i0 != 1 || o-o0 != 1 {
		t.Fatalf("push to a new partition with a transactionId called intern_partitions %d and broker_options %d times, want 1 and 1", i-i0, o-o0)
	}
}
