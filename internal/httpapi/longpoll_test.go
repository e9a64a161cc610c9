package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pgquectl/pgquectl/internal/httpapi"
)

// parkedPop starts a long-poll pop in the background.
func (b *brokerT) parkedPop(path string) <-chan *popRes {
	ch := make(chan *popRes, 1)
	go func() {
		req, _ := http.NewRequest("GET", b.ts.URL+path, nil)
		resp, err := b.ts.Client().Do(req)
		if err != nil {
			ch <- nil
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			ch <- nil
			return
		}
		var p popRes
		if err := jsonDecode(resp, &p); err != nil {
			ch <- nil
			return
		}
		ch <- &p
	}()
	return ch
}

// waitParked waits until n pops are parked on b.
func waitParked(t *testing.T, b *brokerT, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if b.parked() == n {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("parked pops: %d, want %d", b.parked(), n)
}

func (b *brokerT) parked() int {
	_, out, _ := b.do("GET", "/status", nil)
	var s struct {
		ParkedPops int `json:"parkedPops"`
	}
	_ = jsonUnmarshal(out, &s)
	return s.ParkedPops
}

// A parked pop holds no database connection, and a push on the same
// broker wakes it well before its backoff would re-check (the backoff
// after 3 checks is >= 200 ms; we wait until it is at 1 s).
func TestLongPollWakeSameBroker(t *testing.T) {
	e := setup(t)
	pool := e.pool()
	b := e.start(httpapi.Config{Pool: pool})
	b.push(item("q", "", 0, ""))
	if p := b.pop("/api/v1/pop/queue/q?autoAck=true"); p == nil {
		t.Fatal("first pop")
	}
	ch := b.parkedPop("/api/v1/pop/queue/q?wait=true&timeout=60000&autoAck=true")
	waitParked(t, b, 1)
	time.Sleep(2 * time.Second) // backoff now at its 1 s cap
	waitParked(t, b, 1)
	// Its backoff re-check takes a connection for the check's duration
	// (long on a loaded machine): between checks it holds none.
	held := pool.Stat().AcquiredConns()
	for i := 0; held != 0 && i < 100; i++ {
		time.Sleep(10 * time.Millisecond)
		held = pool.Stat().AcquiredConns()
	}
	if held != 0 {
		t.Fatalf("a parked pop holds %d pool connections (sampled for 1 s)", held)
	}
	start := time.Now()
	b.push(item("q", "", map[string]int{"n": 7}, ""))
	select {
	case p := <-ch:
		if p == nil || len(p.Messages) != 1 || payloadN(p.Messages[0]) != 7 {
			t.Fatalf("woken pop: %+v", p)
		}
		t.Logf("woken after %v", time.Since(start))
	case <-time.After(20 * time.Second):
		t.Fatal("the parked pop was not woken by the push")
	}
	// Woken through its gate, not by a backoff re-check.
	if !strings.Contains(string(b.must(200, "GET", "/metrics/prometheus", nil, nil)), "pgque_pop_wakes_total 1\n") {
		t.Fatalf("the pop was not woken through its gate exactly once")
	}
}

func TestLongPollTimeout(t *testing.T) {
	e := setup(t)
	b := e.start(httpapi.Config{})
	b.push(item("q", "", 0, ""))
	b.pop("/api/v1/pop/queue/q?autoAck=true")
	start := time.Now()
	if p := b.pop("/api/v1/pop/queue/q?wait=true&timeout=700"); p != nil {
		t.Fatalf("timed-out pop: %+v", p)
	}
	if d := time.Since(start); d < 650*time.Millisecond || d > 15*time.Second {
		t.Fatalf("wait took %v, want about 700ms", d)
	}
	// The long-poll cap applies.
	c := e.start(httpapi.Config{LongPollMax: 300 * time.Millisecond})
	start = time.Now()
	if p := c.pop("/api/v1/pop/queue/q?wait=true&timeout=60000"); p != nil {
		t.Fatalf("capped pop: %+v", p)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Fatalf("capped wait took %v", d)
	}
}

// A push through broker A wakes a pop parked on broker B (LISTEN/NOTIFY);
// the push's own NOTIFY (sent in its transaction, delivered at commit)
// is what wakes it, no tick involved.
func TestLongPollWakeAcrossBrokers(t *testing.T) {
	e := setup(t)
	a := e.start(httpapi.Config{Peers: true})
	b := e.start(httpapi.Config{Peers: true})
	a.push(item("q", "", 0, ""))
	if p := a.pop("/api/v1/pop/queue/q?autoAck=true"); p == nil {
		t.Fatal("first pop")
	}
	ch := b.parkedPop("/api/v1/pop/queue/q?wait=true&timeout=60000&autoAck=true")
	waitParked(t, b, 1)
	time.Sleep(2 * time.Second)
	start := time.Now()
	a.push(item("q", "", map[string]int{"n": 9}, ""))
	select {
	case p := <-ch:
		if p == nil || len(p.Messages) != 1 || payloadN(p.Messages[0]) != 9 {
			t.Fatalf("woken pop: %+v", p)
		}
		// The backoff alone would re-check within 1 s; the hint is what
		// makes it sooner. Only a gross bound here (loaded machine).
		t.Logf("woken after %v", time.Since(start))
	case <-time.After(20 * time.Second):
		t.Fatal("the pop parked on B was not woken by a push through A")
	}
	if !strings.Contains(string(b.must(200, "GET", "/metrics/prometheus", nil, nil)), "pgque_peer_hints_total 2\n") ||
		!strings.Contains(string(b.must(200, "GET", "/metrics/prometheus", nil, nil)), "pgque_pop_wakes_total 1\n") {
		t.Fatalf("B did not count one peer hint per push through A (2) and one wake: %s", grepMetrics(b.must(200, "GET", "/metrics/prometheus", nil, nil)))
	}
}

// Stop answers parked pops with 204 at once and drains.
func TestStopEndsParkedPops(t *testing.T) {
	e := setup(t)
	b := e.start(httpapi.Config{})
	b.push(item("q", "", 0, ""))
	b.pop("/api/v1/pop/queue/q?autoAck=true")
	ch := make(chan int, 1)
	go func() {
		code, _, _ := b.do("GET", "/api/v1/pop/queue/q?wait=true&timeout=60000", nil)
		ch <- code
	}()
	waitParked(t, b, 1)
	start := time.Now()
	if err := b.srv.Stop(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-ch:
		if code != 204 {
			t.Fatalf("parked pop on stop: %d", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a parked pop outlived Stop")
	}
	t.Logf("stopped in %v", time.Since(start))
}

// A pop of a queue that does not exist yet answers 204 (not 404) and,
// parked, is woken by the push that creates the queue.
func TestPopBeforeQueueExists(t *testing.T) {
	e := setup(t)
	b := e.start(httpapi.Config{})
	if p := b.pop("/api/v1/pop/queue/later"); p != nil {
		t.Fatalf("pop of a missing queue: %+v", p)
	}
	ch := b.parkedPop("/api/v1/pop/queue/later?wait=true&timeout=60000")
	waitParked(t, b, 1)
	b.push(item("later", "", map[string]int{"n": 3}, ""))
	select {
	case p := <-ch:
		if p == nil || payloadN(p.Messages[0]) != 3 {
			t.Fatalf("woken pop: %+v", p)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("not woken by the push that created the queue")
	}
}

// A parked pop re-checks with backoff 100 ms ×3, then doubling, capped at
// 1 s: over a 2.5 s wait that is about 8 checks (0, .1, .2, .3, .5, .9,
// 1.7, 2.5 s), where a fixed 100 ms would make ~25 and a fixed 1 s 3-4.
func TestLongPollBackoff(t *testing.T) {
	e := setup(t)
	rec := &recorder{}
	b := e.start(httpapi.Config{Candidates: rec})
	b.must(200, "POST", "/api/v1/configure", map[string]any{"queue": "q"}, nil)
	if p := b.pop("/api/v1/pop/queue/q?wait=true&timeout=2500"); p != nil {
		t.Fatalf("pop: %+v", p)
	}
	rec.mu.Lock()
	n := rec.pops
	rec.mu.Unlock()
	if n < 5 || n > 10 {
		t.Fatalf("%d checks in a 2.5 s wait, want about 8", n)
	}
	t.Logf("%d checks", n)
}
