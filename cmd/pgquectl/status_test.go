package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/pgquectl/pgquectl/internal/locks"
	"github.com/pgquectl/pgquectl/internal/pgtest"
	"github.com/pgquectl/pgquectl/internal/status"
)

func statusMain(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = Main(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func statusExec(t *testing.T, conn *pgx.Conn, sql string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// TestStatusHealthyCheck: a fresh install is all OK and --check exits 0.
func TestStatusHealthyCheck(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDB(t)
	code, out, errOut := statusMain(t, "status", "--dsn", dsn, "--check", "--sample", "100ms")
	if code != 0 || !strings.HasPrefix(out, "PGQUE OK - ") || strings.Count(out, "\n") != 1 {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, errOut = statusMain(t, "status", "--dsn", dsn, "--sample", "0")
	if code != 0 || !strings.Contains(out, "pgquectl status: OK") || !strings.Contains(out, "XMIN HORIZON") {
		t.Fatalf("table: exit %d, stderr %q:\n%s", code, errOut, out)
	}
}

// TestStatusCheckExitCodes: 1 WARN, 2 CRIT (a held snapshot against tiny
// thresholds), 3 when the server cannot be reached, 2 for usage errors.
func TestStatusCheckExitCodes(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDB(t)
	holder := pgtest.Conn(t, dsn)
	statusExec(t, holder, `BEGIN ISOLATION LEVEL REPEATABLE READ`)
	statusExec(t, holder, `SELECT 1`)
	time.Sleep(20 * time.Millisecond)

	for _, tc := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"--xmin-warn", "1ms", "--xmin-crit", "1h"}, 1, "PGQUE WARN - "},
		{[]string{"--xmin-warn", "1ms", "--xmin-crit", "2ms"}, 2, "PGQUE CRIT - "},
	} {
		args := append([]string{"status", "--dsn", dsn, "--check", "--sample", "0"}, tc.args...)
		code, out, errOut := statusMain(t, args...)
		if code != tc.code || !strings.HasPrefix(out, tc.out) || !strings.Contains(out, "xmin horizon") {
			t.Errorf("%v: exit %d (want %d), stdout %q, stderr %q", tc.args, code, tc.code, out, errOut)
		}
	}
	code, out, _ := statusMain(t, "status", "--dsn", "postgres://nobody@127.0.0.1:1/x?sslmode=disable&connect_timeout=2", "--check")
	if code != 3 || !strings.HasPrefix(out, "PGQUE UNKNOWN - ") {
		t.Errorf("unreachable: exit %d, %q", code, out)
	}
	code, _, errOut := statusMain(t, "status", "--dsn", dsn, "-o", "xml")
	if code != 2 || !strings.Contains(errOut, "table, wide or json") {
		t.Errorf("-o xml: exit %d, %q", code, errOut)
	}
	code, _, errOut = statusMain(t, "status", "--dsn", dsn, "--xmin-warn", "10m", "--xmin-crit", "1m")
	if code != 2 || !strings.Contains(errOut, "xmin: WARN (10m) is above CRIT (1m)") {
		t.Errorf("WARN above CRIT: exit %d, %q", code, errOut)
	}
	code, _, errOut = statusMain(t, "status", "--dsn", dsn, "--consumer-lag-warn", "2h", "--consumer-lag-crit", "90m")
	if code != 2 || !strings.Contains(errOut, "consumer lag: WARN (2h) is above CRIT (1h30m)") {
		t.Errorf("consumer lag WARN above CRIT: exit %d, %q", code, errOut)
	}
}

// TestStatusJSONCarriesEveryField: with a queue, a consumer, a held
// snapshot, a daemon leader and a pg_cron job, -o json parses and carries
// every column the tables show.
func TestStatusJSONCarriesEveryField(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDB(t)
	conn := pgtest.Conn(t, dsn)
	statusExec(t, conn, `SELECT pgque.create_queue('orders')`)
	statusExec(t, conn, `SELECT pgque.subscribe('orders', 'billing')`)
	statusExec(t, conn, `SELECT pgque.send('orders', 'x'::text)`)
	statusExec(t, conn, `SELECT pgque.force_next_tick('orders')`)
	statusExec(t, conn, `SELECT pgque.ticker()`)
	holder := pgtest.Conn(t, dsn)
	statusExec(t, holder, `BEGIN ISOLATION LEVEL REPEATABLE READ`)
	statusExec(t, holder, `SELECT 1`)
	leader := pgtest.Conn(t, dsn)
	statusExec(t, leader, `SELECT pg_advisory_lock($1::int4, $2::int4)`, locks.ClassID, locks.TickerLeader)
	cronJobForTest(t, conn)

	code, out, errOut := statusMain(t, "status", "--dsn", dsn, "-o", "json", "--sample", "200ms")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	var r status.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("JSON does not parse into status.Report: %v\n%s", err, out)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatal(err)
	}
	first := func(path ...string) map[string]any {
		var cur any = m
		for _, p := range path {
			switch c := cur.(type) {
			case map[string]any:
				cur = c[p]
			case []any:
				if len(c) == 0 {
					t.Fatalf("%v: empty list at %s", path, p)
				}
				cur = c[0].(map[string]any)[p]
			}
		}
		if l, isList := cur.([]any); isList {
			if len(l) == 0 {
				t.Fatalf("%v: empty list", path)
			}
			cur = l[0]
		}
		obj, isObj := cur.(map[string]any)
		if !isObj {
			t.Fatalf("%v: %T, want an object", path, cur)
		}
		return obj
	}
	has := func(obj map[string]any, where string, keys ...string) {
		for _, k := range keys {
			if _, found := obj[k]; !found {
				t.Errorf("%s: no field %q in %v", where, k, obj)
			}
		}
	}
	// One line per table of the text output: its columns' fields.
	has(first("queues", "rows"), "queues", "queue_name", "level", "reason", "pending_events", "ev_new", "ev_per_sec",
		"ticker_lag_s", "expected_tick_every_s", "ticks_in_sample", "last_tick_id", "last_tick_time",
		"queue_rotation_period_s", "queue_switch_time", "since_rotation_s", "pinned_by", "pinned_by_lag_s",
		"queue_tick_period_ms", "queue_ticker_idle_period_s", "tick_lag_warn_at_s", "tick_lag_crit_at_s")
	has(first("engine"), "engine", "installed", "version", "meta_rotation_period_s", "last_meta_rotation", "level")
	has(first("consumers", "rows"), "consumers", "queue_name", "consumer_name", "level", "pending_events", "lag_s",
		"last_seen_s", "last_tick", "current_batch", "next_tick")
	has(first("bloat", "families"), "bloat families", "kind", "level", "tables", "live_tuples", "dead_tuples", "bound",
		"crit_at", "worst_table", "worst_dead", "size_bytes")
	has(first("bloat", "tables"), "bloat tables", "name", "kind", "live_tuples", "dead_tuples", "inserts", "updates",
		"deletes", "size_bytes", "autovacuum_off")
	has(first("wal"), "wal", "sampled", "ticks", "tick_bytes", "tick_share", "tick_wal_bytes_each", "level")
	has(first("wal", "rate"), "wal rate", "bytes", "bytes_per_sec", "seconds", "xids_per_sec", "records", "fpi")
	has(first("xmin", "backends"), "xmin backends", "xmin_holder", "pid", "user", "application", "database", "state",
		"backend_xmin", "backend_xid", "xact_age_s", "xmin_age_xids", "level", "reason")
	has(first("xmin"), "xmin", "slots", "prepared", "oldest", "hidden")
	has(first("cron", "daemon"), "ticker daemon", "pid", "granted", "user", "application", "client_addr", "backend_start")
	has(first("cron"), "cron", "settings", "access", "running", "running_verdict", "history", "ticking")
	if r.Cron.Settings.Loaded {
		has(first("cron", "jobs"), "cron jobs", "jobname", "level", "schedule", "active", "last_status",
			"since_last_start_s", "runs", "succeeded", "failed", "running", "interval_s")
	}
	has(first("notify"), "notify", "usage", "level")
	has(first("connections"), "connections", "total", "max_connections", "reserved_superuser", "share", "level")
	has(first("checks"), "checks", "section", "name", "level", "reason")
	has(first("thresholds"), "thresholds", "xmin_warn_s", "xmin_crit_s", "tick_dead_max", "subscription_dead_max")
	if th := first("thresholds"); th["xmin_warn_s"] != 60.0 {
		t.Errorf("thresholds in seconds: xmin_warn_s = %v", th["xmin_warn_s"])
	}
	if len(r.Queues.Rows) != 1 || len(r.Consumers.Rows) != 1 || len(r.Checks) == 0 || r.Summary == "" {
		t.Errorf("decoded report: %+v", r)
	}
}

