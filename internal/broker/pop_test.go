package broker_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgquectl/pgquectl/internal/broker"
)

func (e *env) pop(p broker.Pop, partition string) broker.PopResult {
	e.t.Helper()
	res, err := broker.PopPartition(ctxT(e.t), e.conn, p, partition)
	if err != nil {
		e.t.Fatalf("pop %+v %q: %v", p, partition, err)
	}
	return res
}

func (e *env) ack(group string, acks ...broker.Ack) []broker.AckResult {
	e.t.Helper()
	res, err := broker.AckBatch(ctxT(e.t), e.conn, group, acks)
	if err != nil {
		e.t.Fatalf("ack: %v", err)
	}
	return res
}

func ackOf(m broker.Message, status string) broker.Ack {
	return broker.Ack{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, Status: status, LeaseID: m.LeaseID}
}

func numbers(t *testing.T, ms []broker.Message) []int {
	t.Helper()
	out := make([]int, len(ms))
	for i, m := range ms {
		var v struct{ N int }
		if err := json.Unmarshal(m.Data, &v); err != nil {
			t.Fatalf("payload %s: %v", m.Data, err)
		}
		out[i] = v.N
	}
	return out
}

func seq(from, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = from + i
	}
	return out
}

func TestPopLeaseAckInOrder(t *testing.T) {
	e := setup(t)
	e.pushN("q", "p", 0, 5)
	e.tick("q")
	p := broker.Pop{Queue: "q", Batch: 3}
	r := e.pop(p, "p")
	if got := numbers(t, r.Messages); !slices.Equal(got, seq(0, 3)) {
		t.Fatalf("first pop %v", got)
	}
	if len(r.Verdicts) != 1 || r.Verdicts[0].Kind != broker.VerdictTook || r.Verdicts[0].Drained || r.LeaseID == "" {
		t.Fatalf("verdicts %+v lease %q", r.Verdicts, r.LeaseID)
	}
	if m := r.Messages[0]; m.DeliveryAttempt != 1 || m.Partition != "p" || m.TransactionID != m.ID {
		t.Errorf("message %+v", m)
	}
	// One live lease per (partition, group): a second pop is told leased.
	r2 := e.pop(p, "p")
	if len(r2.Messages) != 0 || len(r2.Verdicts) != 1 || r2.Verdicts[0].Kind != broker.VerdictLeased ||
		!r2.Verdicts[0].Until.Equal(r.Messages[0].LeaseUntil) {
		t.Fatalf("second pop %+v (lease until %v)", r2, r.Messages[0].LeaseUntil)
	}
	// Acking the middle message holds it ahead of the first (not done
	// until acked); the lease stays. The first then moves the position
	// over both.
	res := e.ack("", ackOf(r.Messages[1], ""))
	if !res[0].Success || res[0].LeaseReleased || res[0].Noop {
		t.Fatalf("ack middle %+v", res)
	}
	res = e.ack("", ackOf(r.Messages[0], ""), ackOf(r.Messages[2], "completed"))
	if !res[0].Success || res[0].Noop || res[0].LeaseReleased || !res[1].Success || !res[1].LeaseReleased {
		t.Fatalf("ack rest %+v", res)
	}
	r3 := e.pop(p, "p")
	if got := numbers(t, r3.Messages); !slices.Equal(got, seq(3, 2)) || !r3.Verdicts[0].Drained {
		t.Fatalf("third pop %v %+v", got, r3.Verdicts)
	}
	// Acking with a lease that does not exist fails and changes nothing.
	bad := ackOf(r3.Messages[0], "")
	bad.LeaseID = "6f1c1a2e-0000-4000-8000-000000000000"
	if res := e.ack("", bad); res[0].Success || res[0].Error != "invalid or expired lease" {
		t.Fatalf("unknown lease %+v", res)
	}
	bad.LeaseID = "not-a-uuid"
	if res := e.ack("", bad); res[0].Success || res[0].Error != "invalid or expired lease" {
		t.Fatalf("malformed lease %+v", res)
	}
	if res := e.ack("", broker.Ack{TransactionID: "x", PartitionID: "nope"}); res[0].Success || res[0].Error != "unknown partition" {
		t.Fatalf("unknown partition %+v", res)
	}
	res = e.ack("", ackOf(r3.Messages[1], ""), ackOf(r3.Messages[0], ""))
	if !res[0].Success || res[0].LeaseReleased || !res[1].Success || !res[1].LeaseReleased {
		t.Fatalf("ack last, then first %+v", res)
	}
	r4 := e.pop(p, "p")
	if len(r4.Messages) != 0 || r4.Verdicts[0].Kind != broker.VerdictEmpty {
		t.Fatalf("drained partition: %+v", r4)
	}
}

