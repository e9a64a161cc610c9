package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

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
	if code != 2 || !strings.Contains(errOut, "table or json") {
		t.Errorf("-o xml: exit %d, %q", code, errOut)
	}
	code, _, errOut = statusMain(t, "status", "--dsn", dsn, "--xmin-warn", "10m", "--xmin-crit", "1m")
	if code != 2 || !strings.Contains(errOut, "xmin: WARN") {
		t.Errorf("WARN above CRIT: exit %d, %q", code, errOut)
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
		"pgque_json_test@"+dbName, dbName).Scan(&id); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = server.Exec(ctx, `SELECT cron.unschedule($1::bigint)`, id)
	})
}
