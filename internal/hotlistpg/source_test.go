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

// An ack of a drained claim clears the partition's entry at once when the
// pop was checked out after a tick that this broker made after the
// partition's last mark (TickCovers): that pop saw every marked message.
// Before, the entry was listed ready again whenever the last mark was
// younger than EmptyGrace (2 s) - at 100 msg/s over 10 partitions always -
// and the pops that followed found it empty (~2 empty pop-list verdicts
// per message in bench/broker). A mark made after the tick call began is
// not known to be visible: its entry is still listed again (the grace).
func TestAckOfDrainedClaimClearsWhenATickCoversTheMark(t *testing.T) {
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
	tick := func() {
		t.Helper()
		var ticked bool
		if err := c.QueryRow(ctx, `SELECT ticked FROM pgque.broker_tick('c', NULL)`).Scan(&ticked); err != nil || !ticked {
			t.Fatalf("broker_tick: ticked %v, %v (want a new tick)", ticked, err)
		}
	}
	popAck := func(what string) {
		t.Helper()
		res, err := src.Pop(ctx, c, pop)
		if err != nil || len(res.Messages) != 1 {
			t.Fatalf("%s: pop: %d messages, %v (want 1)", what, len(res.Messages), err)
		}
		m := res.Messages[0]
		acks, err := broker.AckBatch(ctx, c, "g", []broker.Ack{{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, LeaseID: m.LeaseID}})
		if err != nil || len(acks) != 1 || !acks[0].Success || !acks[0].LeaseReleased {
			t.Fatalf("%s: ack: %+v %v", what, acks, err)
		}
		src.Note(broker.Event{Kind: broker.EventAcked, Queue: "c", Partitions: []int32{m.PartitionID},
			Acks: []broker.AckNote{{Group: "g", PartitionID: m.PartitionID, LeaseReleased: true}}})
	}
	listed := func(what string, want int) {
		t.Helper()
		if st := src.HotList().Stats(); st.Ready != want || st.Wheel != 0 {
			t.Fatalf("%s: ready %d wheel %d, want ready %d, wheel 0", what, st.Ready, st.Wheel, want)
		}
	}
	// The group's ring exists (first pop: cold reseed); the queue too.
	push()
	tick()
	popAck("first message")

	// No tick of ours covers the mark: the grace keeps the entry listed.
	push()
	tick()
	popAck("tick not reported")
	listed("drained claim acked, mark not known covered", 1)
	if res, err := src.Pop(ctx, c, pop); err != nil || len(res.Messages) != 0 {
		t.Fatalf("the re-listed entry: %d messages, %v (want an empty verdict)", len(res.Messages), err)
	}

	// Our tick, begun after the mark, covers it: the ack clears the entry.
	push()
	covered := src.TickCovers("c")
	tick()
	covered()
	popAck("covered")
	listed("drained claim acked, mark covered by our tick", 0)

	// A mark made after the tick call began is not covered by it.
	covered = src.TickCovers("c")
	push()
	tick()
	covered()
	popAck("marked after the tick began")
	listed("drained claim acked, mark after the tick began", 1)
}
