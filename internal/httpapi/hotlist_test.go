package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgquectl/pgquectl/internal/broker"
	"github.com/pgquectl/pgquectl/internal/hotlist"
	"github.com/pgquectl/pgquectl/internal/httpapi"
	"github.com/pgquectl/pgquectl/internal/pgtest"
)

// End to end, with the hot-list on and off: a queue of 2,000 partitions,
// pushes to a random few, wildcard long-poll pops with acks in three
// groups (two consumers each). Every message reaches every group exactly
// once; with the hot-list on, none waits longer than one reseed interval
// (plus the loops' periods) — including messages written without any mark
// (broker.Push straight on the database, as a producer outside the broker
// would), which only the reseed floor finds.
func TestHotListEndToEnd(t *testing.T) {
	t.Parallel()
	// One after the other: the scan's load would skew the hot-list's
	// latencies on a small machine.
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("hotlist=%v", on), func(t *testing.T) {
			dsn := pgtest.NewDB(t)
			d := &pgtest.EngineDB{T: t, DSN: dsn, Conn: pgtest.Conn(t, dsn)}
			hotListEndToEnd(t, &env{EngineDB: d, t: t, dsn: d.DSN, conn: d.Conn}, on)
		})
	}
}

func hotListEndToEnd(t *testing.T, e *env, on bool) {
	const (
		queue  = "e2e"
		nParts = 2000
		reseed = 6 * time.Second
		// slack covers the reseed loop's 1 s period, a parked pop's 1 s
		// backoff and a loaded machine.
		slack = 4 * time.Second
	)
	pool := e.pool()
	b := e.start(httpapi.Config{Pool: pool, HotList: on, LongPollMax: 2 * time.Second,
		HotListOptions: hotlist.Options{ReseedInterval: reseed, ReseedPhase: reseed, LogInterval: -1}})

	items := make([]map[string]any, nParts)
	for i := range items {
		items[i] = item(queue, part(i), map[string]int{"n": -1}, "")
	}
	b.push(items...)
	groups := []string{"g1", "g2", "g3"}
	for _, g := range groups { // subscribe: "new" skips the set-up messages
		if p := b.pop("/api/v1/pop/queue/" + queue + "?subscriptionMode=new&consumerGroup=" + g); p != nil {
			t.Fatalf("group %s got set-up messages: %d", g, len(p.Messages))
		}
	}

	var mu sync.Mutex
	pushedAt := map[int]time.Time{}
	got := map[string]map[int]time.Time{}
	dups := 0
	for _, g := range groups {
		got[g] = map[int]time.Time{}
	}
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, g := range groups {
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				path := "/api/v1/pop/queue/" + queue + "?consumerGroup=" + g + "&wait=true&timeout=1000&batch=10&partitions=3"
				for ctx.Err() == nil {
					code, out, _ := b.do("GET", path, nil)
					if code == http.StatusNoContent {
						continue
					}
					if code != http.StatusOK {
						t.Errorf("pop %s: %d %s", g, code, out)
						return
					}
					var p popRes
					if err := json.Unmarshal(out, &p); err != nil {
						t.Error(err)
						return
					}
					now := time.Now()
					acks := make([]map[string]any, len(p.Messages))
					mu.Lock()
					for i, m := range p.Messages {
						n := payloadN(m)
						if _, seen := got[g][n]; seen {
							dups++
						}
						got[g][n] = now
						acks[i] = ackOf(m, "completed")
					}
					mu.Unlock()
					for _, a := range b.ack(g, acks...) {
						if !a.Success {
							t.Errorf("ack %s: %+v", g, a)
						}
					}
				}
			}()
		}
	}

	rng := rand.New(rand.NewPCG(1, 2))
	n := 0
	var unmarked []int
	for round := range 40 {
		var batch []map[string]any
		mu.Lock()
		for range 3 {
			pi := rng.IntN(nParts)
			for range 1 + rng.IntN(3) {
				batch = append(batch, item(queue, part(pi), map[string]int{"n": n}, ""))
				pushedAt[n] = time.Now()
				n++
			}
		}
		mu.Unlock()
		b.push(batch...)
		if round%10 == 5 {
			// A producer outside the broker: no mark, no hint.
			raw := []broker.Item{{Queue: queue, Partition: part(rng.IntN(nParts)), Payload: json.RawMessage(`{"n":` + strconv.Itoa(n) + `}`)}}
			mu.Lock()
			pushedAt[n] = time.Now()
			unmarked = append(unmarked, n)
			n++
			mu.Unlock()
			if _, err := broker.Push(ctxT(t), pool, raw); err != nil {
				t.Fatal(err)
			}
			e.exec(`WITH f AS MATERIALIZED (SELECT pgque.force_next_tick($1) AS t) SELECT pgque.ticker($1) FROM f`, queue)
		}
		time.Sleep(20 * time.Millisecond)
	}

	deadline := time.Now().Add(reseed + slack + 30*time.Second)
	for time.Now().Before(deadline) {
		mu.Lock()
		done := true
		for _, g := range groups {
			done = done && len(got[g]) == n
		}
		mu.Unlock()
		if done {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	if dups != 0 {
		t.Errorf("%d duplicate deliveries", dups)
	}
	for _, g := range groups {
		if len(got[g]) != n {
			var missing []int
			for i := range n {
				if _, ok := got[g][i]; !ok {
					missing = append(missing, i)
				}
			}
			t.Errorf("group %s got %d of %d messages; missing %v (unmarked: %v)", g, len(got[g]), n, missing, unmarked)
			continue
		}
		var worst time.Duration
		var marked []time.Duration
		for i := range n {
			d := got[g][i].Sub(pushedAt[i])
			worst = max(worst, d)
			if !slices.Contains(unmarked, i) {
				marked = append(marked, d)
			}
		}
		slices.Sort(marked)
		p50 := marked[len(marked)/2]
		t.Logf("group %s: %d messages, slowest delivery %v, median of the marked ones %v", g, n, worst, p50)
		// Marked messages are found by their marks, not by the floor
		// (which would put the median near half the reseed interval).
		if on && p50 > reseed/3 {
			t.Errorf("group %s: median delivery of marked messages %v: the floor found them, not the marks", g, p50)
		}
		// Without the hot-list every pop scans 2,000 partitions: slower on a
		// loaded machine, and no floor to bound; delivery is what counts.
		if on && worst > reseed+slack {
			t.Errorf("group %s: a message waited %v (> reseed interval %v + %v)", g, worst, reseed, slack)
		}
	}
	if on {
		page := string(b.must(http.StatusOK, "GET", "/metrics/prometheus", nil, nil))
		if !regexp.MustCompile(`(?m)^pgque_hotlist_reseeds_total [1-9]`).MatchString(page) ||
			!regexp.MustCompile(`(?m)^pgque_hotlist_verdicts_total\{verdict="took"\} [1-9]`).MatchString(page) {
			t.Errorf("hot-list metrics show no reseed or no took verdict:\n%s", grepMetrics([]byte(page)))
		}
	}
}

func part(i int) string { return fmt.Sprintf("p%04d", i) }

// Memory: wildcard pops on 100,000 throw-away queue names (10,000 with
// -short; each pop is one database call, minutes on a small machine)
// leave the hot-list's ring count back at one — the queue whose message is
// still leased — after two idle-sweep intervals.
func TestHotListForgetsIdleQueues(t *testing.T) {
	// Long enough that rings pile up past 1,000 between sweeps even when a
	// loaded machine answers only ~300 pops/s (the check below).
	const sweep = 5 * time.Second
	names := 100000
	if testing.Short() {
		names = 10000
	}
	e := setup(t)
	b := e.start(httpapi.Config{HotList: true, HotListOptions: hotlist.Options{SweepInterval: sweep, LogInterval: -1}})
	b.push(item("kept", "a", 1, "")) // a queue with work stays
	if p := b.pop("/api/v1/pop/queue/kept?batch=10"); p == nil || len(p.Messages) != 1 {
		t.Fatalf("pop of kept: %+v", p)
	}
	gauge := func(name string) int {
		page := b.must(http.StatusOK, "GET", "/metrics/prometheus", nil, nil)
		m := regexp.MustCompile(`(?m)^` + name + ` (\d+)$`).FindSubmatch(page)
		if m == nil {
			t.Fatalf("no %s in the metrics", name)
		}
		v, _ := strconv.Atoi(string(m[1]))
		return v
	}
	var wg sync.WaitGroup
	next := make(chan int)
	peak := 0
	var mu sync.Mutex
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if p := b.pop(fmt.Sprintf("/api/v1/pop/queue/tmp-%d-%d?consumerGroup=g%d", i, rand.Int(), i%3)); p != nil {
					t.Errorf("a throw-away queue had messages: %+v", p)
					return
				}
			}
		}()
	}
	start := time.Now()
	for i := range names {
		next <- i
		if i%10000 == 9999 {
			v := gauge("pgque_hotlist_rings")
			mu.Lock()
			peak = max(peak, v)
			mu.Unlock()
		}
	}
	close(next)
	wg.Wait()
	t.Logf("%d pops in %v; most rings seen %d", names, time.Since(start), peak)
	if peak < 1000 {
		t.Fatalf("the pops left at most %d rings: the test does not exercise the sweep", peak)
	}
	deadline := time.Now().Add(2*sweep + 20*time.Second) // two intervals; the rest is a loaded machine
	rings := 0
	for time.Now().Before(deadline) {
		if rings = gauge("pgque_hotlist_rings"); rings <= 1 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if rings != 1 {
		t.Fatalf("rings after the sweeps: %d, want 1 (the kept queue's)", rings)
	}
	if q := gauge("pgque_hotlist_queues"); q != 1 {
		t.Fatalf("queues after the sweeps: %d, want 1", q)
	}
}