func TestLeaseExpiryRedelivers(t *testing.T) {
	e := setup(t)
	e.pushN("q", "p", 0, 2)
	e.tick("q")
	p := broker.Pop{Queue: "q", Batch: 10, LeaseSeconds: 1}
	r := e.pop(p, "p")
	if len(r.Messages) != 2 {
		t.Fatalf("pop %+v", r)
	}
	time.Sleep(1100 * time.Millisecond)
	r2 := e.pop(p, "p")
	if got := numbers(t, r2.Messages); !slices.Equal(got, seq(0, 2)) || r2.Messages[0].DeliveryAttempt != 2 || r2.LeaseID == r.LeaseID {
		t.Fatalf("after expiry %v %+v", got, r2.Messages)
	}
	// The old lease is gone: its ack fails; the new one works.
	if res := e.ack("", ackOf(r.Messages[1], "")); res[0].Success {
		t.Fatalf("expired lease acked: %+v", res)
	}
	if res := e.ack("", ackOf(r2.Messages[0], ""), ackOf(r2.Messages[1], "")); !res[0].Success || !res[1].Success || !res[1].LeaseReleased {
		t.Fatalf("ack %+v", res)
	}
}

func TestAutoAck(t *testing.T) {
	e := setup(t)
	e.pushN("q", "p", 0, 3)
	e.tick("q")
	p := broker.Pop{Queue: "q", Batch: 2, AutoAck: true}
	r := e.pop(p, "p")
	if got := numbers(t, r.Messages); !slices.Equal(got, seq(0, 2)) || r.LeaseID != "" {
		t.Fatalf("autoack pop %v lease %q", got, r.LeaseID)
	}
	r = e.pop(p, "p")
	if got := numbers(t, r.Messages); !slices.Equal(got, seq(2, 1)) || !r.Verdicts[0].Drained {
		t.Fatalf("autoack second pop %v %+v", got, r.Verdicts)
	}
	if r = e.pop(p, "p"); len(r.Messages) != 0 {
		t.Fatalf("third pop %+v", r)
	}
}

func TestPopBadInputAndOddNames(t *testing.T) {
	e := setup(t)
	group := `g "it's" 🚀 x`
	e.pushN("q", `p 'x' 🙂`, 0, 2)
	e.tick("q")
	r := e.pop(broker.Pop{Queue: "q", Group: group, Batch: 5, SubscriptionMode: "all"}, `p 'x' 🙂`)
	if len(r.Messages) != 2 || r.Messages[0].Partition != `p 'x' 🙂` {
		t.Fatalf("odd names: %+v", r)
	}
	res := e.ack(group, ackOf(r.Messages[0], ""), ackOf(r.Messages[1], ""))
	if !res[1].Success || !res[1].LeaseReleased || res[1].Queue != "q" || res[1].PartitionID != r.Messages[0].PartitionID {
		t.Fatalf("ack %+v", res)
	}
	cursors := e.int(`SELECT count(*) FROM pgque.group_cursor`)
	for name, p := range map[string]broker.Pop{
		"batch 0":         {Queue: "q", Batch: 0},
		"negative lease":  {Queue: "q", Batch: 1, LeaseSeconds: -5},
		"long group name": {Queue: "q", Group: strings.Repeat("g", 256), Batch: 1},
		"bad mode":        {Queue: "q", Group: "fresh", Batch: 1, SubscriptionMode: "latest"},
		"control char":    {Queue: "q", Group: "a\tb", Batch: 1},
	} {
		if _, err := broker.PopPartition(ctxT(t), e.conn, p, `p 'x' 🙂`); !errors.Is(err, broker.ErrInvalidInput) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := broker.PopPartition(ctxT(t), e.conn, broker.Pop{Queue: "nope", Batch: 1}, "p"); !errors.Is(err, broker.ErrNotFound) {
		t.Errorf("unknown queue: %v", err)
	}
	if r := e.pop(broker.Pop{Queue: "q", Batch: 1}, "no such partition"); len(r.Messages) != 0 || len(r.Verdicts) != 0 {
		t.Errorf("unknown partition: %+v", r)
	}
	if n := e.int(`SELECT count(*) FROM pgque.group_cursor`); n != cursors {
		t.Errorf("bad pops changed cursors: %d -> %d", cursors, n)
	}
	if n := e.int(`SELECT count(*) FROM pgque.broker_group`); n != 2 {
		t.Errorf("%d groups, want 2 (the odd one and queue mode)", n)
	}
}
