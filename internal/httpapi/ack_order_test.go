package httpapi_test

import (
	"testing"

	"github.com/pgquectl/pgquectl/internal/httpapi"
)

// Acks never lose nor steal: the order of the acks inside a leased batch
// does not matter, and an ack without a leaseId never completes a message
// another consumer holds under a live lease.

// expireLeases ends every live lease now (what time does, without waiting).
func (e *env) expireLeases() {
	e.t.Helper()
	e.exec(`UPDATE pgque.group_cursor SET gc_lease_until = now() - interval '1 second' WHERE gc_lease IS NOT NULL`)
}

// Row 5: consumer 1's lease expired, consumer 2 holds the redelivered
// batch; consumer 1's ack without leaseId must not complete it.
func TestAckWithoutLeaseDoesNotStealRedelivery(t *testing.T) {
	e := setup(t)
	b := e.start(httpapi.Config{})
	b.push(item("q", "", map[string]int{"n": 0}, ""), item("q", "", map[string]int{"n": 1}, ""))
	p1 := b.pop("/api/v1/pop/queue/q?batch=2")
	if p1 == nil || len(p1.Messages) != 2 {
		t.Fatalf("consumer 1's pop: %+v", p1)
	}
	e.expireLeases()
	p2 := b.pop("/api/v1/pop/queue/q?batch=2")
	if p2 == nil || len(p2.Messages) != 2 || p2.Messages[0].DeliveryAttempt != 2 {
		t.Fatalf("consumer 2's pop: %+v", p2)
	}
	for _, m := range p1.Messages {
		var out []ackRes
		b.must(200, "POST", "/api/v1/ack", map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID}, &out)
		if out[0].Success || out[0].Error == nil || *out[0].Error != "invalid or expired lease" {
			t.Fatalf("consumer 1's ack without leaseId of a message consumer 2 holds: %+v (want invalid or expired lease)", out[0])
		}
	}
	// Consumer 2's work is its own: both its acks complete, the last one
	// releases the lease.
	a := b.ack("", ackOf(p2.Messages[0], ""), ackOf(p2.Messages[1], ""))
	if !a[0].Success || a[0].Noop || !a[1].Success || a[1].Noop || !a[1].LeaseReleased {
		t.Fatalf("consumer 2's acks: %+v", a)
	}
}

// Row 6: pop 3, ack #2 completed, then #1 failed: #1 is retried
// (redelivered), never silently done. In one batch, [#2 completed, #1
// failed] with retryLimit 0 dead-letters #1.
func TestFailedAckAfterLaterAckIsHonoured(t *testing.T) {
	e := setup(t)
	b := e.start(httpapi.Config{})
	b.push(item("q", "", map[string]int{"n": 1}, ""), item("q", "", map[string]int{"n": 2}, ""),
		item("q", "", map[string]int{"n": 3}, ""))
	p := b.pop("/api/v1/pop/queue/q?batch=3")
	if p == nil || len(p.Messages) != 3 {
		t.Fatalf("pop: %+v", p)
	}
	if a := b.ack("", ackOf(p.Messages[1], "completed")); !a[0].Success || a[0].Noop {
		t.Fatalf("ack #2 completed: %+v", a)
	}
	a := b.ack("", ackOf(p.Messages[0], "failed"))
	if !a[0].Success || a[0].Noop || !a[0].LeaseReleased {
		t.Fatalf("ack #1 failed after #2 completed: %+v (want a retry: not noop, lease released)", a[0])
	}
	p2 := b.pop("/api/v1/pop/queue/q?batch=3")
	if p2 == nil || len(p2.Messages) == 0 || payloadN(p2.Messages[0]) != 1 {
		t.Fatalf("redelivery after the failed ack: %+v (want #1 first)", p2)
	}

	// One batch, out of order, retries exhausted: #1 is dead-lettered.
	b.must(200, "POST", "/api/v1/configure", `{"queue":"q","options":{"retryLimit":0}}`, nil)
	e.expireLeases()
	p3 := b.pop("/api/v1/pop/queue/q?batch=3")
	if p3 == nil || len(p3.Messages) != 3 {
		t.Fatalf("third pop: %+v", p3)
	}
	a = b.ack("", ackOf(p3.Messages[1], "completed"), ackOf(p3.Messages[0], "failed"))
	if !a[0].Success || !a[1].Success || a[1].Noop || !a[1].DLQ {
		t.Fatalf("[#2 completed, #1 failed]: %+v (want #1 dead-lettered)", a)
	}
	var list struct {
		Total    int `json:"total"`
		Messages []struct {
			TransactionID string `json:"transactionId"`
		} `json:"messages"`
	}
	b.must(200, "GET", "/api/v1/dlq?queue=q", nil, &list)
	if list.Total != 1 || list.Messages[0].TransactionID != p3.Messages[0].TransactionID {
		t.Fatalf("DLQ: %+v", list)
	}
	if a := b.ack("", ackOf(p3.Messages[2], "")); !a[0].Success || !a[0].LeaseReleased {
		t.Fatalf("ack #3: %+v", a)
	}
	if p := b.pop("/api/v1/pop/queue/q?batch=3"); p != nil {
		t.Fatalf("left after the batch: %+v", p)
	}
}
