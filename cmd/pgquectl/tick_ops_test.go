package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgquectl/pgquectl/internal/db"
	"github.com/pgquectl/pgquectl/internal/pgtest"
)

// Statements of the tick operation tests.
const (
	qTickCount     = `SELECT count(*) FROM pgque.tick t JOIN pgque.queue q ON q.queue_id = t.tick_queue WHERE q.queue_name = $1`
	qJobsNamed     = `SELECT count(*) FROM cron.job WHERE jobname::text = ANY ($1::text[])`
	qSetting       = `SELECT coalesce(pgque.get_setting($1), 'NULL')`
	qUnscheduleAll = `SELECT count(cron.unschedule(jobid)) FROM cron.job WHERE jobname::text = ANY ($1::text[])`
)

func tickCtx(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func jobNames(t *testing.T, ctx context.Context, engine *pgx.Conn) []string {
	t.Helper()
	var names []string
	if err := engine.QueryRow(ctx, qTickJobNames).Scan(&names); err != nil {
		t.Fatal(err)
	}
	return names
}

// cronEngineDB creates database name on server (srv: a connection to its
// cron database), installs the engine there and returns its DSN, a
// connection to it and the engine's pg_cron job names. At cleanup `tick --off` stops ticking, the
// jobs are unscheduled and the database is dropped.
func cronEngineDB(t *testing.T, ctx context.Context, server string, srv *pgx.Conn, name string) (string, *pgx.Conn, []string) {
	t.Helper()
	if _, err := srv.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	dsn, err := db.WithDatabase(server, name)
	if err != nil {
		t.Fatal(err)
	}
	pgtest.InstallEngine(t, dsn)
	engine := pgtest.Conn(t, dsn)
	names := jobNames(t, ctx, engine)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		runMain(t, "tick", "--dsn", dsn, "--off")
		_ = engine.Close(ctx)
		_, _ = srv.Exec(ctx, qUnscheduleAll, names)
		_, _ = srv.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	})
	return dsn, engine, names
}

