package httpapi_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/pgquectl/pgquectl/internal/httpapi"
)

// Bad input anywhere is a 4xx that changes nothing, never a 500: NUL in
// every name and in JSON strings of the payload (PostgreSQL's text and
// jsonb refuse it; these were 500 "internal error"), integers past int4,
// invalid UTF-8 (was stored as U+FFFD), names a URL cannot address (".."
// was pushed, then its pop was redirected).
func TestBadInputIs4xx(t *testing.T) {
	e := setup(t)
	b := e.start(httpapi.Config{})
	b.push(item("q", "", 0, "t0"))
	p := b.pop("/api/v1/pop/queue/q")
	if p == nil {
		t.Fatal("pop")
	}
	lease := p.Messages[0].LeaseID
	raw := func(s string) []byte { return []byte(s) }
	for _, tc := range []struct {
		name, method, path string
		body               any
		want               int
		msg                string
	}{
		{"NUL in queue", "POST", "/api/v1/push", raw(`{"items":[{"queue":"a\u0000b","payload":1}]}`), 400, "NUL"},
		{"NUL in partition", "POST", "/api/v1/push", raw(`{"items":[{"queue":"q","partition":"p\u0000","payload":1}]}`), 400, "NUL"},
		{"NUL in payload", "POST", "/api/v1/push", raw(`{"items":[{"queue":"q","payload":{"s":"x\u0000y"}}]}`), 400, "NUL"},
		{"NUL in payload key", "POST", "/api/v1/push", raw(`{"items":[{"queue":"q","payload":{"\u0000":1}}]}`), 400, "NUL"},
		{"NUL in transactionId", "POST", "/api/v1/push", raw(`{"items":[{"queue":"q","payload":1,"transactionId":"\u0000"}]}`), 400, "NUL"},
		{"NUL in pop group", "GET", "/api/v1/pop/queue/q?consumerGroup=g%00", nil, 400, "NUL"},
		{"NUL in pop queue", "GET", "/api/v1/pop/queue/a%00b", nil, 400, "NUL"},
		{"NUL in pop partition", "GET", "/api/v1/pop/queue/q/partition/a%00b", nil, 400, "NUL"},
		{"NUL in namespace", "POST", "/api/v1/configure", raw(`{"queue":"q","namespace":"n\u0000"}`), 400, "NUL"},
		{"NUL in task", "GET", "/api/v1/pop?task=t%00", nil, 400, "NUL"},
		{"NUL in ack group", "POST", "/api/v1/ack", raw(`{"transactionId":"t0","partitionId":"x","consumerGroup":"\u0000"}`), 400, "NUL"},
		{"NUL in ack transactionId", "POST", "/api/v1/ack", raw(`{"transactionId":"\u0000","partitionId":"x"}`), 400, "NUL"},
		{"control character in queue", "POST", "/api/v1/push", raw(`{"items":[{"queue":"a\u0007","payload":1}]}`), 400, "control"},
		{"leaseSeconds past int4", "GET", "/api/v1/pop/queue/q?leaseSeconds=999999999999", nil, 400, "2147483647"},
		{"batch past int4", "GET", "/api/v1/pop/queue/q?batch=2147483648", nil, 400, "2147483647"},
		{"timeout past int64 ms", "GET", "/api/v1/pop/queue/q?timeout=9223372036854775807", nil, 400, "2147483647"},
		{"extend past int4", "POST", "/api/v1/lease/" + lease + "/extend", raw(`{"seconds":1000000000000}`), 400, "2147483647"},
		{"dlq limit past int4", "GET", "/api/v1/dlq?limit=2147483648", nil, 400, "2147483647"},
		{"dlq offset past int4", "GET", "/api/v1/dlq?offset=99999999999", nil, 400, "2147483647"},
		{"invalid UTF-8 queue in the body", "POST", "/api/v1/push", raw("{\"items\":[{\"queue\":\"a\xffb\",\"payload\":1}]}"), 400, "UTF-8"},
		{"invalid UTF-8 queue in the path", "GET", "/api/v1/pop/queue/a%FFb", nil, 400, "UTF-8"},
		{"queue ..", "POST", "/api/v1/push", raw(`{"items":[{"queue":"..","payload":1}]}`), 400, "URL"},
		{"queue .", "POST", "/api/v1/push", raw(`{"items":[{"queue":".","payload":1}]}`), 400, "URL"},
		{"partition ..", "POST", "/api/v1/push", raw(`{"items":[{"queue":"q","partition":"..","payload":1}]}`), 400, "URL"},
		{"configure ..", "POST", "/api/v1/configure", raw(`{"queue":".."}`), 400, "URL"},
		{"group ..", "GET", "/api/v1/pop/queue/q?consumerGroup=..", nil, 400, "URL"},
	} {
		code, out, _ := b.do(tc.method, tc.path, tc.body)
		if code != tc.want || !strings.Contains(string(out), tc.msg) {
			t.Errorf("%s: %d %s, want %d naming %q", tc.name, code, out, tc.want, tc.msg)
		}
	}
	if n := e.int(`SELECT count(*) FROM pgque.queue`); n != 1 {
		t.Errorf("%d queues after the bad requests, want 1 (q)", n)
	}
	if n := e.events("q"); n != 1 {
		t.Errorf("%d events in q, want 1", n)
	}
	// Escaped, any other name is addressable: "..." and "a/b" push and pop.
	for _, name := range []string{"...", "a/b", "a b%"} {
		b.push(item(name, "", 1, ""))
		if p := b.pop("/api/v1/pop/queue/" + url.PathEscape(name)); p == nil || p.Queue != name {
			t.Errorf("pop of %q: %+v", name, p)
		}
	}
}

