package httpapi_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/pgquectl/pgquectl/internal/httpapi"
)

// queenOptions is every option Queen's POST /api/v1/configure takes, with a
// value other than its default.
var queenOptions = map[string]any{
	"leaseTime": 45, "maxSize": 1000, "ttl": 7200, "retryLimit": 5, "retryDelay": 2500,
	"deadLetterQueue": false, "dlqAfterMaxRetries": false, "priority": 4, "delayedProcessing": 0,
	"windowBuffer": 0, "retentionSeconds": 86400, "completedRetentionSeconds": 3600,
	"retentionEnabled": true, "encryptionEnabled": true, "maxWaitTimeSeconds": 600,
	"minPopWaitTime": 50, "dedupWindowSeconds": 120, "retentionSinkHold": "lake-1",
	"retentionSinkHoldMaxSeconds": 86400, "storage": "segments",
}

// Every Queen option is accepted, stored and echoed back (the configure
// answer and the queue detail), every option appears in the echo with its
// value or default, and bad values are refused with 400 and change nothing.
func TestConfigureEveryQueenOption(t *testing.T) {
	e := setup(t)
	b := e.start(httpapi.Config{})
	var c struct {
		Configured  bool           `json:"configured"`
		Queue       string         `json:"queue"`
		PartitionID any            `json:"partitionId"`
		Options     map[string]any `json:"options"`
	}
	b.must(200, "POST", "/api/v1/configure", map[string]any{"queue": "q", "options": queenOptions}, &c)
	want := map[string]any{}
	j, _ := json.Marshal(queenOptions)
	_ = json.Unmarshal(j, &want)
	if !c.Configured || c.Queue != "q" || !reflect.DeepEqual(c.Options, want) {
		t.Fatalf("configure echo:\n got %v\nwant %v", c.Options, want)
	}
	var d struct {
		Options map[string]any `json:"options"`
	}
	b.must(200, "GET", "/api/v1/resources/queues/q", nil, &d)
	if !reflect.DeepEqual(d.Options, want) {
		t.Fatalf("stored options:\n got %v\nwant %v", d.Options, want)
	}
	// A queue configured with nothing echoes every option with Queen's default.
	c.Options = nil
	b.must(200, "POST", "/api/v1/configure", map[string]any{"queue": "fresh"}, &c)
	defaults := map[string]any{"priority": 0.0, "leaseTime": 300.0, "retryLimit": 3.0, "retryDelay": 1000.0,
		"maxSize": 0.0, "ttl": 3600.0, "deadLetterQueue": true, "dlqAfterMaxRetries": true, "delayedProcessing": 0.0,
		"windowBuffer": 0.0, "retentionSeconds": 0.0, "completedRetentionSeconds": 0.0, "retentionEnabled": false,
		"encryptionEnabled": false, "maxWaitTimeSeconds": 0.0, "minPopWaitTime": 0.0, "dedupWindowSeconds": 3600.0,
		"retentionSinkHold": "", "retentionSinkHoldMaxSeconds": 604800.0}
	if !reflect.DeepEqual(c.Options, defaults) {
		t.Fatalf("defaults:\n got %v\nwant %v", c.Options, defaults)
	}
	for _, bad := range []string{`{"retentionEnabled": 1}`, `{"retentionSinkHold": "a:b"}`,
		`{"retentionSinkHoldMaxSeconds": 59}`, `{"storage": "disk"}`, `{"minPopWaitTime": -1}`} {
		if code, out, _ := b.do("POST", "/api/v1/configure", `{"queue":"q","options":`+bad+`}`); code != 400 {
			t.Errorf("configure %s: %d %s", bad, code, out)
		}
	}
	b.must(200, "GET", "/api/v1/resources/queues/q", nil, &d)
	if !reflect.DeepEqual(d.Options, want) {
		t.Fatalf("options after refused configures:\n got %v\nwant %v", d.Options, want)
	}
}