func countJobs(t *testing.T, ctx context.Context, server *pgx.Conn, names []string) int {
	t.Helper()
	var n int
	if err := server.QueryRow(ctx, qJobsNamed, names).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestTickLongDatabaseName: a 49-byte database name holding '_' and '%'
// (LIKE wildcards) gets hashed job names; tick registers 6 jobs (pg_cron
// 1.4), the plan and `tick` show them, --off removes all 6 and uninstall
// leaves none. Before the engine answered "which jobs are ours", the plan
// said 0 jobs, --off removed 0 and uninstall left the purge job.
func TestTickLongDatabaseName(t *testing.T) {
	t.Parallel()
	server := pgtest.RequireCron(t)
	ctx := tickCtx(t, 3*time.Minute)
	b := make([]byte, 17)
	_, _ = rand.Read(b)
	name := "pgqt_long_%_db_" + hex.EncodeToString(b)
	if len(name) != 49 {
		t.Fatalf("name is %d bytes", len(name))
	}
	srv := pgtest.Conn(t, server)
	dsn, _, names := cronEngineDB(t, ctx, server, srv, name)
	for _, n := range names {
		if len(n) > 63 || !strings.HasPrefix(n, "pgque_") {
			t.Fatalf("job name %q does not fit pg_cron's 63 bytes", n)
		}
	}

	out, stderr, code := runMain(t, "tick", "--dsn", dsn, "--hz", "10")
	if code != 0 {
		t.Fatalf("tick --hz 10: exit %d: %s", code, stderr)
	}
	// pg_cron 1.4: the two ticker jobs and the purge (the loop runs the
	// maintenance itself).
	if n := countJobs(t, ctx, srv, names); n != 3 {
		t.Fatalf("tick --hz 10 registered %d jobs, want 3:\n%s", n, out)
	}
	if strings.Count(out, "pgque_") != 3 || !strings.Contains(out, "pg_cron jobs 0 → 3") {
		t.Errorf("the plan does not show the 3 jobs:\n%s", out)
	}
	out, stderr, code = runMain(t, "tick", "--dsn", dsn)
	if code != 0 || strings.Count(out, "pgque_") != 3 {
		t.Errorf("tick (status): exit %d, %s; want the 3 jobs:\n%s", code, stderr, out)
	}
	out, _, _ = runMain(t, "status", "--dsn", dsn)
	if strings.Contains(out, "no pgque jobs") || !strings.Contains(out, names[0]) {
		t.Errorf("status does not see our jobs:\n%s", out)
	}

	out, stderr, code = runMain(t, "tick", "--dsn", dsn, "--off")
	if code != 0 || !strings.Contains(out, "pg_cron jobs 3 → 0") {
		t.Fatalf("tick --off: exit %d: %s\n%s", code, stderr, out)
	}
	if n := countJobs(t, ctx, srv, names); n != 0 {
		t.Fatalf("tick --off left %d jobs", n)
	}

	if _, stderr, code = runMain(t, "tick", "--dsn", dsn, "--hz", "10"); code != 0 {
		t.Fatalf("tick --hz 10 again: exit %d: %s", code, stderr)
	}
	if _, stderr, code = runMain(t, "uninstall", "--dsn", dsn, "--force"); code != 0 {
		t.Fatalf("uninstall --force: exit %d: %s", code, stderr)
	}
	if n := countJobs(t, ctx, srv, names); n != 0 {
		t.Fatalf("uninstall --force left %d jobs", n)
	}
}

// TestTickOffStopsTheRunningLoop: after `tick --off` the running
// ticker_loop() (started here as pg_cron 1.4 starts it, in minute slots)
// ends within about a second, and no tick happens 2 s later. Before, it
// kept ticking to the end of its minute slot.
func TestTickOffStopsTheRunningLoop(t *testing.T) {
	t.Parallel()
	pgtest.RequireCron(t)
	ctx := tickCtx(t, 3*time.Minute)
	dsn := pgtest.NewDB(t)
	engine := pgtest.Conn(t, dsn)
	pgtest.Exec(t, dsn, `SELECT pgque.create_queue('q')`)
	t.Cleanup(func() { runMain(t, "tick", "--dsn", dsn, "--off") })
	if _, stderr, code := runMain(t, "tick", "--dsn", dsn, "--hz", "50"); code != 0 {
		t.Fatalf("tick --hz 50: exit %d: %s", code, stderr)
	}
	if v := settingOf(t, ctx, engine, "ticker_slot_seconds"); v != "60" {
		t.Fatalf("ticker_slot_seconds = %s on pg_cron 1.4, want 60", v)
	}
	loop := pgtest.Conn(t, dsn)
	done := make(chan error, 1)
	go func() {
		_, err := loop.Exec(ctx, `CALL pgque.ticker_loop()`, pgx.QueryExecModeSimpleProtocol)
		done <- err
	}()
	send := func() {
		t.Helper()
		if _, err := engine.Exec(ctx, `SELECT pgque.send('q', 'x'::text)`); err != nil {
			t.Fatal(err)
		}
	}
	// The loop ticks: events keep the queue due at every period.
	ticking := false
	before := ticks(t, ctx, engine, "q")
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		send()
		time.Sleep(50 * time.Millisecond)
		if ticks(t, ctx, engine, "q") > before+2 {
			ticking = true
			break
		}
	}
	if !ticking {
		t.Fatal("the loop never ticked")
	}

	out, stderr, code := runMain(t, "tick", "--dsn", dsn, "--off")
	if code != 0 {
		t.Fatalf("tick --off: exit %d: %s", code, stderr)
	}
	if !strings.Contains(out, "ends within a second") {
		t.Errorf("tick --off does not say when the loop stops: %s", out)
	}
	offAt := time.Now()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ticker_loop: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ticker_loop still running 10 s after tick --off")
	}
	t.Logf("loop ended %s after tick --off", time.Since(offAt).Round(time.Millisecond))
	after := ticks(t, ctx, engine, "q")
	for range 20 {
		send()
		time.Sleep(100 * time.Millisecond)
	}
	if n := ticks(t, ctx, engine, "q"); n != after {
		t.Fatalf("%d ticks happened after tick --off stopped the loop", n-after)
	}
	if out, _, _ := runMain(t, "tick", "--dsn", dsn); !strings.Contains(out, "stopped (tick --off)") {
		t.Errorf("tick (status) after --off:\n%s", out)
	}
}