// noFloor: hot-list options whose periodic reseed never runs during a
// test, so only marks, hints and hooks can make work known.
var noFloor = hotlist.Options{ReseedInterval: time.Hour, ReseedPhase: time.Hour, LogInterval: -1}

// waitListEmpty pops on path (nothing may come) until b's hot-list lists
// nothing (ready, parked or checked out): stale entries clear when a pop
// finds them empty past the grace of their last mark.
func waitListEmpty(t *testing.T, b *brokerT, path string) {
	t.Helper()
	re := regexp.MustCompile(`(?m)^pgque_hotlist_(ready|wheel|inflight) (\d+)$`)
	deadline := time.Now().Add(20 * time.Second)
	for {
		n := 0
		for _, m := range re.FindAllStringSubmatch(string(b.must(200, "GET", "/metrics/prometheus", nil, nil)), -1) {
			v, _ := strconv.Atoi(m[2])
			n += v
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the hot-list still lists %d entries", n)
		}
		if p := b.pop(path); p != nil {
			t.Fatalf("a message while waiting for an empty list: %+v", p)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// hotPop pops on b with a long-poll of 5 s and returns the payloads.
func hotPop(b *brokerT, path string) []int {
	b.t.Helper()
	p := b.pop(path + "&wait=true&timeout=5000")
	if p == nil {
		return nil
	}
	var out []int
	for _, m := range p.Messages {
		out = append(out, payloadN(m))
	}
	return out
}

// Two hot-list brokers on one database: a push through A reaches B's list
// as a dirty hint (B's periodic reseed is an hour away, so nothing else
// could list the new partition there).
func TestHotListPeerHints(t *testing.T) {
	e := setup(t)
	a := e.start(httpapi.Config{Peers: true, HotList: true, HotListOptions: noFloor})
	b := e.start(httpapi.Config{Peers: true, HotList: true, HotListOptions: noFloor})
	a.push(item("q", "x", map[string]int{"n": 1}, ""))
	if got := hotPop(b, "/api/v1/pop/queue/q?autoAck=true"); !slices.Equal(got, []int{1}) { // seeds B's ring
		t.Fatalf("first pop on B: %v", got)
	}
	// A learns of B from its hello (sent when B's LISTEN took effect).
	time.Sleep(500 * time.Millisecond)
	a.push(item("q", "y", map[string]int{"n": 2}, ""))
	if got := hotPop(b, "/api/v1/pop/queue/q?autoAck=true"); !slices.Equal(got, []int{2}) {
		t.Fatalf("pop on B after a push through A: %v\nA: %s\nB: %s", got,
			grepMetrics(a.must(200, "GET", "/metrics/prometheus", nil, nil)), grepMetrics(b.must(200, "GET", "/metrics/prometheus", nil, nil)))
	}
	if page := string(b.must(200, "GET", "/metrics/prometheus", nil, nil)); !regexp.MustCompile(`(?m)^pgque_hotlist_marks_total\{origin="remote"\} [1-9]`).MatchString(page) {
		t.Fatalf("B counted no remote mark:\n%s", grepMetrics([]byte(page)))
	}
}

// A seek back creates pending work without a push: the seek hook forgets
// the group's list, so the next pop reseeds it and delivers again.
func TestHotListSeekReseeds(t *testing.T) {
	e := setup(t)
	b := e.start(httpapi.Config{HotList: true, HotListOptions: noFloor})
	before := time.Now().UTC().Add(-time.Second)
	b.push(item("q", "a", map[string]int{"n": 1}, ""), item("q", "b", map[string]int{"n": 2}, ""))
	path := "/api/v1/pop/queue/q?autoAck=true&batch=10&partitions=2&consumerGroup=g&subscriptionMode=all"
	got := hotPop(b, path)
	slices.Sort(got)
	if !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("first pop: %v", got)
	}
	if p := b.pop(path); p != nil {
		t.Fatalf("drained, yet: %+v", p)
	}
	waitListEmpty(t, b, path)
	b.must(200, "POST", "/api/v1/consumer-groups/g/queues/q/seek", map[string]any{"timestamp": before.Format(time.RFC3339Nano)}, nil)
	got = hotPop(b, path)
	slices.Sort(got)
	if !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("after the seek back: %v", got)
	}
}

// A dead letter replayed: the replay names the partition it went back
// into and the hook marks it (no reseed: the group's list is kept), so the
// message is delivered again without the periodic floor.
func TestHotListDLQReplay(t *testing.T) {
	e := setup(t)
	b := e.start(httpapi.Config{HotList: true, HotListOptions: noFloor})
	b.must(200, "POST", "/api/v1/configure", map[string]any{"queue": "q", "options": map[string]any{"retryLimit": 0}}, nil)
	b.push(item("q", "a", map[string]int{"n": 5}, ""))
	p := b.pop("/api/v1/pop/queue/q?wait=true&timeout=5000")
	if p == nil || len(p.Messages) != 1 {
		t.Fatalf("pop: %+v", p)
	}
	if r := b.ack("", ackOf(p.Messages[0], "dlq")); !r[0].Success || !r[0].DLQ {
		t.Fatalf("dead-lettering ack: %+v", r)
	}
	if p := b.pop("/api/v1/pop/queue/q?wait=true&timeout=500"); p != nil {
		t.Fatalf("dead-lettered, yet: %+v", p)
	}
	var list struct {
		Messages []struct{ ID string } `json:"messages"`
	}
	b.must(200, "GET", "/api/v1/dlq?queue=q", nil, &list)
	if len(list.Messages) != 1 {
		t.Fatalf("dead letters: %+v", list)
	}
	waitListEmpty(t, b, "/api/v1/pop/queue/q?autoAck=true")
	reseeds, marks := metricValue(t, b, "pgque_hotlist_reseeds_total"), metricValue(t, b, `pgque_hotlist_marks_total{origin="local"}`)
	b.must(200, "POST", "/api/v1/dlq/"+list.Messages[0].ID+"/replay", nil, nil)
	if got := hotPop(b, "/api/v1/pop/queue/q?autoAck=true"); !slices.Equal(got, []int{5}) {
		t.Fatalf("after the replay: %v", got)
	}
	if r, m := metricValue(t, b, "pgque_hotlist_reseeds_total"), metricValue(t, b, `pgque_hotlist_marks_total{origin="local"}`); r != reseeds || m != marks+1 {
		t.Fatalf("the replay: reseeds %v -> %v (want unchanged), local marks %v -> %v (want +1: the replayed partition)", reseeds, r, marks, m)
	}
}

// metricValue reads one sample (name with its labels, as printed) of b's
// Prometheus page; a missing sample fails the test.
func metricValue(t *testing.T, b *brokerT, sample string) float64 {
	t.Helper()
	page := string(b.must(200, "GET", "/metrics/prometheus", nil, nil))
	for _, line := range strings.Split(page, "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("sample %s: %v", sample, err)
			}
			return f
		}
	}
	t.Fatalf("no sample %s in:\n%s", sample, grepMetrics([]byte(page)))
	return 0
}

