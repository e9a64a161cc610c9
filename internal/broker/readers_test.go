package broker_test

import (
	"testing"
	"time"

	"github.com/pgquectl/pgquectl/internal/broker"
)

// One log, two readers: a classic consumer (receive/ack) and a consumer
// group read the same pushed events; each sees every message once.
func TestOneLogTwoReaders(t *testing.T) {
	e := setup(t)
	e.exec(`SELECT pgque.create_queue('q')`)
	e.exec(`SELECT pgque.subscribe('q', 'classic')`)
	e.pushN("q", "a", 0, 5)
	e.pushN("q", "b", 5, 5)
	e.tick("q")
	seen := map[int]int{}
	for {
		rows, err := e.conn.Query(ctxT(t), `SELECT batch_id, (payload::jsonb->>'n')::int FROM pgque.receive('q', 'classic', 3)`)
		if err != nil {
			t.Fatal(err)
		}
		var batch int64 = -1
		n := 0
		for rows.Next() {
			var v int
			if err := rows.Scan(&batch, &v); err != nil {
				t.Fatal(err)
			}
			seen[v]++
			n++
		}
		rows.Close()
		if n == 0 {
			break
		}
		e.exec(`SELECT pgque.ack($1)`, batch)
	}
	if len(seen) != 10 {
		t.Fatalf("classic consumer saw %v", seen)
	}
	for v, c := range seen {
		if c != 1 {
			t.Errorf("classic consumer saw %d %d times", v, c)
		}
	}
	group := map[int]int{}
	for _, part := range []string{"a", "b"} {
		for {
			r := e.pop(broker.Pop{Queue: "q", Group: "g", Batch: 2, SubscriptionMode: "all", AutoAck: true}, part)
			if len(r.Messages) == 0 {
				break
			}
			for _, v := range numbers(t, r.Messages) {
				group[v]++
			}
		}
	}
	if len(group) != 10 {
		t.Fatalf("group saw %v", group)
	}
	for v, c := range group {
		if c != 1 {
			t.Errorf("group saw %d %d times", v, c)
		}
	}
}

func TestDelayedProcessingAndWindowBuffer(t *testing.T) {
	e := setup(t)
	// The message becomes claimable at its creation + 2 s: the verdict's
	// until is judged against the time before the push, not against the
	// pop's time (a loaded machine may take a second between the two).
	pushed := time.Now()
	e.pushN("d", "p", 0, 1)
	e.exec(`SELECT pgque.set_queue_config('d', 'delayed_processing', '2')`)
	e.tick("d")
	p := broker.Pop{Queue: "d", Batch: 10, AutoAck: true}
	r := e.pop(p, "p")
	if len(r.Messages) != 0 || r.Verdicts[0].Kind != broker.VerdictLeased || r.Verdicts[0].Until.Before(pushed.Add(1900*time.Millisecond)) {
		t.Fatalf("delayed message popped early: %+v", r)
	}
	time.Sleep(time.Until(r.Verdicts[0].Until) + 100*time.Millisecond)
	if r = e.pop(p, "p"); len(r.Messages) != 1 {
		t.Fatalf("delayed message not popped after the delay: %+v", r)
	}

	e.pushN("w", "p", 0, 1)
	e.exec(`SELECT pgque.set_queue_config('w', 'window_buffer', '2')`)
	e.tick("w")
	p.Queue = "w"
	r = e.pop(p, "p")
	if len(r.Messages) != 0 || r.Verdicts[0].Kind != broker.VerdictLeased {
		t.Fatalf("window not quiet yet but popped: %+v", r)
	}
	time.Sleep(time.Until(r.Verdicts[0].Until) + 100*time.Millisecond)
	if r = e.pop(p, "p"); len(r.Messages) != 1 {
		t.Fatalf("quiet window not popped: %+v", r)
	}
}
