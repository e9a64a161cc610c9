package httpapi_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/pgquectl/pgquectl/internal/httpapi"
)

// Conformance with Queen's server for what its client libraries rely on:
// subscription modes (a group naming none reads the history; only new /
// new-only start at the tail; the server-wide default) and queue names up
// to 255 bytes (Queen's VARCHAR(255)), with and without a tenant.

// seedHistory pushes n messages to q/p and proves they were ticked (a
// queue-mode pop sees them), so a group subscribing later with mode new
// would start after them.
func seedHistory(t *testing.T, b *brokerT, q string, n int) {
	t.Helper()
	var items []map[string]any
	for i := 1; i <= n; i++ {
		items = append(items, item(q, "p", map[string]int{"n": i}, ""))
	}
	b.push(items...)
	if p := b.pop("/api/v1/pop/queue/" + q + "/partition/p?autoAck=true&batch=100"); p == nil || len(p.Messages) != n {
		t.Fatalf("queue-mode pop of the history: %+v", p)
	}
}

// groupGot pops q/p once for group with the extra query (e.g.
// "&subscriptionMode=new") and returns the payload numbers it got.
func groupGot(t *testing.T, b *brokerT, q, group, extra string) []int {
	t.Helper()
	p := b.pop("/api/v1/pop/queue/" + q + "/partition/p?autoAck=true&batch=100&consumerGroup=" + url.QueryEscape(group) + extra)
	if p == nil {
		return nil
	}
	out := make([]int, len(p.Messages))
	for i, m := range p.Messages {
		out[i] = payloadN(m)
	}
	return out
}

func ints(v []int) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// A group that names no subscriptionMode, created after messages were
// pushed and ticked, gets them all (Queen: no mode = all), on the
// partition route and the wildcard route.
func TestQueenGroupWithoutModeReadsHistory(t *testing.T) {
	e := setup(t)
	b := e.start(httpapi.Config{})
	seedHistory(t, b, "orders", 3)
	if got := groupGot(t, b, "orders", "billing", ""); ints(got) != "[1,2,3]" {
		t.Fatalf("group billing without subscriptionMode got %v, want the history [1,2,3]", got)
	}
	p := b.pop("/api/v1/pop/queue/orders?autoAck=true&batch=100&consumerGroup=audit")
	if p == nil || len(p.Messages) != 3 {
		t.Fatalf("wildcard pop of group audit without subscriptionMode: %+v, want the 3 messages", p)
	}
	var mode string
	if err := e.conn.QueryRow(ctxT(t), `SELECT string_agg(DISTINCT gs_mode, ',') FROM pgque.group_subscription`).Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if mode != "all" {
		t.Fatalf("stored subscription modes %q, want all", mode)
	}
}

