package httpapi_test

import (
	"bytes"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/pgquectl/pgquectl/internal/httpapi"
)

// brokerTicks reads pgque_broker_ticks_total by result.
func (b *brokerT) brokerTicks() map[string]int64 {
	b.t.Helper()
	code, page, _ := b.do("GET", "/metrics/prometheus", nil)
	if code != http.StatusOK {
		b.t.Fatalf("metrics: %d", code)
	}
	out := map[string]int64{}
	re := regexp.MustCompile(`(?m)^pgque_broker_ticks_total\{result="(\w+)"\} (\S+)$`)
	for _, m := range re.FindAllSubmatch(page, -1) {
		v, err := strconv.ParseFloat(string(m[2]), 64)
		if err != nil {
			b.t.Fatal(err)
		}
		out[string(m[1])] = int64(v)
	}
	if len(out) != 4 {
		b.t.Fatalf("pgque_broker_ticks_total: %v, want 4 results\n%s", out, grepMetrics(page))
	}
	return out
}

// A push that commits while its queue's tick is in flight, before that
// tick takes its snapshot, is covered by it: the broker answers it once
// that tick is done and makes no second tick (and no second broker_tick
// call). Before, every push arriving during a tick caused one more tick.
// The tick is held back by holding the queue's tick lock (as a scheduled
// ticker would), so the second push surely commits before its snapshot.
func TestBrokerTickInFlightCoversLaterPush(t *testing.T) {
	e := setup(t)
	b := e.start(httpapi.Config{})
	b.push(item("cq", "p", map[string]int{"n": 1}, ""))
	qid := e.int(`SELECT queue_id FROM pgque.queue WHERE queue_name = 'cq'`)
	ticks := func() int64 { return e.int(`SELECT count(*) FROM pgque.tick WHERE tick_queue = $1`, qid) }
	before, beforeTicks := b.brokerTicks(), ticks()

	ctx := ctxT(t)
	holder := e.holdTickLock(t, qid)
	answered := make(chan error, 2)
	pushAsync := func(n int) {
		body := fmt.Sprintf(`{"items":[{"queue":"cq","partition":"p","payload":{"n":%d}}]}`, n)
		go func() {
			resp, err := b.ts.Client().Post(b.ts.URL+"/api/v1/push", "application/json", bytes.NewReader([]byte(body)))
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode != http.StatusCreated {
					err = fmt.Errorf("push %d: status %d", n, resp.StatusCode)
				}
			}
			answered <- err
		}()
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !ok(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	pushAsync(2)
	// Its tick waits for the lock holder.
	waitFor("the first push's tick to wait for the tick lock", func() bool {
		return e.int(`SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = 1885827446 AND objid = $1 AND NOT granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`, qid) == 1
	})
	pushAsync(3)
	waitFor("the second push to commit", func() bool { return e.events("cq") == 3 })
	time.Sleep(200 * time.Millisecond) // it asks for its tick right after its commit
	if err := holder.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if err := <-answered; err != nil {
			t.Fatal(err)
		}
	}
	after := b.brokerTicks()
	if d := ticks() - beforeTicks; d != 1 {
		t.Errorf("%d ticks made for two pushes, the second committed while the first one's tick waited: want 1", d)
	}
	for _, c := range []struct {
		result string
		want   int64
	}{{"ticked", 1}, {"coalesced", 1}, {"covered", 0}, {"failed", 0}} {
		if d := after[c.result] - before[c.result]; d != c.want {
			t.Errorf("broker ticks %s: %d, want %d (before %v, after %v)", c.result, d, c.want, before, after)
		}
	}
	// All are poppable (queue mode reads from the start).
	p := b.pop("/api/v1/pop/queue/cq/partition/p?batch=10&autoAck=true")
	if p == nil || len(p.Messages) != 3 || payloadN(p.Messages[1]) != 2 || payloadN(p.Messages[2]) != 3 {
		t.Fatalf("pop after the pushes: %+v, want messages 1, 2 and 3", p)
	}
}