// cronJobForTest registers a harmless, never-due job named like ours for
// the test database, when pg_cron is set up; removed at cleanup.
func cronJobForTest(t *testing.T, engine *pgx.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if !pgtest.HasCron(t) {
		return
	}
	server := pgtest.Conn(t, pgtest.Server(t))
	var dbName string
	if err := engine.QueryRow(ctx, `SELECT current_database()`).Scan(&dbName); err != nil {
		t.Fatal(err)
	}
	var id int64
	if err := server.QueryRow(ctx, `SELECT cron.schedule_in_database($1, '0 0 1 1 *', 'SELECT 1', $2)`,
		"pgque_maint@"+dbName, dbName).Scan(&id); err != nil { // a name of pgque.cron_job_names()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = server.Exec(ctx, `SELECT cron.unschedule($1::bigint)`, id)
	})
}

// tickerJobForTest registers, with pg_cron, a never-due ticker job named
// like ours for the test database (pgque_ticker@<db>, CALL
// pgque.ticker_loop()), and returns its id and a connection to the cron
// database; job and runs are removed at cleanup.
func tickerJobForTest(t *testing.T, engine *pgx.Conn) (int64, *pgx.Conn) {
	t.Helper()
	pgtest.RequireCron(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	server := pgtest.Conn(t, pgtest.Server(t))
	var dbName string
	if err := engine.QueryRow(ctx, `SELECT current_database()`).Scan(&dbName); err != nil {
		t.Fatal(err)
	}
	var id int64
	if err := server.QueryRow(ctx, `SELECT cron.schedule_in_database($1, '0 0 1 1 *', 'CALL pgque.ticker_loop()', $2)`,
		"pgque_ticker@"+dbName, dbName).Scan(&id); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = server.Exec(ctx, `SELECT cron.unschedule($1::bigint)`, id)
		_, _ = server.Exec(ctx, `DELETE FROM cron.job_run_details WHERE jobid = $1`, id)
	})
	return id, server
}

