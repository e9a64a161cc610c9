package pgstats_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgquectl/pgquectl/internal/locks"
	"github.com/pgquectl/pgquectl/internal/pgstats"
	"github.com/pgquectl/pgquectl/internal/pgtest"
)

func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func exec(t *testing.T, conn *pgx.Conn, sql string, args ...any) {
	t.Helper()
	if _, err := conn.Exec(ctxT(t), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func TestParseLSN(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want pgstats.LSN
	}{
		{"0/0", 0},
		{"0/16B3748", 0x16B3748},
		{"1/0", 1 << 32},
		{"FFFFFFFF/FFFFFFFF", 1<<64 - 1},
	} {
		got, err := pgstats.ParseLSN(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseLSN(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
		if got.String() != tc.in {
			t.Errorf("LSN(%d).String() = %q, want %q", tc.want, got.String(), tc.in)
		}
	}
	for _, bad := range []string{"", "16B3748", "x/1", "1/x", "100000000/0"} {
		if _, err := pgstats.ParseLSN(bad); err == nil {
			t.Errorf("ParseLSN(%q): want an error", bad)
		}
	}
}

func TestClassifyTable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, parent string
		kind         pgstats.TableKind
		queue        int64
	}{
		{"event_12_0", "", pgstats.KindEvent, 12},
		{"event_3_2", "", pgstats.KindEvent, 3},
		{"event_template", "", pgstats.KindOther, 0},
		{"tick_0", "tick", pgstats.KindTick, 0},
		{"tick_2", "", pgstats.KindTick, 0},
		{"subscription_1", "subscription", pgstats.KindSubscription, 0},
		{"queue", "", pgstats.KindOther, 0},
		{"retry_queue", "", pgstats.KindOther, 0},
		{"dead_letter", "", pgstats.KindOther, 0},
		{"partition", "", pgstats.KindOther, 0},
	} {
		kind, q := pgstats.ClassifyTable(tc.name, tc.parent)
		if kind != tc.kind || q != tc.queue {
			t.Errorf("ClassifyTable(%q, %q) = %s, %d; want %s, %d", tc.name, tc.parent, kind, q, tc.kind, tc.queue)
		}
	}
}

func TestWALRate(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewEmptyDB(t)
	conn := pgtest.Conn(t, dsn)
	ctx := ctxT(t)
	exec(t, conn, `CREATE TABLE w (g int, pad text)`)
	from, err := pgstats.ReadWAL(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	exec(t, conn, `INSERT INTO w SELECT g, repeat('x', 100) FROM generate_series(1, 10000) g`)
	to, err := pgstats.ReadWAL(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	r := pgstats.Rate(from, to)
	// 10,000 rows of ~130 bytes: at least a megabyte of WAL.
	if r.Bytes < 1<<20 || r.Seconds <= 0 || r.BytesPerSec <= 0 {
		t.Errorf("rate after writing 10,000 rows: %+v", r)
	}
	if r.XIDs < 1 {
		t.Errorf("xids: %d, want ≥ 1 (the INSERT assigned one)", r.XIDs)
	}
	sampled, err := pgstats.SampleWAL(ctx, conn, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if sampled.Seconds < 0.05 || sampled.Bytes < 0 {
		t.Errorf("SampleWAL over 50ms: %+v", sampled)
	}
}

func TestTableStatsOfEngine(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDB(t)
	conn := pgtest.Conn(t, dsn)
	ts, err := pgstats.TableStats(ctxT(t), conn, "pgque")
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]pgstats.TableKind{}
	for _, tb := range ts {
		kinds[tb.Name] = tb.Kind
		if tb.Name == "tick" || tb.Name == "subscription" {
			t.Errorf("partitioned parent %s listed: only tables that hold rows belong in the report", tb.Name)
		}
	}
	for name, want := range map[string]pgstats.TableKind{
		"tick_0": pgstats.KindTick, "tick_1": pgstats.KindTick, "tick_2": pgstats.KindTick,
		"subscription_0": pgstats.KindSubscription, "subscription_2": pgstats.KindSubscription,
		"queue": pgstats.KindOther,
	} {
		if kinds[name] != want {
			t.Errorf("table %s: kind %q, want %q (all: %v)", name, kinds[name], want, kinds)
		}
	}
}

// TestDeadTuples: updates committed while another session holds the xmin
// horizon leave dead tuples that both readers report once the writer
// flushed its statistics.
func TestDeadTuples(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewEmptyDB(t)
	writer := pgtest.Conn(t, dsn)
	holder := pgtest.Conn(t, dsn)
	reader := pgtest.Conn(t, dsn)
	ctx := ctxT(t)
	exec(t, writer, `CREATE SCHEMA s`)
	exec(t, writer, `CREATE TABLE s.churn (id int PRIMARY KEY, n int) WITH (autovacuum_enabled = off)`)
	exec(t, writer, `INSERT INTO s.churn SELECT g, 0 FROM generate_series(1, 10) g`)
	exec(t, holder, `BEGIN ISOLATION LEVEL REPEATABLE READ`)
	exec(t, holder, `SELECT count(*) FROM s.churn`)
	for range 30 {
		exec(t, writer, `UPDATE s.churn SET n = n + 1`)
	}
	pgtest.FlushStats(t, writer) // pg_stat_force_next_flush() on 15+, a wait on 14
	const want = 300
	var dead int64
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		m, err := pgstats.DeadTuples(ctx, reader, "s")
		if err != nil {
			t.Fatal(err)
		}
		if dead = m["churn"]; dead >= want {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if dead != want {
		t.Fatalf("pg_stat_get_dead_tuples(s.churn) = %d, want %d", dead, want)
	}
	ts, err := pgstats.TableStats(ctx, reader, "s")
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 1 || ts[0].DeadTuples != want || ts[0].Updates != want || !ts[0].AutovacuumOff || ts[0].SizeBytes < 0 {
		t.Errorf("TableStats(s) = %+v, want one table with %d dead tuples and updates, autovacuum off", ts, want)
	}
	if err := pgstats.ClearStatsSnapshot(ctx, reader); err != nil {
		t.Fatal(err)
	}
	totals := pgstats.SumByKind(ts)
	if totals[4].Kind != pgstats.KindOther || totals[4].DeadTuples != want {
		t.Errorf("SumByKind: %+v", totals)
	}
}

func TestXminBackends(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewEmptyDB(t)
	holder := pgtest.Conn(t, dsn)
	reader := pgtest.Conn(t, dsn)
	ctx := ctxT(t)
	exec(t, holder, `SET application_name = 'xmin-holder'`)
	exec(t, holder, `BEGIN ISOLATION LEVEL REPEATABLE READ`)
	exec(t, holder, `SELECT 1`)
	pid := holder.PgConn().PID()
	bs, err := pgstats.XminBackends(ctx, reader)
	if err != nil {
		t.Fatal(err)
	}
	var found *pgstats.Backend
	for i := range bs {
		if bs[i].PID == int32(pid) {
			found = &bs[i]
		}
		if bs[i].PID == int32(reader.PgConn().PID()) {
			t.Errorf("the reader's own backend is listed: %+v", bs[i])
		}
	}
	if found == nil {
		t.Fatalf("holder pid %d not among %+v", pid, bs)
	}
	if found.BackendXmin == nil || found.XminHolder != "backend_xmin" || !found.SameDatabase || found.Hidden ||
		found.XactAge == nil || found.Application != "xmin-holder" || found.State != "idle in transaction" {
		t.Errorf("holder: %+v", *found)
	}
}

func TestPreparedXacts(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewEmptyDB(t)
	conn := pgtest.Conn(t, dsn)
	ctx := ctxT(t)
	var maxPrepared int
	if err := conn.QueryRow(ctx, `SELECT current_setting('max_prepared_transactions')::int`).Scan(&maxPrepared); err != nil {
		t.Fatal(err)
	}
	ps, err := pgstats.PreparedXacts(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	if maxPrepared == 0 {
		if len(ps) != 0 {
			t.Errorf("prepared transactions on a server that allows none: %+v", ps)
		}
		t.Skip("max_prepared_transactions = 0 on the test server: cannot PREPARE TRANSACTION")
	}
	exec(t, conn, `CREATE TABLE p (x int)`)
	exec(t, conn, `BEGIN`)
	exec(t, conn, `INSERT INTO p VALUES (1)`)
	exec(t, conn, `PREPARE TRANSACTION 'pgstats-test'`)
	t.Cleanup(func() { _, _ = conn.Exec(context.Background(), `ROLLBACK PREPARED 'pgstats-test'`) })
	ps, err = pgstats.PreparedXacts(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 1 || ps[0].GID != "pgstats-test" || !ps[0].SameDatabase {
		t.Errorf("prepared: %+v", ps)
	}
}

func TestAdvisoryHolders(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewEmptyDB(t)
	leader := pgtest.Conn(t, dsn)
	reader := pgtest.Conn(t, dsn)
	ctx := ctxT(t)
	hs, err := pgstats.AdvisoryHolders(ctx, reader, locks.ClassID, locks.TickerLeader)
	if err != nil || len(hs) != 0 {
		t.Fatalf("before: %+v, %v", hs, err)
	}
	exec(t, leader, `SET application_name = 'daemon'`)
	exec(t, leader, `SELECT pg_try_advisory_lock($1::int4, $2::int4)`, locks.ClassID, locks.TickerLeader)
	hs, err = pgstats.AdvisoryHolders(ctx, reader, locks.ClassID, locks.TickerLeader)
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) != 1 || hs[0].PID != int32(leader.PgConn().PID()) || !hs[0].Granted || hs[0].Application != "daemon" || hs[0].BackendStart == nil {
		t.Errorf("holders: %+v", hs)
	}
}

func TestServerCounters(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewEmptyDB(t)
	conn := pgtest.Conn(t, dsn)
	ctx := ctxT(t)
	u, err := pgstats.NotifyQueueUsage(ctx, conn)
	if err != nil || u < 0 || u > 1 {
		t.Errorf("notify usage %v, %v", u, err)
	}
	c, err := pgstats.ReadConnections(ctx, conn)
	if err != nil || c.ThisDatabase < 1 || c.Total < c.ThisDatabase || c.MaxConnections <= c.ReservedSuperuser {
		t.Errorf("connections %+v, %v", c, err)
	}
	s, err := pgstats.Session(ctx, conn)
	if err != nil || !s.Superuser || s.ServerVersionNum < 140000 || s.BackendPID != int32(conn.PgConn().PID()) {
		t.Errorf("session %+v, %v", s, err)
	}
	if _, err := pgstats.Queues(ctx, conn); !errors.Is(err, pgstats.ErrUnavailable) {
		t.Errorf("Queues without the engine: %v, want ErrUnavailable", err)
	}
	e, err := pgstats.ReadEngine(ctx, conn)
	if err != nil || e.Installed {
		t.Errorf("ReadEngine without the engine: %+v, %v", e, err)
	}
}
