package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgquectl/pgquectl/internal/pgtest"
)

// Statements of the tick tests.
const (
	qTickSettings = `SELECT string_agg(name || '=' || coalesce(value, 'NULL'), ',' ORDER BY name) FROM pgque.settings`
	qTickQueues   = `SELECT string_agg(queue_name || '=' || coalesce(queue_tick_period_ms::text, 'NULL'), ',' ORDER BY queue_name) FROM pgque.queue`
	// Our jobs: the names the engine gives (pgque.cron_job_names(), read
	// from the engine database and passed as $1), matched exactly.
	qTickJobs = `SELECT coalesce(string_agg(jobid || ':' || jobname || ':' || schedule, ',' ORDER BY jobname), '')
	               FROM cron.job WHERE jobname::text = ANY ($1::text[])`
	qTickJobNames = `SELECT pgque.cron_job_names()`
)

func TestTickUsage(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"tick", "--queue", "q"}, "pass --hz N"},
		{[]string{"tick", "--status", "--hz", "10"}, "--status only shows"},
		{[]string{"tick", "--hz", "0"}, "out of range"},
		{[]string{"tick", "--hz", "1001"}, "out of range"},
		{[]string{"tick", "--hz", "-5"}, "out of range"},
		{[]string{"tick", "--hz", "100", "--period", "10ms"}, "not both"},
		{[]string{"tick", "--period", "0s"}, "out of range"},
		{[]string{"tick", "--period", "1500us"}, "whole number of milliseconds"},
		{[]string{"tick", "--period", "-5ms"}, "must not be negative"},
		{[]string{"tick", "--hz", "100", "--rotation-period", "1500us"}, "--rotation-period"},
		{[]string{"tick", "--off", "--hz", "10"}, "--off"},
		{[]string{"tick", "--run", "--dry-run", "--hz", "10"}, "do not go together"},
		{[]string{"tick", "--hz", "abc"}, "invalid argument"},
	} {
		_, stderr, code := runMain(t, c.args...)
		if code != exitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", c.args, code, stderr, exitUsage, c.want)
		}
	}
}

func TestTickHelpTeaches(t *testing.T) {
	t.Parallel()
	out, _, code := runMain(t, "tick", "--help")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"--hz 100 --dry-run", "--run --hz 100", "--off", "clamp(300 × period, 1s, 30s)"} {
		if !strings.Contains(out, want) {
			t.Errorf("help lacks %q", want)
		}
	}
}

type tickState struct{ settings, queues, jobs string }

