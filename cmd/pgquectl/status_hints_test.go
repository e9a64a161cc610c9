package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pgquectl/pgquectl/internal/pgtest"
	"github.com/pgquectl/pgquectl/internal/status"
)

// sqlInHint finds the SQL statements a hint prints: SELECT of a function
// call (string literals with doubled quotes inside), GRANT ... TO role,
// COMMIT / ROLLBACK PREPARED 'gid'.
var sqlInHint = regexp.MustCompile(`SELECT [a-z_.]+\((?:[^()']|'(?:[^']|'')*')*\)` +
	`|GRANT [A-Za-z_ ]+ TO (?:"(?:[^"]|"")*"|[a-z_][a-z_0-9]*)` +
	`|(?:COMMIT|ROLLBACK) PREPARED '(?:[^']|'')*'`)

// TestStatusHintsExecute: every SQL statement status prints as a fix runs
// as printed, with names that need quoting (a queue o'dd "q", a consumer
// c'x, a role Mon"itor): literals where literals belong, identifiers
// quoted as identifiers.
func TestStatusHintsExecute(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDB(t)
	conn := pgtest.Conn(t, dsn)
	const queue, consumer = `o'dd "q"`, `c'x`
	statusExec(t, conn, `SELECT pgque.create_queue($1)`, queue)
	statusExec(t, conn, `SELECT pgque.subscribe($1, $2)`, queue, consumer)
	statusExec(t, conn, `SELECT pgque.send($1, 'x'::text)`, queue)
	statusExec(t, conn, `SELECT pgque.force_next_tick($1)`, queue)
	statusExec(t, conn, `SELECT pgque.ticker()`)
	statusExec(t, conn, `SELECT pgque.set_queue_config($1, 'ticker_paused', 'true')`, queue)
	holder := pgtest.Conn(t, dsn)
	statusExec(t, holder, `BEGIN ISOLATION LEVEL REPEATABLE READ`)
	statusExec(t, holder, `SELECT 1`)
	time.Sleep(20 * time.Millisecond)

	// A role whose name needs quoting, without grants: the grant hints.
	role := fmt.Sprintf(`Mon"itor%d`, time.Now().UnixNano()%1_000_000)
	ident := `"` + strings.ReplaceAll(role, `"`, `""`) + `"`
	server := pgtest.Conn(t, pgtest.Server(t))
	statusExec(t, server, `CREATE ROLE `+ident+` LOGIN PASSWORD 'pw'`)
	t.Cleanup(func() {
		_, _ = server.Exec(t.Context(), `DO $$BEGIN IF to_regnamespace('cron') IS NOT NULL THEN EXECUTE 'REVOKE ALL ON SCHEMA cron FROM `+strings.ReplaceAll(ident, "'", "''")+`'; END IF; END$$`)
		_, _ = server.Exec(t.Context(), `REVOKE pg_monitor, pgque_reader FROM `+ident)
		_, _ = server.Exec(t.Context(), `DROP ROLE `+ident)
	})

	var hints []string
	for _, d := range []string{dsn, asUser(t, dsn, role, "pw")} {
		_, out, errOut := statusMain(t, "status", "--dsn", d, "-o", "json", "--sample", "0",
			"--xmin-warn", "1ms", "--xmin-crit", "1h", "--consumer-lag-warn", "1ms", "--consumer-lag-crit", "2ms")
		var r status.Report
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("%v\n%s%s", err, out, errOut)
		}
		for _, c := range r.Checks {
			hints = append(hints, c.Reason)
		}
		for _, ps := range [][]status.Problem{r.Engine.Problems, r.Queues.Problems, r.Consumers.Problems, r.Xmin.Problems, r.Cron.Problems} {
			for _, p := range ps {
				hints = append(hints, p.Fix)
			}
		}
	}
	seen := map[string]bool{}
	for _, h := range hints {
		for _, stmt := range sqlInHint.FindAllString(h, -1) {
			if seen[stmt] {
				continue
			}
			seen[stmt] = true
			on := conn
			if strings.Contains(stmt, "ON SCHEMA cron") {
				on = server // "in database postgres: GRANT USAGE ON SCHEMA cron ..."
			}
			if _, err := on.Exec(t.Context(), stmt); err != nil {
				t.Errorf("hint %q: %s fails: %v", h, stmt, err)
			}
		}
	}
	for _, want := range []string{
		`SELECT pgque.set_queue_config('o''dd "q"', 'ticker_paused', 'false')`,
		`SELECT pgque.unsubscribe('o''dd "q"', 'c''x')`,
		`GRANT pgque_reader TO ` + ident,
		`GRANT pg_monitor TO ` + ident,
		fmt.Sprintf(`SELECT pg_terminate_backend(%d)`, holder.PgConn().PID()),
	} {
		if !seen[want] {
			t.Errorf("no hint printed %s; hints:\n%s", want, strings.Join(hints, "\n"))
		}
	}
	if t.Failed() {
		return
	}
	// The statements did what they say: the queue ticks again, the
	// consumer is gone, the role may read.
	var paused bool
	if err := conn.QueryRow(t.Context(), `SELECT queue_ticker_paused FROM pgque.get_queue_info($1)`, queue).Scan(&paused); err != nil || paused {
		t.Errorf("still paused after the hint: %v %v", paused, err)
	}
	var subs int
	if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM pgque.get_consumer_info($1)`, queue).Scan(&subs); err != nil || subs != 0 {
		t.Errorf("%d consumers after unsubscribe: %v", subs, err)
	}
}

// TestTickQueueHintExecutes: `tick --queue` naming a missing queue prints
// the create_queue call that creates it, and that call runs as printed.
func TestTickQueueHintExecutes(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDB(t)
	const queue = `new 'q"`
	_, errOut, code := runMain(t, "tick", "--hz", "10", "--queue", queue, "--dry-run", "--dsn", dsn)
	stmts := sqlInHint.FindAllString(errOut, -1)
	if code == 0 || len(stmts) != 1 || !strings.Contains(stmts[0], "pgque.create_queue(") {
		t.Fatalf("tick --queue on a missing queue: exit %d, statements %q in %q", code, stmts, errOut)
	}
	conn := pgtest.Conn(t, dsn)
	if _, err := conn.Exec(t.Context(), stmts[0]); err != nil {
		t.Fatalf("%s fails: %v", stmts[0], err)
	}
	var n int
	if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM pgque.get_queue_info($1)`, queue).Scan(&n); err != nil || n != 1 {
		t.Errorf("queue %s after the hint: %d, %v", queue, n, err)
	}
}
