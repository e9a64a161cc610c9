package broker_test

import (
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgquectl/pgquectl/internal/broker"
)

// backendCPU is the CPU time (user + system, in clock ticks of 10 ms) the
// server process pid has used so far (/proc/<pid>/stat fields 14 and 15).
func backendCPU(t *testing.T, pid int32) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Skipf("backend CPU not readable (server on another host?): %v", err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return u + s
}

// TestCPUProbePopAck measures the backend CPU time per pop_list and per
// group_ack call in a steady state like the broker's at 1k msg/s: each
// round pushes ~17 messages over a few of 64 partitions, ticks, pops them
// with the hot-list's candidate list (the pushed partitions and some idle
// ones), batch 100, and acks them in one call. A measurement, not a check:
// it runs only with PGQUE_CPU_PROBE=<rounds> and logs ms per call.
func TestCPUProbePopAck(t *testing.T) {
	rounds, _ := strconv.Atoi(os.Getenv("PGQUE_CPU_PROBE"))
	if rounds <= 0 {
		t.Skip("set PGQUE_CPU_PROBE=<rounds> to measure backend CPU per pop and ack")
	}
	e := setup(t)
	e.exec(`SELECT pgque.create_queue('q')`)
	const parts = 64
	names := make([]string, parts)
	for i := range names {
		names[i] = fmt.Sprintf("p%d", i)
		e.pushN("q", names[i], 0, 1)
	}
	e.tick("q")
	c, err := pgx.Connect(ctxT(t), e.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctxT(t))
	var pid int32
	if err := c.QueryRow(ctxT(t), `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	ids := map[string]int32{}
	rows, _ := c.Query(ctxT(t), `SELECT part_name, part_id FROM pgque.partition p JOIN pgque.queue q ON q.queue_id = p.part_queue WHERE q.queue_name = 'q'`)
	for rows.Next() {
		var n string
		var id int32
		_ = rows.Scan(&n, &id)
		ids[n] = id
	}
	if rows.Err() != nil || len(ids) < parts {
		t.Fatalf("partitions: %d, %v", len(ids), rows.Err())
	}
	// With pg_stat_statements preloaded (track = all, track_planning on:
	// PGQUE_TEST_DSN naming such a server), the statements' time is
	// logged too.
	var pgss bool
	if err := c.QueryRow(ctxT(t), `SELECT current_setting('shared_preload_libraries') ~ 'pg_stat_statements'`).Scan(&pgss); err != nil {
		t.Fatal(err)
	}
	if pgss {
		if _, err := c.Exec(ctxT(t), `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`); err != nil {
			t.Fatal(err)
		}
	}
	rng := rand.New(rand.NewSource(1))
	p := broker.Pop{Queue: "q", Group: "g", Batch: 100, MaxPartitions: 100, SubscriptionMode: "all"}
	var popCPU, ackCPU, msgs, pops int64
	var popWall, ackWall time.Duration
	for r := 0; r < rounds+2; r++ {
		if r == rounds+1 {
			if os.Getenv("PGQUE_CPU_PROBE_EXPLAIN") == "" {
				break
			}
			for _, s := range []string{`LOAD 'auto_explain'`, `SET auto_explain.log_min_duration = 0`,
				`SET auto_explain.log_analyze = on`, `SET auto_explain.log_nested_statements = on`,
				`SET auto_explain.log_buffers = on`} {
				if _, err := c.Exec(ctxT(t), s); err != nil {
					t.Fatal(err)
				}
			}
		}
		hot := map[string]bool{}
		var items []broker.Item
		for len(items) < 17 {
			n := names[rng.Intn(parts)]
			hot[n] = true
			items = append(items, broker.Item{Queue: "q", Partition: n, Payload: payload(r)})
		}
		e.push(items...)
		e.tick("q")
		var cands []int32
		for n := range hot {
			cands = append(cands, ids[n])
		}
		for len(cands) < 16 {
			cands = append(cands, ids[names[rng.Intn(parts)]])
		}
		c0, w0 := backendCPU(t, pid), time.Now()
		res, err := broker.PopList(ctxT(t), c, p, cands)
		c1, w1 := backendCPU(t, pid), time.Now()
		if err != nil {
			t.Fatal(err)
		}
		acks := make([]broker.Ack, len(res.Messages))
		for i, m := range res.Messages {
			acks[i] = broker.Ack{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, LeaseID: m.LeaseID}
		}
		ar, err := broker.AckBatch(ctxT(t), c, "g", acks)
		c2, w2 := backendCPU(t, pid), time.Now()
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range ar {
			if !a.Success {
				t.Fatalf("ack failed: %+v", a)
			}
		}
		if r == 0 && pgss {
			if _, err := c.Exec(ctxT(t), `SELECT pg_stat_statements_reset()`); err != nil {
				t.Fatal(err)
			}
		}
		if r == 0 { // the first round plans; report it apart
			t.Logf("first round: pop %d ms, ack %d ms (CPU), %d messages", (c1-c0)*10, (c2-c1)*10, len(res.Messages))
			continue
		}
		if r == rounds+1 {
			break
		}
		popCPU += c1 - c0
		ackCPU += c2 - c1
		popWall += w1.Sub(w0)
		ackWall += w2.Sub(w1)
		msgs += int64(len(res.Messages))
		pops++
	}
	t.Logf("%d rounds, %.1f messages per pop: pop %.3f ms CPU (%.3f wall), ack %.3f ms CPU (%.3f wall) per call; %.3f ms CPU per message",
		pops, float64(msgs)/float64(pops), float64(popCPU*10)/float64(pops), popWall.Seconds()*1000/float64(pops),
		float64(ackCPU*10)/float64(pops), ackWall.Seconds()*1000/float64(pops), float64((popCPU+ackCPU)*10)/float64(msgs))
	if !pgss {
		return
	}
	srows, err := c.Query(ctxT(t), `SELECT calls, plans, total_exec_time / $1, total_plan_time / $1,
		left(regexp_replace(query, '\s+', ' ', 'g'), 90) FROM pg_stat_statements
		WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
		ORDER BY total_exec_time + total_plan_time DESC LIMIT 25`, float64(pops))
	if err != nil {
		t.Fatal(err)
	}
	defer srows.Close()
	for srows.Next() {
		var calls, plans int64
		var ex, pl float64
		var q string
		if err := srows.Scan(&calls, &plans, &ex, &pl, &q); err != nil {
			t.Fatal(err)
		}
		t.Logf("%6d calls %6d plans  exec %.3f  plan %.3f ms per round  %s", calls, plans, ex, pl, q)
	}
}
