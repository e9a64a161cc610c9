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
)

// Push requests that arrive while the broker's push call slot is busy are
// answered from ONE pgque.push call (one transaction), each with its own
// result; the pgque_push_waiting gauge counts them while they wait.
func TestPushRequestsCombined(t *testing.T) {
	e := setup(t)
	b := e.start(httpapi.Config{PushConcurrency: 1})
	b.push(item("c", "hold", 0, ""))
	// Hold the dedup lock of (c, hold): a push with a transactionId there
	// waits inside its call, keeping the only call slot busy.
	e.exec(`SELECT pg_advisory_lock(1885827449, hashtext(q.queue_id || '/' || p.part_id))
	          FROM pgque.queue q JOIN pgque.partition p ON p.part_queue = q.queue_id
	         WHERE q.queue_name = 'c' AND p.part_name = 'hold'`)
	post := func(items ...map[string]any) (int, []pushRes, error) {
		raw, _ := json.Marshal(map[string]any{"items": items})
		resp, err := b.ts.Client().Post(b.ts.URL+"/api/v1/push", "application/json", bytes.NewReader(raw))
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		var res []pushRes
		body, _ := io.ReadAll(resp.Body)
		if err := json.Unmarshal(body, &res); err != nil {
			return resp.StatusCode, nil, fmt.Errorf("%s: %w", body, err)
		}
		return resp.StatusCode, res, nil
	}
	type outcome struct {
		code int
		res  []pushRes
		err  error
	}
	held := make(chan outcome, 1)
	go func() {
		c, r, err := post(item("c", "hold", 1, "h"))
		held <- outcome{c, r, err}
	}()
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	waitUntil("the held push", func() bool {
		return e.int(`SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`) == 1
	})
	const n = 5
	outs := make(chan outcome, n)
	for i := range n {
		go func() {
			c, r, err := post(item("c", fmt.Sprintf("k%d", i), 100+i, ""))
			outs <- outcome{c, r, err}
		}()
	}
	waitUntil("5 waiting pushes", func() bool {
		_, body, _ := b.do(http.MethodGet, "/metrics/prometheus", nil)
		return strings.Contains(string(body), fmt.Sprintf("\npgque_push_waiting %d\n", n))
	})
	e.exec(`SELECT pg_advisory_unlock_all()`)
	if o := <-held; o.err != nil || o.code != http.StatusCreated {
		t.Fatalf("held push: %d %v", o.code, o.err)
	}
	ids := map[string]bool{}
	for range n {
		o := <-outs
		if o.err != nil || o.code != http.StatusCreated || len(o.res) != 1 || o.res[0].Index != 0 || o.res[0].Status != "queued" || ids[o.res[0].MessageID] {
			t.Fatalf("push: %d %+v %v", o.code, o.res, o.err)
		}
		ids[o.res[0].MessageID] = true
	}
	if c := e.events("c"); c != n+2 {
		t.Errorf("queue c holds %d events, want %d", c, n+2)
	}
	if c := e.int(`SELECT count(DISTINCT ev_txid) FROM pgque.event_1_0`); c != 3 {
		t.Errorf("the events came in %d transactions, want 3 (first push, held push, one for the %d waiting)", c, n)
	}
}
