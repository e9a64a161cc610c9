package status_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgquectl/pgquectl/internal/config"
	"github.com/pgquectl/pgquectl/internal/locks"
	"github.com/pgquectl/pgquectl/internal/pgtest"
	"github.com/pgquectl/pgquectl/internal/status"
)

// setup is what most tests need: a database with the engine, a superuser
// connection to it, and thresholds to adjust.
type setup struct {
	dsn  string
	conn *pgx.Conn
	th   status.Thresholds
}

func newSetup(t *testing.T) *setup {
	t.Helper()
	dsn := pgtest.NewDB(t)
	return &setup{dsn: dsn, conn: pgtest.Conn(t, dsn), th: status.DefaultThresholds()}
}

func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func exec(t *testing.T, conn *pgx.Conn, sql string, args ...any) {
	t.Helper()
	if _, err := conn.Exec(ctxT(t), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// collector returns a collector for dsn, closed at cleanup.
func collector(t *testing.T, dsn string, th status.Thresholds, sample time.Duration) *status.Collector {
	t.Helper()
	c := status.NewCollector(status.Options{
		Conn:       config.Connection{DSN: dsn, ConnectTimeout: 10 * time.Second, ApplicationName: "status-test"},
		Sample:     sample,
		Thresholds: th,
	})
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func collect(t *testing.T, c *status.Collector) *status.Report {
	t.Helper()
	r, err := c.Collect(ctxT(t))
	if err != nil {
		t.Fatalf("Collect: %v", err)
	}
	return r
}

// check finds the check named name.
func check(t *testing.T, r *status.Report, name string) status.Check {
	t.Helper()
	for _, c := range r.Checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no check %q in %s", name, r.Summary)
	return status.Check{}
}

func notOK(r *status.Report) []status.Check {
	var bad []status.Check
	for _, c := range r.Checks {
		if c.Level != status.OK {
			bad = append(bad, c)
		}
	}
	return bad
}

// TestFreshInstallAllOK: the engine installed, no queues: every check OK.
func TestFreshInstallAllOK(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	r := collect(t, collector(t, s.dsn, s.th, 200*time.Millisecond))
	if r.Level != status.OK || len(notOK(r)) > 0 {
		t.Fatalf("fresh install: level %s, not OK: %+v", r.Level, notOK(r))
	}
	if !r.Engine.Installed || r.Engine.Version == "" {
		t.Errorf("engine: %+v", r.Engine)
	}
	if !r.WAL.Sampled || r.WAL.Rate == nil || r.WAL.Rate.Seconds < 0.2 {
		t.Errorf("WAL not sampled over 200ms: %+v", r.WAL)
	}
	if len(r.Bloat.Families) != 3 { // tick, subscription and group cursor; no event tables without queues
		t.Errorf("bloat families: %+v", r.Bloat.Families)
	}
	for _, name := range []string{"engine", "xmin horizon", "ticking", "notify queue", "connections", "wal rate", "dead tuples tick", "dead tuples subscription"} {
		if c := check(t, r, name); c.Level != status.OK {
			t.Errorf("check %s: %+v", name, c)
		}
	}
	if !strings.HasPrefix(r.Summary, "PGQUE OK - ") {
		t.Errorf("summary %q", r.Summary)
	}
}

// TestXminWarnThenCrit: a REPEATABLE READ transaction that took its
// snapshot holds backend_xmin; the check goes OK → WARN → CRIT naming its pid.
func TestXminWarnThenCrit(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	holder := pgtest.Conn(t, s.dsn)
	exec(t, holder, `SET application_name = 'long-report'`)
	exec(t, holder, `BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY`)
	exec(t, holder, `SELECT count(*) FROM pg_class`) // takes the snapshot
	pid := strconv.Itoa(int(holder.PgConn().PID()))

	// Limits far above one collection's time on a loaded 2-core machine, so
	// the first collection still sees OK.
	s.th.XminWarn, s.th.XminCrit = 4*time.Second, 8*time.Second
	c := collector(t, s.dsn, s.th, 0)
	var seen []status.Level
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		r := collect(t, c)
		x := check(t, r, "xmin horizon")
		if !strings.Contains(x.Reason, "pid "+pid) {
			t.Fatalf("xmin check does not name the holder pid %s: %+v", pid, x)
		}
		if len(seen) == 0 || seen[len(seen)-1] != x.Level {
			seen = append(seen, x.Level)
			t.Logf("%s: %s", x.Level, x.Reason)
		}
		if x.Level == status.Crit {
			var row *status.BackendRow
			for i := range r.Xmin.Backends {
				if strconv.Itoa(int(r.Xmin.Backends[i].PID)) == pid {
					row = &r.Xmin.Backends[i]
				}
			}
			if row == nil || row.Application != "long-report" || row.BackendXmin == nil || row.Level != status.Crit {
				t.Errorf("holder row: %+v", row)
			}
			if r.Level != status.Crit {
				t.Errorf("report level %s with a CRIT check", r.Level)
			}
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	want := []status.Level{status.OK, status.Warn, status.Crit}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Fatalf("xmin levels seen %v, want %v", seen, want)
	}
	exec(t, holder, `COMMIT`)
	if x := check(t, collect(t, c), "xmin horizon"); x.Level != status.OK {
		t.Errorf("after COMMIT: %+v", x)
	}
}

// TestTickLagCrit: events sent, nothing ticks: the queue goes CRIT.
func TestTickLagCrit(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	exec(t, s.conn, `SELECT pgque.create_queue('orders')`)
	exec(t, s.conn, `SELECT pgque.send('orders', '{"n": 1}'::jsonb)`)
	exec(t, s.conn, `SELECT pgque.send('orders', '{"n": 2}'::jsonb)`)
	// Classic thresholds: expected every ticker_max_lag = 3 s. Scale the
	// factors down so the test waits about a second, not 30.
	s.th.TickLagWarnFactor, s.th.TickLagWarnMin = 0.1, 300*time.Millisecond
	s.th.TickLagCritFactor, s.th.TickLagCritMin = 0.3, time.Second
	c := collector(t, s.dsn, s.th, 0)
	var q status.Check
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		q = check(t, collect(t, c), "queue orders")
		if q.Level == status.Crit {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if q.Level != status.Crit || !strings.Contains(q.Reason, "2 events waiting for a tick") {
		t.Fatalf("queue check: %+v", q)
	}
	r := collect(t, c)
	if tk := check(t, r, "ticking"); tk.Level != status.Crit || !strings.Contains(tk.Reason, "ticking is down: queue orders has 2 events waiting") ||
		!strings.Contains(tk.Reason, "nothing ticks") {
		t.Errorf("ticking: %+v", tk)
	}
	if len(r.Queues.Rows) != 1 || r.Queues.Rows[0].NewEvents == nil || *r.Queues.Rows[0].NewEvents != 2 {
		t.Errorf("queue row: %+v", r.Queues.Rows)
	}

	// A tick clears it.
	exec(t, s.conn, `SELECT pgque.force_next_tick('orders')`)
	exec(t, s.conn, `SELECT pgque.ticker()`)
	if q := check(t, collect(t, c), "queue orders"); q.Level != status.OK {
		t.Errorf("after a tick: %+v", q)
	}
}

// TestTickLagWithoutClassicConsumer: a queue with a 10 ms tick period that
// no classic consumer reads is ticked by the engine's classic thresholds
// (consumer groups need no ticks), so its tick lag is judged against
// ticker_max_lag (3 s: WARN from 9 s), not the period (WARN from 3 s): 5 s
// without a tick and events waiting is OK. Once a classic consumer
// subscribes, the period applies again and the same lag is WARN.
func TestTickLagWithoutClassicConsumer(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	exec(t, s.conn, `SELECT pgque.create_queue('groups')`)
	exec(t, s.conn, `SELECT pgque.set_queue_config('groups', 'tick_period_ms', '10')`)
	exec(t, s.conn, `SELECT pgque.ticker()`) // the post-creation tick
	exec(t, s.conn, `SELECT pgque.send('groups', '{"n": 1}'::jsonb)`)
	exec(t, s.conn, `UPDATE pgque.tick SET tick_time = tick_time - interval '5 seconds'`)
	c := collector(t, s.dsn, s.th, 0)
	r := collect(t, c)
	if q := check(t, r, "queue groups"); q.Level != status.OK {
		t.Errorf("queue without a classic consumer, 5 s since its last tick: %+v, want OK", q)
	}
	if tk := check(t, r, "ticking"); tk.Level != status.OK && strings.Contains(tk.Reason, "groups") {
		t.Errorf("ticking: %+v", tk)
	}
	exec(t, s.conn, `SELECT pgque.subscribe('groups', 'c')`)
	if q := check(t, collect(t, c), "queue groups"); q.Level != status.Warn || !strings.Contains(q.Reason, "expected every 10ms") {
		t.Errorf("with a classic consumer, 5 s since the last tick at a 10 ms period: %+v, want WARN", q)
	}
}

// TestDaemonLeader: the session holding the ticker leader lock is shown as
// what ticks the queues.
func TestDaemonLeader(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	exec(t, s.conn, `SELECT pgque.create_queue('jobs')`)
	c := collector(t, s.dsn, s.th, 0)
	if tk := check(t, collect(t, c), "ticking"); tk.Level != status.Warn {
		t.Fatalf("queue without a ticker: %+v", tk)
	}
	leader := pgtest.Conn(t, s.dsn)
	exec(t, leader, `SET application_name = 'pgquectl tick'`)
	exec(t, leader, `SELECT pg_advisory_lock($1::int4, $2::int4)`, locks.ClassID, locks.TickerLeader)
	r := collect(t, c)
	tk := check(t, r, "ticking")
	pid := int32(leader.PgConn().PID())
	if tk.Level != status.OK || !strings.Contains(tk.Reason, fmt.Sprintf("pid %d", pid)) {
		t.Errorf("ticking with a daemon leader: %+v", tk)
	}
	if len(r.Cron.Daemon) != 1 || r.Cron.Daemon[0].PID != pid || !r.Cron.Daemon[0].Granted || r.Cron.Daemon[0].BackendStart == nil {
		t.Errorf("daemon rows: %+v", r.Cron.Daemon)
	}
}

// TestBloatWarnThenCrit: consumers churn their subscription row through
// the engine (receive + ack) while another session holds the xmin
// horizon: dead tuples pile up, WARN above the bound, CRIT at 4×.
func TestBloatWarnThenCrit(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	ctx := ctxT(t)
	exec(t, s.conn, `SELECT pgque.create_queue('churn')`)
	exec(t, s.conn, `SELECT pgque.subscribe('churn', 'worker')`)
	holder := pgtest.Conn(t, s.dsn)
	exec(t, holder, `BEGIN ISOLATION LEVEL REPEATABLE READ`)
	exec(t, holder, `SELECT count(*) FROM pgque.queue`)

	s.th.SubscriptionDeadMax = 40 // CRIT from 160
	c := collector(t, s.dsn, s.th, 0)
	churn := func(n int) {
		for range n {
			exec(t, s.conn, `SELECT pgque.send('churn', 'x'::text)`)
			exec(t, s.conn, `SELECT pgque.force_next_tick('churn')`)
			exec(t, s.conn, `SELECT pgque.ticker()`)
			rows, err := s.conn.Query(ctx, `SELECT batch_id FROM pgque.receive('churn', 'worker', 100)`)
			if err != nil {
				t.Fatal(err)
			}
			ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
			if err != nil || len(ids) != 1 {
				t.Fatalf("receive: %v, %v (want one event)", ids, err)
			}
			exec(t, s.conn, `SELECT pgque.ack($1)`, ids[0])
		}
		pgtest.FlushStats(t, s.conn) // PostgreSQL 14 has no pg_stat_force_next_flush()
	}
	var seen []status.Level
	var f status.FamilyRow
	for i := 0; i < 100 && f.Level != status.Crit; i++ {
		churn(5) // ≈ 2 dead tuples per batch: far less than the 120-wide WARN band
		prev := f.DeadTuples
		for _, fam := range collect(t, c).Bloat.Families {
			if fam.Kind == "subscription" {
				f = fam
			}
		}
		if f.DeadTuples < prev {
			t.Fatalf("dead tuples went down from %d to %d while the xmin is held: %+v", prev, f.DeadTuples, f)
		}
		if len(seen) == 0 || seen[len(seen)-1] != f.Level {
			seen = append(seen, f.Level)
			t.Logf("%s at %d dead: %s", f.Level, f.DeadTuples, f.Reason)
		}
	}
	want := []status.Level{status.OK, status.Warn, status.Crit}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Fatalf("subscription bloat levels seen %v, want %v (last %+v)", seen, want, f)
	}
	if f.DeadTuples < 160 || f.Bound != 40 || f.CritAt != 160 || !strings.HasPrefix(f.WorstName, "subscription_") {
		t.Errorf("CRIT family row: %+v", f)
	}
	for _, fam := range collect(t, c).Bloat.Families {
		if fam.Kind == "event" && fam.DeadTuples != 0 {
			t.Errorf("event tables are insert-only, yet have %d dead tuples", fam.DeadTuples)
		}
	}
}

// TestWatchRefreshes: Run with Watch re-collects until the context ends.
func TestWatchRefreshes(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	ctx, cancel := context.WithTimeout(ctxT(t), time.Minute)
	defer cancel()
	// Stop after the third report: generous on a loaded machine, and the
	// count shows Run re-collected.
	out := &countingWriter{stopAt: 3, stop: cancel}
	o := status.RunOptions{
		Options: status.Options{Conn: config.Connection{DSN: s.dsn}, Sample: 50 * time.Millisecond, Thresholds: s.th},
		Format:  status.FormatTable,
		Watch:   200 * time.Millisecond,
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	level, err := status.Run(ctx, o, out)
	if err != nil || level != status.OK {
		t.Fatalf("Run: %s, %v", level, err)
	}
	if n := strings.Count(out.b.String(), "PGQUE OK - "); n != 3 {
		t.Errorf("%d reports before the stop, want 3:\n%s", n, out.b.String())
	}
}

// countingWriter cancels stop once stopAt reports were written.
type countingWriter struct {
	b      strings.Builder
	stopAt int
	stop   context.CancelFunc
}

func (w *countingWriter) Write(p []byte) (int, error) {
	n, err := w.b.Write(p)
	if strings.Count(w.b.String(), "PGQUE OK - ") >= w.stopAt {
		w.stop()
	}
	return n, err
}
