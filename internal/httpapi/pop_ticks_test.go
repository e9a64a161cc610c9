package httpapi_test

import (
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pgquectl/pgquectl/internal/httpapi"
	"github.com/pgquectl/pgquectl/internal/pgtest"
)

// A pop does not wait for the queue's ticks in flight (a push is answered
// only once its own tick is done): while a tick of the queue is stuck, a
// pop of what is already visible is answered at once. Before, every pop
// of a queue with a tick in flight first waited for that tick (up to 2 s),
// which on a busy queue added up to two tick durations to each pop.
func TestPopDoesNotWaitForTicksInFlight(t *testing.T) {
	e := setup(t)
	b := e.start(httpapi.Config{})
	code, out, h := b.do("POST", "/api/v1/push", map[string]any{"items": []any{
		map[string]any{"queue": "q", "partition": "p", "payload": map[string]any{"n": 1}}}})
	if code != http.StatusCreated {
		t.Fatalf("push: %d %s", code, out)
	}
	// Where the push's time went: its statement and its tick wait.
	if st := h.Get("Server-Timing"); !regexp.MustCompile(`^db;dur=[0-9]+\.[0-9]{3}, tick;dur=[0-9]+\.[0-9]{3}$`).MatchString(st) {
		t.Fatalf("push Server-Timing %q, want db;dur=<ms>, tick;dur=<ms>", st)
	}

	// Hold the lock every broker tick takes (shared) first: the next tick
	// of q blocks until it is released.
	lock := pgtest.Conn(t, e.dsn)
	if _, err := lock.Exec(ctxT(t), `SELECT pg_advisory_lock(1885827445, 6)`); err != nil {
		t.Fatal(err)
	}
	pushed := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest("POST", b.ts.URL+"/api/v1/push",
			strings.NewReader(`{"items":[{"queue":"q","partition":"p","payload":{"n":2}}]}`))
		req.Header.Set("Content-Type", "application/json")
		resp, err := b.ts.Client().Do(req)
		if err != nil {
			pushed <- 0
			return
		}
		resp.Body.Close()
		pushed <- resp.StatusCode
	}()
	deadline := time.Now().Add(30 * time.Second)
	for e.int(`SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
		AND classid = 1885827445 AND objid = 6`) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the second push's tick never waited for the lock")
		}
		time.Sleep(5 * time.Millisecond)
	}

	start := time.Now()
	code, out, h = b.do("GET", "/api/v1/pop/queue/q?batch=10", nil)
	took := time.Since(start)
	var p popRes
	if code != http.StatusOK || jsonUnmarshal(out, &p) != nil {
		t.Fatalf("pop: %d %s", code, out)
	}
	if st := h.Get("Server-Timing"); !regexp.MustCompile(`^db;dur=[0-9]+\.[0-9]{3}, park;dur=0\.000$`).MatchString(st) {
		t.Fatalf("pop Server-Timing %q, want db;dur=<ms>, park;dur=0.000", st)
	}
	if len(p.Messages) != 1 {
		t.Fatalf("pop with a tick stuck got %d messages, want 1 (the first push's)", len(p.Messages))
	}
	// The old wait was 2 s (or the tick's end, which cannot come while the
	// lock is held), spent before the pop statement: time outside the
	// statement ("db" of Server-Timing) is what a wait costs; a loaded
	// machine may slow the statement itself, not that.
	m := regexp.MustCompile(`^db;dur=([0-9.]+)`).FindStringSubmatch(h.Get("Server-Timing"))
	dbMs, _ := strconv.ParseFloat(m[1], 64)
	if outside := took - time.Duration(dbMs*float64(time.Millisecond)); outside >= 1500*time.Millisecond {
		t.Fatalf("a pop took %v (%s), %v of it outside its statement, while a tick of its queue was stuck: it waited for the tick",
			took, h.Get("Server-Timing"), outside)
	}
	if _, err := lock.Exec(ctxT(t), `SELECT pg_advisory_unlock(1885827445, 6)`); err != nil {
		t.Fatal(err)
	}
	if code := <-pushed; code != http.StatusCreated {
		t.Fatalf("second push: status %d, want 201", code)
	}
}
