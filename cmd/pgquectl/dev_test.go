package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/pgquectl/pgquectl/internal/install"
	"github.com/pgquectl/pgquectl/internal/pgtest"
)

// runMain runs Main with args and returns stdout, stderr and the exit code.
func runMain(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Main(args, &out, &errOut)
	return out.String(), errOut.String(), code
}

// reachableTempDir is a temp dir the postgres user can enter (t.TempDir is
// 0700 and, as root, PostgreSQL runs as postgres).
func reachableTempDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

var exportLine = regexp.MustCompile(`export PGQUE_DSN='([^']+)'`)

// TestDev: bring-up, a second run is a no-op with the same DSN, the DSN
// serves the engine, status, stop, status (exit 3), destroy.
func TestDev(t *testing.T) {
	t.Parallel()
	state := filepath.Join(reachableTempDir(t), "dev")
	t.Cleanup(func() { runMain(t, "dev", "destroy", "--state-dir", state) })

	out, errOut, code := runMain(t, "dev", "--state-dir", state, "--fast")
	if code != 0 {
		t.Fatalf("dev: exit %d\n%s\n%s", code, out, errOut)
	}
	m := exportLine.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("dev printed no DSN:\n%s", out)
	}
	dsn := m[1]
	for _, want := range []string{"started", `database "pgque" created`, "installed pgque engine " + install.Version} {
		if !strings.Contains(out, want) {
			t.Errorf("first dev output lacks %q:\n%s", want, out)
		}
	}

	out2, errOut, code := runMain(t, "dev", "--state-dir", state)
	if code != 0 {
		t.Fatalf("second dev: exit %d\n%s\n%s", code, out2, errOut)
	}
	if m2 := exportLine.FindStringSubmatch(out2); m2 == nil || m2[1] != dsn {
		t.Errorf("second dev printed another DSN:\n%s", out2)
	}
	for _, want := range []string{"already running", "exists", "nothing to do"} {
		if !strings.Contains(out2, want) {
			t.Errorf("second dev output lacks %q:\n%s", want, out2)
		}
	}

	conn := pgtest.Conn(t, dsn)
	var v string
	if err := conn.QueryRow(t.Context(), `SELECT pgque.version()`).Scan(&v); err != nil || v != install.Version {
		t.Fatalf("engine in the dev database: %q, %v", v, err)
	}
	conn.Close(t.Context())

	out, _, code = runMain(t, "dev", "dsn", "--state-dir", state)
	if code != 0 || strings.TrimSpace(out) != dsn {
		t.Errorf("dev dsn = %q (exit %d), want %q", out, code, dsn)
	}
	out, _, code = runMain(t, "dev", "status", "--state-dir", state)
	if code != 0 || !strings.Contains(out, "running") || !strings.Contains(out, "engine      "+install.Version) {
		t.Errorf("dev status (exit %d):\n%s", code, out)
	}
	if _, errOut, code := runMain(t, "dev", "stop", "--state-dir", state); code != 0 {
		t.Fatalf("dev stop: exit %d: %s", code, errOut)
	}
	out, _, code = runMain(t, "dev", "status", "--state-dir", state)
	if code != exitNotRunning || !strings.Contains(out, "stopped") {
		t.Errorf("dev status after stop (exit %d):\n%s", code, out)
	}
	if _, errOut, code := runMain(t, "dev", "destroy", "--state-dir", state); code != 0 {
		t.Fatalf("dev destroy: exit %d: %s", code, errOut)
	}
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Errorf("state dir still there after destroy: %v", err)
	}
	_, errOut, code = runMain(t, "dev", "status", "--state-dir", state)
	if code != exitNotRunning || !strings.Contains(errOut, "pgquectl dev") {
		t.Errorf("dev status without a cluster: exit %d, %q", code, errOut)
	}
}

func TestDevUsage(t *testing.T) {
	t.Parallel()
	_, errOut, code := runMain(t, "dev", "--state-dir", "")
	if code != exitUsage {
		t.Errorf("empty --state-dir: exit %d (%s)", code, errOut)
	}
	_, errOut, code = runMain(t, "dev", "--port", "70000", "--state-dir", t.TempDir())
	if code != exitUsage {
		t.Errorf("--port 70000: exit %d (%s)", code, errOut)
	}
}
