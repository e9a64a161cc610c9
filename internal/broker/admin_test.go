package broker_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/pgquectl/pgquectl/internal/broker"
)

func TestExtendLease(t *testing.T) {
	e := setup(t)
	e.pushN("q", "a", 0, 1)
	e.pushN("q", "b", 0, 1)
	e.tick("q")
	r, err := broker.PopAny(ctxT(t), e.conn, broker.Pop{Queue: "q", Batch: 10, MaxPartitions: 2, LeaseSeconds: 30})
	if err != nil || len(r.Messages) != 2 {
		t.Fatalf("pop %+v %v", r, err)
	}
	n, until, err := broker.ExtendLease(ctxT(t), e.conn, r.LeaseID, 120)
	if err != nil || n != 2 || until.Before(time.Now().Add(100*time.Second)) {
		t.Fatalf("extend: %d %v %v", n, until, err)
	}
	// Never shortens.
	n, until2, err := broker.ExtendLease(ctxT(t), e.conn, r.LeaseID, 5)
	if err != nil || n != 2 || !until2.Equal(until) {
		t.Fatalf("shorter extend: %d %v (was %v) %v", n, until2, until, err)
	}
	for _, id := range []string{"00000000-0000-4000-8000-000000000000", "nope", ""} {
		if n, _, err := broker.ExtendLease(ctxT(t), e.conn, id, 10); err != nil || n != 0 {
			t.Errorf("unknown lease %q: %d %v", id, n, err)
		}
	}
	if _, _, err := broker.ExtendLease(ctxT(t), e.conn, r.LeaseID, -1); !errors.Is(err, broker.ErrInvalidInput) {
		t.Errorf("negative seconds: %v", err)
	}
}

func TestDLQListReplayPurge(t *testing.T) {
	e := setup(t)
	e.exec(`SELECT pgque.create_queue('q')`)
	e.exec(`SELECT pgque.subscribe('q', 'classic')`)
	e.push(broker.Item{Queue: "q", Partition: "p", Payload: payload(map[string]int{"n": 7}), TransactionID: "tx-7"})
	e.tick("q")
	p := broker.Pop{Queue: "q", Group: "g", Batch: 1, SubscriptionMode: "all"}
	r := e.pop(p, "p")
	if res := e.ack("g", broker.Ack{TransactionID: "tx-7", PartitionID: r.Messages[0].PartitionUUID, Status: "dlq", LeaseID: r.LeaseID, Error: "bad"}); !res[0].DLQ {
		t.Fatalf("dlq ack %+v", res)
	}
	// Another group still gets it normally.
	if r := e.pop(broker.Pop{Queue: "q", Group: "other", Batch: 5, SubscriptionMode: "all", AutoAck: true}, "p"); len(r.Messages) != 1 {
		t.Fatalf("other group: %+v", r)
	}
	dls, total, err := broker.ListDLQ(ctxT(t), e.conn, "q", "g", 100, 0)
	if err != nil || total != 1 || len(dls) != 1 {
		t.Fatalf("list: %+v %d %v", dls, total, err)
	}
	d := dls[0]
	if d.TransactionID != "tx-7" || d.Error != "bad" || d.Partition != "p" || d.Group != "g" || d.MessageID != r.Messages[0].ID || string(d.Data) != `{"n": 7}` {
		t.Errorf("dead letter %+v", d)
	}
	if _, total, _ := broker.ListDLQ(ctxT(t), e.conn, "q", "other", 100, 0); total != 0 {
		t.Errorf("other group's DLQ total %d", total)
	}
	if _, err := broker.ReplayDLQ(ctxT(t), e.conn, d.ID+1000); !errors.Is(err, broker.ErrNotFound) {
		t.Errorf("replay unknown: %v", err)
	}
	if _, err := broker.ReplayDLQ(ctxT(t), e.conn, d.ID); err != nil {
		t.Fatal(err)
	}
	e.tick("q")
	// Only group g gets the replayed message; the classic consumer and the
	// other group do not see it again.
	if r := e.pop(p, "p"); len(r.Messages) != 1 || r.Messages[0].TransactionID != "tx-7" {
		t.Fatalf("replayed: %+v", r)
	}
	if r := e.pop(broker.Pop{Queue: "q", Group: "other", Batch: 5, AutoAck: true}, "p"); len(r.Messages) != 0 {
		t.Errorf("other group got the replay: %+v", r.Messages)
	}
	if n := e.int(`SELECT count(*) FROM pgque.receive('q', 'classic', 10)`); n != 1 {
		t.Errorf("classic consumer got %d messages, want 1 (the original only)", n)
	}
	if n := e.int(`SELECT count(*) FROM pgque.group_dead_letter`); n != 0 {
		t.Errorf("%d dead letters after replay", n)
	}
	e.exec(`INSERT INTO pgque.group_dead_letter (gdl_queue, gdl_group, gdl_partition, gdl_msg, gdl_txn, gdl_ev_id, gdl_created)
	        SELECT 1, grp_id, 1, gen_random_uuid(), 'x', 1000 + grp_id, now() FROM pgque.broker_group`)
	if n, err := broker.PurgeDLQ(ctxT(t), e.conn, "q", "g"); err != nil || n != 1 {
		t.Errorf("purge g: %d %v", n, err)
	}
	if n, err := broker.PurgeDLQ(ctxT(t), e.conn, "q", ""); err != nil || n != 1 {
		t.Errorf("purge all: %d %v", n, err)
	}
	if _, err := broker.PurgeDLQ(ctxT(t), e.conn, "nope", ""); !errors.Is(err, broker.ErrNotFound) {
		t.Errorf("purge unknown queue: %v", err)
	}
}

