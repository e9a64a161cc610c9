package broker_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pgquectl/pgquectl/internal/broker"
)

func TestPushMixedQueuesAndPartitions(t *testing.T) {
	e := setup(t)
	odd := `q "it's" 🚀 x`
	res := e.push(
		broker.Item{Queue: "a", Payload: payload(1)},
		broker.Item{Queue: odd, Partition: `p "quoted" 🙂`, Payload: payload("two")},
		broker.Item{Queue: "a", Partition: "k 1", Payload: payload(map[string]int{"x": 3}), TransactionID: "t-3"},
		broker.Item{Queue: "a", Partition: "Default", Payload: payload(nil)},
	)
	if len(res) != 4 {
		t.Fatalf("results %+v", res)
	}
	seen := map[string]bool{}
	for i, r := range res {
		if r.Index != i || r.Status != broker.StatusQueued || seen[r.MessageID] {
			t.Errorf("result %d: %+v", i, r)
		}
		seen[r.MessageID] = true
		if len(r.MessageID) != 36 || r.MessageID[14] != '7' {
			t.Errorf("message id %q is not a version-7 UUID", r.MessageID)
		}
	}
	if res[1].Queue != odd || res[2].TransactionID != "t-3" || res[0].TransactionID != res[0].MessageID {
		t.Errorf("results %+v", res)
	}
	if n := e.events("a"); n != 3 {
		t.Errorf("queue a holds %d events, want 3", n)
	}
	if n := e.events(odd); n != 1 {
		t.Errorf("queue %q holds %d events, want 1", odd, n)
	}
	// Partitions are interned densely per queue: Default 0, then new ones.
	if n := e.int(`SELECT part_id FROM pgque.partition p JOIN pgque.queue q ON q.queue_id = p.part_queue
	                WHERE q.queue_name = 'a' AND part_name = 'k 1'`); n != 1 {
		t.Errorf("partition 'k 1' id %d, want 1", n)
	}
	if n := e.int(`SELECT part_id FROM pgque.partition p JOIN pgque.queue q ON q.queue_id = p.part_queue
	                WHERE q.queue_name = $1 AND part_name = $2`, odd, `p "quoted" 🙂`); n != 1 {
		t.Errorf("quoted partition id %d, want 1", n)
	}
	// Each event carries its partition; the payload is stored as JSON text.
	if n := e.int(`SELECT count(*) FROM pgque.event_1_0 WHERE ev_partition = 1 AND ev_data::jsonb = '{"x":3}' AND ev_extra1 = 't-3'`); n != 1 {
		t.Errorf("event of partition 'k 1' found %d times", n)
	}
	// Message ids are time-ordered and derived from the event.
	if n := e.int(`SELECT count(*) FROM pgque.event_1_0 e WHERE pgque.message_uuid(1, e.ev_id, e.ev_time)::text = $1`, res[0].MessageID); n != 1 {
		t.Errorf("message id of item 0 not derived from its event (%d)", n)
	}
}

func TestPushDedupWithinAndAfterWindow(t *testing.T) {
	e := setup(t)
	first := e.push(broker.Item{Queue: "d", Partition: "p", Payload: payload(1), TransactionID: "tx"})
	again := e.push(
		broker.Item{Queue: "d", Partition: "p", Payload: payload(2), TransactionID: "tx"},     // stored duplicate
		broker.Item{Queue: "d", Partition: "other", Payload: payload(3), TransactionID: "tx"}, // other partition: new
		broker.Item{Queue: "d", Partition: "other", Payload: payload(4), TransactionID: "tx"}, // repeats item 1 of this push
	)
	if again[0].Status != broker.StatusDuplicate || again[0].MessageID != first[0].MessageID {
		t.Errorf("same transactionId inside the window: %+v, original %+v", again[0], first[0])
	}
	if again[1].Status != broker.StatusQueued || again[2].Status != broker.StatusDuplicate || again[2].MessageID != again[1].MessageID {
		t.Errorf("in-push duplicate: %+v", again)
	}
	if n := e.events("d"); n != 2 {
		t.Errorf("%d events stored, want 2", n)
	}
	// After the window the same id is new again.
	e.exec(`SELECT pgque.set_queue_config('d', 'dedup_window', '1')`)
	time.Sleep(1100 * time.Millisecond)
	late := e.push(broker.Item{Queue: "d", Partition: "p", Payload: payload(5), TransactionID: "tx"})
	if late[0].Status != broker.StatusQueued || late[0].MessageID == first[0].MessageID {
		t.Errorf("after the window: %+v", late[0])
	}
	if n := e.events("d"); n != 3 {
		t.Errorf("%d events stored, want 3", n)
	}
}

func TestPushBadInputChangesNothing(t *testing.T) {
	e := setup(t)
	e.push(broker.Item{Queue: "keep", Payload: payload(0)})
	cases := map[string][]broker.Item{
		"10 kB partition name": {{Queue: "keep", Payload: payload(1)}, {Queue: "keep", Partition: strings.Repeat("x", 10240), Payload: payload(2)}},
		"missing payload":      {{Queue: "keep", Payload: payload(1)}, {Queue: "new1"}},
		"missing queue":        {{Queue: "", Payload: payload(1)}},
		"queue name too long":  {{Queue: "keep", Payload: payload(1)}, {Queue: strings.Repeat("q", 323), Payload: payload(1)}},
		"control character":    {{Queue: "keep", Partition: "a\nb", Payload: payload(1)}},
		"bad JSON payload":     {{Queue: "keep", Payload: []byte("{nope")}},
		"long transaction id":  {{Queue: "keep", Payload: payload(1), TransactionID: strings.Repeat("t", 513)}},
	}
	for name, items := range cases {
		_, err := broker.Push(ctxT(t), e.conn, items)
		if !errors.Is(err, broker.ErrInvalidInput) {
			t.Errorf("%s: err %v, want ErrInvalidInput", name, err)
		}
	}
	if n := e.events("keep"); n != 1 {
		t.Errorf("queue keep holds %d events after bad pushes, want 1", n)
	}
	if n := e.int(`SELECT count(*) FROM pgque.queue`); n != 1 {
		t.Errorf("%d queues, want 1", n)
	}
	if n := e.int(`SELECT count(*) FROM pgque.partition`); n != 1 {
		t.Errorf("%d partitions, want 1", n)
	}
}

func TestPushTenThousandItems(t *testing.T) {
	e := setup(t)
	items := make([]broker.Item, 10000)
	for i := range items {
		items[i] = broker.Item{Queue: "big", Partition: []string{"a", "b", "c"}[i%3], Payload: payload(i), TransactionID: "t" + string(rune('a'+i%26)) + strings.Repeat("x", i%7) + "-" + strconv.Itoa(i)}
	}
	res, err := broker.Push(ctxT(t), e.conn, items)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 10000 {
		t.Fatalf("%d results", len(res))
	}
	for i, r := range res {
		if r.Index != i || r.Status != broker.StatusQueued {
			t.Fatalf("result %d: %+v", i, r)
		}
	}
	if n := e.events("big"); n != 10000 {
		t.Errorf("%d events, want 10000", n)
	}
	if n := e.int(`SELECT count(*) FROM pgque.dedup`); n != 10000 {
		t.Errorf("%d dedup rows, want 10000", n)
	}
}
