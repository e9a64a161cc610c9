package sql_test

import (
	"io/fs"
	"regexp"
	"strings"
	"testing"

	"github.com/pgquectl/pgquectl/internal/broker"
	enginesql "github.com/pgquectl/pgquectl/sql"
)

// sqlComment is a line comment (the engine's files use no /* */ blocks
// around code that names the group).
var sqlComment = regexp.MustCompile(`--.*$`)

// TestQueueModeGroupHasOneHome fails when the queue-mode group's name is
// written outside sql/engine/045_queue_mode.sql (comments may name it):
// every engine file names it through pgque.queue_mode_group() or
// pgque.group_name_or_default(). It also checks the home against Go's,
// broker.QueueMode (whose one-home check is in internal/queuekey).
func TestQueueModeGroupHasOneHome(t *testing.T) {
	e := setup(t)
	var name, empty, null, named string
	if err := e.conn.QueryRow(ctxT(t), `SELECT pgque.queue_mode_group(), pgque.group_name_or_default(''),
	        pgque.group_name_or_default(NULL), pgque.group_name_or_default('g')`).Scan(&name, &empty, &null, &named); err != nil {
		t.Fatal(err)
	}
	if name != broker.QueueMode || empty != name || null != name || named != "g" {
		t.Errorf("queue_mode_group() = %q (Go: %q); group_name_or_default: '' → %q, NULL → %q, 'g' → %q",
			name, broker.QueueMode, empty, null, named)
	}
	for _, dir := range []string{"engine", "broker", "procedures", "uninstall"} {
		names, err := fs.Glob(enginesql.FS, dir+"/*.sql")
		if err != nil {
			t.Fatal(err)
		}
		for _, file := range names {
			if file == "engine/045_queue_mode.sql" {
				continue
			}
			b, err := fs.ReadFile(enginesql.FS, file)
			if err != nil {
				t.Fatal(err)
			}
			for n, line := range strings.Split(string(b), "\n") {
				if strings.Contains(sqlComment.ReplaceAllString(line, ""), broker.QueueMode) {
					t.Errorf("sql/%s:%d: the queue-mode group written as a literal; use pgque.queue_mode_group() or pgque.group_name_or_default() (045_queue_mode.sql): %s",
						file, n+1, strings.TrimSpace(line))
				}
			}
		}
	}
}

// TestQueueModeGroupFoldsToConstant: the two functions are inlinable
// (STABLE plain SQL, no SET clause, not SECURITY DEFINER), so a plan holds
// the group's name itself; queue_depth's default argument names the home.
func TestQueueModeGroupFoldsToConstant(t *testing.T) {
	e := setup(t)
	if n := e.int64(`SELECT count(*) FROM pg_proc p
	                  WHERE p.pronamespace = 'pgque'::regnamespace AND p.proname IN ('queue_mode_group', 'group_name_or_default')
	                    AND p.provolatile = 's' AND NOT p.prosecdef AND p.proconfig IS NULL
	                    AND p.prolang = (SELECT oid FROM pg_language WHERE lanname = 'sql')`); n != 2 {
		t.Errorf("%d of the 2 queue-mode functions are inlinable STABLE SQL", n)
	}
	rows, err := e.conn.Query(ctxT(t), `EXPLAIN (VERBOSE, COSTS OFF)
		SELECT g.grp_id FROM pgque.broker_group g
		 WHERE g.grp_name = pgque.group_name_or_default($1) OR g.grp_name <> pgque.queue_mode_group()`, "")
	if err != nil {
		t.Fatal(err)
	}
	var plan strings.Builder
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan.WriteString(line + "\n")
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if p := plan.String(); strings.Contains(p, "queue_mode_group") || strings.Contains(p, "group_name_or_default") || !strings.Contains(p, broker.QueueMode) {
		t.Errorf("the plan does not hold the constant:\n%s", p)
	}
	var args string
	if err := e.conn.QueryRow(ctxT(t), `SELECT pg_get_function_arguments('pgque.queue_depth(text, text)'::regprocedure)`).Scan(&args); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(args, "DEFAULT pgque.queue_mode_group()") {
		t.Errorf("queue_depth's arguments: %s", args)
	}
}