func ticks(t *testing.T, ctx context.Context, c *pgx.Conn, queue string) int64 {
	t.Helper()
	var n int64
	if err := c.QueryRow(ctx, qTickCount, queue).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func settingOf(t *testing.T, ctx context.Context, c *pgx.Conn, name string) string {
	t.Helper()
	var v string
	if err := c.QueryRow(ctx, qSetting, name).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestTickRotationPeriodRejectedBeforeAnything: an out-of-range
// --rotation-period is the engine's to reject, before any plan is printed
// and with nothing changed, also on --dry-run (which used to pass).
func TestTickRotationPeriodRejectedBeforeAnything(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDB(t)
	ctx := tickCtx(t, time.Minute)
	engine := pgtest.Conn(t, dsn)
	var before string
	if err := engine.QueryRow(ctx, qTickSettings).Scan(&before); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"--hz", "10", "--rotation-period", "100000h", "--dry-run"},
		{"--hz", "10", "--rotation-period", "100000h"},
		{"--period", "2m", "--dry-run"},
		{"--period", "2m"},
	} {
		out, stderr, code := runMain(t, append([]string{"tick", "--dsn", dsn}, args...)...)
		if code != exitUsage || out != "" || !strings.Contains(stderr, "invalid value") || !strings.Contains(stderr, "nothing was changed") {
			t.Errorf("tick %v: exit %d, stdout %q, stderr %q; want exit %d, no plan, the engine's rejection", args, code, out, stderr, exitUsage)
		}
	}
	var after string
	if err := engine.QueryRow(ctx, qTickSettings).Scan(&after); err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Fatalf("settings changed:\nbefore %s\nafter  %s", before, after)
	}
}

// TestTickPlanShowsWhatTheEngineUses: after `--queue x --period 5ms`, a
// default `--hz 50` leaves x at 5 ms; the plan says so (it used to show x at
// 20 ms), prints "applied: X → Y", and `tick` alone shows the same.
func TestTickPlanShowsWhatTheEngineUses(t *testing.T) {
	t.Parallel()
	pgtest.RequireCron(t)
	dsn := pgtest.NewDB(t)
	t.Cleanup(func() { runMain(t, "tick", "--dsn", dsn, "--off") })
	pgtest.Exec(t, dsn, `SELECT pgque.create_queue('x')`)
	pgtest.Exec(t, dsn, `SELECT pgque.create_queue('y')`)
	pgtest.Exec(t, dsn, `SELECT pgque.set_queue_config('x', 'tick_period_ms', '5')`)
	out, stderr, code := runMain(t, "tick", "--dsn", dsn, "--hz", "50", "--queue", "y")
	if code != 0 {
		t.Fatalf("tick: exit %d: %s", code, stderr)
	}
	for _, want := range []string{"applied: tick period of y classic → 20ms", "applied: default tick period classic (unchanged)", "applied: pg_cron jobs 0 → 3"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	out, stderr, code = runMain(t, "tick", "--dsn", dsn)
	if code != 0 {
		t.Fatalf("tick (status): exit %d: %s", code, stderr)
	}
	for _, want := range []string{"default tick period: classic", "│ x     │ 5ms", "│ y     │ 20ms", "ticker daemon:       none", "pgque_ticker@"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	// The default changes; x keeps its own 5 ms and the plan says so.
	out, stderr, code = runMain(t, "tick", "--dsn", dsn, "--hz", "50", "--dry-run")
	if code != 0 {
		t.Fatalf("dry run: exit %d: %s", code, stderr)
	}
	if !strings.Contains(out, "│ x     │ 5ms") || strings.Contains(out, "│ x     │ 20ms") {
		t.Errorf("the plan shows x at another period than the engine's 5ms:\n%s", out)
	}
	if !strings.Contains(out, "would apply: default tick period classic → 20ms") {
		t.Errorf("no would-apply line:\n%s", out)
	}
}

// TestTickNonSuperuserHintNamesTheMissingGrant: a role that may use schema
// cron but not execute cron.schedule_in_database (pg_cron revokes it from
// PUBLIC) gets a hint naming that EXECUTE grant - not the USAGE it already
// has - and no setting changes (all or nothing).
func TestTickNonSuperuserHintNamesTheMissingGrant(t *testing.T) {
	t.Parallel()
	server := pgtest.RequireCron(t)
	ctx := tickCtx(t, time.Minute)
	dsn := pgtest.NewDB(t)
	engine := pgtest.Conn(t, dsn)
	var dbname string
	if err := engine.QueryRow(ctx, "SELECT current_database()").Scan(&dbname); err != nil {
		t.Fatal(err)
	}
	role := "tk_" + dbname[max(0, len(dbname)-20):]
	ident := pgx.Identifier{role}.Sanitize()
	srv := pgtest.Conn(t, server)
	for _, q := range []string{
		"CREATE ROLE " + ident + " LOGIN",
		"GRANT pgque_admin TO " + ident,
		"GRANT USAGE ON SCHEMA cron TO " + ident,
	} {
		if _, err := srv.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = srv.Exec(ctx, "REVOKE USAGE ON SCHEMA cron FROM "+ident)
		_, _ = srv.Exec(ctx, "DROP OWNED BY "+ident)
		_, _ = srv.Exec(ctx, "DROP ROLE IF EXISTS "+ident)
	})
	if !strings.HasPrefix(dsn, "postgres://postgres@") {
		t.Skipf("cannot derive a DSN for another role from %q", dsn)
	}
	roleDSN := "postgres://" + role + "@" + strings.TrimPrefix(dsn, "postgres://postgres@")
	var before string
	if err := engine.QueryRow(ctx, qTickSettings).Scan(&before); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := runMain(t, "tick", "--dsn", roleDSN, "--hz", "100")
	if code == 0 {
		t.Fatal("tick without EXECUTE on cron.schedule_in_database succeeded")
	}
	want := "GRANT EXECUTE ON FUNCTION cron.schedule_in_database(text,text,text,text,text,boolean) TO " + ident
	if !strings.Contains(stderr, want) || strings.Contains(stderr, "GRANT USAGE ON SCHEMA cron") {
		t.Errorf("stderr %q\nwant the hint %q", stderr, want)
	}
	var after string
	if err := engine.QueryRow(ctx, qTickSettings).Scan(&after); err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Fatalf("a failed tick changed settings:\nbefore %s\nafter  %s", before, after)
	}
}

