package broker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/pgquectl/pgquectl/internal/broker"
)

// asRole runs f in a transaction (rolled back) as role: a role with only
// its pgque_* grants, no table privileges.
func (e *env) asRole(role string, f func(q broker.Querier) error) error {
	e.t.Helper()
	tx, err := e.conn.Begin(ctxT(e.t))
	if err != nil {
		e.t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctxT(e.t), `SET LOCAL ROLE `+role); err != nil {
		e.t.Fatal(err)
	}
	return f(tx)
}

// The read routes (resources, status, consumer groups, DLQ list), the
// transaction route's requiredLeases and DLQ replay work for the least
// privileged role the docs give them (pgque_reader; replay: pgque_admin),
// which holds EXECUTE on pgque functions and no table privileges: none of
// them reads a pgque table directly.
func TestReadOperationsNeedNoTableGrants(t *testing.T) {
	e := setup(t)
	e.pushN("q", "p", 0, 3)
	e.tick("q")
	r := e.pop(broker.Pop{Queue: "q", Group: "g", Batch: 1, SubscriptionMode: "all", LeaseSeconds: 60}, "p")
	if len(r.Messages) != 1 {
		t.Fatalf("pop: %+v", r)
	}
	if res := e.ack("g", broker.Ack{TransactionID: r.Messages[0].TransactionID, PartitionID: r.Messages[0].PartitionUUID,
		Status: "dlq", LeaseID: r.LeaseID}); !res[0].DLQ {
		t.Fatalf("dlq ack: %+v", res)
	}
	live := e.pop(broker.Pop{Queue: "q", Batch: 1, LeaseSeconds: 60}, "p")
	if live.LeaseID == "" {
		t.Fatalf("queue-mode pop: %+v", live)
	}
	if err := e.asRole("pgque_reader", func(q broker.Querier) error {
		qs, err := broker.Queues(ctxT(t), q, "")
		if err != nil {
			return err
		}
		if len(qs) != 1 || qs[0].Queue != "q" || qs[0].Partitions != 2 || qs[0].Options["leaseTime"] != float64(300) {
			return fmt.Errorf("queues: %+v", qs)
		}
		if qs, err := broker.Queues(ctxT(t), q, "none"); err != nil || len(qs) != 0 {
			return fmt.Errorf("unknown queue: %+v %v", qs, err)
		}
		d, err := broker.QueueDepth(ctxT(t), q, "q", "")
		if err != nil {
			return err
		}
		if len(d) != 2 || d[1].Partition != "p" || d[1].Retained != 3 || d[1].Pending != 3 || d[0].Retained != 0 {
			return fmt.Errorf("depth: %+v", d)
		}
		for lease, want := range map[string]bool{live.LeaseID: true, "00000000-0000-4000-8000-000000000000": false, "x": false} {
			got, err := broker.LeaseLive(ctxT(t), q, lease)
			if err != nil || got != want {
				return fmt.Errorf("lease %q live: %v %v, want %v", lease, got, err, want)
			}
		}
		if gs, err := broker.Groups(ctxT(t), q, "q"); err != nil || len(gs) != 2 {
			return fmt.Errorf("groups: %+v %v", gs, err)
		}
		if dls, total, err := broker.ListDLQ(ctxT(t), q, "q", "g", 10, 0); err != nil || total != 1 || len(dls) != 1 {
			return fmt.Errorf("dlq list: %+v %d %v", dls, total, err)
		}
		return nil
	}); err != nil {
		t.Fatalf("as pgque_reader: %v", err)
	}
	if err := e.asRole("pgque_writer", func(q broker.Querier) error {
		_, err := broker.Queues(ctxT(t), q, "")
		return err
	}); err != nil {
		t.Fatalf("resources as pgque_writer: %v", err)
	}
	id := e.int(`SELECT gdl_id FROM pgque.group_dead_letter`)
	if err := e.asRole("pgque_admin", func(q broker.Querier) error {
		msg, queue, err := broker.ReplayDLQQueue(ctxT(t), q, id)
		if err != nil || msg == "" || queue != "q" {
			return fmt.Errorf("replay: %q %q %v", msg, queue, err)
		}
		if _, _, err := broker.ReplayDLQQueue(ctxT(t), q, id); !errors.Is(err, broker.ErrNotFound) {
			return fmt.Errorf("replaying it again: %v, want ErrNotFound", err)
		}
		return nil
	}); err != nil {
		t.Fatalf("as pgque_admin: %v", err)
	}
}