// A push of more items than --push-max-items is 413 at once, naming the
// limit (100,000 items with transactionIds used to answer 503 "database
// timeout" after 30 s, every time: retryable by its status, never done).
func TestPushItemLimit(t *testing.T) {
	e := setup(t)
	b := e.start(httpapi.Config{})
	var buf bytes.Buffer
	buf.WriteString(`{"items":[`)
	for i := range 100000 {
		if i > 0 {
			buf.WriteByte(',')
		}
		fmt.Fprintf(&buf, `{"queue":"big","payload":%d,"transactionId":"tx-%d"}`, i, i)
	}
	buf.WriteString(`]}`)
	start := time.Now()
	code, out, _ := b.do("POST", "/api/v1/push", buf.Bytes())
	if code != http.StatusRequestEntityTooLarge || !strings.Contains(string(out), "at most 10000 items") {
		t.Fatalf("100,000 items: %d %s", code, out)
	}
	t.Logf("answered in %v", time.Since(start))
	// The same in a transaction.
	items := make([]map[string]any, 10001)
	for i := range items {
		items[i] = item("big", "", i, "")
	}
	code, out, _ = b.do("POST", "/api/v1/transaction", map[string]any{"operations": []any{
		map[string]any{"type": "push", "items": items[:5000]}, map[string]any{"type": "push", "items": items[5000:]}}})
	if code != http.StatusRequestEntityTooLarge {
		t.Fatalf("a transaction of 10,001 pushed items: %d %s", code, out)
	}
	if n := e.int(`SELECT count(*) FROM pgque.queue WHERE queue_name = 'big'`); n != 0 {
		t.Fatal("the refused pushes created their queue")
	}
}

// Request bodies in flight are bounded by the body budget: past it, 503
// with Retry-After (six concurrent 60 MB pushes used to take 1.55 GB).
// Here the budget holds one body of the limit (4 × 64 KiB charged): a
// request holding it - its body half sent - leaves none for a second.
func TestBodyBudget(t *testing.T) {
	e := setup(t)
	b := e.start(httpapi.Config{BodyLimit: 64 << 10, BodyBudget: 4 * 64 << 10})
	pr, pw := io.Pipe()
	req, _ := http.NewRequestWithContext(ctxT(t), "POST", b.ts.URL+"/api/v1/push", pr)
	req.ContentLength = 60 << 10
	done := make(chan int, 1)
	go func() {
		resp, err := b.ts.Client().Do(req)
		if err != nil {
			done <- 0
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	_, _ = pw.Write([]byte(`{"items":[{"queue":"q","payload":"`))
	for deadline := time.Now().Add(30 * time.Second); b.metric("pgque_http_body_budget_used_bytes") == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the slow request never took its part of the budget")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// 240 KiB held: a 5 KiB push (20 KiB charged) does not fit.
	code, out, h := b.do("POST", "/api/v1/push", map[string]any{"items": []any{item("q", "", strings.Repeat("y", 5000), "")}})
	if code != http.StatusServiceUnavailable || h.Get("Retry-After") == "" || !strings.Contains(string(out), "--body-budget") {
		t.Fatalf("a push past the budget: %d %s (Retry-After %q)", code, out, h.Get("Retry-After"))
	}
	// The first one completes; then the budget is back.
	rest := strings.Repeat("x", 60<<10-len(`{"items":[{"queue":"q","payload":"`)-len(`"}]}`))
	_, _ = pw.Write([]byte(rest + `"}]}`))
	pw.Close()
	if c := <-done; c != http.StatusCreated {
		t.Fatalf("the slow push: %d", c)
	}
	b.push(item("q", "", 1, ""))
	// Over the limit: 413 naming it.
	code, out, _ = b.do("POST", "/api/v1/push", bytes.Repeat([]byte(" "), 65<<10))
	if code != http.StatusRequestEntityTooLarge || !strings.Contains(string(out), "--body-limit") {
		t.Fatalf("a body over the limit: %d %s", code, out)
	}
}

// A push whose backend is terminated under its statement answers 503 (it
// was 500 "push: unexpected EOF" when PostgreSQL crashed) and says that
// it may have been stored and that a transactionId makes the retry safe.
func TestPushConnectionLostIs503(t *testing.T) {
	e := setup(t)
	b := e.start(httpapi.Config{})
	b.push(item("q", "", 0, ""))
	ctx := ctxT(t)
	holder, err := e.pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback(ctx) //nolint:errcheck
	if _, err := holder.Exec(ctx, `LOCK TABLE pgque.queue IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		code int
		out  []byte
		h    http.Header
	}
	ch := make(chan answer, 1)
	go func() {
		code, out, h := b.do("POST", "/api/v1/push", map[string]any{"items": []any{item("q", "", 1, "t1")}})
		ch <- answer{code, out, h}
	}()
	var pid int64
	for deadline := time.Now().Add(30 * time.Second); pid == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the push never waited for the lock")
		}
		_ = e.conn.QueryRow(ctx, `SELECT coalesce(max(pid), 0) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%pgque.push%'`).Scan(&pid)
		time.Sleep(10 * time.Millisecond)
	}
	e.exec(`SELECT pg_terminate_backend($1::int)`, pid)
	a := <-ch
	if a.code != http.StatusServiceUnavailable || a.h.Get("Retry-After") == "" ||
		!strings.Contains(string(a.out), "may have been stored") || !strings.Contains(string(a.out), "transactionId") {
		t.Fatalf("push with its backend terminated: %d %s (Retry-After %q)", a.code, a.out, a.h.Get("Retry-After"))
	}
}
