package broker_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgquectl/pgquectl/internal/broker"
)

func TestGroupsFanOutAndSubscriptionModes(t *testing.T) {
	e := setup(t)
	e.pushN("q", "p", 0, 3)
	e.tick("q")
	// "all" and queue mode see the backlog; "new" starts at the tail.
	all := e.pop(broker.Pop{Queue: "q", Group: "g-all", Batch: 10, SubscriptionMode: "all", AutoAck: true}, "p")
	qm := e.pop(broker.Pop{Queue: "q", Batch: 10, SubscriptionMode: "new", AutoAck: true}, "p")
	nw := e.pop(broker.Pop{Queue: "q", Group: "g-new", Batch: 10, SubscriptionMode: "new", AutoAck: true}, "p")
	// No mode is "all" (Queen's default).
	def := e.pop(broker.Pop{Queue: "q", Group: "g-default", Batch: 10, AutoAck: true}, "p")
	if len(all.Messages) != 3 || len(qm.Messages) != 3 || len(nw.Messages) != 0 || len(def.Messages) != 3 {
		t.Fatalf("all %d, queue mode %d, new %d, no mode %d messages", len(all.Messages), len(qm.Messages), len(nw.Messages), len(def.Messages))
	}
	// A time in the future skips everything so far; first contact decides.
	from := time.Now().Add(time.Hour)
	fr := e.pop(broker.Pop{Queue: "q", Group: "g-from", Batch: 10, SubscriptionFrom: &from, AutoAck: true}, "p")
	if len(fr.Messages) != 0 {
		t.Fatalf("from the future: %d messages", len(fr.Messages))
	}
	e.pushN("q", "p", 3, 2)
	e.pushN("q", "other", 100, 1)
	e.tick("q")
	for _, g := range []string{"g-all", "g-new", ""} {
		r := e.pop(broker.Pop{Queue: "q", Group: g, Batch: 10, SubscriptionMode: "all", AutoAck: true}, "p")
		if got := numbers(t, r.Messages); !slices.Equal(got, seq(3, 2)) {
			t.Errorf("group %q got %v, want [3 4]", g, got)
		}
		// A partition first reached later is seeded from the group's first contact.
		r = e.pop(broker.Pop{Queue: "q", Group: g, Batch: 10, AutoAck: true}, "other")
		if got := numbers(t, r.Messages); !slices.Equal(got, []int{100}) {
			t.Errorf("group %q on partition other got %v, want [100]", g, got)
		}
	}
	fr = e.pop(broker.Pop{Queue: "q", Group: "g-from", Batch: 10, AutoAck: true}, "p")
	if len(fr.Messages) != 0 {
		t.Errorf("g-from got %d messages created before its start", len(fr.Messages))
	}
	past := time.Now().Add(-time.Hour)
	fr = e.pop(broker.Pop{Queue: "q", Group: "g-past", Batch: 10, SubscriptionFrom: &past, AutoAck: true}, "p")
	if got := numbers(t, fr.Messages); !slices.Equal(got, seq(0, 5)) {
		t.Errorf("g-past got %v", got)
	}
}

