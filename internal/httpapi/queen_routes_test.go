package httpapi_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/pgquectl/pgquectl/internal/httpapi"
)

type listedMsg struct {
	ID            string          `json:"id"`
	TransactionID string          `json:"transactionId"`
	PartitionID   string          `json:"partitionId"`
	Queue         string          `json:"queue"`
	QueuePath     string          `json:"queuePath"`
	Partition     string          `json:"partition"`
	Status        string          `json:"status"`
	Data          json.RawMessage `json:"data"`
	CreatedAt     string          `json:"createdAt"`
}

type listRes struct {
	Messages []listedMsg `json:"messages"`
	Mode     struct {
		HasQueueMode bool   `json:"hasQueueMode"`
		Type         string `json:"type"`
	} `json:"mode"`
	Total int `json:"total"`
}

func txns(l listRes) []string {
	var out []string
	for _, m := range l.Messages {
		out = append(out, m.TransactionID)
	}
	return out
}

// doAs sends a request with extra headers (a tenant).
func (b *brokerT) doAs(h map[string]string, method, path string, body any) (int, []byte) {
	b.t.Helper()
	var rd io.Reader
	if body != nil {
		j, _ := json.Marshal(body)
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequestWithContext(ctxT(b.t), method, b.ts.URL+path, rd)
	if err != nil {
		b.t.Fatal(err)
	}
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := b.ts.Client().Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// List with filters and paging, get by address, delete: a deleted message
// is never delivered afterwards, and its event row is still there.
func TestMessagesListGetDelete(t *testing.T) {
	e := setup(t)
	b := e.start(httpapi.Config{})
	for i, txn := range []string{"t1", "t2", "t3"} {
		b.push(item("mq", "p1", map[string]int{"n": i + 1}, txn))
	}
	b.push(item("mq", "p2", map[string]int{"n": 4}, "t4"), item("other", "", map[string]int{"n": 5}, "t5"))

	var all listRes
	b.must(http.StatusOK, "GET", "/api/v1/messages?queue=mq", nil, &all)
	if got := txns(all); !slices.Equal(got, []string{"t4", "t3", "t2", "t1"}) || all.Total != 4 {
		t.Fatalf("list: %v total %d, want t4 t3 t2 t1 (newest first) total 4", got, all.Total)
	}
	for _, m := range all.Messages {
		if m.Queue != "mq" || m.Status != "pending" || m.QueuePath != "mq/"+m.Partition || m.ID == "" || len(m.Data) == 0 {
			t.Fatalf("listed message %+v", m)
		}
	}
	var p1 listRes
	b.must(http.StatusOK, "GET", "/api/v1/messages?queue=mq&partition=p1", nil, &p1)
	if got := txns(p1); !slices.Equal(got, []string{"t3", "t2", "t1"}) {
		t.Fatalf("partition p1: %v", got)
	}
	var page1, page2 listRes
	b.must(http.StatusOK, "GET", "/api/v1/messages?limit=2", nil, &page1)
	b.must(http.StatusOK, "GET", "/api/v1/messages?limit=2&offset=2", nil, &page2)
	if got := append(txns(page1), txns(page2)...); !slices.Equal(got, []string{"t5", "t4", "t3", "t2"}) {
		t.Fatalf("pages: %v, want t5 t4 | t3 t2", got)
	}
	var old listRes
	b.must(http.StatusOK, "GET", "/api/v1/messages?to="+url.QueryEscape(time.Now().Add(-2*time.Hour).Format(time.RFC3339)), nil, &old)
	if len(old.Messages) != 0 {
		t.Fatalf("to two hours ago: %v", txns(old))
	}
	if code, out, _ := b.do("GET", "/api/v1/messages?limit=0", nil); code != http.StatusBadRequest {
		t.Fatalf("limit=0: %d %s", code, out)
	}

	pid := p1.Messages[0].PartitionID
	var got struct {
		TransactionID string          `json:"transactionId"`
		Queue         string          `json:"queue"`
		Status        string          `json:"status"`
		Data          json.RawMessage `json:"data"`
	}
	b.must(http.StatusOK, "GET", "/api/v1/messages/"+pid+"/t2", nil, &got)
	if got.TransactionID != "t2" || got.Queue != "mq" || got.Status != "pending" || string(got.Data) != `{"n":2}` {
		t.Fatalf("get t2: %+v %s", got, got.Data)
	}
	// The message id addresses it too.
	b.must(http.StatusOK, "GET", "/api/v1/messages/"+pid+"/"+p1.Messages[1].ID, nil, &got)
	if got.TransactionID != "t2" {
		t.Fatalf("get by message id: %+v", got)
	}

	// Queue mode takes t1 (auto-ack): completed.
	if p := b.pop("/api/v1/pop/queue/mq/partition/p1?batch=1&autoAck=true"); p == nil || p.Messages[0].TransactionID != "t1" {
		t.Fatalf("first pop: %+v", p)
	}
	var done listRes
	b.must(http.StatusOK, "GET", "/api/v1/messages?queue=mq&status=completed", nil, &done)
	if got := txns(done); !slices.Equal(got, []string{"t1"}) || !done.Mode.HasQueueMode || done.Mode.Type != "queue" {
		t.Fatalf("completed: %v mode %+v", got, done.Mode)
	}

	b.must(http.StatusOK, "DELETE", "/api/v1/messages/"+pid+"/t2", nil, nil)
	if code, out, _ := b.do("GET", "/api/v1/messages/"+pid+"/t2", nil); code != http.StatusNotFound {
		t.Fatalf("get after delete: %d %s", code, out)
	}
	if code, out, _ := b.do("DELETE", "/api/v1/messages/"+pid+"/t2", nil); code != http.StatusNotFound {
		t.Fatalf("second delete: %d %s", code, out)
	}
	b.must(http.StatusOK, "GET", "/api/v1/messages?queue=mq&partition=p1", nil, &p1)
	if got := txns(p1); !slices.Equal(got, []string{"t3", "t1"}) {
		t.Fatalf("list after delete: %v", got)
	}
	// Never delivered: queue mode and a new group that reads everything.
	for _, path := range []string{"/api/v1/pop/queue/mq/partition/p1?batch=10",
		"/api/v1/pop/queue/mq/partition/p1?batch=10&consumerGroup=g&subscriptionMode=all"} {
		p := b.pop(path)
		var got []string
		for _, m := range p.Messages {
			got = append(got, m.TransactionID)
		}
		want := []string{"t3"}
		if len(p.Messages) > 0 && p.ConsumerGroup == "g" {
			want = []string{"t1", "t3"}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s: %v, want %v", path, got, want)
		}
	}
	if n := e.int(`SELECT count(*) FROM pgque.message_tombstone`); n != 1 {
		t.Fatalf("tombstones: %d", n)
	}
	if n := e.events("mq"); n != 4 {
		t.Fatalf("event rows: %d, want 4 (a delete changes none)", n)
	}
	for _, bad := range []string{"/api/v1/messages/not-a-uuid/t3", "/api/v1/messages/" + pid + "/nope"} {
		if code, out, _ := b.do("DELETE", bad, nil); code != http.StatusNotFound {
			t.Fatalf("DELETE %s: %d %s", bad, code, out)
		}
	}
}

// A tenant sees and deletes only its own messages: another tenant's
// address is not found.
func TestMessagesTenants(t *testing.T) {
	e := setup(t)
	b := e.start(httpapi.Config{TenantHeader: "X-Tenant"})
	ta, tb := map[string]string{"X-Tenant": "a"}, map[string]string{"X-Tenant": "b"}
	if code, out := b.doAs(ta, "POST", "/api/v1/push", map[string]any{"items": []any{item("q", "p", 1, "x1")}}); code != http.StatusCreated {
		t.Fatalf("push: %d %s", code, out)
	}
	var la, lb listRes
	_, out := b.doAs(ta, "GET", "/api/v1/messages", nil)
	_ = json.Unmarshal(out, &la)
	_, out = b.doAs(tb, "GET", "/api/v1/messages", nil)
	_ = json.Unmarshal(out, &lb)
	if len(la.Messages) != 1 || la.Messages[0].Queue != "q" || len(lb.Messages) != 0 {
		t.Fatalf("tenant a lists %+v, tenant b %+v", la.Messages, lb.Messages)
	}
	path := "/api/v1/messages/" + la.Messages[0].PartitionID + "/x1"
	for _, m := range []string{"GET", "DELETE"} {
		if code, out := b.doAs(tb, m, path, nil); code != http.StatusNotFound {
			t.Fatalf("tenant b %s: %d %s", m, code, out)
		}
	}
	if code, out := b.doAs(ta, "GET", path, nil); code != http.StatusOK {
		t.Fatalf("tenant a get after b's delete: %d %s", code, out)
	}
	if code, out := b.doAs(ta, "DELETE", path, nil); code != http.StatusOK {
		t.Fatalf("tenant a delete: %d %s", code, out)
	}
}

type maintRes struct {
	MaintenanceMode    *bool  `json:"maintenanceMode"`
	PopMaintenanceMode *bool  `json:"popMaintenanceMode"`
	Message            string `json:"message"`
}

func on(p *bool) bool { return p != nil && *p }

// until retries check (a bounded loop: a peer learns a change through a
// notification) and fails after 10 s.
func until(t *testing.T, what string, check func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !check() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10 s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Maintenance state is stored in the database and shared by the brokers
// of it: pop maintenance empties pops and delivers after it ends; push
// maintenance refuses pushes with 503 + Retry-After and stores nothing.
func TestMaintenanceShared(t *testing.T) {
	e := setup(t)
	a := e.start(httpapi.Config{Peers: true})
	b := e.start(httpapi.Config{Peers: true})
	var st maintRes
	a.must(http.StatusOK, "GET", "/api/v1/system/maintenance", nil, &st)
	if on(st.MaintenanceMode) || on(st.PopMaintenanceMode) || st.MaintenanceMode == nil {
		t.Fatalf("initial state: %+v", st)
	}
	if code, out, _ := a.do("POST", "/api/v1/system/maintenance/pop", map[string]any{"enabled": "yes"}); code != http.StatusBadRequest {
		t.Fatalf("bad body: %d %s", code, out)
	}

	b.push(item("mq", "", map[string]int{"n": 1}, "m1"))
	a.must(http.StatusOK, "POST", "/api/v1/system/maintenance/pop", map[string]any{"enabled": true}, &st)
	if !on(st.PopMaintenanceMode) {
		t.Fatalf("POST pop on: %+v", st)
	}
	b.must(http.StatusOK, "GET", "/api/v1/system/maintenance/pop", nil, &st)
	if !on(st.PopMaintenanceMode) {
		t.Fatalf("other broker's GET: %+v", st)
	}
	for _, br := range []*brokerT{a, b} {
		if p := br.pop("/api/v1/pop/queue/mq"); p != nil {
			t.Fatalf("pop under pop maintenance: %+v", p)
		}
	}
	// A long poll parked during maintenance gets the message once it ends
	// (switched off through the other broker: a learns by notification).
	got := make(chan *popRes, 1)
	go func() {
		code, out, _ := a.do("GET", "/api/v1/pop/queue/mq?wait=true&timeout=10000", nil)
		var p popRes
		if code == http.StatusOK {
			_ = json.Unmarshal(out, &p)
		}
		got <- &p
	}()
	b.must(http.StatusOK, "POST", "/api/v1/system/maintenance/pop", map[string]any{"enabled": false}, &st)
	if p := <-got; len(p.Messages) != 1 || p.Messages[0].TransactionID != "m1" {
		t.Fatalf("long poll after pop maintenance: %+v", p)
	}

	a.must(http.StatusOK, "POST", "/api/v1/system/maintenance", map[string]any{"enabled": true}, &st)
	if !on(st.MaintenanceMode) {
		t.Fatalf("POST push on: %+v", st)
	}
	before := e.events("mq")
	code, out, h := a.do("POST", "/api/v1/push", map[string]any{"items": []any{item("mq", "", 2, "m2")}})
	if code != http.StatusServiceUnavailable || h.Get("Retry-After") == "" {
		t.Fatalf("push under maintenance: %d %s Retry-After %q", code, out, h.Get("Retry-After"))
	}
	until(t, "the other broker refuses pushes", func() bool {
		code, _, _ := b.do("POST", "/api/v1/push", map[string]any{"items": []any{item("mq", "", 3, "m3")}})
		return code == http.StatusServiceUnavailable
	})
	if n := e.events("mq"); n != before {
		t.Fatalf("events %d -> %d under push maintenance", before, n)
	}
	a.must(http.StatusOK, "GET", "/api/v1/system/maintenance", nil, &st)
	if !on(st.MaintenanceMode) || on(st.PopMaintenanceMode) {
		t.Fatalf("state: %+v", st)
	}
	a.must(http.StatusOK, "POST", "/api/v1/system/maintenance", map[string]any{"enabled": false}, &st)
	until(t, "the other broker accepts pushes again", func() bool {
		code, _, _ := b.do("POST", "/api/v1/push", map[string]any{"items": []any{item("mq", "", 4, "m4")}})
		return code == http.StatusCreated
	})
}
