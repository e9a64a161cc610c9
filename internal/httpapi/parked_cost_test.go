package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgquectl/pgquectl/internal/httpapi"
	"github.com/pgquectl/pgquectl/internal/pgtest"
)

// xacts is the database's committed plus rolled-back transactions so far
// (pg_stat_database, flushed first).
func (e *env) xacts() int64 {
	e.t.Helper()
	pgtest.FlushStats(e.t, e.conn)
	return e.int(`SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()`)
}

// xactRate is the database's transactions per second over d.
func (e *env) xactRate(d time.Duration) float64 {
	e.t.Helper()
	before := e.xacts()
	time.Sleep(d)
	after := e.xacts()
	return float64(after-before-1) / d.Seconds() // the flush's own statement
}

// Idle parked pops cost the database per (queue, group) with waiters, not
// per waiting pop: 1,000 pops parked on 50 empty queues (20 a queue) - and
// as many on 50 queues that do not exist - re-check once for all the
// waiters of a queue. The review measured 1,000-1,200 transactions/s for
// the existing queues, 2,000 for the missing ones.
func TestParkedPopsShareTheirChecks(t *testing.T) {
	for _, tc := range []struct {
		name    string
		hot     bool
		missing bool
		config  bool
	}{{"sqlscan", false, false, false}, {"sqlscan-missing", false, true, false}, {"hotlist", true, false, false}, {"hotlist-missing", true, true, false}} {
		t.Run(tc.name, func(t *testing.T) {
			e := setup(t)
			pool := e.pool()
			b := e.start(httpapi.Config{Pool: pool, HotList: tc.hot, LongPollMax: time.Minute})
			const queues, perQueue = 50, 20
			for i := 0; i < queues && !tc.missing; i++ {
				q := fmt.Sprintf("q%d", i)
				if tc.config {
					b.must(200, "POST", "/api/v1/configure", map[string]any{"queue": q}, nil)
					continue
				}
				b.push(item(q, "", 0, ""))
				if p := b.pop("/api/v1/pop/queue/" + q + "?autoAck=true"); p == nil {
					t.Fatalf("pop of %s", q)
				}
			}
			// An idle backend reports its counters up to 10 s late
			// (PostgreSQL 15's PGSTAT_IDLE_INTERVAL); one that exits reports
			// them at once: close the pool's connections before counting.
			pool.Reset()
			time.Sleep(time.Second)
			idle := e.xactRate(3 * time.Second)
			ctx, cancel := context.WithCancel(ctxT(t))
			var wg sync.WaitGroup
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: queues * perQueue}}
			for i := 0; i < queues*perQueue; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					req, _ := http.NewRequestWithContext(ctx, "GET",
						fmt.Sprintf("%s/api/v1/pop/queue/q%d?wait=true&timeout=60000", b.ts.URL, i%queues), nil)
					if resp, err := client.Do(req); err == nil {
						resp.Body.Close()
					}
				}()
			}
			waitParked(t, b, queues*perQueue)
			// Parked for real: their first checks (one each, queued on the
			// pool) are done.
			for deadline := time.Now().Add(time.Minute); b.metric("pgque_parked_pops") < queues*perQueue*0.98; {
				if time.Now().After(deadline) {
					t.Fatalf("%v pops parked after a minute", b.metric("pgque_parked_pops"))
				}
				time.Sleep(100 * time.Millisecond)
			}
			time.Sleep(2 * time.Second) // every backoff at its 1 s cap
			pool.Reset()                // the pops' first checks: counted now
			time.Sleep(time.Second)
			runs := b.metric("pgque_pop_checks_total{kind=\"run\"}")
			shared := b.metric("pgque_pop_checks_total{kind=\"shared\"}")
			parked := e.xactRate(5 * time.Second)
			runs = b.metric("pgque_pop_checks_total{kind=\"run\"}") - runs
			shared = b.metric("pgque_pop_checks_total{kind=\"shared\"}") - shared
			if n := b.parked(); n != queues*perQueue {
				t.Fatalf("%d pops parked at the end, want %d", n, queues*perQueue)
			}
			cancel()
			wg.Wait()
			t.Logf("%s: idle %.1f transactions/s; with %d parked pops on %d queues: %.1f/s (checks: %.1f/s run, %.1f/s shared)",
				tc.name, idle, queues*perQueue, queues, parked, runs/5, shared/5)
			// The hot-list answers an empty warm ring from memory, and a
			// missing queue is re-checked every 5 s: well under 50/s. The
			// SQL scan (--hotlist=false) asks PostgreSQL at every check: one
			// check per queue at the 1 s backoff cap, ~50/s for 50 queues
			// (was ~1,230/s); the bound allows 1.5 per queue.
			limit := 50.0
			if !tc.hot && !tc.missing {
				limit = 1.5 * queues
			}
			if parked-idle >= limit {
				t.Fatalf("%d parked pops on %d queues add %.1f transactions/s (idle %.1f/s), want < %.0f",
					queues*perQueue, queues, parked-idle, idle, limit)
			}
		})
	}
}

// metric reads one sample of the broker's metrics page (0 when absent).
func (b *brokerT) metric(name string) float64 {
	b.t.Helper()
	for _, l := range strings.Split(string(b.must(200, "GET", "/metrics/prometheus", nil, nil)), "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				b.t.Fatal(err)
			}
			return f
		}
	}
	return 0
}
