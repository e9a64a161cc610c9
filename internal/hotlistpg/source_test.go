package hotlistpg_test

import (
	"encoding/json"
	"testing"

	"github.com/pgquectl/pgquectl/internal/broker"
)

// The source reads a queue's delayedProcessing and windowBuffer when a pop
// first serves it and again after a configure: a push to a delayed or
// windowed queue parks its entry (wheel) instead of listing it ready, so
// no pop asks PostgreSQL about it before it can be claimed.
func TestSourcePassesQueueOptionsToMarks(t *testing.T) {
	t.Parallel()
	c, src := quietSource(t)
	ctx := ctxT(t)
	pop := broker.Pop{Queue: "d", Group: "g", Batch: 10, MaxPartitions: 1, AutoAck: true}
	configure := func(opts string) {
		t.Helper()
		if _, err := broker.Configure(ctx, c, "d", nil, nil, json.RawMessage(opts)); err != nil {
			t.Fatal(err)
		}
		src.Note(broker.Event{Kind: broker.EventConfigured, Queue: "d"})
		if res, err := src.Pop(ctx, c, pop); err != nil || len(res.Messages) != 0 {
			t.Fatalf("pop after configure %s: %+v %v", opts, res, err)
		}
	}
	push := func(part string) {
		t.Helper()
		res, err := broker.Push(ctx, c, []broker.Item{{Queue: "d", Partition: part, Payload: json.RawMessage(`1`)}})
		if err != nil {
			t.Fatal(err)
		}
		src.Note(broker.Event{Kind: broker.EventPushed, Queue: "d", Partitions: []int32{res[0].PartitionID}})
	}
	want := func(what string, ready, wheel int) {
		t.Helper()
		if st := src.HotList().Stats(); st.Ready != ready || st.Wheel != wheel {
			t.Fatalf("%s: ready %d wheel %d, want %d and %d", what, st.Ready, st.Wheel, ready, wheel)
		}
	}
	configure(`{"delayedProcessing": 2}`)
	push("a")
	want("delayedProcessing 2", 0, 1)
	configure(`{"delayedProcessing": 0, "windowBuffer": 3}`)
	push("b")
	want("windowBuffer 3", 0, 2)
	configure(`{"windowBuffer": 0}`)
	push("c")
	want("no deferral", 1, 2)
}

// An ack of a drained claim clears the partition's entry at once: the pop
// was checked out after the partition's last mark, and pop_list closes its
// range at its own snapshot, so that pop saw every marked message (no tick
// is involved: there is none in this test). Before (ranges closed at the
// latest tick), the entry was listed ready again whenever the last mark was
// younger than EmptyGrace (2 s) unless this broker's own tick covered it -
// at 100 msg/s over 10 partitions always - and the pops that followed found
// it empty (~2 empty pop-list verdicts per message in bench/broker). A mark
// made after the check-out is not known to be seen: its entry is listed
// again.
func TestAckOfDrainedClaimClearsWithoutTick(t *testing.T) {
	t.Parallel()
	c, src := quietSource(t)
	ctx := ctxT(t)
	pop := broker.Pop{Queue: "c", Group: "g", Batch: 10, MaxPartitions: 4, LeaseSeconds: 60, SubscriptionMode: "all"}
	push := func() {
		t.Helper()
		res, err := broker.Push(ctx, c, []broker.Item{{Queue: "c", Partition: "p", Payload: json.RawMessage(`1`)}})
		if err != nil {
			t.Fatal(err)
		}
		src.Note(broker.Event{Kind: broker.EventPushed, Queue: "c", Partitions: []int32{res[0].PartitionID}})
	}
	ack := func(what string, m broker.Message) {
		t.Helper()
		acks, err := broker.AckBatch(ctx, c, "g", []broker.Ack{{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, LeaseID: m.LeaseID}})
		if err != nil || len(acks) != 1 || !acks[0].Success || !acks[0].LeaseReleased {
			t.Fatalf("%s: ack: %+v %v", what, acks, err)
		}
		src.Note(broker.Event{Kind: broker.EventAcked, Queue: "c", Partitions: []int32{m.PartitionID},
			Acks: []broker.AckNote{{Group: "g", PartitionID: m.PartitionID, LeaseReleased: true}}})
	}
	popOne := func(what string) broker.Message {
		t.Helper()
		res, err := src.Pop(ctx, c, pop)
		if err != nil || len(res.Messages) != 1 {
			t.Fatalf("%s: pop: %d messages, %v (want 1)", what, len(res.Messages), err)
		}
		return res.Messages[0]
	}
	listed := func(what string, want int) {
		t.Helper()
		if st := src.HotList().Stats(); st.Ready != want || st.Wheel != 0 {
			t.Fatalf("%s: ready %d wheel %d, want ready %d, wheel 0", what, st.Ready, st.Wheel, want)
		}
	}
	push() // creates the queue (and its first tick)
	var ticks int
	if err := c.QueryRow(ctx, `SELECT count(*) FROM pgque.tick`).Scan(&ticks); err != nil {
		t.Fatal(err)
	}
	ack("first message", popOne("first message"))
	listed("drained claim acked", 0)

	push()
	ack("second message", popOne("second message"))
	listed("drained claim acked again", 0)

	// A mark made after the check-out: the entry is listed again.
	push()
	m := popOne("third message")
	push()
	ack("third message", m)
	listed("drained claim acked, marked after its check-out", 1)
	var after int
	if err := c.QueryRow(ctx, `SELECT count(*) FROM pgque.tick`).Scan(&after); err != nil || after != ticks {
		t.Fatalf("ticks: %d -> %d, %v (want none made)", ticks, after, err)
	}
}
