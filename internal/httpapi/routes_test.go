package httpapi_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pgquectl/pgquectl/internal/httpapi"
)

func TestPopPartitionAndLabel(t *testing.T) {
	e := setup(t)
	b := e.start(httpapi.Config{})
	b.must(200, "POST", "/api/v1/configure", map[string]any{"queue": "q1", "namespace": "ns", "task": "t"}, nil)
	b.push(item("q1", "a", map[string]int{"n": 1}, ""), item("q1", "b", map[string]int{"n": 2}, ""))
	p := b.pop("/api/v1/pop/queue/q1/partition/b?autoAck=true")
	if p == nil || len(p.Messages) != 1 || p.Partition != "b" || payloadN(p.Messages[0]) != 2 || p.LeaseID != "" {
		t.Fatalf("partition pop: %+v", p)
	}
	if p := b.pop("/api/v1/pop/queue/q1/partition/nope"); p != nil {
		t.Fatalf("unknown partition: %+v", p)
	}
	p = b.pop("/api/v1/pop?namespace=ns&task=t&autoAck=true")
	if p == nil || len(p.Messages) != 1 || p.Queue != "q1" || payloadN(p.Messages[0]) != 1 {
		t.Fatalf("label pop: %+v", p)
	}
	if p := b.pop("/api/v1/pop?namespace=other"); p != nil {
		t.Fatalf("other namespace: %+v", p)
	}
}

// Ack statuses: retry redelivers without spending a retry; failed spends
// one; retryLimit exhausted → DLQ; dlq → dead-lettered now; an unknown
// lease → success:false.
func TestAckStatusesRetryLimitDLQ(t *testing.T) {
	e := setup(t)
	b := e.start(httpapi.Config{})
	b.must(200, "POST", "/api/v1/configure", map[string]any{"queue": "q", "options": map[string]any{"retryLimit": 1}}, nil)
	b.push(item("q", "", map[string]int{"n": 1}, "m1"), item("q", "", map[string]int{"n": 2}, "m2"))

	// retry ×3: no retry spent, still delivered.
	for i := 1; i <= 3; i++ {
		p := b.pop("/api/v1/pop/queue/q?batch=1")
		if p == nil || p.Messages[0].TransactionID != "m1" || p.Messages[0].DeliveryAttempt != i {
			t.Fatalf("retry round %d: %+v", i, p)
		}
		if a := b.ack("", ackOf(p.Messages[0], "retry")); !a[0].Success || !a[0].LeaseReleased || a[0].DLQ {
			t.Fatalf("retry ack: %+v", a)
		}
	}
	// failed twice with retryLimit 1: the second failure dead-letters it.
	p := b.pop("/api/v1/pop/queue/q?batch=1")
	if a := b.ack("", ackOf(p.Messages[0], "failed")); !a[0].Success || a[0].DLQ {
		t.Fatalf("first failure: %+v", a)
	}
	p = b.pop("/api/v1/pop/queue/q?batch=1")
	if p == nil || p.Messages[0].TransactionID != "m1" {
		t.Fatalf("redelivery after one failure: %+v", p)
	}
	if a := b.ack("", map[string]any{"transactionId": "m1", "partitionId": p.Messages[0].PartitionID, "leaseId": p.LeaseID,
		"status": "boom", "error": "it broke"}); !a[0].Success || !a[0].DLQ {
		t.Fatalf("second failure: %+v", a)
	}
	// m2 next; status dlq dead-letters it at once.
	p = b.pop("/api/v1/pop/queue/q?batch=1")
	if p == nil || p.Messages[0].TransactionID != "m2" {
		t.Fatalf("after DLQ: %+v", p)
	}
	// Unknown lease id → success:false, nothing changed.
	bad := ackOf(p.Messages[0], "completed")
	bad["leaseId"] = "00000000-0000-0000-0000-000000000001"
	if a := b.ack("", bad); a[0].Success || a[0].Error == nil || *a[0].Error != "invalid or expired lease" {
		t.Fatalf("unknown lease: %+v", a)
	}
	bad["leaseId"] = "not-a-uuid"
	if a := b.ack("", bad); a[0].Success {
		t.Fatalf("malformed lease: %+v", a)
	}
	if a := b.ack("", ackOf(p.Messages[0], "dlq")); !a[0].Success || !a[0].DLQ {
		t.Fatalf("dlq ack: %+v", a)
	}
	if p := b.pop("/api/v1/pop/queue/q"); p != nil {
		t.Fatalf("queue not empty: %+v", p)
	}
	var dl struct {
		Messages []struct {
			ID            string `json:"id"`
			TransactionID string `json:"transactionId"`
			Queue         string `json:"queue"`
			ConsumerGroup string `json:"consumerGroup"`
			ErrorMessage  string `json:"errorMessage"`
			RetryCount    int    `json:"retryCount"`
			FailedAt      string `json:"failedAt"`
		} `json:"messages"`
		Pagination struct{ Limit, Offset int } `json:"pagination"`
		Total      int                         `json:"total"`
	}
	b.must(200, "GET", "/api/v1/dlq?queue=q&limit=10", nil, &dl)
	if dl.Total != 2 || len(dl.Messages) != 2 || dl.Pagination.Limit != 10 {
		t.Fatalf("DLQ list: %+v", dl)
	}
	var m1 = dl.Messages[0]
	if m1.TransactionID != "m1" {
		m1 = dl.Messages[1]
	}
	if m1.TransactionID != "m1" || m1.ErrorMessage != "it broke" || m1.Queue != "q" || m1.ConsumerGroup != "__QUEUE_MODE__" {
		t.Fatalf("DLQ entry: %+v", dl.Messages)
	}
	// Replay m1: poppable again.
	b.must(200, "POST", "/api/v1/dlq/"+m1.ID+"/replay", nil, nil)
	p = b.pop("/api/v1/pop/queue/q")
	if p == nil || p.Messages[0].TransactionID != "m1" {
		t.Fatalf("after replay: %+v", p)
	}
	if code, _, _ := b.do("POST", "/api/v1/dlq/999999/replay", nil); code != 404 {
		t.Fatalf("replay of an unknown id: %d", code)
	}
	if code, _, _ := b.do("POST", "/api/v1/dlq/abc/replay", nil); code != 400 {
		t.Fatalf("replay of a bad id: %d", code)
	}
	var purged struct{ Deleted int }
	b.must(200, "DELETE", "/api/v1/dlq?queue=q", nil, &purged)
	if purged.Deleted != 1 {
		t.Fatalf("purged %d, want 1", purged.Deleted)
	}
	if code, _, _ := b.do("DELETE", "/api/v1/dlq", nil); code != 400 {
		t.Fatalf("purge without queue: %d", code)
	}
}

