package main

import (
	"strings"
	"testing"

	"github.com/pgquectl/pgquectl/internal/install"
	"github.com/pgquectl/pgquectl/internal/pgtest"
)

// TestInstallCommands: install, install again (no-op), version shows the
// installed engine, uninstall --dry-run changes nothing, uninstall.
func TestInstallCommands(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewEmptyDB(t)

	out, errOut, code := runMain(t, "version", "--dsn", dsn)
	if code != 0 || !strings.Contains(out, "engine    "+install.Version) || !strings.Contains(out, "not installed") {
		t.Errorf("version before install (exit %d):\n%s%s", code, out, errOut)
	}

	out, errOut, code = runMain(t, "install", "--dry-run", "--dsn", dsn)
	if code != 0 || !strings.Contains(out, "-- file: ") || !strings.Contains(errOut, "dry run") {
		t.Errorf("install --dry-run (exit %d): stderr %q", code, errOut)
	}
	out, _, _ = runMain(t, "version", "--dsn", dsn)
	if !strings.Contains(out, "not installed") {
		t.Errorf("dry run installed something:\n%s", out)
	}

	out, errOut, code = runMain(t, "install", "--dsn", dsn)
	if code != 0 || !strings.Contains(out, "installed pgque engine "+install.Version) {
		t.Fatalf("install (exit %d):\n%s%s", code, out, errOut)
	}
	out, _, code = runMain(t, "install", "--dsn", dsn)
	if code != 0 || !strings.Contains(out, "nothing to do") {
		t.Errorf("second install (exit %d):\n%s", code, out)
	}
	out, _, code = runMain(t, "install", "--reinstall", "--dsn", dsn)
	if code != 0 || !strings.Contains(out, "reinstalled") {
		t.Errorf("install --reinstall (exit %d):\n%s", code, out)
	}
	out, _, code = runMain(t, "version", "--dsn", dsn)
	if code != 0 || !strings.Contains(out, "database  "+install.Version+" installed") {
		t.Errorf("version after install (exit %d):\n%s", code, out)
	}

	pgtest.Exec(t, dsn, `SELECT pgque.create_queue('q')`)
	pgtest.Exec(t, dsn, `SELECT pgque.subscribe('q', 'c')`)
	pgtest.Exec(t, dsn, `SELECT pgque.send('q', 'x')`)
	pgtest.Exec(t, dsn, `SELECT pgque.force_next_tick('q')`)
	pgtest.Exec(t, dsn, `SELECT pgque.ticker()`)
	_, errOut, code = runMain(t, "uninstall", "--dsn", dsn)
	if code == 0 || !strings.Contains(errOut, "--force") {
		t.Errorf("uninstall with a pending event (exit %d): %s", code, errOut)
	}
	out, errOut, code = runMain(t, "uninstall", "--force", "--dry-run", "--dsn", dsn)
	if code != 0 || !strings.Contains(out, "DROP SCHEMA") {
		t.Errorf("uninstall --dry-run (exit %d):\n%s%s", code, out, errOut)
	}
	out, errOut, code = runMain(t, "uninstall", "--force", "--dsn", dsn)
	if code != 0 || !strings.Contains(out, "removed the pgque engine") {
		t.Fatalf("uninstall --force (exit %d):\n%s%s", code, out, errOut)
	}
	out, _, _ = runMain(t, "version", "--dsn", dsn)
	if !strings.Contains(out, "not installed") {
		t.Errorf("engine still there after uninstall:\n%s", out)
	}
}

// TestInstallErrors: an unreachable server fails with advice, exit 1.
func TestInstallErrors(t *testing.T) {
	t.Parallel()
	_, errOut, code := runMain(t, "install", "--dsn", "postgres://x@127.0.0.1:1/x?sslmode=disable", "--connect-timeout", "2s")
	if code != 1 || !strings.Contains(errOut, "unreachable") || !strings.Contains(errOut, "check that PostgreSQL is running") {
		t.Errorf("install on an unreachable server: exit %d, %q", code, errOut)
	}
}

// TestInstallDryRunOffline: install --dry-run needs no database: with none
// reachable it prints the whole install script (exit 0), and that script
// installs the engine.
func TestInstallDryRunOffline(t *testing.T) {
	t.Parallel()
	out, errOut, code := runMain(t, "install", "--dry-run", "--dsn", "postgres://nobody@127.0.0.1:1/none?sslmode=disable")
	if code != 0 || !strings.Contains(out, "-- file: ") || !strings.Contains(errOut, "no database reached") {
		t.Fatalf("offline install --dry-run: exit %d, stderr %q", code, errOut)
	}
	dsn := pgtest.NewEmptyDB(t)
	conn := pgtest.Conn(t, dsn)
	if _, err := conn.Exec(t.Context(), "BEGIN;\n"+out+"\nCOMMIT;"); err != nil {
		t.Fatalf("the offline script does not install: %v", err)
	}
	out, _, code = runMain(t, "version", "--dsn", dsn)
	if code != 0 || !strings.Contains(out, "database  "+install.Version+" installed") {
		t.Errorf("version after running the offline script (exit %d):\n%s", code, out)
	}
}
