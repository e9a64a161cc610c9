package broker_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/pgquectl/pgquectl/internal/broker"
)

// The ack rule (pgque.group_ack): the order of the acks inside a leased
// batch does not matter. The position moves only over a contiguous prefix
// of resolved events; an event acked ahead of an unresolved one is held on
// the cursor until the events before it are resolved; a failed ack is
// honoured (retried or dead-lettered) whatever came before it.

// popN pushes n numbered messages to q/p, ticks, and pops them in one
// batch (group g, lease 300 s).
func (e *env) popN(n int) broker.PopResult {
	e.t.Helper()
	e.pushN("q", "p", 0, n)
	e.tick("q")
	r := e.pop(broker.Pop{Queue: "q", Group: "g", Batch: n, SubscriptionMode: "all"}, "p")
	if len(r.Messages) != n {
		e.t.Fatalf("pop %d: got %+v", n, r)
	}
	return r
}

// expire ends the live lease of q/p for group g now (what time does,
// without waiting for it).
func (e *env) expire() {
	e.t.Helper()
	e.exec(`UPDATE pgque.group_cursor SET gc_lease_until = now() - interval '1 second'
	         WHERE gc_lease IS NOT NULL`)
}

func (e *env) repop(n int) broker.PopResult {
	e.t.Helper()
	return e.pop(broker.Pop{Queue: "q", Group: "g", Batch: n, SubscriptionMode: "all"}, "p")
}

func (e *env) configure(opts string) {
	e.t.Helper()
	if _, err := broker.Configure(ctxT(e.t), e.conn, "q", nil, nil, json.RawMessage(opts)); err != nil {
		e.t.Fatalf("configure: %v", err)
	}
}

// A failed ack sent after a completed ack of a later message of the same
// batch is honoured: the failed message is redelivered (retry spent), not
// counted as done by the later ack.
func TestAckFailedAfterLaterCompletedIsRetried(t *testing.T) {
	e := setup(t)
	r := e.popN(3)
	res := e.ack("g", ackOf(r.Messages[1], "completed"))
	if !res[0].Success || res[0].Noop || res[0].LeaseReleased {
		t.Fatalf("ack #1 completed: %+v", res)
	}
	res = e.ack("g", ackOf(r.Messages[0], "failed"))
	if !res[0].Success || res[0].Noop || !res[0].LeaseReleased || !res[0].Redeliver || res[0].DLQ {
		t.Fatalf("ack #0 failed after #1 completed: %+v (want a retry: success, lease released, not noop)", res)
	}
	r2 := e.repop(3)
	if got := numbers(t, r2.Messages); !slices.Equal(got, seq(0, 3)) || r2.Messages[0].DeliveryAttempt != 2 {
		t.Fatalf("redelivery after the failed ack: %v %+v (want 0, 1, 2, attempt 2)", got, r2.Messages)
	}
	if n := e.int(`SELECT gc_fails FROM pgque.group_cursor`); n != 1 {
		t.Fatalf("retries spent: %d, want 1", n)
	}
}

// The same in one batch: [#1 completed, #0 failed] with retryLimit 0
// dead-letters #0 and completes #1; the lease stays for #2.
func TestAckOutOfOrderInOneBatchDeadLetters(t *testing.T) {
	e := setup(t)
	e.pushN("q", "p", 0, 3)
	e.configure(`{"retryLimit": 0}`)
	e.tick("q")
	r := e.repop(3)
	res := e.ack("g", ackOf(r.Messages[1], "completed"), ackOf(r.Messages[0], "failed"))
	if !res[0].Success || !res[1].Success || !res[1].DLQ || res[1].Noop || res[1].LeaseReleased {
		t.Fatalf("[#1 completed, #0 failed]: %+v (want #0 dead-lettered, lease kept for #2)", res)
	}
	if dls, total, err := broker.ListDLQ(ctxT(t), e.conn, "q", "g", 10, 0); err != nil || total != 1 ||
		dls[0].TransactionID != r.Messages[0].TransactionID {
		t.Fatalf("DLQ: %+v %d %v", dls, total, err)
	}
	res = e.ack("g", ackOf(r.Messages[2], ""))
	if !res[0].Success || !res[0].LeaseReleased || res[0].Redeliver {
		t.Fatalf("ack #2: %+v (want the lease released at the batch end)", res)
	}
	if r2 := e.repop(3); len(r2.Messages) != 0 {
		t.Fatalf("after the batch: %+v", r2.Messages)
	}
}

