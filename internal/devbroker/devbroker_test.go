package devbroker

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/pgquectl/pgquectl/internal/pgtest"
)

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Start is idempotent, Status sees the process, Stop stops it and removes
// the pid file.
func TestStartStatusStop(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDB(t)
	dir := t.TempDir()
	exe := filepath.Join(dir, "pgquectl")
	if out, err := exec.Command("go", "build", "-o", exe, "../../cmd/pgquectl").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if st := Status(dir); st.Running {
		t.Fatalf("running before start: %+v", st)
	}
	o := Options{StateDir: dir, DSN: dsn, Listen: freePort(t), Exe: exe, StartTimeout: 60 * time.Second}
	info, err := Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = Stop(context.Background(), dir, 10*time.Second) })
	again, err := Start(ctx, o)
	if err != nil || again.PID != info.PID || !again.Running {
		t.Fatalf("second start: %+v %v (first %+v)", again, err, info)
	}
	resp, err := http.Get(info.URL + "/health")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("health: %v %v", err, resp)
	}
	resp.Body.Close()
	if st := Status(dir); !st.Running || st.PID != info.PID || st.URL != info.URL {
		t.Fatalf("status: %+v", st)
	}
	if err := Stop(ctx, dir, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if st := Status(dir); st.Running {
		t.Fatalf("running after stop: %+v", st)
	}
	if _, err := os.Stat(filepath.Join(dir, PIDFile)); !os.IsNotExist(err) {
		t.Fatalf("pid file after stop: %v", err)
	}
	if err := Stop(ctx, dir, time.Second); err != nil {
		t.Fatalf("second stop: %v", err)
	}
	// A stale pid file naming a process that is not a broker is ignored.
	if err := os.WriteFile(filepath.Join(dir, PIDFile), []byte("1\nhttp://x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if st := Status(dir); st.Running {
		t.Fatalf("pid 1 taken for the broker: %+v", st)
	}
}

func buildExe(t *testing.T) string {
	t.Helper()
	exe := filepath.Join(t.TempDir(), "pgquectl")
	if out, err := exec.Command("go", "build", "-o", exe, "../../cmd/pgquectl").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return exe
}

// Several `pgquectl dev` at once start one broker: every caller gets the
// same process, and the pid file names it.
func TestStartConcurrentStartsOne(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDB(t)
	dir := t.TempDir()
	exe := buildExe(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	o := Options{StateDir: dir, DSN: dsn, Listen: freePort(t), Exe: exe, StartTimeout: 60 * time.Second}
	t.Cleanup(func() { _ = Stop(context.Background(), dir, 10*time.Second) })
	const n = 4
	infos := make([]Info, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() { defer wg.Done(); infos[i], errs[i] = Start(ctx, o) }()
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Errorf("start %d: %v", i, errs[i])
		}
	}
	st := Status(dir)
	if !st.Running {
		t.Fatalf("no broker running after %d concurrent starts: %+v", n, st)
	}
	for i, info := range infos {
		if info.PID != st.PID {
			t.Errorf("start %d returned pid %d, the pid file names %d", i, info.PID, st.PID)
		}
	}
}

// A broker running on another DSN (the dev cluster came back on another
// port) is replaced by one on the new DSN; the same DSN keeps it.
func TestStartRestartsOnOtherDSN(t *testing.T) {
	t.Parallel()
	dsn1, dsn2 := pgtest.NewDB(t), pgtest.NewDB(t)
	dir := t.TempDir()
	exe := buildExe(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	o := Options{StateDir: dir, DSN: dsn1, Listen: freePort(t), Exe: exe, StartTimeout: 60 * time.Second}
	first, err := Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = Stop(context.Background(), dir, 10*time.Second) })
	if st := Status(dir); st.DSN != dsn1 {
		t.Fatalf("status DSN %q, want %q", st.DSN, dsn1)
	}
	o.DSN = dsn2
	second, err := Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if second.PID == first.PID || running(first.PID) {
		t.Fatalf("broker on the old DSN kept: first pid %d (running %v), second %d", first.PID, running(first.PID), second.PID)
	}
	if st := Status(dir); !st.Running || st.PID != second.PID || st.DSN != dsn2 {
		t.Fatalf("status after the restart: %+v", st)
	}
	third, err := Start(ctx, o)
	if err != nil || third.PID != second.PID {
		t.Fatalf("start on the same DSN: %+v %v (running: %d)", third, err, second.PID)
	}
}

// A pid file naming another broker (a recycled pid: a `serve` on another
// address) is not ours; Stop on a state directory that does not exist is
// fine.
func TestStatusOtherBrokerNotOurs(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDB(t)
	dir := t.TempDir()
	exe := buildExe(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	info, err := Start(ctx, Options{StateDir: dir, DSN: dsn, Listen: freePort(t), Exe: exe, StartTimeout: 60 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = Stop(context.Background(), dir, 10*time.Second) })
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, PIDFile), []byte(fmt.Sprintf("%d\nhttp://%s\n", info.PID, freePort(t))), 0o644); err != nil {
		t.Fatal(err)
	}
	if st := Status(other); st.Running {
		t.Fatalf("another state dir's broker taken for ours: %+v", st)
	}
	if err := Stop(ctx, other, time.Second); err != nil || !running(info.PID) {
		t.Fatalf("stop of the other state dir: %v, our broker running %v", err, running(info.PID))
	}
	if err := Stop(ctx, filepath.Join(other, "missing"), time.Second); err != nil {
		t.Fatalf("stop without a state dir: %v", err)
	}
}