type queueDetail struct {
	ID         any              `json:"id"`
	Name       string           `json:"name"`
	Namespace  any              `json:"namespace"`
	Task       any              `json:"task"`
	CreatedAt  string           `json:"createdAt"`
	Partitions []map[string]any `json:"partitions"`
	Totals     map[string]any   `json:"totals"`
	Options    map[string]any   `json:"options"`
	Not        []string         `json:"notEnforced"`
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// GET /api/v1/resources/queues/:queue answers Queen's get_queue_v2 shape:
// partitions is an array of {id, name, createdAt, stats, oldestMessage,
// newestMessage}, totals sums the stats; plus the options and the ones not
// enforced.
func TestQueueDetailQueenShape(t *testing.T) {
	e := setup(t)
	b := e.start(httpapi.Config{})
	b.must(200, "POST", "/api/v1/configure", map[string]any{"queue": "q", "namespace": "ns",
		"options": map[string]any{"priority": 5, "encryptionEnabled": true, "retryDelay": 1000, "leaseTime": 60}}, nil)
	b.push(item("q", "p1", 1, ""), item("q", "p1", 2, ""), item("q", "p1", 3, ""), item("q", "p2", 4, ""))
	p := b.pop("/api/v1/pop/queue/q/partition/p1?batch=1")
	if p == nil || len(p.Messages) != 1 {
		t.Fatalf("pop: %+v", p)
	}
	var d queueDetail
	b.must(200, "GET", "/api/v1/resources/queues/q", nil, &d)
	if d.Name != "q" || d.Namespace != "ns" || d.Task != nil || len(d.CreatedAt) != 24 {
		t.Fatalf("detail: %+v", d)
	}
	byName := map[string]map[string]any{}
	for _, pt := range d.Partitions {
		if got := keys(pt); !reflect.DeepEqual(got, []string{"createdAt", "id", "name", "newestMessage", "oldestMessage", "stats"}) {
			t.Fatalf("partition fields %v", got)
		}
		byName[pt["name"].(string)] = pt
	}
	statKeys := []string{"completed", "deadLetter", "failed", "pending", "processing", "total"}
	p1, ok := byName["p1"]
	if !ok || byName["p2"] == nil {
		t.Fatalf("partitions %v", d.Partitions)
	}
	st := p1["stats"].(map[string]any)
	if !reflect.DeepEqual(keys(st), statKeys) || st["total"] != 3.0 || st["pending"] != 3.0 || st["processing"] != 1.0 ||
		st["completed"] != 0.0 || p1["id"] != p.PartitionID || p1["oldestMessage"] == nil {
		t.Fatalf("p1: %v", p1)
	}
	if !reflect.DeepEqual(keys(d.Totals), statKeys) || d.Totals["total"] != 4.0 || d.Totals["pending"] != 4.0 ||
		d.Totals["processing"] != 1.0 {
		t.Fatalf("totals: %v", d.Totals)
	}
	if !reflect.DeepEqual(d.Not, []string{"encryptionEnabled", "priority"}) || d.Options["leaseTime"] != 60.0 {
		t.Fatalf("options %v, not enforced %v", d.Options, d.Not)
	}
	b.ack("", ackOf(p.Messages[0], "completed"))
	b.must(200, "GET", "/api/v1/resources/queues/q", nil, &d)
	if d.Totals["completed"] != 1.0 || d.Totals["pending"] != 3.0 || d.Totals["processing"] != 0.0 {
		t.Fatalf("totals after an ack: %v", d.Totals)
	}
}

// With retentionEnabled and retentionSeconds, messages past the retention
// are not delivered, and the event table holding them is truncated by the
// rotation (its pages are gone); nothing is deleted or updated row by row.
func TestRetentionHTTP(t *testing.T) {
	e := setup(t)
	b := e.start(httpapi.Config{})
	b.must(200, "POST", "/api/v1/configure", map[string]any{"queue": "q",
		"options": map[string]any{"retentionEnabled": true, "retentionSeconds": 1}}, nil)
	e.exec(`SELECT pgque.set_queue_config('q', 'rotation_period', '0')`)
	qid := e.int(`SELECT queue_id FROM pgque.queue WHERE queue_name = 'q'`)
	t0 := e.int(`SELECT queue_cur_table FROM pgque.queue WHERE queue_id = $1`, qid)
	tbl := fmt.Sprintf("pgque.event_%d_%d", qid, t0)
	items := make([]map[string]any, 20)
	for i := range items {
		items[i] = item("q", "p", map[string]int{"n": i}, "")
	}
	b.push(items...)
	if p := b.pop("/api/v1/pop/queue/q/partition/p?batch=1&autoAck=true"); p == nil || payloadN(p.Messages[0]) != 0 {
		t.Fatalf("first pop: %+v", p)
	}
	size := e.int(`SELECT pg_relation_size($1::regclass)`, tbl)
	time.Sleep(1100 * time.Millisecond) // messages 1..19 are past the retention
	if p := b.pop("/api/v1/pop/queue/q/partition/p?batch=10&autoAck=true"); p != nil {
		t.Fatalf("expired messages delivered: %+v", p)
	}
	// Three switches: the third truncates the table the messages were in.
	for switches := 0; switches < 3; {
		cur := e.int(`SELECT queue_cur_table FROM pgque.queue WHERE queue_id = $1`, qid)
		e.exec(`SELECT pgque.maint_rotate_tables_step2()`)
		deadline := time.Now().Add(60 * time.Second)
		for e.int(`SELECT queue_cur_table FROM pgque.queue WHERE queue_id = $1`, qid) == cur {
			if time.Now().After(deadline) {
				t.Fatalf("no event-table switch after %d: the expired messages still pin the rotation", switches)
			}
			time.Sleep(20 * time.Millisecond)
			e.exec(`SELECT pgque.broker_tick('q')`)
			e.exec(`SELECT pgque.maint_rotate_tables_step1('q')`)
		}
		switches++
	}
	if n := e.int(`SELECT count(*) FROM ` + tbl); n != 0 || size == 0 || e.int(`SELECT pg_relation_size($1::regclass)`, tbl) != 0 {
		t.Fatalf("%s: %d rows, %d bytes (%d before)", tbl, n, e.int(`SELECT pg_relation_size($1::regclass)`, tbl), size)
	}
	if e.int(`SELECT coalesce(sum(n_tup_del + n_tup_upd), 0) FROM pg_stat_user_tables
	           WHERE schemaname = 'pgque' AND relname LIKE 'event\_%'`) != 0 {
		t.Fatal("event rows were deleted or updated")
	}
	// New messages are delivered as before.
	b.push(item("q", "p", map[string]int{"n": 100}, ""))
	if p := b.pop("/api/v1/pop/queue/q/partition/p?batch=10&autoAck=true"); p == nil || len(p.Messages) != 1 || payloadN(p.Messages[0]) != 100 {
		t.Fatalf("after the rotation: %+v", p)
	}
}