// POST /api/v1/configure refreshes the hot-list's copy of the queue's
// delayedProcessing: a push to a delayed queue parks its entry (no pop
// asks PostgreSQL about it before D + 300 ms); once the delay is
// configured away, the next push is listed ready.
func TestHotListConfigureRefreshesQueueOptions(t *testing.T) {
	e := setup(t)
	b := e.start(httpapi.Config{HotList: true, HotListOptions: noFloor})
	gauges := func(what string, ready, wheel float64) {
		t.Helper()
		if r, w := metricValue(t, b, "pgque_hotlist_ready"), metricValue(t, b, "pgque_hotlist_wheel"); r != ready || w != wheel {
			t.Fatalf("%s: ready %v wheel %v, want %v and %v", what, r, w, ready, wheel)
		}
	}
	path := "/api/v1/pop/queue/q?autoAck=true&consumerGroup=g"
	b.must(200, "POST", "/api/v1/configure", map[string]any{"queue": "q", "options": map[string]any{"delayedProcessing": 30}}, nil)
	if p := b.pop(path); p != nil {
		t.Fatalf("first pop: %+v", p)
	}
	b.push(item("q", "a", map[string]int{"n": 1}, ""))
	gauges("delayed 30 s", 0, 1)
	b.must(200, "POST", "/api/v1/configure", map[string]any{"queue": "q", "options": map[string]any{"delayedProcessing": 0}}, nil)
	if p := b.pop(path); p != nil {
		t.Fatalf("pop after configure: %+v", p)
	}
	b.push(item("q", "b", map[string]int{"n": 2}, ""))
	gauges("not delayed", 1, 1)
}