// partnerTickerJobForTest registers the never-due second ticker job
// (pgque_ticker_2@<db>) beside tickerJobForTest's: the engine's job set has
// two, and status warns of one alone (an outdated job set).
func partnerTickerJobForTest(t *testing.T, engine, server *pgx.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var id int64
	if err := server.QueryRow(ctx, `SELECT cron.schedule_in_database('pgque_ticker_2@' || $1, '0 0 1 1 *', 'CALL pgque.ticker_loop()', $1)`,
		engine.Config().Database).Scan(&id); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = server.Exec(ctx, `SELECT cron.unschedule($1::bigint)`, id)
	})
}

// Run rows written the way pg_cron 1.4 writes them (observed on this
// server with a job pointing at a port nothing listens on): a run that
// could not connect is 'failed', 'connection failed', with no start_time,
// end_time or job_pid.
const (
	sqlRunConnectionFailed = `INSERT INTO cron.job_run_details (jobid, runid, database, username, command, status, return_message)
	                          SELECT j.jobid, nextval('cron.runid_seq'), j.database, j.username, j.command, 'failed', 'connection failed'
	                            FROM cron.job j WHERE j.jobid = $1`
	sqlRunSucceeded = `INSERT INTO cron.job_run_details (jobid, runid, job_pid, database, username, command, status, return_message, start_time, end_time)
	                   SELECT j.jobid, nextval('cron.runid_seq'), 1, j.database, j.username, j.command, 'succeeded', 'CALL',
	                          now() - interval '20 seconds', now() - interval '1 second'
	                     FROM cron.job j WHERE j.jobid = $1`
)

