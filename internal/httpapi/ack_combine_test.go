package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pgquectl/pgquectl/internal/httpapi"
	"github.com/pgquectl/pgquectl/internal/pgtest"
)

// Ack requests (single and batch) that arrive while the broker's ack
// transaction slot is busy are answered from ONE transaction, each with
// its own results; pgque_ack_waiting counts them while they wait and the
// pgque_ack_* counters count the transactions and requests.
func TestAckRequestsCombined(t *testing.T) {
	e := setup(t)
	b := e.start(httpapi.Config{AckConcurrency: 1})
	msgs := map[string]msg{}
	for _, p := range []string{"hold", "a", "b", "c"} {
		b.push(item("q", p, 1, ""))
		r := b.pop("/api/v1/pop/queue/q/partition/" + p + "?consumerGroup=g")
		if r == nil || len(r.Messages) != 1 {
			t.Fatalf("pop %s: %+v", p, r)
		}
		msgs[p] = r.Messages[0]
	}
	// Hold the cursor of (q, hold): an ack there waits inside its
	// transaction, keeping the only slot busy.
	conn := pgtest.Conn(t, e.dsn)
	if _, err := conn.Exec(ctxT(t), `BEGIN`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctxT(t), `SELECT 1 FROM pgque.group_cursor gc JOIN pgque.partition p ON p.part_id = gc.gc_partition
	                                   WHERE p.part_name = 'hold' FOR UPDATE OF gc`); err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		code int
		res  []ackRes
		err  error
	}
	post := func(path string, body any, ch chan<- outcome) {
		raw, _ := json.Marshal(body)
		resp, err := b.ts.Client().Post(b.ts.URL+path, "application/json", bytes.NewReader(raw))
		if err != nil {
			ch <- outcome{err: err}
			return
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		var res []ackRes
		if err := json.Unmarshal(out, &res); err != nil {
			ch <- outcome{resp.StatusCode, nil, fmt.Errorf("%s: %w", out, err)}
			return
		}
		ch <- outcome{resp.StatusCode, res, nil}
	}
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	metric := func(name string) string {
		_, body, _ := b.do(http.MethodGet, "/metrics/prometheus", nil)
		for _, l := range strings.Split(string(body), "\n") {
			if v, ok := strings.CutPrefix(l, name+" "); ok {
				return v
			}
		}
		return ""
	}
	held := make(chan outcome, 1)
	single := func(m msg) map[string]any {
		a := ackOf(m, "")
		a["consumerGroup"] = "g"
		return a
	}
	go post("/api/v1/ack", single(msgs["hold"]), held)
	waitUntil("the held ack", func() bool {
		return e.int(`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`) == 1
	})
	one, batch := make(chan outcome, 1), make(chan outcome, 1)
	go post("/api/v1/ack", single(msgs["a"]), one)
	waitUntil("the single ack to wait", func() bool { return metric("pgque_ack_waiting") == "1" })
	go post("/api/v1/ack/batch", map[string]any{"consumerGroup": "g", "acknowledgments": []any{ackOf(msgs["b"], ""), single(msgs["c"])}}, batch)
	waitUntil("the batch to wait", func() bool { return metric("pgque_ack_waiting") == "2" })
	if _, err := conn.Exec(ctxT(t), `ROLLBACK`); err != nil {
		t.Fatal(err)
	}
	if o := <-held; o.err != nil || o.code != http.StatusOK || len(o.res) != 1 || !o.res[0].Success {
		t.Fatalf("held ack: %+v", o)
	}
	if o := <-one; o.err != nil || o.code != http.StatusOK || len(o.res) != 1 || !o.res[0].Success || o.res[0].Index != 0 ||
		o.res[0].TransactionID != msgs["a"].TransactionID || !o.res[0].LeaseReleased {
		t.Errorf("single ack: %+v", o)
	}
	o := <-batch
	if o.err != nil || o.code != http.StatusOK || len(o.res) != 2 {
		t.Fatalf("batch ack: %+v", o)
	}
	for i, p := range []string{"b", "c"} {
		if r := o.res[i]; !r.Success || r.Index != i || r.TransactionID != msgs[p].TransactionID || !r.LeaseReleased || r.Noop {
			t.Errorf("batch ack %d: %+v", i, r)
		}
	}
	if n := e.int(`SELECT count(DISTINCT gc.xmin::text) FROM pgque.group_cursor gc JOIN pgque.partition p ON p.part_id = gc.gc_partition
	                WHERE p.part_name IN ('a', 'b', 'c')`); n != 1 {
		t.Errorf("the cursors of a, b, c were written by %d transactions, want 1", n)
	}
	for name, want := range map[string]string{"pgque_ack_transactions_total": "2", "pgque_ack_statements_total": "2", "pgque_ack_requests_total": "3"} {
		if got := metric(name); got != want {
			t.Errorf("%s = %q, want %s", name, got, want)
		}
	}
}
