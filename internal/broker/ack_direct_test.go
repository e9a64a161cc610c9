package broker_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgquectl/pgquectl/internal/broker"
)

// ackStep is one ack request of a case: messages (indexes into the leased
// batch) with a status and a lease variant.
type ackStep struct {
	msgs   []int
	status string
	lease  string // "" own lease id, "none", "wrong"
}

// An ack through the AckCombiner with a cached route goes through the
// queue's ack_direct when it is group_ack's fast-path case, and answers
// exactly as pgque.group_ack does, leaving the cursor as it does; every
// other case (out of order, a failed status, a wrong lease, a repeated
// ack) falls back to pgque.group_ack and answers the same. Each case runs
// on two partitions with the same messages: "g<i>" acked by
// pgque.group_ack (broker.AckBatch), "d<i>" through the combiner; then the
// leases are expired and both partitions popped dry: the same messages
// come back (or none).
func TestAckDirectSameAnswers(t *testing.T) {
	e := setup(t)
	pool, err := pgxpool.New(ctxT(t), e.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	c := broker.NewAckCombiner(pool, 1, 0, 30*time.Second)
	cases := []struct {
		name   string
		n      int
		steps  []ackStep
		direct int64 // statements ack_direct answered
	}{
		{"whole batch in order", 3, []ackStep{{msgs: []int{0, 1, 2}}}, 1},
		{"prefix, then the rest", 3, []ackStep{{msgs: []int{0}}, {msgs: []int{1, 2}, status: "success"}}, 2},
		{"one by one, no lease id", 3, []ackStep{{msgs: []int{0}, lease: "none"}, {msgs: []int{1}, lease: "none"}, {msgs: []int{2}, lease: "none"}}, 3},
		{"out of order", 3, []ackStep{{msgs: []int{1}}, {msgs: []int{0}}, {msgs: []int{2}}}, 1}, // the last is next again
		{"swapped in one request", 2, []ackStep{{msgs: []int{1, 0}}}, 0},
		{"repeated in one request", 2, []ackStep{{msgs: []int{0, 0}}}, 0},
		{"wrong lease", 2, []ackStep{{msgs: []int{0}, lease: "wrong"}, {msgs: []int{0, 1}}}, 1},
		{"failed, then completed", 2, []ackStep{{msgs: []int{0}, status: "failed"}}, 0},
		{"retried ack after the batch", 2, []ackStep{{msgs: []int{0, 1}}, {msgs: []int{0, 1}}, {msgs: []int{1}, lease: "none"}}, 1},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e.t = t
			gp, dp := fmt.Sprint("g", i), fmt.Sprint("d", i)
			// d's route: one message acked through the combiner first
			// (pgque.group_ack, then the route is looked up).
			e.pushN("q", dp, -1, 1)
			e.tick("q")
			w := e.pop(broker.Pop{Queue: "q", Group: "g", Batch: 1, SubscriptionMode: "all"}, dp)
			if _, err := c.Ack(ctxT(t), broker.AnyTenant, []broker.AckPart{{Group: "g", Acks: []broker.Ack{ackOf(w.Messages[0], "")}}}); err != nil {
				t.Fatal(err)
			}
			e.pushN("q", gp, 0, tc.n)
			e.pushN("q", dp, 0, tc.n)
			e.tick("q")
			pop := func(p string) []broker.Message {
				r := e.pop(broker.Pop{Queue: "q", Group: "g", Batch: tc.n, SubscriptionMode: "all"}, p)
				if len(r.Messages) != tc.n {
					t.Fatalf("pop %s: %d messages, want %d", p, len(r.Messages), tc.n)
				}
				return r.Messages
			}
			gm, dm := pop(gp), pop(dp)
			before := c.Stats().Direct
			for s, st := range tc.steps {
				acks := func(ms []broker.Message) []broker.Ack {
					var out []broker.Ack
					for _, k := range st.msgs {
						a := ackOf(ms[k], st.status)
						switch st.lease {
						case "none":
							a.LeaseID = ""
						case "wrong":
							a.LeaseID = "00000000-0000-4000-8000-000000000001"
						}
						out = append(out, a)
					}
					return out
				}
				gr := e.ack("g", acks(gm)...)
				dr, err := c.Ack(ctxT(t), broker.AnyTenant, []broker.AckPart{{Group: "g", Acks: acks(dm)}})
				if err != nil {
					t.Fatal(err)
				}
				for k := range gr {
					a, b := gr[k], dr[0][k]
					a.TransactionID, b.TransactionID, a.PartitionID, b.PartitionID = "", "", 0, 0
					if a != b {
						t.Errorf("step %d item %d: group_ack %+v, direct %+v", s, k, a, b)
					}
				}
			}
			if got := c.Stats().Direct - before; got != tc.direct {
				t.Errorf("ack_direct answered %d statements, want %d", got, tc.direct)
			}
			// The cursors: what comes back once the leases end.
			e.expire()
			rest := func(p string) []int {
				r := e.pop(broker.Pop{Queue: "q", Group: "g", Batch: 10, SubscriptionMode: "all"}, p)
				return numbers(t, r.Messages)
			}
			if g, d := rest(gp), rest(dp); !slices.Equal(g, d) {
				t.Errorf("redelivered after the case: group_ack's partition %v, direct's %v", g, d)
			}
			e.expire()
		})
	}
}