// TestStatusCronConnectionFailedIsCrit: every run of the ticker job fails
// before it starts ("connection failed", no start_time): --check is CRIT
// (exit 2) naming the error, the job and ticking; it was OK before.
func TestStatusCronConnectionFailedIsCrit(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDB(t)
	conn := pgtest.Conn(t, dsn)
	id, cron := tickerJobForTest(t, conn)
	statusExec(t, cron, sqlRunSucceeded, id)
	if code, out, errOut := statusMain(t, "status", "--dsn", dsn, "--check", "--sample", "0"); code != 1 ||
		!strings.Contains(out, "WARN ticking: only one pg_cron ticker job") || !strings.Contains(out, "re-run pgquectl tick") {
		t.Fatalf("one ticker job (an outdated job set), one successful run: exit %d (want 1: re-run pgquectl tick), %q %q", code, out, errOut)
	}
	partnerTickerJobForTest(t, conn, cron)
	if code, out, errOut := statusMain(t, "status", "--dsn", dsn, "--check", "--sample", "0"); code != 0 {
		t.Fatalf("one successful run: exit %d, %q %q", code, out, errOut)
	}
	for range 3 {
		statusExec(t, cron, sqlRunConnectionFailed, id)
	}
	code, out, errOut := statusMain(t, "status", "--dsn", dsn, "--check", "--sample", "0")
	if code != 2 || !strings.HasPrefix(out, "PGQUE CRIT - ") {
		t.Fatalf("runs failing with connection failed: exit %d (want 2), %q %q", code, out, errOut)
	}
	for _, want := range []string{"CRIT cron job pgque_ticker@", "failing: 3 run(s) failed since the last success", "connection failed",
		"CRIT ticking: the pg_cron ticker job pgque_ticker@", "(cron.job nodename / nodeport)"} {
		if !strings.Contains(out, want) {
			t.Errorf("--check lacks %q:\n%s", want, out)
		}
	}
	// The table shows the failures counted in the window.
	_, out, _ = statusMain(t, "status", "--dsn", dsn, "--sample", "0", "-o", "json")
	var r status.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Cron.Jobs) != 2 || r.Cron.Jobs[0].Failed != 3 || r.Cron.Jobs[0].Runs != 4 || r.Cron.Jobs[0].FailedSinceSuccess != 3 {
		t.Errorf("job row: %+v", r.Cron.Jobs)
	}
}

// TestStatusCronAndDaemonBothTick: a pg_cron ticker job that runs and a
// ticker daemon leading at the same time → WARN; while the pg_cron loop
// holds its liveness lock, the daemon stands by → OK.
func TestStatusCronAndDaemonBothTick(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDB(t)
	conn := pgtest.Conn(t, dsn)
	id, cron := tickerJobForTest(t, conn)
	partnerTickerJobForTest(t, conn, cron)
	statusExec(t, cron, sqlRunSucceeded, id)
	leader := pgtest.Conn(t, dsn)
	statusExec(t, leader, `SELECT pg_advisory_lock($1::int4, $2::int4)`, locks.ClassID, locks.TickerLeader)
	code, out, errOut := statusMain(t, "status", "--dsn", dsn, "--check", "--sample", "0")
	if code != 1 || !strings.Contains(out, "WARN ticking: both pg_cron (job pgque_ticker@") ||
		!strings.Contains(out, fmt.Sprintf("ticker daemon (pid %d", leader.PgConn().PID())) {
		t.Fatalf("pg_cron and a daemon: exit %d (want 1), %q %q", code, out, errOut)
	}
	loop := pgtest.Conn(t, dsn)
	statusExec(t, loop, `SELECT pg_advisory_lock($1::int4, $2::int4)`, locks.ClassID, locks.TickerLoop)
	code, out, errOut = statusMain(t, "status", "--dsn", dsn, "--check", "--sample", "0")
	if code != 0 {
		t.Fatalf("daemon standing by for a live loop: exit %d (want 0), %q %q", code, out, errOut)
	}
	_, out, _ = statusMain(t, "status", "--dsn", dsn, "--sample", "0")
	if want := fmt.Sprintf("pg_cron loop alive (pid %d holds the loop lock); ticker daemon pid %d stands by", loop.PgConn().PID(), leader.PgConn().PID()); !strings.Contains(out, want) {
		t.Errorf("table lacks %q:\n%s", want, out)
	}
}