func TestLeaseExpiryAndExtend(t *testing.T) {
	e := setup(t)
	b := e.start(httpapi.Config{})
	b.push(item("q", "", map[string]int{"n": 1}, "m1"))
	p := b.pop("/api/v1/pop/queue/q?leaseSeconds=1")
	if p == nil {
		t.Fatal("pop")
	}
	var ext struct {
		LeaseID      string `json:"leaseId"`
		Success      bool   `json:"success"`
		Renewed      int    `json:"renewed"`
		NewExpiresAt string `json:"newExpiresAt"`
		LeaseExp     string `json:"lease_expires_at"`
	}
	b.must(200, "POST", "/api/v1/lease/"+p.LeaseID+"/extend", map[string]int{"seconds": 3}, &ext)
	if !ext.Success || ext.Renewed != 1 || ext.NewExpiresAt == "" || ext.LeaseExp != ext.NewExpiresAt {
		t.Fatalf("extend: %+v", ext)
	}
	time.Sleep(1500 * time.Millisecond)
	if q := b.pop("/api/v1/pop/queue/q"); q != nil {
		t.Fatalf("redelivered before the extended lease expired: %+v", q)
	}
	p2 := b.pop("/api/v1/pop/queue/q?wait=true&timeout=10000")
	if p2 == nil || p2.Messages[0].TransactionID != "m1" || p2.Messages[0].DeliveryAttempt != 2 || p2.LeaseID == p.LeaseID {
		t.Fatalf("redelivery after expiry: %+v", p2)
	}
	// The old lease is gone.
	if a := b.ack("", ackOf(p.Messages[0], "completed")); a[0].Success {
		t.Fatalf("ack with the expired lease: %+v", a)
	}
	b.must(200, "POST", "/api/v1/lease/"+p.LeaseID+"/extend", nil, &ext)
	if ext.Success || ext.Renewed != 0 {
		t.Fatalf("extend of an expired lease: %+v", ext)
	}
	if code, _, _ := b.do("POST", "/api/v1/lease/x/extend", `{"seconds":0}`); code != 400 {
		t.Fatalf("seconds 0: %d", code)
	}
	if code, _, _ := b.do("POST", "/api/v1/lease/x/extend", `{"seconds":"5"}`); code != 400 {
		t.Fatalf("seconds as a string: %d", code)
	}
}