// Queue depth is what each group has still to do, not what is retained.
func TestQueueDepthCountsPending(t *testing.T) {
	e := setup(t)
	e.pushN("q", "a", 0, 5)
	e.pushN("q", "b", 0, 3)
	e.tick("q")
	depth := func(group string) map[string][2]int64 {
		t.Helper()
		d, err := broker.QueueDepth(ctxT(t), e.conn, "q", group)
		if err != nil {
			t.Fatalf("depth %q: %v", group, err)
		}
		out := map[string][2]int64{}
		for _, p := range d {
			out[p.Partition] = [2]int64{p.Pending, p.Retained}
		}
		return out
	}
	check := func(group string, want map[string][2]int64) {
		t.Helper()
		if got := depth(group); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("depth %q: got (pending, retained) %v, want %v", group, got, want)
		}
	}
	check("", map[string][2]int64{"Default": {0, 0}, "a": {5, 5}, "b": {3, 3}})

	// Queue mode: 2 of a popped and acked, 1 more leased (still pending).
	r := e.pop(broker.Pop{Queue: "q", Batch: 2, LeaseSeconds: 60}, "a")
	if len(r.Messages) != 2 {
		t.Fatalf("pop: %+v", r)
	}
	for _, m := range r.Messages {
		e.ack("", broker.Ack{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, LeaseID: r.LeaseID})
	}
	if r := e.pop(broker.Pop{Queue: "q", Batch: 1, LeaseSeconds: 60}, "a"); len(r.Messages) != 1 {
		t.Fatalf("pop: %+v", r)
	}
	check("", map[string][2]int64{"Default": {0, 0}, "a": {3, 5}, "b": {3, 3}})
	check(broker.QueueMode, map[string][2]int64{"Default": {0, 0}, "a": {3, 5}, "b": {3, 3}})

	// A group in mode all has everything to do; one in mode new nothing,
	// until a push (not ticked yet: pending counts committed events).
	e.pop(broker.Pop{Queue: "q", Group: "gall", Batch: 1, SubscriptionMode: "all", AutoAck: true}, "b")
	e.pop(broker.Pop{Queue: "q", Group: "gnew", Batch: 1, SubscriptionMode: "new", AutoAck: true}, "b")
	check("gall", map[string][2]int64{"Default": {0, 0}, "a": {5, 5}, "b": {2, 3}})
	check("gnew", map[string][2]int64{"Default": {0, 0}, "a": {0, 5}, "b": {0, 3}})
	e.pushN("q", "b", 10, 2)
	check("gnew", map[string][2]int64{"Default": {0, 0}, "a": {0, 5}, "b": {2, 5}})
	check("", map[string][2]int64{"Default": {0, 0}, "a": {3, 5}, "b": {5, 5}})

	// Auto-acked to the end: nothing pending.
	e.tick("q")
	for {
		r := e.pop(broker.Pop{Queue: "q", Group: "gall", Batch: 10, SubscriptionMode: "all", AutoAck: true}, "b")
		if len(r.Messages) == 0 {
			break
		}
	}
	check("gall", map[string][2]int64{"Default": {0, 0}, "a": {5, 5}, "b": {0, 5}})

	if _, err := broker.QueueDepth(ctxT(t), e.conn, "q", "never"); !errors.Is(err, broker.ErrNotFound) {
		t.Errorf("a group that never subscribed: %v, want ErrNotFound", err)
	}
	if _, err := broker.QueueDepth(ctxT(t), e.conn, "none", ""); !errors.Is(err, broker.ErrNotFound) {
		t.Errorf("unknown queue: %v, want ErrNotFound", err)
	}
}