// TestStatusTickingDowntime: without a standby, status says how long the
// pg_cron loop was gone (the pause between two ticker runs) and whether it
// is alive now.
func TestStatusTickingDowntime(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDB(t)
	conn := pgtest.Conn(t, dsn)
	id, cron := tickerJobForTest(t, conn)
	// A loop killed at -100 s; pg_cron started the next one 47 s later.
	statusExec(t, cron, `INSERT INTO cron.job_run_details (jobid, runid, job_pid, database, username, command, status, return_message, start_time, end_time)
	                     SELECT j.jobid, nextval('cron.runid_seq'), 1, j.database, j.username, j.command, s.status, '', now() - s.st, now() - s.en
	                       FROM cron.job j,
	                            (VALUES ('failed', interval '160 seconds', interval '100 seconds'),
	                                    ('succeeded', interval '53 seconds', interval '1 second')) s (status, st, en)
	                      WHERE j.jobid = $1`, id)
	code, out, errOut := statusMain(t, "status", "--dsn", dsn, "--sample", "0", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var r status.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if r.Cron.LargestGap == nil || *r.Cron.LargestGap < 46.5 || *r.Cron.LargestGap > 47.5 || r.Cron.LoopAlive {
		t.Errorf("largest gap %v, loop alive %v; want 47 s, not alive", r.Cron.LargestGap, r.Cron.LoopAlive)
	}
	if !strings.Contains(r.Cron.Ticking.Reason, "longest pause between ticker runs in the last 10m: 47s") {
		t.Errorf("ticking: %+v", r.Cron.Ticking)
	}
}

// TestStatusMonitorRoleFullOK: a NOSUPERUSER LOGIN role with the grants
// docs/reference/status.md documents gets a full OK (exit 0) from --check on a
// healthy database that pg_cron ticks, although pg_cron's row-level
// security hides the superuser's jobs from it.
func TestStatusMonitorRoleFullOK(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for pg_cron's minute schedule to start the ticker")
	}
	t.Parallel()
	pgtest.RequireCron(t)
	dsn := pgtest.NewDB(t)
	conn := pgtest.Conn(t, dsn)
	if out, errOut, code := runMain(t, "tick", "--hz", "10", "--dsn", dsn); code != 0 {
		t.Fatalf("tick --hz 10: exit %d\n%s\n%s", code, out, errOut)
	}
	t.Cleanup(func() { runMain(t, "tick", "--off", "--dsn", dsn) })
	statusExec(t, conn, `SELECT pgque.create_queue('orders')`)
	statusExec(t, conn, `SELECT pgque.subscribe('orders', 'billing')`)

	// The documented grants (docs/reference/status.md, "Running as a non-superuser").
	role := fmt.Sprintf("status_monitor_%d", time.Now().UnixNano()%1_000_000_000)
	server := pgtest.Conn(t, pgtest.Server(t))
	statusExec(t, server, `CREATE ROLE `+role+` LOGIN NOSUPERUSER PASSWORD 'pw'`)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = server.Exec(ctx, `REVOKE ALL ON SCHEMA cron FROM `+role)
		_, _ = server.Exec(ctx, `DROP ROLE `+role)
	})
	for _, g := range []string{`GRANT pg_monitor TO ROLE`, `GRANT pgque_reader TO ROLE`} {
		statusExec(t, server, strings.ReplaceAll(g, "ROLE", role))
	}
	statusExec(t, server, `GRANT USAGE ON SCHEMA cron TO `+role)
	monitorDSN := asUser(t, dsn, role, "pw")

	// Wait until pg_cron's loop ticks an event through (its next minute).
	statusExec(t, conn, `SELECT pgque.send('orders', 'x'::text)`)
	deadline := time.Now().Add(100 * time.Second)
	for {
		var waiting int64
		if err := conn.QueryRow(t.Context(), `SELECT ev_new FROM pgque.get_queue_info('orders')`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("pg_cron did not tick within 100 s")
		}
		time.Sleep(time.Second)
	}
	code, out, errOut := statusMain(t, "status", "--dsn", monitorDSN, "--check", "--sample", "100ms")
	if code != 0 || !strings.HasPrefix(out, "PGQUE OK - ") {
		t.Fatalf("monitor role with the documented grants: exit %d (want 0)\n%s%s", code, out, errOut)
	}
	_, out, _ = statusMain(t, "status", "--dsn", monitorDSN, "--sample", "0")
	if !strings.Contains(out, "user "+role) {
		t.Errorf("not run as %s:\n%s", role, out)
	}
}

// asUser rewrites a postgres:// URL to log in as user.
func asUser(t *testing.T, dsn, user, password string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(user, password)
	return u.String()
}

// TestStatusJSONNoNullsAndVersion: on a fresh install (no queues, slots,
// prepared transactions, problems) every list in -o json is an array, never
// null, so `jq '.xmin.slots[]'` works; the report carries schema_version 1.
func TestStatusJSONNoNullsAndVersion(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDB(t)
	code, out, errOut := statusMain(t, "status", "--dsn", dsn, "-o", "json", "--sample", "0")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if strings.Contains(out, "null") {
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, ": null") {
				t.Logf("null: %s", strings.TrimSpace(line))
			}
		}
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatal(err)
	}
	if m["schema_version"] != 1.0 {
		t.Errorf("schema_version = %v, want 1", m["schema_version"])
	}
	for _, path := range [][]string{{"xmin", "slots"}, {"xmin", "prepared"}, {"queues", "rows"}, {"consumers", "rows"},
		{"queues", "problems"}, {"engine", "problems"}, {"cron", "daemon"}, {"cron", "loop"}, {"wal", "problems"}} {
		var cur any = m
		for _, p := range path {
			cur = cur.(map[string]any)[p]
		}
		if l, isList := cur.([]any); !isList || len(l) != 0 {
			t.Errorf("%s = %#v, want []", strings.Join(path, "."), cur)
		}
	}
}