func TestTransactionCommitAndRollback(t *testing.T) {
	e := setup(t)
	b := e.start(httpapi.Config{})
	b.push(item("in", "", map[string]int{"n": 1}, "m1"))
	p := b.pop("/api/v1/pop/queue/in")
	var res struct {
		Success bool   `json:"success"`
		Reason  string `json:"reason"`
		Error   string `json:"error"`
		Results []struct {
			Index     int    `json:"index"`
			Type      string `json:"type"`
			Success   bool   `json:"success"`
			MessageID string `json:"messageId"`
			QueueName string `json:"queueName"`
			Noop      *bool  `json:"noop"`
		} `json:"results"`
	}
	// Rollback: a push then an ack with a wrong lease → nothing pushed,
	// nothing acked.
	badAck := ackOf(p.Messages[0], "completed")
	badAck["type"] = "ack"
	badAck["leaseId"] = "00000000-0000-0000-0000-000000000002"
	b.must(200, "POST", "/api/v1/transaction", map[string]any{"operations": []any{
		map[string]any{"type": "push", "items": []any{item("out", "", 1, "")}}, badAck}}, &res)
	if res.Success || len(res.Results) != 0 || res.Error == "" {
		t.Fatalf("rollback answer: %+v", res)
	}
	if n := e.int(`SELECT count(*) FROM pgque.queue WHERE queue_name = 'out'`); n != 0 {
		t.Fatalf("a rolled-back transaction created the queue")
	}
	// A valid ack then a failing push (a 10 kB partition name) → the ack
	// is rolled back too: acking again works and is not a no-op.
	goodAck := ackOf(p.Messages[0], "completed")
	goodAck["type"] = "ack"
	b.must(200, "POST", "/api/v1/transaction", map[string]any{"operations": []any{goodAck,
		map[string]any{"type": "push", "items": []any{item("out", strings.Repeat("x", 10240), 1, "")}}}}, &res)
	if res.Success || res.Error == "" {
		t.Fatalf("failing push: %+v", res)
	}
	if n := e.int(`SELECT count(*) FROM pgque.queue WHERE queue_name = 'out'`); n != 0 {
		t.Fatalf("a rolled-back push created its queue")
	}
	// required lease that is not live → rollback.
	b.must(200, "POST", "/api/v1/transaction", map[string]any{"operations": []any{
		map[string]any{"type": "push", "items": []any{item("out", "", 1, "")}}},
		"requiredLeases": []string{"00000000-0000-0000-0000-000000000003"}}, &res)
	if res.Success || e.int(`SELECT count(*) FROM pgque.queue WHERE queue_name = 'out'`) != 0 {
		t.Fatalf("required lease: %+v", res)
	}
	// Commit: ack + push together.
	okAck := ackOf(p.Messages[0], "completed")
	okAck["type"] = "ack"
	b.must(200, "POST", "/api/v1/transaction", map[string]any{"operations": []any{
		okAck, map[string]any{"type": "push", "items": []any{item("out", "", map[string]int{"n": 5}, "")}}},
		"requiredLeases": []string{p.LeaseID}}, &res)
	if !res.Success || len(res.Results) != 2 || res.Results[0].Type != "ack" || res.Results[1].Type != "push" ||
		res.Results[1].QueueName != "out" || res.Results[1].MessageID == "" {
		t.Fatalf("commit: %+v", res)
	}
	if !res.Results[0].Success || res.Results[0].Noop == nil || *res.Results[0].Noop {
		t.Fatalf("the ack on commit is a no-op: the rolled-back one applied: %+v", res)
	}
	if a := b.ack("", ackOf(p.Messages[0], "completed")); !a[0].Noop {
		t.Fatalf("acked in the transaction, yet a second ack is not a no-op: %+v", a)
	}
	if q := b.pop("/api/v1/pop/queue/in"); q != nil {
		t.Fatalf("acked in the transaction but redelivered: %+v", q)
	}
	if q := b.pop("/api/v1/pop/queue/out"); q == nil || payloadN(q.Messages[0]) != 5 {
		t.Fatalf("pushed in the transaction: %+v", q)
	}
	// Unknown type → 400; empty → success.
	if code, _, _ := b.do("POST", "/api/v1/transaction", `{"operations":[{"type":"pop"}]}`); code != 400 {
		t.Fatalf("unknown operation type: %d", code)
	}
	b.must(200, "POST", "/api/v1/transaction", `{"operations":[]}`, &res)
	if !res.Success || len(res.Results) != 0 {
		t.Fatalf("empty transaction: %+v", res)
	}
}