func TestRetryAndRetryLimitToDLQ(t *testing.T) {
	e := setup(t)
	e.pushN("q", "p", 0, 3)
	e.exec(`SELECT pgque.set_queue_config('q', 'retry_limit', '2')`)
	e.tick("q")
	p := broker.Pop{Queue: "q", Group: "g", Batch: 2, SubscriptionMode: "all"}
	// retry does not spend a retry: five retries, still delivered.
	for i := 0; i < 5; i++ {
		r := e.pop(p, "p")
		if got := numbers(t, r.Messages); !slices.Equal(got, seq(0, 2)) || r.Messages[0].DeliveryAttempt != i+1 {
			t.Fatalf("retry round %d: %v attempt %d", i, got, r.Messages[0].DeliveryAttempt)
		}
		if res := e.ack("g", ackOf(r.Messages[0], "retry")); !res[0].Success || !res[0].LeaseReleased {
			t.Fatalf("retry ack %+v", res)
		}
	}
	// failed: message 0 done, message 1 fails 3 times (retryLimit 2) -> DLQ.
	for i := 0; i < 3; i++ {
		r := e.pop(p, "p")
		start := 1
		if i == 0 {
			start = 0
		}
		want := seq(start, 2)
		if got := numbers(t, r.Messages); !slices.Equal(got, want) {
			t.Fatalf("fail round %d: got %v want %v", i, got, want)
		}
		var acks []broker.Ack
		if i == 0 {
			acks = append(acks, ackOf(r.Messages[0], "completed"))
		}
		acks = append(acks, broker.Ack{TransactionID: r.Messages[len(acks)].TransactionID, PartitionID: r.Messages[0].PartitionUUID,
			Status: "boom", LeaseID: r.LeaseID, Error: fmt.Sprintf("fail %d", i)})
		res := e.ack("g", acks...)
		last := res[len(res)-1]
		if !last.Success || last.DLQ != (i == 2) {
			t.Fatalf("fail round %d: %+v", i, res)
		}
	}
	if n := e.int(`SELECT count(*) FROM pgque.group_dead_letter WHERE gdl_error = 'fail 2' AND gdl_retries = 2`); n != 1 {
		t.Errorf("dead letters: %d", n)
	}
	// The batch's other message stays leased: the cursor moved past the
	// dead letter only. A dlq status dead-letters it at once.
	r := e.pop(p, "p")
	if len(r.Messages) != 0 || r.Verdicts[0].Kind != broker.VerdictLeased {
		t.Fatalf("after DLQ: %+v", r)
	}
	var lease string
	if err := e.conn.QueryRow(ctxT(t), `SELECT gc_lease::text FROM pgque.group_cursor`).Scan(&lease); err != nil {
		t.Fatal(err)
	}
	var txn, part string
	if err := e.conn.QueryRow(ctxT(t), `SELECT pgque.message_uuid(1, ev_id, ev_time)::text, (SELECT part_uuid::text FROM pgque.partition WHERE part_name = 'p')
	                                       FROM pgque.event_1_0 WHERE ev_data::jsonb->>'n' = '2'`).Scan(&txn, &part); err != nil {
		t.Fatal(err)
	}
	if res := e.ack("g", broker.Ack{TransactionID: txn, PartitionID: part, Status: "dlq", LeaseID: lease}); !res[0].DLQ || !res[0].LeaseReleased {
		t.Fatalf("dlq ack %+v", res)
	}
	if n := e.int(`SELECT count(*) FROM pgque.group_dead_letter`); n != 2 {
		t.Errorf("dead letters: %d, want 2", n)
	}
	if r := e.pop(p, "p"); len(r.Messages) != 0 {
		t.Errorf("after dlq: %d messages", len(r.Messages))
	}
}

func TestPopListVerdicts(t *testing.T) {
	e := setup(t)
	e.pushN("q", "a", 0, 2)
	e.pushN("q", "b", 10, 2)
	e.pushN("q", "c", 20, 1)
	e.push(broker.Item{Queue: "q", Partition: "idle", Payload: payload(0)})
	e.tick("q")
	e.pop(broker.Pop{Queue: "q", Batch: 10, AutoAck: true}, "idle")
	// Hold b's lease.
	held := e.pop(broker.Pop{Queue: "q", Batch: 10}, "b")
	ids := map[string]int32{}
	rows, err := e.conn.Query(ctxT(t), `SELECT part_name, part_id FROM pgque.partition`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n string
		var id int32
		if err := rows.Scan(&n, &id); err != nil {
			t.Fatal(err)
		}
		ids[n] = id
	}
	rows.Close()
	r, err := broker.PopList(ctxT(t), e.conn, broker.Pop{Queue: "q", Batch: 3, MaxPartitions: 3},
		[]int32{ids["idle"], ids["b"], ids["a"], ids["c"], 999})
	if err != nil {
		t.Fatal(err)
	}
	got := map[int32]broker.Verdict{}
	for _, v := range r.Verdicts {
		got[v.PartitionID] = v
	}
	if v := got[ids["idle"]]; v.Kind != broker.VerdictEmpty {
		t.Errorf("idle: %+v", v)
	}
	if v := got[ids["b"]]; v.Kind != broker.VerdictLeased || !v.Until.Equal(held.Messages[0].LeaseUntil) {
		t.Errorf("b: %+v", v)
	}
	if v := got[ids["a"]]; v.Kind != broker.VerdictTook || !v.Drained {
		t.Errorf("a: %+v", v)
	}
	if v := got[ids["c"]]; v.Kind != broker.VerdictTook || !v.Drained {
		t.Errorf("c: %+v", v)
	}
	// The budget (3 messages) is spent at c: 999 comes after, no verdict.
	if _, ok := got[999]; ok || len(r.Verdicts) != 4 {
		t.Errorf("verdicts %+v", r.Verdicts)
	}
	if got := numbers(t, r.Messages); !slices.Equal(got, []int{0, 1, 20}) {
		t.Errorf("messages %v", got)
	}
}

