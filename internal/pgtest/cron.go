package pgtest

import (
	"context"
	"os"
	"testing"
	"time"
)

// EnvRequireCron set to 1 turns "pg_cron is not available" from a skip into
// a test failure. CI sets it for the server that must carry pg_cron (Debian
// PostgreSQL 15), so a broken pg_cron setup cannot pass as skipped tests.
const EnvRequireCron = "PGQUE_REQUIRE_CRON"

// sqlCronReady: pg_cron is preloaded and its extension exists in the
// database this connection reaches (the shared server's postgres database,
// which is cron.database_name for the test clusters).
const sqlCronReady = `SELECT current_setting('shared_preload_libraries') ~ '(^|[ ,])pg_cron($|[ ,])'
                         AND to_regclass('cron.job') IS NOT NULL`

// RequireCron returns the superuser DSN of the shared server's database
// that holds pg_cron, or skips the test when pg_cron is absent there. With
// PGQUE_REQUIRE_CRON=1 an absent pg_cron fails the test instead.
func RequireCron(t testing.TB) string {
	t.Helper()
	server, reason := cronServer(t)
	if reason == "" {
		return server
	}
	t.Skip(reason)
	return ""
}

// HasCron tells whether pg_cron is set up on the shared server (as
// RequireCron sees it), for a test that exercises pg_cron in one part only
// and runs the rest without it. With PGQUE_REQUIRE_CRON=1 an absent pg_cron
// fails the test.
func HasCron(t testing.TB) bool {
	t.Helper()
	_, reason := cronServer(t)
	if reason != "" {
		t.Logf("%s: the pg_cron part of this test is not exercised", reason)
	}
	return reason == ""
}

// cronServer returns the server DSN, or why pg_cron is not usable there
// (failing the test instead when PGQUE_REQUIRE_CRON=1).
func cronServer(t testing.TB) (string, string) {
	t.Helper()
	server := Server(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn := Conn(t, server)
	var ready bool
	err := conn.QueryRow(ctx, sqlCronReady).Scan(&ready)
	if err == nil && ready {
		return server, ""
	}
	reason := "pg_cron is not preloaded, or its extension is missing, on the test server"
	if err != nil {
		reason += " (" + err.Error() + ")"
	}
	if os.Getenv(EnvRequireCron) == "1" {
		t.Fatalf("%s, and %s=1 says it must be there", reason, EnvRequireCron)
	}
	return server, reason
}