func TestConfigureResourcesDelete(t *testing.T) {
	e := setup(t)
	b := e.start(httpapi.Config{})
	var c struct {
		Configured bool           `json:"configured"`
		QueueID    int            `json:"queueId"`
		Queue      string         `json:"queue"`
		Namespace  *string        `json:"namespace"`
		Options    map[string]any `json:"options"`
	}
	b.must(200, "POST", "/api/v1/configure", map[string]any{"queue": "q", "namespace": "ns",
		"options": map[string]any{"leaseTime": 10, "priority": 5}}, &c)
	if !c.Configured || c.Queue != "q" || c.Namespace == nil || *c.Namespace != "ns" || c.Options["leaseTime"] != float64(10) ||
		c.Options["retryLimit"] != float64(3) || c.Options["priority"] != float64(5) {
		t.Fatalf("configure: %+v", c)
	}
	// Absent keys keep their value.
	b.must(200, "POST", "/api/v1/configure", map[string]any{"queue": "q", "options": map[string]any{"retryLimit": 7}}, &c)
	if c.Options["leaseTime"] != float64(10) || c.Options["retryLimit"] != float64(7) {
		t.Fatalf("second configure: %+v", c)
	}
	for _, body := range []string{`{"options":{}}`, `{"queue":"q","options":{"leaseTime":"x"}}`, `{"queue":"q","options":{"nope":1}}`, `{"queue":"q","options":[1]}`} {
		if code, out, _ := b.do("POST", "/api/v1/configure", body); code != 400 {
			t.Errorf("configure %s: %d %s", body, code, out)
		}
	}
	b.push(item("q", "p", 1, ""), item("q", "p2", 1, ""))
	var list struct {
		Queues []map[string]any `json:"queues"`
	}
	b.must(200, "GET", "/api/v1/resources/queues", nil, &list)
	if len(list.Queues) != 1 || list.Queues[0]["name"] != "q" || list.Queues[0]["partitions"] != float64(3) {
		t.Fatalf("queues: %+v", list)
	}
	var one map[string]any
	b.must(200, "GET", "/api/v1/resources/queues/q", nil, &one)
	if one["namespace"] != "ns" {
		t.Fatalf("queue: %+v", one)
	}
	if code, _, _ := b.do("GET", "/api/v1/resources/queues/none", nil); code != 404 {
		t.Fatalf("unknown queue: %d", code)
	}
	var st struct {
		Messages   int              `json:"messages"`
		Partitions []map[string]any `json:"partitions"`
	}
	b.must(200, "GET", "/api/v1/status/queues/q", nil, &st)
	if st.Messages != 2 || len(st.Partitions) != 3 { // Default, p, p2
		t.Fatalf("queue status: %+v", st)
	}
	b.must(200, "GET", "/api/v1/status", nil, nil)
	b.must(200, "DELETE", "/api/v1/resources/queues/q", nil, nil)
	if n := e.int(`SELECT count(*) FROM pgque.queue`); n != 0 {
		t.Fatalf("queues after delete: %d", n)
	}
	if code, out, _ := b.do("DELETE", "/api/v1/resources/queues/q", nil); code != 200 || !strings.Contains(string(out), `"deleted":false`) {
		t.Fatalf("deleting an unknown queue: %d %s", code, out)
	}
}