// A pop checked out after a push's mark sees the push (pop_list closes
// its range at its own snapshot; hotlist.Options.ClaimsSeeMarks): a pop
// that drains the partition, once acked, clears the entry instead of
// listing it again for the EmptyGrace (2 s) - a re-listed entry cost empty
// pop-list calls (~2 per message at 100 msg/s in bench/broker).
func TestHotListAckClearsDrainedPartition(t *testing.T) {
	e := setup(t)
	b := e.start(httpapi.Config{HotList: true, HotListOptions: noFloor})
	const path = "/api/v1/pop/queue/q?consumerGroup=g&subscriptionMode=all&batch=10"
	for round := range 3 {
		b.push(item("q", "a", map[string]int{"n": round}, ""))
		p := b.pop(path)
		if p == nil || len(p.Messages) != 1 || payloadN(p.Messages[0]) != round {
			t.Fatalf("round %d: pop: %+v", round, p)
		}
		if r := b.ack("g", ackOf(p.Messages[0], "completed")); !r[0].Success {
			t.Fatalf("round %d: ack: %+v", round, r)
		}
		if ready, parked := metricValue(t, b, "pgque_hotlist_ready"), metricValue(t, b, "pgque_hotlist_wheel"); ready != 0 || parked != 0 {
			t.Fatalf("round %d: after acking the drained claim: ready %v, wheel %v, want 0 and 0", round, ready, parked)
		}
	}
	if n := metricValue(t, b, `pgque_pop_verdicts_total{verdict="took"}`); n != 3 {
		t.Fatalf("took verdicts %v, want 3", n)
	}
}