// TestUninstallWithoutReadAllSettings: uninstall finds pg_cron's database
// the way install and tick do when cron.database_name is unreadable (no
// pg_read_all_settings); it used to fail reading it.
func TestUninstallWithoutReadAllSettings(t *testing.T) {
	t.Parallel()
	server := pgtest.RequireCron(t)
	ctx := tickCtx(t, time.Minute)
	dsn := pgtest.NewDB(t)
	engine := pgtest.Conn(t, dsn)
	var dbname string
	if err := engine.QueryRow(ctx, "SELECT current_database()").Scan(&dbname); err != nil {
		t.Fatal(err)
	}
	role := "un_" + dbname[max(0, len(dbname)-20):]
	ident := pgx.Identifier{role}.Sanitize()
	srv := pgtest.Conn(t, server)
	for _, q := range []string{"CREATE ROLE " + ident + " LOGIN", "GRANT pgque_admin TO " + ident} {
		if _, err := srv.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// What uninstall reads besides pg_cron (a database owner has it).
	if _, err := engine.Exec(ctx, "GRANT SELECT ON pgque.engine_version TO "+ident); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = engine.Exec(ctx, "REVOKE ALL ON pgque.engine_version FROM "+ident)
		_, _ = srv.Exec(ctx, "DROP ROLE IF EXISTS "+ident)
	})
	if !strings.HasPrefix(dsn, "postgres://postgres@") {
		t.Skipf("cannot derive a DSN for another role from %q", dsn)
	}
	roleDSN := "postgres://" + role + "@" + strings.TrimPrefix(dsn, "postgres://postgres@")
	out, stderr, code := runMain(t, "uninstall", "--dsn", roleDSN, "--force", "--dry-run")
	if code != 0 || !strings.Contains(out, "DROP SCHEMA") {
		t.Fatalf("uninstall --dry-run without pg_read_all_settings: exit %d: %s\n%s", code, stderr, out)
	}
}
