package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
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
	// dev has no --reinstall: its advice must name a command that has it.
	if strings.Contains(out2, "use --reinstall") {
		t.Errorf("second dev advises a flag dev lacks:\n%s", out2)
	}
	for _, want := range []string{"already running", "exists", "already installed", "pgquectl install --reinstall --dsn"} {
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

// freeTCPPort returns a port nothing listens on right now.
func freeTCPPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// statePort reads the port recorded in the dev state directory.
func statePort(t *testing.T, state string) int {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(state, "localpg.json"))
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Port int `json:"port"`
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		t.Fatal(err)
	}
	return st.Port
}

// cronJobPorts returns nodeport -> number of jobs in the dev cluster's pg_cron.
func cronJobPorts(t *testing.T, cronDSN string) map[int]int {
	t.Helper()
	conn := pgtest.Conn(t, cronDSN)
	defer conn.Close(context.Background())
	rows, err := conn.Query(t.Context(), `SELECT nodeport, count(*) FROM cron.job GROUP BY nodeport`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]int{}
	for rows.Next() {
		var port, n int
		if err := rows.Scan(&port, &n); err != nil {
			t.Fatal(err)
		}
		out[port] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDevPortRefusedChangesNothing: `dev --port N` while the cluster runs on
// another port is refused and changes nothing (state file, dev dsn); after
// `dev stop` a new --port is taken and every pg_cron job follows it; `tick
// --off` survives the next `dev` (registered once).
func TestDevPortRefusedChangesNothing(t *testing.T) {
	t.Parallel()
	pgtest.RequireCron(t) // the dev cluster preloads the same pg_cron build
	state := filepath.Join(reachableTempDir(t), "dev")
	t.Cleanup(func() { runMain(t, "dev", "destroy", "--state-dir", state) })

	out, errOut, code := runMain(t, "dev", "--state-dir", state, "--fast")
	if code != 0 {
		t.Fatalf("dev: exit %d\n%s\n%s", code, out, errOut)
	}
	dsn := exportLine.FindStringSubmatch(out)[1]
	port := statePort(t, state)
	cronDSN := strings.Replace(dsn, "/pgque?", "/postgres?", 1)
	if got := cronJobPorts(t, cronDSN); got[port] == 0 || len(got) != 1 {
		t.Fatalf("jobs by port after dev: %v, want all on %d", got, port)
	}

	other := freeTCPPort(t)
	out, errOut, code = runMain(t, "dev", "--state-dir", state, "--port", fmt.Sprint(other))
	if code == 0 || !strings.Contains(errOut, fmt.Sprintf("already runs on port %d, not %d", port, other)) {
		t.Fatalf("dev --port %d on a running cluster: exit %d\n%s\n%s", other, code, out, errOut)
	}
	if got := statePort(t, state); got != port {
		t.Errorf("refused --port wrote port %d to the state file (running on %d)", got, port)
	}
	if out, _, _ := runMain(t, "dev", "dsn", "--state-dir", state); strings.TrimSpace(out) != dsn {
		t.Errorf("dev dsn after a refused --port = %q, want %q", out, dsn)
	}

	// Stopped, a new port is taken and the pg_cron jobs follow it.
	if _, errOut, code := runMain(t, "dev", "stop", "--state-dir", state); code != 0 {
		t.Fatalf("dev stop: exit %d: %s", code, errOut)
	}
	out, errOut, code = runMain(t, "dev", "--state-dir", state, "--port", fmt.Sprint(other))
	if code != 0 || !strings.Contains(out, fmt.Sprintf("on port %d", other)) {
		t.Fatalf("dev --port %d after stop: exit %d\n%s\n%s", other, code, out, errOut)
	}
	if got := statePort(t, state); got != other {
		t.Errorf("state port %d after moving to %d", got, other)
	}
	cronDSN = strings.Replace(cronDSN, fmt.Sprintf(":%d/", port), fmt.Sprintf(":%d/", other), 1)
	if got := cronJobPorts(t, cronDSN); got[other] == 0 || len(got) != 1 {
		t.Errorf("jobs by port after moving to %d: %v (a job left on %d fails with connection failed)", other, got, port)
	}

	// Registered once: after tick --off, dev leaves ticking off.
	newDSN := strings.Replace(dsn, fmt.Sprintf(":%d/", port), fmt.Sprintf(":%d/", other), 1)
	if out, errOut, code := runMain(t, "tick", "--off", "--dsn", newDSN); code != 0 {
		t.Fatalf("tick --off: exit %d\n%s\n%s", code, out, errOut)
	}
	out, errOut, code = runMain(t, "dev", "--state-dir", state)
	if code != 0 || !strings.Contains(out, "left as it is") {
		t.Fatalf("dev after tick --off: exit %d\n%s\n%s", code, out, errOut)
	}
	if got := cronJobPorts(t, cronDSN); len(got) != 0 {
		t.Errorf("dev re-registered jobs after tick --off: %v", got)
	}
}

// TestDevTakenPortNewStateDir: a taken --port on a new state directory is
// refused before initdb and leaves nothing behind.
func TestDevTakenPortNewStateDir(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	taken := l.Addr().(*net.TCPAddr).Port
	state := filepath.Join(reachableTempDir(t), "dev")
	out, errOut, code := runMain(t, "dev", "--state-dir", state, "--port", fmt.Sprint(taken))
	if code == 0 || !strings.Contains(errOut, fmt.Sprintf("port %d on localhost is taken", taken)) {
		t.Fatalf("dev on a taken port: exit %d\n%s\n%s", code, out, errOut)
	}
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Errorf("a refused dev left %s behind (stat: %v)", state, err)
	}
}
