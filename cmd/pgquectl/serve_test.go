package main

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgquectl/pgquectl/internal/pgtest"
)

func TestServeHelpTeaches(t *testing.T) {
	t.Parallel()
	out, _, code := runMain(t, "serve", "--help")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"--listen", ":6632", "--auth-secret", "--body-limit", "--pool-size", "--long-poll-max",
		"curl -s localhost:6632/api/v1/push", "wait=true", "SIGTERM"} {
		if !strings.Contains(out, want) {
			t.Errorf("serve --help lacks %q", want)
		}
	}
	if _, stderr, code := runMain(t, "serve", "--pool-size", "1"); code != exitUsage || !strings.Contains(stderr, "--pool-size") {
		t.Errorf("--pool-size 1: exit %d %q", code, stderr)
	}
}

func TestWithPoolSize(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"":                           "pool_max_conns=7",
		"host=x":                     "host=x pool_max_conns=7",
		"postgres://h/db":            "postgres://h/db?pool_max_conns=7",
		"postgres://h/db?sslmode=no": "postgres://h/db?sslmode=no&pool_max_conns=7",
		"host=x pool_max_conns=3":    "host=x pool_max_conns=3",
	} {
		if got := withPoolSize(in, 7); got != want {
			t.Errorf("withPoolSize(%q) = %q, want %q", in, got, want)
		}
	}
}

// SIGTERM drains: a parked pop answers 204 at once, the process exits 0
// and stops listening.
func TestServeSIGTERMDrains(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDB(t)
	bin := filepath.Join(t.TempDir(), "pgquectl")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "serve", "--dsn", dsn, "--listen", "127.0.0.1:0", "--drain-timeout", "10s")
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the listen line: %v", err)
	}
	url := strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(line, "Broker listening on "), " (Ctrl-C to stop)\n"))
	url = strings.TrimSuffix(url, " (Ctrl-C to stop)")
	resp, err := http.Post(url+"/api/v1/push", "application/json", strings.NewReader(`{"items":[{"queue":"q","payload":1}]}`))
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("push: %v %v", err, resp)
	}
	resp.Body.Close()
	http.Get(url + "/api/v1/pop/queue/q?autoAck=true")
	popped := make(chan int, 1)
	go func() {
		resp, err := http.Get(url + "/api/v1/pop/queue/q?wait=true&timeout=60000")
		if err != nil {
			popped <- -1
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		popped <- resp.StatusCode
	}()
	time.Sleep(500 * time.Millisecond)
	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-popped:
		if code != 204 {
			t.Fatalf("parked pop on SIGTERM: %d", code)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("parked pop still waiting after SIGTERM")
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not exit after SIGTERM")
	}
	t.Logf("drained in %v", time.Since(start))
	if _, err := http.Get(url + "/status"); err == nil {
		t.Fatal("still listening after exit")
	}
}