// SetSubscription moves where a group's later partitions start; cursors it
// has keep their place; errors change nothing.
func TestSetSubscription(t *testing.T) {
	e := setup(t)
	e.pushN("q", "a", 0, 2)
	e.tick("q")
	// First contact in mode new: a's cursor starts at the tail.
	if r := e.pop(broker.Pop{Queue: "q", Group: "g", Batch: 10, SubscriptionMode: "new", AutoAck: true}, "a"); len(r.Messages) != 0 {
		t.Fatalf("mode new got the backlog: %+v", r)
	}
	e.pushN("q", "b", 0, 3)
	e.tick("q")
	before := e.int(`SELECT count(*) FROM pgque.group_subscription WHERE gs_mode = 'new'`)
	for _, c := range []struct {
		group, mode string
		at          time.Time
		want        error
	}{
		{"g", "sometimes", time.Time{}, broker.ErrInvalidInput},
		{"g", "all", time.Now(), broker.ErrInvalidInput},
		{"g", "", time.Time{}, broker.ErrInvalidInput},
		{broker.QueueMode, "all", time.Time{}, broker.ErrInvalidInput},
		{"nobody", "all", time.Time{}, broker.ErrNotFound},
	} {
		if _, err := broker.SetSubscription(ctxT(t), e.conn, c.group, "", c.mode, c.at); !errors.Is(err, c.want) {
			t.Errorf("SetSubscription(%q, %q, %v): %v, want %v", c.group, c.mode, c.at, err, c.want)
		}
	}
	if _, err := broker.SetSubscription(ctxT(t), e.conn, "g", "other-prefix", "all", time.Time{}); !errors.Is(err, broker.ErrNotFound) {
		t.Errorf("another tenant's prefix: %v, want ErrNotFound", err)
	}
	if n := e.int(`SELECT count(*) FROM pgque.group_subscription WHERE gs_mode = 'new'`); n != before || n != 1 {
		t.Fatalf("failed calls changed subscriptions: %d mode-new rows, was %d", n, before)
	}
	if n, err := broker.SetSubscription(ctxT(t), e.conn, "g", "q", "all", time.Time{}); err != nil || n != 1 {
		t.Fatalf("set all: %d %v", n, err)
	}
	// b is reached later: from the oldest event. a keeps its cursor.
	if r := e.pop(broker.Pop{Queue: "q", Group: "g", Batch: 10, AutoAck: true}, "b"); len(r.Messages) != 3 {
		t.Fatalf("b after mode all: %d messages, want 3", len(r.Messages))
	}
	if r := e.pop(broker.Pop{Queue: "q", Group: "g", Batch: 10, AutoAck: true}, "a"); len(r.Messages) != 0 {
		t.Fatalf("a's cursor moved back: %+v", r)
	}
	// From a time: only what was created at or after it.
	e.pushN("q", "c", 0, 2)
	time.Sleep(20 * time.Millisecond)
	mid := time.Now()
	time.Sleep(20 * time.Millisecond)
	e.pushN("q", "c", 10, 1)
	e.tick("q")
	if n, err := broker.SetSubscription(ctxT(t), e.conn, "g", "", "", mid); err != nil || n != 1 {
		t.Fatalf("set from: %d %v", n, err)
	}
	r := e.pop(broker.Pop{Queue: "q", Group: "g", Batch: 10, AutoAck: true}, "c")
	var v struct{ N int }
	if len(r.Messages) == 1 {
		_ = json.Unmarshal(r.Messages[0].Data, &v)
	}
	if len(r.Messages) != 1 || v.N != 10 {
		t.Fatalf("c after from %v: %+v", mid, r.Messages)
	}
	if m := e.int(`SELECT count(*) FROM pgque.group_subscription WHERE gs_mode = 'from'`); m != 1 {
		t.Fatalf("mode from rows: %d", m)
	}
}