func readTickState(t *testing.T, ctx context.Context, engine, server *pgx.Conn, dbname string) tickState {
	t.Helper()
	var s tickState
	if err := engine.QueryRow(ctx, qTickSettings).Scan(&s.settings); err != nil {
		t.Fatal(err)
	}
	var q *string
	if err := engine.QueryRow(ctx, qTickQueues).Scan(&q); err != nil {
		t.Fatal(err)
	}
	if q != nil {
		s.queues = *q
	}
	var names []string
	if err := engine.QueryRow(ctx, qTickJobNames).Scan(&names); err != nil {
		t.Fatal(err)
	}
	if err := server.QueryRow(ctx, qTickJobs, names).Scan(&s.jobs); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestTickDryRunRegisterAndOff(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cronServer := pgtest.RequireCron(t)
	dsn := pgtest.NewDB(t)
	engine := pgtest.Conn(t, dsn)
	server := pgtest.Conn(t, cronServer)
	var dbname string
	if err := engine.QueryRow(ctx, "SELECT current_database()").Scan(&dbname); err != nil {
		t.Fatal(err)
	}
	pgtest.Exec(t, dsn, `SELECT pgque.create_queue('orders')`)
	t.Cleanup(func() { runMain(t, "tick", "--dsn", dsn, "--off") }) // no job left in the shared cron database
	before := readTickState(t, ctx, engine, server, dbname)

	// --dry-run prints the plan and changes nothing.
	out, stderr, code := runMain(t, "tick", "--dsn", dsn, "--hz", "100", "--dry-run")
	if code != 0 {
		t.Fatalf("dry run: exit %d: %s", code, stderr)
	}
	for _, want := range []string{"Dry run", "orders", "10ms", "3s (derived)", "pgque_ticker@", "CALL pgque.ticker_loop()"} {
		if !strings.Contains(out, want) {
			t.Errorf("dry-run output lacks %q:\n%s", want, out)
		}
	}
	if after := readTickState(t, ctx, engine, server, dbname); after != before {
		t.Fatalf("--dry-run changed state:\nbefore %+v\nafter  %+v", before, after)
	}

	// For real: period, rotation, jobs.
	out, stderr, code = runMain(t, "tick", "--dsn", dsn, "--hz", "100", "--rotation-period", "2s")
	if code != 0 {
		t.Fatalf("tick: exit %d: %s", code, stderr)
	}
	first := readTickState(t, ctx, engine, server, dbname)
	if !strings.Contains(first.settings, "tick_period_ms=10,") || !strings.Contains(first.settings, "meta_rotation_period_ms=2000,") {
		t.Fatalf("settings after tick --hz 100 --rotation-period 2s: %s", first.settings)
	}
	// pg_cron 1.4: two ticker jobs and the purge.
	if strings.Count(first.jobs, "pgque_") != 3 || !strings.Contains(out, "pgque_ticker@") || !strings.Contains(out, "pgque_ticker_2@") {
		t.Fatalf("jobs after tick: %q; output:\n%s", first.jobs, out)
	}

	// Again: the same jobs (same ids), not duplicates.
	if _, stderr, code = runMain(t, "tick", "--dsn", dsn, "--hz", "100", "--rotation-period", "2s"); code != 0 {
		t.Fatalf("tick again: exit %d: %s", code, stderr)
	}
	if again := readTickState(t, ctx, engine, server, dbname); again.jobs != first.jobs {
		t.Fatalf("re-registering changed the jobs:\nfirst %s\nagain %s", first.jobs, again.jobs)
	}

	// One queue's period.
	if _, stderr, code = runMain(t, "tick", "--dsn", dsn, "--period", "5ms", "--queue", "orders"); code != 0 {
		t.Fatalf("tick --queue: exit %d: %s", code, stderr)
	}
	if q := readTickState(t, ctx, engine, server, dbname).queues; q != "orders=5" {
		t.Fatalf("queue periods after --queue orders --period 5ms: %s", q)
	}
	if _, stderr, code = runMain(t, "tick", "--dsn", dsn, "--hz", "10", "--queue", "nosuch"); code == 0 || !strings.Contains(stderr, `queue "nosuch" does not exist`) {
		t.Fatalf("unknown queue: exit %d: %s", code, stderr)
	}

	// --off removes exactly our jobs.
	out, stderr, code = runMain(t, "tick", "--dsn", dsn, "--off")
	if code != 0 {
		t.Fatalf("tick --off: exit %d: %s", code, stderr)
	}
	if j := readTickState(t, ctx, engine, server, dbname).jobs; j != "" {
		t.Fatalf("jobs left after --off: %s", j)
	}
	if want := fmt.Sprintf("applied: pg_cron jobs %d → 0", strings.Count(first.jobs, "pgque_")); !strings.Contains(out, want) {
		t.Errorf("--off output %q lacks %q", out, want)
	}
}

func TestTickWithoutEngineSaysInstall(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewEmptyDB(t)
	_, stderr, code := runMain(t, "tick", "--dsn", dsn, "--hz", "10")
	if code != 1 || !strings.Contains(stderr, "pgquectl install") {
		t.Fatalf("exit %d, stderr %q: want exit 1 and a pointer to `pgquectl install`", code, stderr)
	}
}
