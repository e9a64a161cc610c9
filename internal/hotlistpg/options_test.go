package hotlistpg_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/pgquectl/pgquectl/internal/broker"
	"github.com/pgquectl/pgquectl/internal/hotlist"
	"github.com/pgquectl/pgquectl/internal/hotlistpg"
	"github.com/pgquectl/pgquectl/internal/pgtest"
)

// The source reads a queue's delayedProcessing and windowBuffer when a pop
// first serves it and again after a configure: a push to a delayed or
// windowed queue parks its entry (wheel) instead of listing it ready, so
// no pop asks PostgreSQL about it before it can be claimed.
func TestSourcePassesQueueOptionsToMarks(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDB(t)
	c := pgtest.Conn(t, dsn)
	ctx := ctxT(t)
	src := hotlistpg.New(hotlistpg.Config{DB: c, Options: hotlist.Options{LogInterval: -1,
		ReseedInterval: time.Hour, ReseedPhase: time.Hour, SweepInterval: time.Hour}})
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
