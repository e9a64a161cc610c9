package hotlist_test

import (
	"context"
	"fmt"
	"time"

	"github.com/pgquectl/pgquectl/internal/hotlist"
	"github.com/pgquectl/pgquectl/internal/queuekey"
)

// The broker's wildcard pop with the hot-list: check out candidates, run
// the pop-list over them, check the verdicts in; the deferred Release is
// the drop guard.
func ExampleHotList() {
	h := hotlist.New(hotlist.Options{EmptyGrace: -1})
	key := queuekey.Make("default", "orders")
	ctx := context.Background()

	pop := func() {
		co, err := h.Checkout(ctx, hotlist.Request{Key: key, Group: "billing", Batch: 10, Partitions: 1})
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		defer co.Release()
		var verdicts []hotlist.Verdict
		for _, c := range co.Candidates() {
			fmt.Println("candidate", c.Name)
			// here the broker runs its pop-list; say it took everything
			verdicts = append(verdicts, hotlist.Verdict{PartitionID: 0, Partition: c.Name,
				Kind: hotlist.VerdictTook, Drained: true, Until: time.Now().Add(time.Minute)})
		}
		co.CheckIn(verdicts)
	}

	pop() // creates the ring (a cold ring reseeds through Options.Reseeder)
	h.Mark(key, hotlist.Named("customer-42"), hotlist.SourcePush)
	pop()
	// the consumer acks the whole batch: the drained entry is cleared
	h.Acked(key, "billing", hotlist.ByID(0, "customer-42"), hotlist.AckOutcome{LeaseReleased: true})
	pop()
	fmt.Println("rings:", h.Stats().Rings, "ready:", h.Stats().Ready)
	// Output:
	// candidate customer-42
	// rings: 1 ready: 0
}
