package httpapi_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/pgquectl/pgquectl/internal/httpapi"
)

// Deleting a queue is idempotent, as Queen has it: an unknown queue is 200
// with "deleted": false (Queen's clients delete before they create, and
// their HTTP clients throw on a 404), a deleted one "deleted": true. Both
// carry "existed".
func TestQueenDeleteQueueIdempotent(t *testing.T) {
	e := setup(t)
	b := e.start(httpapi.Config{})
	var got struct {
		Deleted *bool   `json:"deleted"`
		Existed *bool   `json:"existed"`
		Queue   string  `json:"queue"`
		Message *string `json:"message"`
	}
	b.must(200, "DELETE", "/api/v1/resources/queues/"+url.PathEscape("never made"), nil, &got)
	if got.Deleted == nil || *got.Deleted || got.Existed == nil || *got.Existed || got.Queue != "never made" || got.Message == nil {
		t.Fatalf("unknown queue: %+v", got)
	}
	b.push(item("q", "p", 1, ""))
	got.Deleted, got.Existed, got.Message = nil, nil, nil
	b.must(200, "DELETE", "/api/v1/resources/queues/q", nil, &got)
	if got.Deleted == nil || !*got.Deleted || got.Existed == nil || !*got.Existed || got.Queue != "q" {
		t.Fatalf("existing queue: %+v", got)
	}
	got.Deleted, got.Existed = nil, nil
	b.must(200, "DELETE", "/api/v1/resources/queues/q", nil, &got)
	if got.Deleted == nil || *got.Deleted || got.Existed == nil || *got.Existed {
		t.Fatalf("second delete: %+v", got)
	}
}

// Deleting a consumer group answers Queen's fields: success,
// consumerGroup, deletedPartitions (the group's partition cursors
// deleted), metadataDeleted, and queueName for the per-queue route.
func TestQueenDeleteGroupFields(t *testing.T) {
	e := setup(t)
	b := e.start(httpapi.Config{})
	b.push(item("q", "p", 1, ""))
	for _, g := range []string{"g1", "g2"} {
		if got := groupGot(t, b, "q", g, ""); len(got) != 1 {
			t.Fatalf("group %s got %v", g, got)
		}
	}
	type answer struct {
		Success           *bool  `json:"success"`
		ConsumerGroup     string `json:"consumerGroup"`
		QueueName         string `json:"queueName"`
		DeletedPartitions *int   `json:"deletedPartitions"`
		MetadataDeleted   *bool  `json:"metadataDeleted"`
	}
	var a answer
	b.must(200, "DELETE", "/api/v1/consumer-groups/g1/queues/q", nil, &a)
	if a.Success == nil || !*a.Success || a.ConsumerGroup != "g1" || a.QueueName != "q" ||
		a.DeletedPartitions == nil || *a.DeletedPartitions < 1 || a.MetadataDeleted == nil {
		t.Fatalf("per-queue delete: %+v", a)
	}
	a = answer{}
	b.must(200, "DELETE", "/api/v1/consumer-groups/g2", nil, &a)
	if a.Success == nil || !*a.Success || a.ConsumerGroup != "g2" || a.DeletedPartitions == nil ||
		*a.DeletedPartitions < 1 || a.MetadataDeleted == nil {
		t.Fatalf("delete from every queue: %+v", a)
	}
}

// Queen's transaction may carry "kv" and "timers" riders (its KV store
// and timers; a once-gate is a kv putIfAbsent). This broker has neither:
// a transaction carrying one is refused with 400 and runs nothing, instead
// of committing the rest without its gate. Empty riders are accepted.
func TestQueenTransactionRidersRefused(t *testing.T) {
	e := setup(t)
	b := e.start(httpapi.Config{})
	push := map[string]any{"type": "push", "items": []any{item("q", "p", 1, "t1")}}
	for _, rider := range []map[string]any{
		{"kv": []any{map[string]any{"op": "putIfAbsent", "ns": "once", "key": "k", "value": true, "required": true}}},
		{"timers": []any{map[string]any{"op": "schedule", "queue": "q", "key": "k", "delay": "1h"}}},
	} {
		body := map[string]any{"operations": []any{push}}
		for k, v := range rider {
			body[k] = v
		}
		code, out, _ := b.do("POST", "/api/v1/transaction", body)
		if code != 400 || !strings.Contains(string(out), "not supported") {
			t.Fatalf("rider %v: %d %s", rider, code, out)
		}
	}
	if n := e.int(`SELECT count(*) FROM pgque.queue`); n != 0 {
		t.Fatalf("a refused transaction created %d queues", n)
	}
	b.must(200, "POST", "/api/v1/transaction", map[string]any{"operations": []any{push}, "kv": []any{}, "timers": nil}, nil)
	if p := b.pop("/api/v1/pop/queue/q/partition/p?autoAck=true"); p == nil || len(p.Messages) != 1 {
		t.Fatalf("transaction with empty riders: %+v", p)
	}
}
