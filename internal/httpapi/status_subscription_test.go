package httpapi_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/pgquectl/pgquectl/internal/httpapi"
)

type queueStatus struct {
	Queue         string `json:"queue"`
	ConsumerGroup string `json:"consumerGroup"`
	Messages      int    `json:"messages"`
	Pending       int    `json:"pending"`
	Retained      int    `json:"retained"`
	Partitions    []struct {
		Partition string `json:"partition"`
		Messages  int    `json:"messages"`
		Pending   int    `json:"pending"`
		Retained  int    `json:"retained"`
	} `json:"partitions"`
}

func (s queueStatus) String() string {
	out := fmt.Sprintf("%s/%s %d %d %d:", s.Queue, s.ConsumerGroup, s.Messages, s.Pending, s.Retained)
	for _, p := range s.Partitions {
		out += fmt.Sprintf(" %s=%d/%d/%d", p.Partition, p.Messages, p.Pending, p.Retained)
	}
	return out
}

// GET /status/queues/:queue reports what a group has still to do.
func TestQueueStatusReportsPending(t *testing.T) {
	e := setup(t)
	b := e.start(httpapi.Config{})
	var items []map[string]any
	for i := 0; i < 4; i++ {
		items = append(items, item("q", "p", map[string]int{"n": i}, ""))
	}
	b.push(append(items, item("q", "o", map[string]int{"n": 9}, ""))...)
	p := b.pop("/api/v1/pop/queue/q/partition/p?batch=3")
	if p == nil || len(p.Messages) != 3 {
		t.Fatalf("pop: %+v", p)
	}
	acks := make([]map[string]any, len(p.Messages))
	for i, m := range p.Messages {
		acks[i] = ackOf(m, "completed")
	}
	b.ack("", acks...)
	status := func(path string) string {
		var st queueStatus
		b.must(http.StatusOK, "GET", path, nil, &st)
		return st.String()
	}
	if got, want := status("/api/v1/status/queues/q"), "q/__QUEUE_MODE__ 2 2 5: Default=0/0/0 o=1/1/1 p=1/1/4"; got != want {
		t.Fatalf("queue mode status: %s, want %s", got, want)
	}
	if code, out, _ := b.do("GET", "/api/v1/status/queues/q?consumerGroup=g", nil); code != http.StatusNotFound {
		t.Fatalf("a group that never subscribed: %d %s", code, out)
	}
	if code, out, _ := b.do("GET", "/api/v1/status/queues/none", nil); code != http.StatusNotFound {
		t.Fatalf("unknown queue: %d %s", code, out)
	}
	b.pop("/api/v1/pop/queue/q/partition/o?batch=10&autoAck=true&consumerGroup=g&subscriptionMode=all")
	if got, want := status("/api/v1/status/queues/q?consumerGroup=g"), "q/g 4 4 5: Default=0/0/0 o=0/0/1 p=4/4/4"; got != want {
		t.Fatalf("group status: %s, want %s", got, want)
	}
}

// POST /consumer-groups/:group/subscription changes where the group's
// partitions reached later start; bad input changes nothing.
func TestGroupSubscriptionRoute(t *testing.T) {
	e := setup(t)
	b := e.start(httpapi.Config{})
	b.push(item("q", "a", map[string]int{"n": 1}, ""))
	if p := b.pop("/api/v1/pop/queue/q/partition/a?autoAck=true&consumerGroup=g&subscriptionMode=new"); p != nil {
		t.Fatalf("mode new got the backlog: %+v", p)
	}
	b.push(item("q", "b", map[string]int{"n": 2}, ""))
	modes := func() string {
		var m string
		if err := e.conn.QueryRow(ctxT(t), `SELECT string_agg(gs_mode || coalesce('@' || gs_from::text, ''), ',') FROM pgque.group_subscription`).Scan(&m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	before := modes()
	for _, c := range []struct {
		group string
		body  any
		code  int
	}{
		{"g", `{}`, 400},
		{"g", `{"subscriptionTimestamp":"yesterday"}`, 400},
		{"g", `{"subscriptionMode":"all","subscriptionTimestamp":"2026-01-01T00:00:00Z"}`, 400},
		{"g", `{"subscriptionTimestamp":1}`, 400},
		{"g", `not json`, 400},
		{"__QUEUE_MODE__", `{"subscriptionMode":"all"}`, 400},
		{"nobody", `{"subscriptionMode":"all"}`, 404},
	} {
		if code, out, _ := b.do("POST", "/api/v1/consumer-groups/"+c.group+"/subscription", c.body); code != c.code {
			t.Errorf("%s %v: %d %s, want %d", c.group, c.body, code, out, c.code)
		}
	}
	if m := modes(); m != before || m != "new" {
		t.Fatalf("rejected requests changed subscriptions: %q (was %q)", m, before)
	}
	var res struct {
		Success bool `json:"success"`
		Queues  int  `json:"queues"`
	}
	b.must(200, "POST", "/api/v1/consumer-groups/g/subscription", map[string]any{"subscriptionMode": "all"}, &res)
	if !res.Success || res.Queues != 1 {
		t.Fatalf("mode all: %+v", res)
	}
	if p := b.pop("/api/v1/pop/queue/q/partition/b?autoAck=true&consumerGroup=g"); p == nil || len(p.Messages) != 1 || payloadN(p.Messages[0]) != 2 {
		t.Fatalf("b after mode all: %+v", p)
	}
	if p := b.pop("/api/v1/pop/queue/q/partition/a?autoAck=true&consumerGroup=g"); p != nil {
		t.Fatalf("a's cursor moved: %+v", p)
	}
	b.push(item("q", "c", map[string]int{"n": 3}, ""))
	time.Sleep(20 * time.Millisecond)
	mid := time.Now().UTC()
	time.Sleep(20 * time.Millisecond)
	b.push(item("q", "c", map[string]int{"n": 4}, ""))
	b.must(200, "POST", "/api/v1/consumer-groups/g/subscription", map[string]any{"subscriptionTimestamp": mid.Format(time.RFC3339Nano)}, &res)
	p := b.pop("/api/v1/pop/queue/q/partition/c?autoAck=true&batch=10&consumerGroup=g")
	if p == nil || len(p.Messages) != 1 || payloadN(p.Messages[0]) != 4 {
		t.Fatalf("c after subscriptionTimestamp %v: %+v", mid, p)
	}
	if m := modes(); m[:5] != "from@" {
		t.Fatalf("subscription after timestamp: %q", m)
	}
	b.must(200, "POST", "/api/v1/consumer-groups/g/subscription", map[string]any{"subscriptionMode": "new"}, &res)
	if m := modes(); m != "new" {
		t.Fatalf("subscription after mode new: %q", m)
	}
}
