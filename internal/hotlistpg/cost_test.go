package hotlistpg_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgquectl/pgquectl/internal/broker"
	"github.com/pgquectl/pgquectl/internal/pgtest"
)

// TestPerPopCost measures, against a real PostgreSQL, the statements of
// the hot-list path at 100 and 10,000 partitions (every partition with a
// old event, group g subscribed after it, 10 of them hot): one reseed scan (group_reseed, all
// pages) and pop_list over the hot candidates. Numbers only
// (docs/design/hotlist.md, "What grows with the partitions"); PGQUE_HOTCOST=1
// runs it.
func TestPerPopCost(t *testing.T) {
	if os.Getenv("PGQUE_HOTCOST") != "1" {
		t.Skip("measurement: set PGQUE_HOTCOST=1")
	}
	for _, seeded := range []bool{false, true} {
		for _, n := range []int{100, 10000} {
			t.Run(fmt.Sprintf("%d/seeded=%v", n, seeded), func(t *testing.T) { perPopCost(t, n, seeded) })
		}
	}
}

// perPopCost: seeded = the group pops every partition's old event first
// (bench/broker's set-up: every partition has a cursor past one event);
// otherwise it subscribes after them and has no cursor on the idle ones.
func perPopCost(t *testing.T, parts int, seeded bool) {
	dsn := pgtest.NewDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute) // the old scan: seconds per reseed
	defer cancel()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	explain := false
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		if explain && strings.Contains(n.Message, "Query Text") {
			t.Log(n.Message)
		}
	}
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	tick := func() {
		if _, err := c.Exec(ctx, `WITH f AS MATERIALIZED (SELECT pgque.force_next_tick('k') AS t) SELECT pgque.ticker('k') FROM f`); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := broker.Configure(ctx, c, "k", nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	var items []broker.Item
	for i := range parts {
		items = append(items, broker.Item{Queue: "k", Partition: fmt.Sprintf("p%05d", i), Payload: json.RawMessage(`0`)})
	}
	res, err := broker.Push(ctx, c, items)
	if err != nil {
		t.Fatal(err)
	}
	tick()
	ids := make([]int32, len(res))
	for i, r := range res {
		ids[i] = r.PartitionID
	}
	// g subscribes now ("new": the set-up messages are not its); the
	// partitions it has no cursor for are judged from its subscription.
	pop := broker.Pop{Queue: "k", Group: "g", Batch: 10, MaxPartitions: 1, AutoAck: true}
	if seeded {
		for lo := 0; lo < parts; lo += 500 {
			chunk := ids[lo:min(lo+500, parts)]
			all := broker.Pop{Queue: "k", Group: "g", Batch: len(chunk), MaxPartitions: len(chunk), AutoAck: true, SubscriptionMode: "all"}
			if r, err := broker.PopList(ctx, c, all, chunk); err != nil || len(r.Messages) != len(chunk) {
				t.Fatalf("seeding pop: %v, %d messages of %d", err, len(r.Messages), len(chunk))
			}
		}
	} else if _, err := broker.PopList(ctx, c, pop, []int32{}); err != nil {
		t.Fatal(err)
	}
	tick()
	hot := make([]int32, 10)
	for i := range hot {
		hot[i] = ids[i*(parts/10)]
	}
	const rounds = 30
	var reseed, list, reseedCPU, listCPU time.Duration
	var backend int
	ms := func(d time.Duration, n int) float64 { return float64(d.Microseconds()) / 1e3 / float64(n) }
	if err := c.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&backend); err != nil {
		t.Fatal(err)
	}
	rows := 0
	for round := range rounds {
		if round == rounds-1 && os.Getenv("PGQUE_HOTCOST_EXPLAIN") == "1" {
			explain = true
			// the plans of the generated functions' statements, as notices
			for _, q := range []string{`LOAD 'auto_explain'`, `SET auto_explain.log_min_duration = 0`,
				`SET auto_explain.log_analyze = on`, `SET auto_explain.log_buffers = on`,
				`SET auto_explain.log_nested_statements = on`, `SET client_min_messages = log`} {
				if _, err := c.Exec(ctx, q); err != nil {
					t.Fatal(err)
				}
			}
		}
		items = items[:0]
		for _, id := range hot {
			items = append(items, broker.Item{Queue: "k", Partition: fmt.Sprintf("p%05d", int(id-ids[0])), Payload: json.RawMessage(`1`)})
		}
		if _, err := broker.Push(ctx, c, items); err != nil {
			t.Fatal(err)
		}
		tick()
		s, cpu := time.Now(), backendCPU(t, backend)
		after := int32(-1)
		for {
			page, err := broker.Reseed(ctx, c, "k", "g", after, 10000)
			if err != nil {
				t.Fatal(err)
			}
			rows += len(page)
			if len(page) < 10000 {
				break
			}
			after = page[len(page)-1].PartitionID
		}
		if round == 0 {
			// the session's first call plans the generated statement
			t.Logf("partitions=%d seeded=%v: first reseed of the session %.2f ms", parts, seeded, ms(time.Since(s), 1))
		}
		reseed += time.Since(s)
		reseedCPU += backendCPU(t, backend) - cpu
		for _, id := range hot {
			s, cpu = time.Now(), backendCPU(t, backend)
			if _, err := broker.PopList(ctx, c, pop, []int32{id}); err != nil {
				t.Fatal(err)
			}
			list += time.Since(s)
			listCPU += backendCPU(t, backend) - cpu
		}
	}
	t.Logf("partitions=%d seeded=%v: reseed %.2f ms per scan (backend CPU %.2f ms, %.1f rows), pop_list %.2f ms per call (backend CPU %.2f ms)",
		parts, seeded, ms(reseed, rounds), ms(reseedCPU, rounds), float64(rows)/rounds, ms(list, rounds*10), ms(listCPU, rounds*10))
}

// backendCPU is the CPU time (user + system) the PostgreSQL backend pid
// used so far, from /proc (the test server runs on this machine): unlike
// wall-clock time it hardly depends on the load of a shared machine.
// Linux clock ticks are 10 ms, so only sums over many calls mean anything.
func backendCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// fields after the command name (which may hold spaces): state is 3rd
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	var utime, stime int64
	fmt.Sscan(f[11], &utime)
	fmt.Sscan(f[12], &stime)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}
