package httpapi_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/pgquectl/pgquectl/internal/httpapi"
)

// A push through the broker is poppable at once on the same broker (the
// broker ticks the queue itself; no pg_cron here), in order, and acked.
func TestPushPopAck(t *testing.T) {
	e := setup(t)
	b := e.start(httpapi.Config{})
	res := b.push(item("q", "p1", map[string]int{"n": 1}, ""), item("q", "p1", map[string]int{"n": 2}, "t2"))
	if len(res) != 2 || res[0].Status != "queued" || res[1].TransactionID != "t2" || res[0].QueueName != "q" ||
		res[0].TransactionID != res[0].MessageID || res[1].Index != 1 {
		t.Fatalf("push: %+v", res)
	}
	p := b.pop("/api/v1/pop/queue/q?batch=10")
	if p == nil || len(p.Messages) != 2 {
		t.Fatalf("pop right after push: %+v", p)
	}
	if p.Queue != "q" || p.Partition != "p1" || p.ConsumerGroup != "__QUEUE_MODE__" || p.PartitionsClaimed != 1 || p.LeaseID == "" ||
		payloadN(p.Messages[0]) != 1 || payloadN(p.Messages[1]) != 2 || p.Messages[0].ID != res[0].MessageID ||
		p.Messages[1].TransactionID != "t2" || p.Messages[0].DeliveryAttempt != 1 || len(p.Messages[0].CreatedAt) != 24 {
		t.Fatalf("pop: %+v", p)
	}
	// The partition is leased: nothing more.
	if again := b.pop("/api/v1/pop/queue/q"); again != nil {
		t.Fatalf("second pop while leased: %+v", again)
	}
	// The later one first: held until the earlier one is acked (the
	// order of the acks inside a batch does not matter).
	acks := b.ack("", ackOf(p.Messages[1], "completed"))
	if len(acks) != 1 || !acks[0].Success || acks[0].LeaseReleased || acks[0].Noop || acks[0].Error != nil {
		t.Fatalf("ack: %+v", acks)
	}
	acks = b.ack("", ackOf(p.Messages[0], "completed"))
	if !acks[0].Success || acks[0].Noop || !acks[0].LeaseReleased {
		t.Fatalf("ack of the earlier one: %+v", acks)
	}
	// Acking it again is a no-op.
	acks = b.ack("", ackOf(p.Messages[0], "completed"))
	if !acks[0].Success || !acks[0].Noop {
		t.Fatalf("ack below the cursor: %+v", acks)
	}
	if again := b.pop("/api/v1/pop/queue/q"); again != nil {
		t.Fatalf("pop after ack: %+v", again)
	}
}

func TestPushEmptyAndValidation(t *testing.T) {
	e := setup(t)
	b := e.start(httpapi.Config{})
	if out := b.must(http.StatusCreated, "POST", "/api/v1/push", `{"items":[]}`, nil); string(out) != "[]" {
		t.Fatalf("empty push: %s", out)
	}
	for _, body := range []string{`{}`, `{"items":[{"payload":1}]}`, `{"items":[{"queue":"q"}]}`, `{"items":[{"queue":""," payload":1}]}`,
		`{"items":[{"queue":5,"payload":1}]}`, `{"items":`, `not json`, `{"items":[]} trailing`, `{"items":"x"}`,
		`{"items":[{"queue":"q","payload":1},{"queue":"q"}]}`} {
		code, out, _ := b.do("POST", "/api/v1/push", body)
		if code != http.StatusBadRequest {
			t.Errorf("push %s: %d %s, want 400", body, code, out)
		}
	}
	if n := e.int(`SELECT count(*) FROM pgque.queue`); n != 0 {
		t.Fatalf("bad pushes created %d queues", n)
	}
	code, out, _ := b.do("POST", "/api/v1/push", `{"items":`)
	if code != 400 || string(out) != `{"error":"bad body: unexpected EOF"}` {
		t.Fatalf("malformed JSON: %d %s", code, out)
	}
}

func TestDuplicateWithinAndAfterWindow(t *testing.T) {
	e := setup(t)
	b := e.start(httpapi.Config{})
	first := b.push(item("q", "", 1, "dup"))
	second := b.push(item("q", "", 2, "dup"), item("q", "other", 3, "dup"))
	if second[0].Status != "duplicate" || second[0].MessageID != first[0].MessageID || second[1].Status != "queued" {
		t.Fatalf("duplicate inside the window: %+v / %+v", first, second)
	}
	if n := e.events("q"); n != 2 {
		t.Fatalf("events after a duplicate: %d, want 2", n)
	}
	// Window of 1 s: after it, the same id is queued again.
	b.must(200, "POST", "/api/v1/configure", map[string]any{"queue": "q", "options": map[string]any{"dedupWindowSeconds": 1}}, nil)
	e.exec(`SELECT pg_sleep(1.2)`)
	third := b.push(item("q", "", 4, "dup"))
	if third[0].Status != "queued" || third[0].MessageID == first[0].MessageID {
		t.Fatalf("after the window: %+v", third)
	}
	if n := e.events("q"); n != 3 {
		t.Fatalf("events: %d, want 3", n)
	}
}

func TestUnknownRoutesAndMethods(t *testing.T) {
	e := setup(t)
	b := e.start(httpapi.Config{})
	for _, c := range [][2]string{{"GET", "/api/v1/nope"}, {"GET", "/api/v2/push"}, {"PUT", "/api/v1/push"}, {"GET", "/"}} {
		code, out, h := b.do(c[0], c[1], nil)
		if code != 404 || string(out) != `{"error":"Not Found","code":"no_such_route"}` || h.Get("Content-Type") != "application/json" {
			t.Errorf("%s %s: %d %s", c[0], c[1], code, out)
		}
	}
}