// TestStatusTableWidth: the default tables fit 120 columns (with a 24-char
// queue, a 16-char consumer, a held snapshot and pg_cron jobs); -o wide
// shows every column.
func TestStatusTableWidth(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDB(t)
	conn := pgtest.Conn(t, dsn)
	const queue, consumer = "orders_from_the_webshop1", "billing_service1"
	statusExec(t, conn, `SELECT pgque.create_queue($1)`, queue)
	statusExec(t, conn, `SELECT pgque.subscribe($1, $2)`, queue, consumer)
	statusExec(t, conn, `SELECT pgque.send($1, 'x'::text)`, queue)
	statusExec(t, conn, `SELECT pgque.force_next_tick($1)`, queue)
	statusExec(t, conn, `SELECT pgque.ticker()`)
	holder := pgtest.Conn(t, dsn)
	statusExec(t, holder, `SET application_name = 'a reporting job, long name'`)
	statusExec(t, holder, `BEGIN ISOLATION LEVEL REPEATABLE READ`)
	statusExec(t, holder, `SELECT 1`)
	cronJobForTest(t, conn)

	isNote := regexp.MustCompile(`^  (OK|WARN|CRIT|UNKNOWN) +\S`)
	_, out, errOut := statusMain(t, "status", "--dsn", dsn, "--sample", "100ms")
	for _, line := range strings.Split(out, "\n") {
		if n := utf8.RuneCountInString(line); n > 120 && !isNote.MatchString(line) && !strings.HasPrefix(line, "PGQUE ") {
			t.Errorf("table line of %d columns:\n%s", n, line)
		}
	}
	for _, want := range []string{"QUEUES", queue, consumer, "PENDING", "LAST TICK", "PINNED BY", "XMIN HORIZON"} {
		if !strings.Contains(out, want) {
			t.Errorf("default table lacks %q:\n%s%s", want, out, errOut)
		}
	}
	_, wide, _ := statusMain(t, "status", "--dsn", dsn, "--sample", "100ms", "-o", "wide")
	for _, want := range []string{"EV/S", "TICK ID", "META ROTATION EVERY / LAST", "OPEN BATCH", "APPLICATION", "a reporting job, long name", "FULL PAGES"} {
		if !strings.Contains(wide, want) {
			t.Errorf("-o wide lacks %q:\n%s", want, wide)
		}
		if strings.Contains(out, want) {
			t.Errorf("the default table shows the wide-only %q", want)
		}
	}
}

// TestStatusTickGap: a busy queue's ticks 30 s apart (a ticker daemon that
// was down, no pg_cron history to tell) are reported from the tick rows.
func TestStatusTickGap(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDB(t)
	conn := pgtest.Conn(t, dsn)
	statusExec(t, conn, `SELECT pgque.create_queue('busy')`)
	for range 2 {
		statusExec(t, conn, `SELECT pgque.send('busy', 'x'::text)`)
		statusExec(t, conn, `SELECT pgque.force_next_tick('busy')`)
		statusExec(t, conn, `SELECT pgque.ticker()`)
	}
	// Move every tick but the newest 30 s back: the pause before the newest.
	statusExec(t, conn, `UPDATE pgque.tick SET tick_time = tick_time - interval '30 seconds'
	                      WHERE tick_id < (SELECT max(tick_id) FROM pgque.tick)`)
	code, out, errOut := statusMain(t, "status", "--dsn", dsn, "--sample", "0", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var r status.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if g := r.Cron.TickGap; g == nil || g.Queue != "busy" || g.Gap < 30 || g.Gap > 31 {
		t.Fatalf("tick gap %+v, want queue busy, 30 s", g)
	}
	if !strings.Contains(r.Cron.Ticking.Reason, "longest pause between ticks of a busy queue in the kept tick rows: 30") {
		t.Errorf("ticking: %+v", r.Cron.Ticking)
	}
}
