package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/pgquectl/pgquectl/internal/broker"
)

// Each role gets exactly its broker functions: writers push, readers pop
// and ack, admins configure; nothing else.
func TestBrokerGrants(t *testing.T) {
	e := setup(t)
	e.pushN("q", "p", 0, 2)
	e.tick("q")
	pool := pgxConn(t, e.dsn)
	as := func(role string, f func(q broker.Querier) error) error {
		tx, err := pool.Begin(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(context.Background())
		if _, err := tx.Exec(ctxT(t), `SET LOCAL ROLE `+role); err != nil {
			t.Fatal(err)
		}
		return f(tx)
	}
	push := func(q broker.Querier) error {
		_, err := broker.Push(ctxT(t), q, []broker.Item{{Queue: "q", Payload: payload(1)}})
		return err
	}
	pop := func(q broker.Querier) error {
		_, err := broker.PopPartition(ctxT(t), q, broker.Pop{Queue: "q", Batch: 1}, "p")
		return err
	}
	configure := func(q broker.Querier) error {
		_, err := broker.Configure(ctxT(t), q, "q", nil, nil, nil)
		return err
	}
	readerOps := func(q broker.Querier) error {
		if _, err := broker.PopAny(ctxT(t), q, broker.Pop{Queue: "q", Batch: 1}); err != nil {
			return err
		}
		if _, err := broker.Reseed(ctxT(t), q, "q", "", -1, 10); err != nil {
			return err
		}
		if _, err := broker.AckBatch(ctxT(t), q, "", []broker.Ack{{TransactionID: "x", PartitionID: "y"}}); err != nil {
			return err
		}
		if _, _, err := broker.ExtendLease(ctxT(t), q, "00000000-0000-4000-8000-000000000000", 10); err != nil {
			return err
		}
		if _, _, err := broker.ListDLQ(ctxT(t), q, "q", "", 10, 0); err != nil {
			return err
		}
		_, err := broker.Groups(ctxT(t), q, "q")
		return err
	}
	seek := func(q broker.Querier) error {
		_, err := broker.Seek(ctxT(t), q, "q", "g", true, time.Time{})
		return err
	}
	for _, c := range []struct {
		role string
		op   string
		f    func(broker.Querier) error
		ok   bool
	}{
		{"pgque_writer", "push", push, true},
		{"pgque_writer", "pop", pop, false},
		{"pgque_reader", "pop", pop, true},
		{"pgque_reader", "push", push, false},
		{"pgque_reader", "configure", configure, false},
		{"pgque_admin", "configure", configure, true},
		{"pgque_admin", "pop", pop, true},
		{"pgque_reader", "reader operations", readerOps, true},
		{"pgque_writer", "reader operations", readerOps, false},
		{"pgque_reader", "seek", seek, false},
		{"pgque_admin", "seek", seek, true},
	} {
		err := as(c.role, c.f)
		if (err == nil) != c.ok {
			t.Errorf("%s %s: err %v, want allowed=%v", c.role, c.op, err, c.ok)
		}
	}
}