func TestBodyLimit(t *testing.T) {
	e := setup(t)
	b := e.start(httpapi.Config{BodyLimit: 4096})
	big := fmt.Sprintf(`{"items":[{"queue":"q","payload":"%0*d"}]}`, 5000, 0)
	code, out, _ := b.do("POST", "/api/v1/push", big)
	if code != http.StatusRequestEntityTooLarge {
		t.Fatalf("over the limit: %d %s", code, out)
	}
	if n := e.int(`SELECT count(*) FROM pgque.queue`); n != 0 {
		t.Fatalf("an oversized push created %d queues", n)
	}
	small := fmt.Sprintf(`{"items":[{"queue":"q","payload":"%0*d"}]}`, 3000, 0)
	b.must(201, "POST", "/api/v1/push", small, nil)
}

func TestPopQueryValidation(t *testing.T) {
	e := setup(t)
	b := e.start(httpapi.Config{})
	b.push(item("q", "", 1, ""))
	for _, q := range []string{"batch=x", "batch=0", "batch=-1", "partitions=a", "autoAck=maybe", "wait=yes please",
		"timeout=1.5", "leaseSeconds=-3", "subscriptionFrom=yesterday"} {
		code, out, _ := b.do("GET", "/api/v1/pop/queue/q?"+q, nil)
		if code != 400 {
			t.Errorf("pop ?%s: %d %s, want 400", q, code, out)
		}
	}
	if code, _, _ := b.do("GET", "/api/v1/pop", nil); code != 400 {
		t.Errorf("pop without namespace or task: %d", code)
	}
	// Nothing was claimed by the bad pops.
	if p := b.pop("/api/v1/pop/queue/q"); p == nil || len(p.Messages) != 1 {
		t.Fatalf("pop after bad pops: %+v", p)
	}
}

// A push is poppable as soon as the broker answered it, with no tick at
// all (no pg_cron, no ticker daemon here; the broker makes none): a group
// claim closes its range at its own snapshot. --no-auto-tick changes
// nothing. Before, the broker ticked the queue after each push and only
// then answered; without that tick a push was not poppable.
func TestPushPoppableWithoutTick(t *testing.T) {
	e := setup(t)
	ticks := func() int64 { return e.int(`SELECT count(*) FROM pgque.tick`) }
	for _, cfg := range []httpapi.Config{{}, {NoAutoTick: true}, {HotList: true}} {
		b := e.start(cfg)
		q := fmt.Sprintf("q%v%v", cfg.NoAutoTick, cfg.HotList)
		b.push(item(q, "", map[string]int{"n": 1}, "")) // creates the queue (and its first tick)
		before := ticks()
		if p := b.pop("/api/v1/pop/queue/" + q + "?autoAck=true"); p == nil || len(p.Messages) != 1 {
			t.Fatalf("%+v: pop of the first push: %+v", cfg, p)
		}
		for n := 2; n <= 4; n++ {
			b.push(item(q, "", map[string]int{"n": n}, ""))
			p := b.pop("/api/v1/pop/queue/" + q + "?autoAck=true&batch=10")
			if p == nil || len(p.Messages) != 1 || payloadN(p.Messages[0]) != n {
				t.Fatalf("%+v: pop right after push %d: %+v", cfg, n, p)
			}
		}
		if n := ticks(); n != before {
			t.Fatalf("%+v: ticks %d -> %d, want none made", cfg, before, n)
		}
	}
}

// Many pushes to one queue at once (combined into fewer calls): every one
// is poppable once answered, and no tick is made for them.
func TestConcurrentPushesPoppableWithoutTicks(t *testing.T) {
	e := setup(t)
	b := e.start(httpapi.Config{})
	b.push(item("q", "", 0, ""))
	before := e.int(`SELECT count(*) FROM pgque.tick`)
	done := make(chan struct{})
	for i := 0; i < 20; i++ {
		go func() {
			defer func() { done <- struct{}{} }()
			b.push(item("q", fmt.Sprint("p", i), 1, ""))
		}()
	}
	for i := 0; i < 20; i++ {
		<-done
	}
	got := 0
	for i := 0; i < 50 && got < 21; i++ {
		if p := b.pop("/api/v1/pop/queue/q?batch=100&partitions=100&autoAck=true"); p != nil {
			got += len(p.Messages)
		}
	}
	if got != 21 {
		t.Fatalf("popped %d, want 21", got)
	}
	if n := e.int(`SELECT count(*) FROM pgque.tick`) - before; n != 0 {
		t.Fatalf("%d ticks for 20 pushes, want none", n)
	}
}

// A pop on the broker that took a push gets it (read your writes) while
// another transaction holds the queue row (a ticker, a configure) for
// 500 ms: a push waits for no tick (it used to: the tick waited for that
// lock).
func TestPopReadsItsPushWhileQueueRowLocked(t *testing.T) {
	e := setup(t)
	b := e.start(httpapi.Config{})
	b.push(item("q", "", map[string]int{"n": 1}, ""))
	if p := b.pop("/api/v1/pop/queue/q?autoAck=true"); p == nil {
		t.Fatal("first pop")
	}
	tx, err := e.conn.Begin(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctxT(t), `SELECT 1 FROM pgque.queue WHERE queue_name = 'q' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	released := make(chan struct{})
	go func() {
		time.Sleep(500 * time.Millisecond)
		_ = tx.Rollback(ctxT(t))
		close(released)
	}()
	b.push(item("q", "", map[string]int{"n": 2}, ""))
	p := b.pop("/api/v1/pop/queue/q?autoAck=true")
	<-released
	if p == nil || payloadN(p.Messages[0]) != 2 {
		t.Fatalf("pop right after a push, queue row locked: %+v", p)
	}
}