// A cached ack route goes stale when the queue's event tables switch:
// ack_direct writes nothing and says so, the ack goes through
// pgque.group_ack (and is answered as usual), the route is looked up
// again, and the next ack goes direct again.
func TestAckDirectStaleAfterRotation(t *testing.T) {
	e := setup(t)
	pool, err := pgxpool.New(ctxT(t), e.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	c := broker.NewAckCombiner(pool, 1, 0, 30*time.Second)
	ackAll := func(ms []broker.Message) {
		t.Helper()
		var acks []broker.Ack
		for _, m := range ms {
			acks = append(acks, ackOf(m, ""))
		}
		res, err := c.Ack(ctxT(t), broker.AnyTenant, []broker.AckPart{{Group: "g", Acks: acks}})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res[0] {
			if !r.Success || r.Noop {
				t.Fatalf("ack: %+v", res[0])
			}
		}
	}
	round := func(from int) {
		t.Helper()
		e.pushN("q", "p", from, 2)
		e.tick("q")
		ackAll(e.pop(broker.Pop{Queue: "q", Group: "g", Batch: 2, SubscriptionMode: "all"}, "p").Messages)
	}
	round(0) // pgque.group_ack, the route learnt
	round(2) // direct
	if d := c.Stats().Direct; d != 1 {
		t.Fatalf("ack_direct statements %d, want 1", d)
	}
	e.exec(`SELECT pgque.set_queue_config('q', 'rotation_period', '0')`)
	e.switchOnce("q", nil)
	round(4) // stale: pgque.group_ack
	if d := c.Stats().Direct; d != 1 {
		t.Fatalf("after the switch: ack_direct statements %d, want still 1", d)
	}
	round(6) // the new route
	if d := c.Stats().Direct; d != 2 {
		t.Fatalf("after the switch, route looked up again: ack_direct statements %d, want 2", d)
	}
	if n := e.int(`SELECT count(*) FROM pgque.group_cursor WHERE gc_lease IS NOT NULL`); n != 0 {
		t.Fatalf("%d leases left", n)
	}
}

// A consumer group deleted (with its metadata) and made again by the next
// pop has a new id: the cached route names the old one, ack_direct writes
// nothing and says so, the ack goes through pgque.group_ack (answered as
// usual), and the route is looked up again.
func TestAckDirectGroupRecreated(t *testing.T) {
	e := setup(t)
	pool, err := pgxpool.New(ctxT(t), e.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	c := broker.NewAckCombiner(pool, 1, 0, 30*time.Second)
	round := func(from int) {
		t.Helper()
		e.pushN("q", "p", from, 1)
		e.tick("q")
		m := e.pop(broker.Pop{Queue: "q", Group: "g", Batch: 1, SubscriptionMode: "all"}, "p").Messages
		if len(m) != 1 {
			t.Fatalf("pop after %d: %d messages", from, len(m))
		}
		res, err := c.Ack(ctxT(t), broker.AnyTenant, []broker.AckPart{{Group: "g", Acks: []broker.Ack{ackOf(m[0], "")}}})
		if err != nil {
			t.Fatal(err)
		}
		if r := res[0][0]; !r.Success || r.Noop || !r.LeaseReleased {
			t.Fatalf("ack after %d: %+v", from, r)
		}
	}
	round(0)
	round(1)
	if d := c.Stats().Direct; d != 1 {
		t.Fatalf("ack_direct statements %d, want 1", d)
	}
	if _, err := broker.DeleteGroup(ctxT(t), e.conn, "g", "", true); err != nil {
		t.Fatal(err)
	}
	round(2) // the group made again: a new id, the route stale
	if d := c.Stats().Direct; d != 1 {
		t.Fatalf("after the group was made again: ack_direct statements %d, want still 1", d)
	}
	round(3)
	if d := c.Stats().Direct; d != 2 {
		t.Fatalf("route looked up again: ack_direct statements %d, want 2", d)
	}
}
