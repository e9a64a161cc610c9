package sql_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	enginesql "github.com/pgquectl/pgquectl/sql"
)

// lockLiteral matches an advisory-lock id written as a number: the engine's
// key range ('pgqu' = 0x70677175 = 1885827445 and the classes above it), a
// lock function called with a number first, or pg_locks' classid / objid
// compared with a number.
var lockLiteral = regexp.MustCompile(`(?i)\b18858274[0-9]{2}\b|0x706771|advisory_\w*lock\w*\(\s*[0-9]|\b(classid|objid)(::\w+)?\s*(=|OPERATOR\(pg_catalog\.=\))\s*[0-9]`)

// bootstrapLock is the one statement allowed to keep numbers: the install
// lock of 000_preamble.sql (nothing exists yet) and uninstall.sql (the schema
// may be gone). TestLockIDsHaveOneHome checks its numbers against the home.
var bootstrapLock = regexp.MustCompile(`(pg_catalog\.)?pg_advisory_xact_lock\((\d+), (\d+)\)`)

// TestLockIDsHaveOneHome fails when an advisory-lock id is written as a
// number outside sql/engine/040_lock_ids.sql (and internal/locks for Go):
// every engine file takes and reads its locks through pgque.lock_id_*().
func TestLockIDsHaveOneHome(t *testing.T) {
	e := setup(t)
	var class, install string
	if err := e.conn.QueryRow(ctxT(t), `SELECT pgque.lock_id_class()::text, pgque.lock_id_install()::text`).Scan(&class, &install); err != nil {
		t.Fatal(err)
	}
	bootstrap := map[string]bool{"engine/000_preamble.sql": true, "uninstall/uninstall.sql": true}
	for _, name := range manifestPaths(t) {
		if name == "engine/040_lock_ids.sql" {
			continue
		}
		b, err := fs.ReadFile(enginesql.FS, name)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for n, line := range strings.Split(string(b), "\n") {
			if bootstrap[name] {
				if m := bootstrapLock.FindStringSubmatch(line); m != nil {
					found = true
					if m[2] != class || m[3] != install {
						t.Errorf("sql/%s:%d: install lock (%s, %s), the home says (%s, %s)", name, n+1, m[2], m[3], class, install)
					}
					continue
				}
				if strings.HasPrefix(strings.TrimSpace(line), "--") {
					continue // the preamble's comment explains the number
				}
			}
			if lockLiteral.MatchString(line) {
				t.Errorf("sql/%s:%d: a lock id written as a number; use pgque.lock_id_*() (040_lock_ids.sql): %s", name, n+1, strings.TrimSpace(line))
			}
		}
		if bootstrap[name] && !found {
			t.Errorf("sql/%s: no install lock found", name)
		}
	}
	goLiteral := regexp.MustCompile(`\b18858274[0-9]{2}\b|0x706771`)
	for _, dir := range []string{"../cmd", "../internal", "../bench", "../scripts"} {
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			if filepath.ToSlash(filepath.Dir(p)) == "../internal/locks" {
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for n, line := range strings.Split(string(b), "\n") {
				if goLiteral.MatchString(line) {
					t.Errorf("%s:%d: a lock id written as a number; use internal/locks: %s", strings.TrimPrefix(p, "../"), n+1, strings.TrimSpace(line))
				}
			}
			return nil
		})
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
}

// TestLockIDsFoldToConstants: the lock-id functions are inlinable
// constants (STABLE plain SQL, no SET clause, no SECURITY DEFINER), so a
// plan holds the number itself and a call costs nothing.
func TestLockIDsFoldToConstants(t *testing.T) {
	e := setup(t)
	if n := e.int64(`SELECT count(*) FROM pg_proc p
	                  WHERE p.pronamespace = 'pgque'::regnamespace AND p.proname ~ '^lock_id_'
	                    AND NOT (p.provolatile = 's' AND NOT p.prosecdef AND p.proconfig IS NULL AND p.pronargs = 0
	                             AND p.prolang = (SELECT oid FROM pg_language WHERE lanname = 'sql'))`); n != 0 {
		t.Errorf("%d lock-id functions are not inlinable STABLE SQL constants", n)
	}
	rows, err := e.conn.Query(ctxT(t), `EXPLAIN (VERBOSE, COSTS OFF)
		SELECT l.pid FROM pg_catalog.pg_locks l
		 WHERE l.locktype = 'advisory' AND l.classid = pgque.lock_id_class()::oid
		   AND l.objid = pgque.lock_id_ticking()::oid`)
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
	if p := plan.String(); strings.Contains(p, "lock_id") || !strings.Contains(p, "1885827445") || !strings.Contains(p, "'6'") {
		t.Errorf("the plan does not hold the constants:\n%s", p)
	}
}

// manifestPaths returns every file manifest.txt names (install, then
// uninstall), relative to sql/: the SQL the one-home checks read.
func manifestPaths(t *testing.T) []string {
	t.Helper()
	entries, err := enginesql.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		out = append(out, e.Path)
	}
	return out
}
