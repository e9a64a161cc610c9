package sql_test

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// The WAL cost of sub-second ticking (docs/design/engine.md, "What ticks and
// deliveries write"). The workload of bench/sub-second's WAL pair, made
// deterministic: 8,000 events sent in producer transactions of 4
// (send_batch), and after every tick a consumer receive (up to 10,000) and
// ack, ticked at "100 Hz" (a tick after every 8 events: 800 ev/s) and at
// "1 Hz" (a tick after every 800). One connection; the WAL of this
// database's records is read back with pg_walinspect and attributed to the
// step that wrote it; full-page images are excluded (they depend on where
// the last checkpoint fell, not on the tick rate).
//
// Issue 8's budget: WAL(100 Hz) <= 1.2 x WAL(1 Hz). Measured on PostgreSQL
// 15: 1.175 x (a cycle of tick + receive + ack writes ~377 bytes: tick ~239,
// receive ~8 - its delivery is in unlogged sequences -, ack ~130); before
// receive stopped writing its row it was 1.25 x (~530 bytes a cycle); before
// the tick's commit lost its subtransaction xid, 1.183 x (~393 bytes).

const (
	walEvents = 8000
	walPerTx  = 4
	// walBudgetRatio is issue 8's goal.
	walBudgetRatio = 1.2
)

// walStepBudget: bytes of WAL records one cycle's step may write at 100 Hz
// (measured on PostgreSQL 15: tick 239 - 255 before its commit lost the
// subtransaction xid (tick_prepare) -, receive 8, ack 130). The tick's
// budget stays 270: its row carries the snapshot, whose in-flight xid list
// grows with the tests running beside it (271 on CI's PostgreSQL 16 leg
// against 250); TestTickerLoopTicksCommitWithoutSubtransactions pins the
// subtransaction regression exactly instead.
var walStepBudget = map[walStep]float64{stepTick: 270, stepReceive: 15, stepAck: 140}

// walStep is one step of the probe's cycle.
type walStep int

const (
	stepSend walStep = iota
	stepTick
	stepReceive
	stepAck
	nSteps
)

func (s walStep) String() string {
	return [...]string{"send", "tick", "receive", "ack"}[s]
}

// walSpan is the WAL range one step wrote.
type walSpan struct {
	from, to uint64
	step     walStep
}

// walRecord is one record of pg_get_wal_records_info.
type walRecord struct {
	lsn   uint64
	xid   uint32
	kind  string // resource_manager/record_type
	bytes int64  // record length without full-page images
	fpi   int64
	rel   string // first block reference's relation (name in this database), "" none
}

// walRun is the WAL one side of the probe wrote, by step, record kind and
// relation.
type walRun struct {
	label  string
	ticks  int
	total  int64
	fpi    int64
	byStep [nSteps]int64
	detail map[string]int64 // "step kind rel" -> bytes
	count  map[string]int64 // "step kind rel" -> records
}

func parseLSN(t *testing.T, s string) uint64 {
	t.Helper()
	hi, lo, ok := strings.Cut(s, "/")
	if !ok {
		t.Fatalf("bad lsn %q", s)
	}
	h, err1 := strconv.ParseUint(hi, 16, 32)
	l, err2 := strconv.ParseUint(lo, 16, 32)
	if err1 != nil || err2 != nil {
		t.Fatalf("bad lsn %q", s)
	}
	return h<<32 | l
}

func fmtLSN(v uint64) string { return fmt.Sprintf("%X/%X", v>>32, v&0xffffffff) }

var blkRel = regexp.MustCompile(`rel (\d+)/(\d+)/(\d+)`)

