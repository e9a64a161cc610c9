package httpapi_test

import (
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/pgquectl/pgquectl/internal/httpapi"
	"github.com/pgquectl/pgquectl/internal/pgtest"
)

// A push waits for no tick and a pop for none either: while the lock every
// tick takes is held (a ticker stuck), a push is answered and popped at
// once. Its Server-Timing has only its statement ("db"; there used to be a
// "tick" wait too), a pop's its statements and its time parked. Before,
// the broker ticked the queue after each push and answered after that
// tick: a stuck tick held every push answer up to 2 s.
func TestPushAndPopWaitForNoTick(t *testing.T) {
	e := setup(t)
	b := e.start(httpapi.Config{})
	b.push(item("q", "p", map[string]int{"n": 0}, ""))
	lock := pgtest.Conn(t, e.dsn)
	if _, err := lock.Exec(ctxT(t), `SELECT pg_advisory_lock(1885827445, 6)`); err != nil {
		t.Fatal(err)
	}
	for n := 1; n <= 2; n++ {
		start := time.Now()
		code, out, h := b.do("POST", "/api/v1/push", map[string]any{"items": []any{
			map[string]any{"queue": "q", "partition": "p", "payload": map[string]any{"n": n}}}})
		if code != http.StatusCreated {
			t.Fatalf("push: %d %s", code, out)
		}
		st := h.Get("Server-Timing")
		if !regexp.MustCompile(`^db;dur=[0-9]+\.[0-9]{3}$`).MatchString(st) {
			t.Fatalf("push Server-Timing %q, want db;dur=<ms>", st)
		}
		// time outside the statement is what a wait would cost (a loaded
		// machine may slow the statement itself, not that)
		m := regexp.MustCompile(`^db;dur=([0-9.]+)`).FindStringSubmatch(st)
		dbMs, _ := strconv.ParseFloat(m[1], 64)
		if outside := time.Since(start) - time.Duration(dbMs*float64(time.Millisecond)); outside >= 1500*time.Millisecond {
			t.Fatalf("a push took %v (%s), %v of it outside its statement, while the tick lock was held", time.Since(start), st, outside)
		}
		code, out, h = b.do("GET", "/api/v1/pop/queue/q?batch=10&autoAck=true", nil)
		var p popRes
		if code != http.StatusOK || jsonUnmarshal(out, &p) != nil {
			t.Fatalf("pop: %d %s", code, out)
		}
		if st := h.Get("Server-Timing"); !regexp.MustCompile(`^db;dur=[0-9]+\.[0-9]{3}, park;dur=0\.000$`).MatchString(st) {
			t.Fatalf("pop Server-Timing %q, want db;dur=<ms>, park;dur=0.000", st)
		}
		want := 1 // the push just made
		if n == 1 {
			want = 2 // and the one before the lock was taken
		}
		if len(p.Messages) != want {
			t.Fatalf("pop after push %d: %d messages, want %d", n, len(p.Messages), want)
		}
	}
	if _, err := lock.Exec(ctxT(t), `SELECT pg_advisory_unlock(1885827445, 6)`); err != nil {
		t.Fatal(err)
	}
}