// Consumer groups: fan-out; modes new / all / from a time; seek; delete.
func TestConsumerGroups(t *testing.T) {
	e := setup(t)
	b := e.start(httpapi.Config{})
	b.push(item("q", "", map[string]int{"n": 1}, ""))
	time.Sleep(50 * time.Millisecond)
	mid := time.Now().UTC()
	time.Sleep(50 * time.Millisecond)
	b.push(item("q", "", map[string]int{"n": 2}, ""))
	count := func(group, extra string) []int {
		var got []int
		for {
			p := b.pop("/api/v1/pop/queue/q?autoAck=true&batch=10&consumerGroup=" + group + extra)
			if p == nil {
				return got
			}
			for _, m := range p.Messages {
				got = append(got, payloadN(m))
			}
		}
	}
	if got := count("gall", "&subscriptionMode=all"); fmt.Sprint(got) != "[1 2]" {
		t.Fatalf("mode all: %v", got)
	}
	if got := count("gnew", "&subscriptionMode=new"); len(got) != 0 {
		t.Fatalf("mode new: %v", got)
	}
	if got := count("gfrom", "&subscriptionFrom="+mid.Format(time.RFC3339Nano)); fmt.Sprint(got) != "[2]" {
		t.Fatalf("mode from: %v", got)
	}
	// Later modes change nothing.
	if got := count("gnew", "&subscriptionMode=all"); len(got) != 0 {
		t.Fatalf("second contact with another mode: %v", got)
	}
	b.push(item("q", "", map[string]int{"n": 3}, ""))
	for _, g := range []string{"gall", "gnew", "gfrom"} {
		if got := count(g, ""); fmt.Sprint(got) != "[3]" {
			t.Fatalf("fan-out to %s: %v", g, got)
		}
	}
	// Seek gall back to mid: 2 and 3 again; to the end: nothing.
	b.must(200, "POST", "/api/v1/consumer-groups/gall/queues/q/seek", map[string]any{"timestamp": mid.Format(time.RFC3339Nano)}, nil)
	if got := count("gall", ""); fmt.Sprint(got) != "[2 3]" {
		t.Fatalf("after seek to a time: %v", got)
	}
	b.must(200, "POST", "/api/v1/consumer-groups/gall/queues/q/seek", map[string]any{"timestamp": mid.Format(time.RFC3339Nano)}, nil)
	b.must(200, "POST", "/api/v1/consumer-groups/gall/queues/q/seek", map[string]any{"toEnd": true}, nil)
	if got := count("gall", ""); len(got) != 0 {
		t.Fatalf("after seek to the end: %v", got)
	}
	for _, body := range []string{`{}`, `{"toEnd":false}`, `{"timestamp":"soon"}`, `{"toEnd":true,"timestamp":"2026-01-01T00:00:00Z"}`} {
		if code, _, _ := b.do("POST", "/api/v1/consumer-groups/gall/queues/q/seek", body); code != 400 {
			t.Errorf("seek %s: %d", body, code)
		}
	}
	var groups []map[string]any
	b.must(200, "GET", "/api/v1/consumer-groups", nil, &groups)
	if len(groups) != 3 { // gall, gnew, gfrom on q; queue mode never popped here
		t.Fatalf("groups: %v", groups)
	}
	b.must(200, "GET", "/api/v1/consumer-groups/gnew", nil, nil)
	if code, _, _ := b.do("GET", "/api/v1/consumer-groups/none", nil); code != 404 {
		t.Fatalf("unknown group: %d", code)
	}
	b.must(200, "DELETE", "/api/v1/consumer-groups/gnew/queues/q", nil, nil)
	b.must(200, "DELETE", "/api/v1/consumer-groups/gfrom?deleteMetadata=true", nil, nil)
	b.must(200, "GET", "/api/v1/consumer-groups", nil, &groups)
	for _, g := range groups {
		if g["name"] == "gnew" || g["name"] == "gfrom" {
			t.Fatalf("deleted group listed: %v", groups)
		}
	}
	// A deleted group starts over (mode all: every retained message).
	if got := count("gfrom", "&subscriptionMode=all"); fmt.Sprint(got) != "[1 2 3]" {
		t.Fatalf("recreated group: %v", got)
	}
}

