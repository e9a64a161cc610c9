package hotlistpg_test

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/pgquectl/pgquectl/internal/broker"
	"github.com/pgquectl/pgquectl/internal/pgtest"
)

// TestPerPopCost measures, against a real PostgreSQL, the statements of
// the hot-list path at 100 and 10,000 partitions (every partition with a
// old event, group g subscribed after it, 10 of them hot): one reseed scan (group_reseed, all
// pages) and pop_list over the hot candidates. Numbers only
// (docs/hotlist.md, "What grows with the partitions"); PGQUE_HOTCOST=1
// runs it.
func TestPerPopCost(t *testing.T) {
	if os.Getenv("PGQUE_HOTCOST") != "1" {
		t.Skip("measurement: set PGQUE_HOTCOST=1")
	}
	for _, n := range []int{100, 10000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) { perPopCost(t, n) })
	}
}

func perPopCost(t *testing.T, parts int) {
	dsn := pgtest.NewDB(t)
	c := pgtest.Conn(t, dsn)
	ctx := ctxT(t)
	tick := func() {
		if _, err := c.Exec(ctx, `WITH f AS MATERIALIZED (SELECT pgque.force_next_tick('k') AS t) SELECT pgque.ticker('k') FROM f`); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := broker.Configure(ctx, c, "k", nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	var items []broker.Item
	for i := range parts {
		items = append(items, broker.Item{Queue: "k", Partition: fmt.Sprintf("p%05d", i), Payload: json.RawMessage(`0`)})
	}
	res, err := broker.Push(ctx, c, items)
	if err != nil {
		t.Fatal(err)
	}
	tick()
	ids := make([]int32, len(res))
	for i, r := range res {
		ids[i] = r.PartitionID
	}
	// g subscribes now ("new": the set-up messages are not its); the
	// partitions it has no cursor for are judged from its subscription.
	pop := broker.Pop{Queue: "k", Group: "g", Batch: 10, MaxPartitions: 1, AutoAck: true}
	if _, err := broker.PopList(ctx, c, pop, []int32{}); err != nil {
		t.Fatal(err)
	}
	tick()
	hot := make([]int32, 10)
	for i := range hot {
		hot[i] = ids[i*(parts/10)]
	}
	const rounds = 30
	var reseed, list time.Duration
	rows := 0
	for range rounds {
		items = items[:0]
		for _, id := range hot {
			items = append(items, broker.Item{Queue: "k", Partition: fmt.Sprintf("p%05d", int(id-ids[0])), Payload: json.RawMessage(`1`)})
		}
		if _, err := broker.Push(ctx, c, items); err != nil {
			t.Fatal(err)
		}
		tick()
		s := time.Now()
		after := int32(-1)
		for {
			page, err := broker.Reseed(ctx, c, "k", "g", after, 10000)
			if err != nil {
				t.Fatal(err)
			}
			rows += len(page)
			if len(page) < 10000 {
				break
			}
			after = page[len(page)-1].PartitionID
		}
		reseed += time.Since(s)
		for _, id := range hot {
			s = time.Now()
			if _, err := broker.PopList(ctx, c, pop, []int32{id}); err != nil {
				t.Fatal(err)
			}
			list += time.Since(s)
		}
	}
	t.Logf("partitions=%d: reseed %.2f ms per scan (%.1f rows), pop_list %.2f ms per call",
		parts, float64(reseed.Microseconds())/1e3/rounds, float64(rows)/rounds, float64(list.Microseconds())/1e3/rounds/10)
}
