package devbroker

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
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