// A batch whose lease expires with an earlier message never acked and a
// later one completed is redelivered from the earlier one: nothing is lost.
func TestAckNeverAckedEarlierIsRedeliveredAtExpiry(t *testing.T) {
	e := setup(t)
	r := e.popN(3)
	if res := e.ack("g", ackOf(r.Messages[2], "")); !res[0].Success || res[0].LeaseReleased {
		t.Fatalf("ack #2: %+v", res)
	}
	e.expire()
	r2 := e.repop(3)
	if got := numbers(t, r2.Messages); !slices.Equal(got, seq(0, 3)) {
		t.Fatalf("after expiry: %v, want 0, 1, 2", got)
	}
	// The new lease starts clean: #2's ack under the old lease is gone
	// with it, so acking 0..2 again releases the lease at #2.
	res := e.ack("g", ackOf(r2.Messages[0], ""), ackOf(r2.Messages[1], ""), ackOf(r2.Messages[2], ""))
	if !res[2].Success || !res[2].LeaseReleased || res[2].Noop {
		t.Fatalf("acks of the redelivery: %+v", res)
	}
}

// Acks held ahead move the position when the gap closes; a retry held
// ahead releases the lease once the events before it are resolved; every
// ack repeated is a noop the second time (a retry spends one retry only).
func TestAckHeldAheadAndIdempotent(t *testing.T) {
	e := setup(t)
	r := e.popN(4)
	res := e.ack("g", ackOf(r.Messages[3], "failed"), ackOf(r.Messages[2], "completed"),
		ackOf(r.Messages[3], "failed"), ackOf(r.Messages[2], "completed"), ackOf(r.Messages[3], "completed"))
	for i, a := range res {
		if !a.Success || a.LeaseReleased || (i >= 2) != a.Noop {
			t.Fatalf("acks ahead: %+v (want success, lease kept, the repeats noop)", res)
		}
	}
	if n := e.int(`SELECT gc_fails FROM pgque.group_cursor`); n != 1 {
		t.Fatalf("retries spent by two identical failed acks: %d, want 1", n)
	}
	if n := e.int(`SELECT count(*) FROM pgque.group_cursor WHERE gc_pos IS NULL`); n != 1 {
		t.Fatalf("the position moved over unacked #0, #1")
	}
	res = e.ack("g", ackOf(r.Messages[1], ""))
	if !res[0].Success || res[0].LeaseReleased {
		t.Fatalf("ack #1: %+v", res)
	}
	// #0 closes the gap: the position moves over 0, 1, 2 and stops before
	// the retry of #3, which releases the lease.
	res = e.ack("g", ackOf(r.Messages[0], ""))
	if !res[0].Success || !res[0].LeaseReleased || !res[0].Redeliver {
		t.Fatalf("ack #0: %+v (want the lease released for the held retry of #3)", res)
	}
	if res := e.ack("g", ackOf(r.Messages[0], "failed")); !res[0].Success || !res[0].Noop {
		t.Fatalf("failed ack of a done message: %+v (want noop)", res)
	}
	r2 := e.repop(4)
	if got := numbers(t, r2.Messages); !slices.Equal(got, []int{3}) || r2.Messages[0].DeliveryAttempt != 2 {
		t.Fatalf("redelivery: %v %+v (want 3 alone, attempt 2)", got, r2.Messages)
	}
}