func TestOddNamesAndBigInputs(t *testing.T) {
	e := setup(t)
	b := e.start(httpapi.Config{})
	names := []string{`it's "quoted"`, "with space", "emoji 🚀", "slash/and?query"}
	for _, n := range names {
		res := b.push(item(n, n, map[string]int{"n": 1}, ""))
		if res[0].QueueName != n {
			t.Fatalf("queue %q: %+v", n, res)
		}
		path := "/api/v1/pop/queue/" + pathEscape(n) + "/partition/" + pathEscape(n) + "?autoAck=true"
		p := b.pop(path)
		if p == nil || p.Queue != n || p.Partition != n {
			t.Fatalf("pop %q: %+v", n, p)
		}
	}
	// A 10 kB partition name is refused, nothing stored.
	long := strings.Repeat("x", 10240)
	if code, out, _ := b.do("POST", "/api/v1/push", map[string]any{"items": []any{item("long", long, 1, "")}}); code != 400 {
		t.Fatalf("10 kB partition: %d %s", code, out)
	}
	if n := e.int(`SELECT count(*) FROM pgque.queue WHERE queue_name = 'long'`); n != 0 {
		t.Fatal("a refused push created its queue")
	}
	// 10,000 items in one push.
	items := make([]map[string]any, 10000)
	for i := range items {
		items[i] = item("big", fmt.Sprint("p", i%50), map[string]int{"n": i}, "")
	}
	res := b.push(items...)
	if len(res) != 10000 || res[9999].Index != 9999 || res[9999].Status != "queued" {
		t.Fatalf("10k push: %d results", len(res))
	}
	if n := e.events("big"); n != 10000 {
		t.Fatalf("events: %d", n)
	}
	if code, _, _ := b.do("GET", "/api/v1/pop/queue/"+pathEscape("a\u241fb"), nil); code != 400 {
		t.Fatalf("queue name with U+241F: %d", code)
	}
	if code, _, _ := b.do("POST", "/api/v1/push", map[string]any{"items": []any{item("a\x01b", "", 1, "")}}); code != 400 {
		t.Fatalf("queue name with a control character: %d", code)
	}
}

func pathEscape(s string) string {
	r := strings.NewReplacer("%", "%25", "/", "%2F", "?", "%3F", " ", "%20", `"`, "%22", "'", "%27", "\x1f", "%1F")
	return r.Replace(s)
}

func TestHealthStatusMetrics(t *testing.T) {
	e := setup(t)
	b := e.start(httpapi.Config{})
	var h map[string]any
	b.must(200, "GET", "/health", nil, &h)
	if h["status"] != "healthy" || h["database"] != "connected" {
		t.Fatalf("health: %v", h)
	}
	b.push(item("q", "", 1, ""), item("q", "", 1, "x"), item("q", "", 1, "x"))
	p := b.pop("/api/v1/pop/queue/q?batch=10")
	b.ack("", ackOf(p.Messages[1], "completed"))
	b.pop("/api/v1/pop/queue/q")
	page := string(b.must(200, "GET", "/metrics/prometheus", nil, nil))
	for _, want := range []string{
		`pgque_pushed_messages_total{status="queued"} 2`,
		`pgque_pushed_messages_total{status="duplicate"} 1`,
		`pgque_acks_total{status="completed",success="true"} 1`,
		`pgque_pops_total{result="messages"} 1`,
		`pgque_pops_total{result="empty"} 1`,
		`pgque_pop_verdicts_total{verdict="took"} 1`,
		`pgque_http_requests_total{code="201",method="POST",route="POST /api/v1/push"} 1`,
		`pgque_http_request_duration_seconds_count{route="GET /api/v1/pop/queue/{queue}"} 2`,
		`pgque_parked_pops 0`,
		`pgque_pool_max_conns `,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("metrics lack %q:\n%s", want, grepMetrics([]byte(page)))
		}
	}
	// /health answers 503 when the database is gone.
	pool := e.pool()
	c := e.start(httpapi.Config{Pool: pool})
	pool.Close()
	if code, out, _ := c.do("GET", "/health", nil); code != 503 || strings.Contains(string(out), "closed pool") {
		t.Fatalf("health with a closed pool: %d %s", code, out)
	}
	var live map[string]any
	c.must(200, "GET", "/status", nil, &live)
	// Errors never carry internal text.
	if code, out, _ := c.do("POST", "/api/v1/push", `{"items":[{"queue":"q","payload":1}]}`); code < 500 || strings.Contains(string(out), "pool") {
		t.Fatalf("push on a closed pool: %d %s", code, out)
	}
}