// walProbe runs the workload with a tick (and a receive + ack) after every
// perTick events and returns the WAL this database's transactions wrote.
func walProbe(t *testing.T, ctx context.Context, conn *pgx.Conn, q string, perTick int) walRun {
	t.Helper()
	var spans []walSpan
	lsn := func() uint64 {
		var s string
		if err := conn.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&s); err != nil {
			t.Fatalf("lsn: %v", err)
		}
		return parseLSN(t, s)
	}
	step := func(st walStep, sql string, args ...any) pgx.Rows {
		t.Helper()
		from := lsn()
		rows, err := conn.Query(ctx, sql, args...)
		if err != nil {
			t.Fatalf("%s: %v", st, err)
		}
		return &spanRows{Rows: rows, done: func() { spans = append(spans, walSpan{from, lsn(), st}) }}
	}
	payloads := make([]string, walPerTx)
	for i := range payloads {
		payloads[i] = "{}"
	}
	run := walRun{label: fmt.Sprintf("tick every %d events", perTick), detail: map[string]int64{}, count: map[string]int64{}}
	received := 0
	start := lsn()
	for sent := 0; sent < walEvents; {
		for i := 0; i < perTick/walPerTx; i++ {
			rows := step(stepSend, `SELECT pgque.send_batch($1, $2::text[])`, q, payloads)
			rows.Close()
			if err := rows.Err(); err != nil {
				t.Fatalf("send_batch: %v", err)
			}
			sent += walPerTx
		}
		time.Sleep(2 * time.Millisecond) // a new 1 ms period slot: the tick is due
		var ticked int64
		rows := step(stepTick, `SELECT pgque.ticker()`)
		for rows.Next() {
			if err := rows.Scan(&ticked); err != nil {
				t.Fatalf("ticker: %v", err)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil || ticked != 1 {
			t.Fatalf("ticker() = %d, %v; want 1 queue ticked", ticked, err)
		}
		run.ticks++
		var batch int64 = -1
		n := 0
		rows = step(stepReceive, `SELECT batch_id FROM pgque.receive($1, 'c', 10000)`, q)
		for rows.Next() {
			if err := rows.Scan(&batch); err != nil {
				t.Fatalf("receive: %v", err)
			}
			n++
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			t.Fatalf("receive: %v", err)
		}
		if n != perTick {
			t.Fatalf("receive after tick %d returned %d events, want %d", run.ticks, n, perTick)
		}
		received += n
		var acked int64
		rows = step(stepAck, `SELECT pgque.ack($1)`, batch)
		for rows.Next() {
			if err := rows.Scan(&acked); err != nil {
				t.Fatalf("ack: %v", err)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil || acked != 1 {
			t.Fatalf("ack(%d) = %d, %v; want 1", batch, acked, err)
		}
	}
	end := lsn()
	// pg_walinspect reads only flushed WAL ("cannot accept future end
	// LSN"): wait until the WAL up to end is on disk. Asynchronous commits
	// (the tickers of other tests' databases) can leave it unflushed.
	for deadline := time.Now().Add(30 * time.Second); ; {
		var flushed bool
		if err := conn.QueryRow(ctx, `SELECT pg_current_wal_flush_lsn() >= $1::pg_lsn`, fmtLSN(end)).Scan(&flushed); err != nil {
			t.Fatalf("flush lsn: %v", err)
		}
		if flushed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("WAL up to %s not flushed within 30 s", fmtLSN(end))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if received != walEvents {
		t.Fatalf("received %d events, want %d", received, walEvents)
	}

	// This database's records: a block reference in it, or (commit records)
	// the xid of a transaction that wrote one. Other tests run in parallel in
	// other databases of the cluster; their records are left out.
	var dbOID uint32
	if err := conn.QueryRow(ctx, `SELECT oid FROM pg_database WHERE datname = current_database()`).Scan(&dbOID); err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	nrows, err := conn.Query(ctx, `SELECT pg_relation_filenode(c.oid)::text, c.relname FROM pg_class c WHERE pg_relation_filenode(c.oid) IS NOT NULL`)
	if err != nil {
		t.Fatal(err)
	}
	for nrows.Next() {
		var fn, name string
		if err := nrows.Scan(&fn, &name); err != nil {
			t.Fatal(err)
		}
		names[fn] = name
	}
	if err := nrows.Err(); err != nil {
		t.Fatal(err)
	}
	rrows, err := conn.Query(ctx, `SELECT start_lsn::text, coalesce(xid::text::bigint, 0), resource_manager || '/' || record_type,
	                                      record_length - fpi_length, fpi_length, coalesce(block_ref, ''), coalesce(description, '')
	                                 FROM pg_get_wal_records_info($1::pg_lsn, $2::pg_lsn)`, fmtLSN(start), fmtLSN(end))
	if err != nil {
		t.Fatalf("pg_get_wal_records_info: %v", err)
	}
	var recs []walRecord
	ours := map[uint32]bool{}
	for rrows.Next() {
		var l, ref, desc string
		var xid int64
		var r walRecord
		if err := rrows.Scan(&l, &xid, &r.kind, &r.bytes, &r.fpi, &ref, &desc); err != nil {
			t.Fatal(err)
		}
		r.lsn, r.xid = parseLSN(t, l), uint32(xid)
		if m := blkRel.FindStringSubmatch(ref); m != nil {
			if m[2] != strconv.FormatUint(uint64(dbOID), 10) {
				continue
			}
			r.rel = names[m[3]]
			if r.rel == "" {
				r.rel = "rel " + m[3]
			}
			if strings.HasPrefix(r.rel, "pg_") {
				continue // catalogs: autovacuum's ANALYZE, catalog pruning - not the engine's writes
			}
			if r.xid != 0 {
				ours[r.xid] = true
			}
		} else if ref != "" {
			continue
		} else if _, subs, ok := strings.Cut(desc, "subxacts: "); ok {
			// A commit of a transaction whose writes were made by its
			// subtransactions (PL/pgSQL EXCEPTION blocks): its subxacts are ours.
			for _, f := range strings.Fields(strings.SplitN(subs, ";", 2)[0]) {
				if x, err := strconv.ParseUint(f, 10, 32); err == nil && ours[uint32(x)] {
					ours[r.xid] = true
				}
			}
		}
		recs = append(recs, r)
	}
	if err := rrows.Err(); err != nil {
		t.Fatal(err)
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].from < spans[j].from })
	for _, r := range recs {
		if r.rel == "" && !ours[r.xid] {
			continue // not this database's (a commit of another test, a running-xacts record)
		}
		i := sort.Search(len(spans), func(i int) bool { return spans[i].to > r.lsn })
		if i == len(spans) || r.lsn < spans[i].from {
			continue // between steps (the probe's own LSN reads write nothing)
		}
		st := spans[i].step
		run.total += r.bytes
		run.fpi += r.fpi
		run.byStep[st] += r.bytes
		key := fmt.Sprintf("%-8s %-22s %s", st, r.kind, r.rel)
		run.detail[key] += r.bytes
		run.count[key]++
	}
	return run
}

// spanRows records the WAL span of a step when its rows are closed.
type spanRows struct {
	pgx.Rows
	done   func()
	closed bool
}

func (r *spanRows) Close() {
	r.Rows.Close()
	if !r.closed {
		r.closed = true
		r.done()
	}
}

func (r *spanRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

func (w walRun) log(t *testing.T) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d ticks, %d bytes of WAL records (+%d FPI bytes); per tick:", w.label, w.ticks, w.total, w.fpi)
	for st := walStep(0); st < nSteps; st++ {
		fmt.Fprintf(&b, " %s %.1f", st, float64(w.byStep[st])/float64(w.ticks))
	}
	keys := make([]string, 0, len(w.detail))
	for k := range w.detail {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "\n  %-60s %8d bytes %6d records  %7.1f B/tick", k, w.detail[k], w.count[k], float64(w.detail[k])/float64(w.ticks))
	}
	t.Log(b.String())
}

// TestWALBudgetSubSecondTicking: the WAL of 100 Hz ticking at 800 ev/s is at
// most walBudgetRatio times the WAL of 1 Hz ticking (deterministic probe),
// and no step of the cycle grew past its budget.
func TestWALBudgetSubSecondTicking(t *testing.T) {
	e := setup(t)
	ctx := ctxT(t)
	if e.int64(`SELECT count(*) FROM pg_available_extensions WHERE name = 'pg_walinspect'`) == 0 {
		t.Skip("pg_walinspect is not available (PostgreSQL < 15)")
	}
	e.exec(`CREATE EXTENSION IF NOT EXISTS pg_walinspect`)
	// Keep the probe's WAL until it is read (checkpoints of a busy test
	// cluster would recycle the segments): a temporary physical slot.
	e.exec(`SELECT pg_create_physical_replication_slot('pgque_walprobe_' || pg_backend_pid(), true, true)`)
	runs := make([]walRun, 0, 2)
	for _, perTick := range []int{800, 8} {
		q := fmt.Sprintf("w%d", perTick)
		e.exec(`SELECT pgque.create_queue($1)`, q)
		e.exec(`SELECT pgque.set_queue_config($1, 'tick_period_ms', '1')`, q)
		e.exec(`SELECT pgque.subscribe($1, 'c')`, q)
		// No autovacuum on the event tables: its records would land in
		// whatever step runs meanwhile (the engine's metadata tables have
		// it off already).
		var alters []string
		rows, err := e.conn.Query(ctx, `SELECT format('ALTER TABLE %s SET (autovacuum_enabled = false)', c.oid::regclass)
		                                  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		                                 WHERE n.nspname = 'pgque' AND c.relkind = 'r' AND c.relname LIKE 'event\_%'`)
		if err != nil {
			t.Fatal(err)
		}
		if alters, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			t.Fatal(err)
		}
		for _, a := range alters {
			e.exec(a)
		}
		// Warm up: the first batch pays for catalog caches and first pages.
		e.exec(`SELECT pgque.send_batch($1, ARRAY['{}'])`, q)
		time.Sleep(2 * time.Millisecond)
		e.exec(`SELECT pgque.ticker($1)`, q)
		if ms := e.receive(q, "c", 10); len(ms) != 1 {
			t.Fatalf("warm-up receive: %d events, want 1", len(ms))
		} else {
			e.exec(`SELECT pgque.ack($1)`, ms[0].Batch)
		}
		run := walProbe(t, ctx, e.conn, q, perTick)
		run.log(t)
		runs = append(runs, run)
		e.exec(`SELECT pgque.drop_queue($1, true)`, q)
	}
	slow, fast := runs[0], runs[1]
	ratio := float64(fast.total) / float64(slow.total)
	extra := float64(fast.total-slow.total) / float64(fast.ticks-slow.ticks)
	t.Logf("WAL 100 Hz / 1 Hz = %d / %d = %.3f; %.1f bytes per extra tick+receive+ack", fast.total, slow.total, ratio, extra)
	if ratio > walBudgetRatio {
		t.Errorf("WAL at 100 Hz is %.3f x WAL at 1 Hz, budget %.2f x", ratio, walBudgetRatio)
	}
	for st, budget := range walStepBudget {
		if got := float64(fast.byStep[st]) / float64(fast.ticks); got > budget {
			t.Errorf("%s writes %.1f bytes of WAL per cycle at 100 Hz, budget %.0f", st, got, budget)
		}
	}
}
