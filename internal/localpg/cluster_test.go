package localpg

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// stateDir returns a state directory path under a temp dir the postgres
// user can reach (t.TempDir is 0700).
func stateDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "state")
}

func TestUnreachableStateDir(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("only root hands the state directory to the postgres user")
	}
	c, err := Open(Options{StateDir: filepath.Join(t.TempDir(), "state")})
	if err != nil {
		t.Fatal(err)
	}
	err = c.Init(testCtx(t))
	if err == nil || !strings.Contains(err.Error(), "chmod o+x") {
		t.Fatalf("Init in a 0700 temp dir: %v, want advice to chmod", err)
	}
}

func TestFindBinaries(t *testing.T) {
	t.Parallel()
	b, err := FindBinaries()
	if err != nil {
		t.Fatal(err)
	}
	if b.Major < 14 {
		t.Errorf("major = %d, want >= 14", b.Major)
	}
	for _, p := range []string{"initdb", "pg_ctl", "postgres"} {
		if _, err := os.Stat(b.Path(p)); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}

func TestFindBinariesMissing(t *testing.T) {
	// Not parallel: changes PATH and debianRoot.
	t.Setenv("PATH", t.TempDir())
	old := debianRoot
	debianRoot = t.TempDir()
	defer func() { debianRoot = old }()
	_, err := FindBinaries()
	if !errors.Is(err, ErrNoBinaries) {
		t.Fatalf("err = %v, want ErrNoBinaries", err)
	}
	if !strings.Contains(err.Error(), "scripts/setup.sh") {
		t.Errorf("error does not say what to do: %v", err)
	}
}

// TestLifecycle runs a cluster through init, start, a second start (no-op),
// stop, start again on the same port, and destroy.
func TestLifecycle(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	dir := stateDir(t)
	c, err := EnsureRunning(ctx, Options{StateDir: dir, Fast: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Destroy(context.Background()) })
	port := c.Port
	query := func(sql string) string {
		t.Helper()
		conn, err := pgx.Connect(ctx, c.DSN("postgres"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var out string
		if err := conn.QueryRow(ctx, sql).Scan(&out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if got := query("SHOW fsync"); got != "off" {
		t.Errorf("fsync = %s, want off (Fast)", got)
	}
	if got := query("SHOW max_connections"); got != "300" {
		t.Errorf("max_connections = %s", got)
	}
	if c.Bin.HasPgCron() {
		if got := query("SELECT extversion FROM pg_extension WHERE extname = 'pg_cron'"); got == "" {
			t.Error("pg_cron not created")
		}
		if got := query("SHOW cron.database_name"); got != "postgres" {
			t.Errorf("cron.database_name = %s", got)
		}
	}

	// Second EnsureRunning: same cluster, same port, no error.
	c2, err := EnsureRunning(ctx, Options{StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if c2.Port != port || c2.DSN("x") != c.DSN("x") {
		t.Errorf("second start moved the cluster: %d -> %d", port, c2.Port)
	}
	st, err := c2.Status(ctx)
	if err != nil || !st.Running || st.PID == 0 {
		t.Fatalf("status = %+v, %v", st, err)
	}

	if err := c2.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c2.Stop(ctx); err != nil {
		t.Fatalf("second stop: %v", err)
	}
	st, err = c2.Status(ctx)
	if err != nil || st.Running || !st.Initialized {
		t.Fatalf("status after stop = %+v, %v", st, err)
	}
	c3, err := Open(Options{StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := c3.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if c3.Port != port {
		t.Errorf("restart changed port %d -> %d", port, c3.Port)
	}
	if got := query("SELECT 'ok'"); got != "ok" {
		t.Error(got)
	}
	if err := c3.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("state dir still there: %v", err)
	}
}

// TestStalePidAndTakenPort: a leftover postmaster.pid naming a dead process
// is removed; a fixed port in use is refused with ErrPortInUse, a free
// choice moves to another port.
func TestStalePidAndTakenPort(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	dir := stateDir(t)
	c, err := Open(Options{StateDir: dir, Fast: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Init(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Destroy(context.Background()) })

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	taken := l.Addr().(*net.TCPAddr).Port

	fixed, err := Open(Options{StateDir: dir, Port: taken})
	if err != nil {
		t.Fatal(err)
	}
	if err := fixed.Start(ctx); !errors.Is(err, ErrPortInUse) {
		t.Fatalf("start on a taken fixed port: %v, want ErrPortInUse", err)
	}

	// A stale pid file: a pid that cannot be a postgres process.
	pidFile := filepath.Join(c.DataDir, "postmaster.pid")
	if err := os.WriteFile(pidFile, []byte("999999999\n"+c.DataDir+"\n0\n1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := chownToServer(pidFile); err != nil {
		t.Fatal(err)
	}
	c.Port = taken // the state says a port that is now taken
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if c.Port == taken {
		t.Error("cluster did not move off the taken port")
	}
	st, err := c.Status(ctx)
	if err != nil || !st.Running {
		t.Fatalf("status = %+v, %v", st, err)
	}
}

// TestEnsureRunningConcurrent: concurrent callers share one cluster.
func TestEnsureRunningConcurrent(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	dir := stateDir(t)
	var wg sync.WaitGroup
	ports := make([]int, 3)
	errs := make([]error, 3)
	for i := range ports {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := EnsureRunning(ctx, Options{StateDir: dir, Fast: true})
			errs[i] = err
			if err == nil {
				ports[i] = c.Port
			}
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		if c, err := Open(Options{StateDir: dir}); err == nil {
			_ = c.Destroy(context.Background())
		}
	})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("caller %d: %v", i, err)
		}
	}
	if ports[0] != ports[1] || ports[1] != ports[2] {
		t.Errorf("callers got different clusters: %v", ports)
	}
}

func TestDestroyRefusesForeignDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "precious.txt"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Open(Options{StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Destroy(context.Background()); err == nil {
		t.Fatal("Destroy removed a directory that is not a cluster")
	}
	if _, err := os.Stat(filepath.Join(dir, "precious.txt")); err != nil {
		t.Fatal(err)
	}
}

func TestSocketDirFallback(t *testing.T) {
	t.Parallel()
	long := "/tmp/" + strings.Repeat("x", 120)
	if d := socketDirFor(long); len(d)+len("/.s.PGSQL.65535") > maxSocketPath {
		t.Errorf("socket dir %q too long", d)
	}
	if d := socketDirFor("/tmp/s"); d != "/tmp/s/sock" {
		t.Errorf("short state dir: %q", d)
	}
}

// TestCrashRestart: CrashRestart is a crash, not a shutdown: the server
// comes back on the same port under a new postmaster after crash recovery
// (its log says so; a fast or smart stop writes a shutdown checkpoint and
// needs none), the open session is cut, what was committed is there and
// what was not is gone.
func TestCrashRestart(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c, err := EnsureRunning(ctx, Options{StateDir: stateDir(t), Fast: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Destroy(context.Background()) })
	conn, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `CREATE TABLE crash (v text); INSERT INTO crash VALUES ('committed')`); err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO crash VALUES ('open')`); err != nil {
		t.Fatal(err)
	}
	before, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CrashRestart(ctx); err != nil {
		t.Fatal(err)
	}
	after, err := c.Status(ctx)
	if err != nil || !after.Running || after.PID == before.PID || after.Port != before.Port {
		t.Fatalf("after the crash restart: %+v (%v); before: pid %d port %d", after, err, before.PID, before.Port)
	}
	if err := tx.Commit(ctx); err == nil {
		t.Fatal("a transaction open across the crash committed")
	}
	log, err := os.ReadFile(c.LogFile)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), "automatic recovery in progress") {
		t.Errorf("no crash recovery in the server log:\n%s", tail(log, 20))
	}
	again, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close(context.Background())
	var got string
	if err := again.QueryRow(ctx, `SELECT string_agg(v, ',') FROM crash`).Scan(&got); err != nil || got != "committed" {
		t.Fatalf("rows after the crash: %q (%v), want committed only", got, err)
	}
}