// Queen's subscriptionMode values: only new and new-only (case and
// spacing aside) skip the history; every other value, from_beginning
// included, reads it; unknown values are not an error.
func TestQueenSubscriptionModeValues(t *testing.T) {
	e := setup(t)
	b := e.start(httpapi.Config{})
	seedHistory(t, b, "q", 2)
	cases := []struct {
		mode    string
		history bool
	}{
		{"all", true},
		{"from_beginning", true},
		{"sometimes", true},
		{"new", false},
		{"new-only", false},
		{"NEW", false},
	}
	for i, c := range cases {
		group := "g" + string(rune('a'+i))
		got := groupGot(t, b, "q", group, "&subscriptionMode="+url.QueryEscape(c.mode))
		if want := map[bool]string{true: "[1,2]", false: "null"}[c.history]; ints(got) != want {
			t.Errorf("subscriptionMode=%s: first pop got %v, want %s", c.mode, got, want)
		}
	}
	b.push(item("q", "p", map[string]int{"n": 3}, ""))
	for i, c := range cases {
		group := "g" + string(rune('a'+i))
		if got := groupGot(t, b, "q", group, ""); ints(got) != "[3]" {
			t.Errorf("subscriptionMode=%s: after a new push got %v, want [3]", c.mode, got)
		}
	}

	// The admin route takes the same values.
	b.push(item("q", "p2", map[string]int{"n": 4}, ""))
	mode := func(group string) string {
		var m string
		if err := e.conn.QueryRow(ctxT(t), `SELECT gs.gs_mode FROM pgque.group_subscription gs
		    JOIN pgque.broker_group g ON g.grp_id = gs.gs_group WHERE g.grp_name = $1`, group).Scan(&m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	for _, c := range []struct{ body, want string }{
		{`{"subscriptionMode":"new-only"}`, "new"},
		{`{"subscriptionMode":"from_beginning"}`, "all"},
		{`{"subscriptionMode":"new"}`, "new"},
		{`{"subscriptionMode":"sometimes"}`, "all"},
	} {
		b.must(http.StatusOK, "POST", "/api/v1/consumer-groups/ga/subscription", c.body, nil)
		if m := mode("ga"); m != c.want {
			t.Errorf("POST subscription %s: stored mode %q, want %q", c.body, m, c.want)
		}
	}
}

// The serve-wide default (--default-subscription-mode) applies to groups
// that name no mode; an explicit mode still wins.
func TestQueenDefaultSubscriptionMode(t *testing.T) {
	e := setup(t)
	b := e.start(httpapi.Config{DefaultSubscriptionMode: "new"})
	seedHistory(t, b, "q", 2)
	if got := groupGot(t, b, "q", "tail", ""); got != nil {
		t.Errorf("default new: a group naming no mode got the history %v", got)
	}
	if got := groupGot(t, b, "q", "everything", "&subscriptionMode=from_beginning"); ints(got) != "[1,2]" {
		t.Errorf("default new, subscriptionMode=from_beginning: got %v, want [1,2]", got)
	}
	b.push(item("q", "p", map[string]int{"n": 3}, ""))
	if got := groupGot(t, b, "q", "tail", ""); ints(got) != "[3]" {
		t.Errorf("default new: after a new push got %v, want [3]", got)
	}
	if _, err := httpapi.New(httpapi.Config{Pool: e.pool(), DefaultSubscriptionMode: "sometimes"}); err == nil ||
		!strings.Contains(err.Error(), "new-only") {
		t.Errorf("an unknown default mode: %v, want an error naming the accepted values", err)
	}
}

// tenantReq sends a request as tenant (header X-Tenant; "" = none).
func tenantReq(t *testing.T, b *brokerT, tenant, method, path string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		j, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequestWithContext(ctxT(t), method, b.ts.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if tenant != "" {
		req.Header.Set("X-Tenant", tenant)
	}
	resp, err := b.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, out
}

// name255 is a queue name of exactly n bytes with multi-byte characters,
// a quote and a space.
func nameOf(n int) string {
	s := "Ω queue's "
	s += strings.Repeat("x", n-len(s))
	return s
}

// Queue names up to 255 bytes work through configure, push and pop, for
// the default tenant and for a tenant (whose stored name is longer); 256
// bytes, and a tenant over its limit, get a clear 400 and create nothing.
func TestQueenLongQueueNames(t *testing.T) {
	e := setup(t)
	b := e.start(httpapi.Config{TenantHeader: "X-Tenant"})
	long := nameOf(255)
	tenantMax := strings.Repeat("t", httpapi.MaxTenantBytes)
	for _, tenant := range []string{"", "acme", tenantMax} {
		code, out := tenantReq(t, b, tenant, "POST", "/api/v1/configure", map[string]any{"queue": long, "options": map[string]any{"leaseTime": 30}})
		if code != http.StatusOK {
			t.Fatalf("tenant %q: configure a 255-byte queue: %d %s", tenant, code, out)
		}
		code, out = tenantReq(t, b, tenant, "POST", "/api/v1/push", map[string]any{"items": []any{
			item(long, "p", map[string]int{"n": 1}, ""), item(long+"", "p", map[string]int{"n": 2}, "")}})
		if code != http.StatusCreated {
			t.Fatalf("tenant %q: push to a 255-byte queue: %d %s", tenant, code, out)
		}
		for _, path := range []string{
			"/api/v1/pop/queue/" + url.PathEscape(long) + "/partition/p?batch=1&autoAck=true",
			"/api/v1/pop/queue/" + url.PathEscape(long) + "?batch=1&autoAck=true&consumerGroup=g",
		} {
			code, out = tenantReq(t, b, tenant, "GET", path, nil)
			var p popRes
			if code != http.StatusOK || json.Unmarshal(out, &p) != nil || len(p.Messages) != 1 || payloadN(p.Messages[0]) != 1 {
				t.Fatalf("tenant %q: GET %s: %d %s", tenant, path, code, out)
			}
			if p.Messages[0].ID == "" {
				t.Fatalf("tenant %q: no message id: %s", tenant, out)
			}
		}
	}
	if n := e.int(`SELECT count(*) FROM pgque.queue WHERE octet_length(queue_name) >= 255`); n != 3 {
		t.Fatalf("%d long queues stored, want 3", n)
	}

	before := e.int(`SELECT count(*) FROM pgque.queue`)
	tooLong := nameOf(256)
	for _, tenant := range []string{"", "acme"} {
		for _, c := range []struct {
			method, path string
			body         any
		}{
			{"POST", "/api/v1/configure", map[string]any{"queue": tooLong}},
			{"POST", "/api/v1/push", map[string]any{"items": []any{item(tooLong, "p", 1, "")}}},
			{"GET", "/api/v1/pop/queue/" + url.PathEscape(tooLong) + "?autoAck=true", nil},
		} {
			code, out := tenantReq(t, b, tenant, c.method, c.path, c.body)
			if code != http.StatusBadRequest || !strings.Contains(string(out), "256 bytes") || !strings.Contains(string(out), "255") {
				t.Errorf("tenant %q: %s %s with a 256-byte queue name: %d %s, want 400 naming 256 bytes and the limit 255",
					tenant, c.method, c.path, code, out)
			}
		}
	}
	code, out := tenantReq(t, b, tenantMax+"t", "POST", "/api/v1/push", map[string]any{"items": []any{item("q", "p", 1, "")}})
	if code != http.StatusBadRequest || !strings.Contains(string(out), "tenant") {
		t.Errorf("a tenant over %d bytes: %d %s, want 400 about the tenant", httpapi.MaxTenantBytes, code, out)
	}
	if after := e.int(`SELECT count(*) FROM pgque.queue`); after != before {
		t.Errorf("refused requests created %d queues", after-before)
	}
}