func TestSeek(t *testing.T) {
	e := setup(t)
	e.pushN("q", "p", 0, 3)
	e.tick("q")
	p := broker.Pop{Queue: "q", Group: "g", Batch: 10, SubscriptionMode: "all", AutoAck: true}
	if r := e.pop(p, "p"); len(r.Messages) != 3 {
		t.Fatalf("first read %d", len(r.Messages))
	}
	mid := time.Now()
	time.Sleep(20 * time.Millisecond)
	e.pushN("q", "p", 3, 2)
	e.tick("q")
	// Back to a time: the events created since are delivered again.
	if n, err := broker.Seek(ctxT(t), e.conn, "q", "g", false, mid); err != nil || n != 1 {
		t.Fatalf("seek: %d %v", n, err)
	}
	if got := numbers(t, e.pop(p, "p").Messages); !slices.Equal(got, seq(3, 2)) {
		t.Fatalf("after seek to a time: %v", got)
	}
	if n, err := broker.Seek(ctxT(t), e.conn, "q", "g", false, mid.Add(-time.Hour)); err != nil || n != 1 {
		t.Fatalf("seek: %d %v", n, err)
	}
	if got := numbers(t, e.pop(p, "p").Messages); !slices.Equal(got, seq(0, 5)) {
		t.Fatalf("after seek to the past: %v", got)
	}
	// To the end: what is pending is skipped; a live lease is dropped.
	e.pushN("q", "p", 5, 2)
	e.tick("q")
	held := e.pop(broker.Pop{Queue: "q", Group: "g", Batch: 1}, "p")
	if len(held.Messages) != 1 {
		t.Fatalf("held %+v", held)
	}
	if _, err := broker.Seek(ctxT(t), e.conn, "q", "g", true, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if r := e.pop(p, "p"); len(r.Messages) != 0 {
		t.Fatalf("after seek to end: %v", numbers(t, r.Messages))
	}
	// The seek to the end skipped the held message: its ack under the
	// dropped lease changes nothing, a noop (the message is below the
	// position; docs/design/broker.md, Ack).
	if res := e.ack("g", ackOf(held.Messages[0], "")); !res[0].Success || !res[0].Noop {
		t.Errorf("ack of a lease dropped by a seek to the end: %+v; want a noop", res)
	}
	e.pushN("q", "p", 7, 1)
	e.tick("q")
	if got := numbers(t, e.pop(p, "p").Messages); !slices.Equal(got, []int{7}) {
		t.Fatalf("after seek to end and a push: %v", got)
	}
	if _, err := broker.Seek(ctxT(t), e.conn, "nope", "g", true, time.Time{}); !errors.Is(err, broker.ErrNotFound) {
		t.Errorf("seek unknown queue: %v", err)
	}
}

func TestDeleteGroup(t *testing.T) {
	e := setup(t)
	e.pushN("q1", "p", 0, 2)
	e.pushN("q2", "p", 0, 2)
	e.tick("q1")
	e.tick("q2")
	for _, q := range []string{"q1", "q2"} {
		if r := e.pop(broker.Pop{Queue: q, Group: "g", Batch: 10, SubscriptionMode: "all", AutoAck: true}, "p"); len(r.Messages) != 2 {
			t.Fatalf("%s: %d", q, len(r.Messages))
		}
	}
	if n, err := broker.DeleteGroup(ctxT(t), e.conn, "g", "q1", false); err != nil || n != 1 {
		t.Fatalf("delete on q1: %d %v", n, err)
	}
	// A deleted group starts over (first contact again); q2 is untouched.
	if r := e.pop(broker.Pop{Queue: "q1", Group: "g", Batch: 10, SubscriptionMode: "all", AutoAck: true}, "p"); len(r.Messages) != 2 {
		t.Errorf("q1 after delete: %d", len(r.Messages))
	}
	if r := e.pop(broker.Pop{Queue: "q2", Group: "g", Batch: 10, SubscriptionMode: "all", AutoAck: true}, "p"); len(r.Messages) != 0 {
		t.Errorf("q2 after deleting on q1: %d", len(r.Messages))
	}
	if n, err := broker.DeleteGroup(ctxT(t), e.conn, "g", "", true); err != nil || n != 2 {
		t.Fatalf("delete everywhere: %d %v", n, err)
	}
	if n := e.int(`SELECT count(*) FROM pgque.broker_group WHERE grp_name = 'g'`); n != 0 {
		t.Errorf("group name kept")
	}
	if n, err := broker.DeleteGroup(ctxT(t), e.conn, "never", "", false); err != nil || n != 0 {
		t.Errorf("unknown group: %d %v", n, err)
	}
}

func TestConfigureAndDeleteQueue(t *testing.T) {
	e := setup(t)
	ns := "billing"
	c, err := broker.Configure(ctxT(t), e.conn, "cq", &ns, nil, json.RawMessage(`{"leaseTime":30,"retryLimit":5,"deadLetterQueue":false,"priority":7}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Queue != "cq" || c.Namespace != "billing" || c.Options["leaseTime"] != float64(30) || c.Options["retryLimit"] != float64(5) ||
		c.Options["deadLetterQueue"] != false || c.Options["dedupWindowSeconds"] != float64(3600) || c.Options["priority"] != float64(7) {
		t.Fatalf("configured %+v", c)
	}
	// Absent keys keep their value; null resets.
	c, err = broker.Configure(ctxT(t), e.conn, "cq", nil, nil, json.RawMessage(`{"retryLimit":null,"windowBuffer":2}`))
	if err != nil || c.Options["leaseTime"] != float64(30) || c.Options["retryLimit"] != float64(3) || c.Options["windowBuffer"] != float64(2) || c.Namespace != "billing" {
		t.Fatalf("reconfigured %+v %v", c, err)
	}
	before := e.int(`SELECT count(*) FROM pgque.queue q WHERE q.queue_options::text = (SELECT queue_options::text FROM pgque.queue WHERE queue_name = 'cq')`)
	for name, opts := range map[string]string{
		"unknown key":  `{"leaseTime":1,"nope":1}`,
		"wrong type":   `{"leaseTime":"30"}`,
		"negative":     `{"retryLimit":-1}`,
		"fraction":     `{"retryLimit":1.5}`,
		"not a bool":   `{"deadLetterQueue":1}`,
		"not a object": `[1]`,
	} {
		if _, err := broker.Configure(ctxT(t), e.conn, "cq", nil, nil, json.RawMessage(opts)); !errors.Is(err, broker.ErrInvalidInput) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if after := e.int(`SELECT count(*) FROM pgque.queue q WHERE q.queue_options::text = (SELECT queue_options::text FROM pgque.queue WHERE queue_name = 'cq')`); after != before {
		t.Errorf("bad configure changed the options")
	}
	// The lease time option is used by pops.
	if _, err := broker.Configure(ctxT(t), e.conn, "cq", nil, nil, json.RawMessage(`{"windowBuffer":null}`)); err != nil {
		t.Fatal(err)
	}
	e.pushN("cq", "p", 0, 1)
	e.tick("cq")
	r := e.pop(broker.Pop{Queue: "cq", Batch: 1}, "p")
	if d := time.Until(r.Messages[0].LeaseUntil); d < 20*time.Second || d > 31*time.Second {
		t.Errorf("lease of %v, want the configured 30 s", d)
	}
	// Delete cascades.
	if err := broker.DeleteQueue(ctxT(t), e.conn, "cq"); err != nil {
		t.Fatal(err)
	}
	for _, tbl := range []string{"queue", "group_cursor", "group_subscription", "partition"} {
		if n := e.int(fmt.Sprintf(`SELECT count(*) FROM pgque.%s`, tbl)); n != 0 {
			t.Errorf("%d rows left in %s", n, tbl)
		}
	}
	if err := broker.DeleteQueue(ctxT(t), e.conn, "cq"); !errors.Is(err, broker.ErrNotFound) {
		t.Errorf("delete unknown: %v", err)
	}
}

func TestWildcardPopAndReseed(t *testing.T) {
	e := setup(t)
	for i := 0; i < 30; i++ {
		e.push(broker.Item{Queue: "q", Partition: fmt.Sprintf("p%02d", i), Payload: payload(map[string]int{"n": i})})
	}
	// Some partitions exist but have nothing new for the group.
	e.tick("q")
	p := broker.Pop{Queue: "q", Batch: 100, MaxPartitions: 5}
	r, err := broker.PopAny(ctxT(t), e.conn, p)
	if err != nil || len(r.Messages) != 5 {
		t.Fatalf("wildcard pop: %d %v", len(r.Messages), err)
	}
	// Reseed: keyset pages by partition id, lease-held partitions included.
	var all []broker.Candidate
	after := int32(-1)
	for {
		page, err := broker.Reseed(ctxT(t), e.conn, "q", "", after, 7)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		all = append(all, page...)
		after = page[len(page)-1].PartitionID
	}
	leased := 0
	for i, c := range all {
		if i > 0 && c.PartitionID <= all[i-1].PartitionID {
			t.Fatalf("reseed not ordered: %+v", all)
		}
		if !c.LeaseUntil.IsZero() {
			leased++
		}
	}
	if len(all) != 30 || leased != 5 {
		t.Fatalf("reseed listed %d partitions (%d leased), want 30 (5)", len(all), leased)
	}
	// Draining everything with wildcard pops.
	seen := 5
	for i := 0; i < 20 && seen < 30; i++ {
		r, err := broker.PopAny(ctxT(t), e.conn, broker.Pop{Queue: "q", Batch: 100, MaxPartitions: 5, AutoAck: true})
		if err != nil {
			t.Fatal(err)
		}
		seen += len(r.Messages)
	}
	if seen != 30 {
		t.Fatalf("wildcard pops saw %d of 30", seen)
	}
	page, err := broker.Reseed(ctxT(t), e.conn, "q", "", -1, 100)
	if err != nil || len(page) != 5 {
		t.Fatalf("after draining, reseed lists %d (the 5 still leased), %v", len(page), err)
	}
	if page, _ := broker.Reseed(ctxT(t), e.conn, "nope", "g", -1, 10); len(page) != 0 {
		t.Errorf("unknown queue reseed %+v", page)
	}
}

func TestPopByLabel(t *testing.T) {
	e := setup(t)
	ns, task := "ns", "resize"
	for _, q := range []string{"a1", "a2", "b1"} {
		if _, err := broker.Configure(ctxT(t), e.conn, q, &ns, &task, nil); err != nil {
			t.Fatal(err)
		}
	}
	other := "other"
	if _, err := broker.Configure(ctxT(t), e.conn, "b1", &other, nil, nil); err != nil {
		t.Fatal(err)
	}
	e.pushN("a2", "p", 0, 2)
	e.pushN("b1", "p", 10, 2)
	e.tick("a2")
	e.tick("b1")
	q, r, err := broker.PopByLabel(ctxT(t), e.conn, "ns", "", broker.Pop{Batch: 10, AutoAck: true})
	if err != nil || q != "a2" || !slices.Equal(numbers(t, r.Messages), seq(0, 2)) {
		t.Fatalf("by namespace: %q %+v %v", q, r, err)
	}
	// b1 moved to namespace "other" but kept its task.
	q, r, err = broker.PopByLabel(ctxT(t), e.conn, "ns", "resize", broker.Pop{Batch: 10, AutoAck: true})
	if err != nil || q != "" || len(r.Messages) != 0 {
		t.Fatalf("by namespace and task after draining: %q %+v %v", q, r, err)
	}
	q, r, err = broker.PopByLabel(ctxT(t), e.conn, "", "resize", broker.Pop{Batch: 10, AutoAck: true})
	if err != nil || q != "b1" || !slices.Equal(numbers(t, r.Messages), seq(10, 2)) {
		t.Fatalf("by task: %q %+v %v", q, r, err)
	}
	if _, _, err := broker.PopByLabel(ctxT(t), e.conn, "", "", broker.Pop{Batch: 1}); !errors.Is(err, broker.ErrInvalidInput) {
		t.Errorf("no label: %v", err)
	}
}