// An ack without a lease id completes a message only while its batch has
// been delivered once: after a redelivery a consumer whose lease expired
// may still hold it, and without the lease id its ack cannot be told from
// the current holder's. The holder's ack with its lease works.
func TestAckWithoutLeaseAfterRedeliveryIsRefused(t *testing.T) {
	e := setup(t)
	r := e.popN(2)
	noLease := func(m broker.Message) broker.Ack { a := ackOf(m, ""); a.LeaseID = ""; return a }
	if res := e.ack("g", noLease(r.Messages[0])); !res[0].Success || res[0].Noop {
		t.Fatalf("first delivery, no lease id: %+v", res)
	}
	e.expire()
	r2 := e.repop(2)
	if len(r2.Messages) != 1 || r2.Messages[0].DeliveryAttempt != 2 {
		t.Fatalf("redelivery: %+v", r2.Messages)
	}
	res := e.ack("g", noLease(r.Messages[1]))
	if res[0].Success || res[0].Error != "invalid or expired lease" {
		t.Fatalf("stale consumer's ack without a lease id: %+v (want invalid or expired lease)", res)
	}
	res = e.ack("g", ackOf(r.Messages[1], ""))
	if res[0].Success || res[0].Error != "invalid or expired lease" {
		t.Fatalf("stale consumer's ack with its old lease: %+v", res)
	}
	if res := e.ack("g", ackOf(r2.Messages[0], "")); !res[0].Success || !res[0].LeaseReleased {
		t.Fatalf("holder's ack: %+v", res)
	}
	// Below the position an ack without a lease id is a noop, as before.
	if res := e.ack("g", noLease(r.Messages[0])); !res[0].Success || !res[0].Noop {
		t.Fatalf("ack below the position: %+v", res)
	}
}

// Scoped calls see only their tenant's queues: another tenant's partition,
// lease and dead letter behave as ones that do not exist.
func TestAckAndLeaseScopedToTenant(t *testing.T) {
	e := setup(t)
	e.push(broker.Item{Queue: "a\u241fq", Partition: "p", Payload: payload(1)},
		broker.Item{Queue: "a\u241fq", Partition: "p", Payload: payload(2)})
	e.tick("a\u241fq")
	r := e.pop(broker.Pop{Queue: "a\u241fq", Group: "g", Batch: 1, SubscriptionMode: "all"}, "p")
	for _, s := range []broker.Scope{broker.InTenant("b"), broker.InTenant("")} {
		res, err := broker.AckBatchIn(ctxT(t), e.conn, s, "g", []broker.Ack{ackOf(r.Messages[0], "")})
		if err != nil || res[0].Success || res[0].Error != "unknown partition" || res[0].Queue != "" {
			t.Fatalf("%+v: another tenant's ack: %+v %v", s, res, err)
		}
		if live, err := broker.LeaseLiveIn(ctxT(t), e.conn, s, r.LeaseID); err != nil || live {
			t.Fatalf("%+v: another tenant's lease live: %v %v", s, live, err)
		}
		if n, _, err := broker.ExtendLeaseIn(ctxT(t), e.conn, s, r.LeaseID, 3600); err != nil || n != 0 {
			t.Fatalf("%+v: another tenant's lease extended: %d %v", s, n, err)
		}
	}
	if live, err := broker.LeaseLiveIn(ctxT(t), e.conn, broker.InTenant("a"), r.LeaseID); err != nil || !live {
		t.Fatalf("own lease: %v %v", live, err)
	}
	res, err := broker.AckBatchIn(ctxT(t), e.conn, broker.InTenant("a"), "g", []broker.Ack{ackOf(r.Messages[0], "dlq")})
	if err != nil || !res[0].Success || !res[0].DLQ {
		t.Fatalf("own ack: %+v %v", res, err)
	}
	if _, total, err := broker.ListDLQIn(ctxT(t), e.conn, broker.InTenant(""), "", "", 10, 0); err != nil || total != 0 {
		t.Fatalf("default tenant's DLQ total: %d %v", total, err)
	}
	dls, total, err := broker.ListDLQIn(ctxT(t), e.conn, broker.InTenant("a"), "", "", 10, 0)
	if err != nil || total != 1 {
		t.Fatalf("own DLQ: %d %v", total, err)
	}
	if _, err := broker.ReplayDLQIn(ctxT(t), e.conn, broker.InTenant("b"), dls[0].ID); err == nil {
		t.Fatal("another tenant replayed a dead letter")
	}
	if _, err := broker.ReplayDLQIn(ctxT(t), e.conn, broker.InTenant("a"), dls[0].ID); err != nil {
		t.Fatalf("own replay: %v", err)
	}
}
