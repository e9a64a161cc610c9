package broker_test

import (
	"testing"

	"github.com/pgquectl/pgquectl/internal/broker"
)

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