// A candidate whose row a concurrent claim holds is leased, never empty.
func TestPopListSkippedRowIsLeased(t *testing.T) {
	e := setup(t)
	e.pushN("q", "a", 0, 2)
	e.tick("q")
	e.pop(broker.Pop{Queue: "q", Batch: 1, AutoAck: true}, "a") // seeds the cursor
	other := pgxConn(t, e.dsn)
	tx, err := other.Begin(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctxT(t))
	if _, err := tx.Exec(ctxT(t), `SELECT 1 FROM pgque.group_cursor FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	r := e.pop(broker.Pop{Queue: "q", Batch: 1}, "a")
	if len(r.Messages) != 0 || len(r.Verdicts) != 1 || r.Verdicts[0].Kind != broker.VerdictLeased ||
		r.Verdicts[0].Until.After(time.Now().Add(2*time.Second)) {
		t.Fatalf("skipped row: %+v", r)
	}
}

func pgxConn(t *testing.T, dsn string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(ctxT(t), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// Per-partition order with 8 concurrent consumers, in queue mode and in 3
// groups at once: every group gets every message exactly once, each
// partition's messages in push order.
func TestConcurrentConsumersKeepPartitionOrder(t *testing.T) {
	e := setup(t)
	const parts, perPart = 6, 40
	for round := 0; round < 4; round++ {
		var items []broker.Item
		for p := 0; p < parts; p++ {
			for i := 0; i < perPart/4; i++ {
				n := round*perPart/4 + i
				items = append(items, broker.Item{Queue: "q", Partition: fmt.Sprintf("p%d", p), Payload: payload(map[string]any{"n": n})})
			}
		}
		e.push(items...)
		e.tick("q")
	}
	pool := pgxConn(t, e.dsn)
	var partIDs []int32
	rows, _ := e.conn.Query(ctxT(t), `SELECT part_id FROM pgque.partition WHERE part_name LIKE 'p%' ORDER BY 1`)
	for rows.Next() {
		var id int32
		_ = rows.Scan(&id)
		partIDs = append(partIDs, id)
	}
	rows.Close()
	groups := []string{"", "g1", "g2", "g3"}
	type got struct {
		mu  sync.Mutex
		seq map[string][]int // partition -> numbers, in delivery order
	}
	results := map[string]*got{}
	for _, g := range groups {
		results[g] = &got{seq: map[string][]int{}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, g := range groups {
		for w := 0; w < 8; w++ {
			wg.Add(1)
			go func(g string, w int) {
				defer wg.Done()
				idle := 0
				for ctx.Err() == nil && idle < 20 {
					cands := append([]int32(nil), partIDs...)
					sort.Slice(cands, func(i, j int) bool { return (int(cands[i])+w)%parts < (int(cands[j])+w)%parts })
					r, err := broker.PopList(ctx, pool, broker.Pop{Queue: "q", Group: g, Batch: 3, SubscriptionMode: "all"}, cands)
					if err != nil {
						t.Errorf("pop: %v", err)
						return
					}
					if len(r.Messages) == 0 {
						idle++
						time.Sleep(20 * time.Millisecond)
						continue
					}
					idle = 0
					res := results[g]
					res.mu.Lock()
					for i, m := range r.Messages {
						res.seq[m.Partition] = append(res.seq[m.Partition], numbers(t, r.Messages[i:i+1])[0])
					}
					res.mu.Unlock()
					var acks []broker.Ack
					for _, m := range r.Messages {
						acks = append(acks, ackOf(m, ""))
					}
					ar, err := broker.AckBatch(ctx, pool, g, acks)
					if err != nil {
						t.Errorf("ack: %v", err)
						return
					}
					for _, a := range ar {
						if !a.Success {
							t.Errorf("ack failed: %+v", a)
						}
					}
				}
			}(g, w)
		}
	}
	wg.Wait()
	for _, g := range groups {
		for p := 0; p < parts; p++ {
			name := fmt.Sprintf("p%d", p)
			if s := results[g].seq[name]; !slices.Equal(s, seq(0, perPart)) {
				t.Errorf("group %q partition %s: %v", g, name, s)
			}
		}
	}
}
