package main

import (
	"bufio"
	"io"
	"net"
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

// --default-subscription-mode (Queen's DEFAULT_SUBSCRIPTION_MODE): --help
// explains it; a misspelt value, from the flag or the environment, is a
// usage error before anything connects.
func TestServeDefaultSubscriptionMode(t *testing.T) {
	out, _, code := runMain(t, "serve", "--help")
	if code != 0 || !strings.Contains(out, "--default-subscription-mode") || !strings.Contains(out, "PGQUE_DEFAULT_SUBSCRIPTION_MODE") {
		t.Errorf("serve --help (exit %d) does not explain --default-subscription-mode", code)
	}
	if _, stderr, code := runMain(t, "serve", "--default-subscription-mode", "sometimes"); code != exitUsage || !strings.Contains(stderr, "--default-subscription-mode") {
		t.Errorf("--default-subscription-mode sometimes: exit %d %q", code, stderr)
	}
	t.Setenv("PGQUE_DEFAULT_SUBSCRIPTION_MODE", "newest")
	if _, stderr, code := runMain(t, "serve"); code != exitUsage || !strings.Contains(stderr, `"newest"`) {
		t.Errorf("PGQUE_DEFAULT_SUBSCRIPTION_MODE=newest: exit %d %q", code, stderr)
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
	bin := buildPgquectl(t)
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

// pgquectl dev starts the broker in the background (idempotent), dev
// status shows it, dev stop stops it.
func TestDevStartsBroker(t *testing.T) {
	t.Parallel()
	state := filepath.Join(reachableTempDir(t), "dev")
	bin := buildPgquectl(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := l.Addr().String()
	l.Close()
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("pgquectl %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	t.Cleanup(func() { _, _ = exec.Command(bin, "dev", "destroy", "--state-dir", state).CombinedOutput() })
	out := run("dev", "--state-dir", state, "--fast", "--no-tick", "--broker-listen", listen)
	url := "http://" + listen
	if !strings.Contains(out, "Broker (Queen v1 HTTP API): "+url) {
		t.Fatalf("dev output lacks the broker URL:\n%s", out)
	}
	resp, err := http.Get(url + "/health")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("broker health: %v %v", err, resp)
	}
	resp.Body.Close()
	pid1 := devBrokerPID(t, state)
	out = run("dev", "--state-dir", state, "--broker-listen", listen)
	if pid2 := devBrokerPID(t, state); pid2 != pid1 || !strings.Contains(out, url) {
		t.Fatalf("second dev: pid %s then %s\n%s", pid1, pid2, out)
	}
	if st := run("dev", "status", "--state-dir", state); !strings.Contains(st, "broker      "+url) {
		t.Fatalf("dev status:\n%s", st)
	}
	run("dev", "stop", "--state-dir", state)
	if _, err := http.Get(url + "/status"); err == nil {
		t.Fatal("broker still answers after dev stop")
	}
	if _, err := os.Stat(filepath.Join(state, "broker.pid")); !os.IsNotExist(err) {
		t.Fatalf("pid file after dev stop: %v", err)
	}
}

func devBrokerPID(t *testing.T, state string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(state, "broker.pid"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.SplitN(string(b), "\n", 2)[0]
}

// A broker port in use does not fail dev: the database is up, the
// broker's failure is reported on stderr.
func TestDevBrokerPortTaken(t *testing.T) {
	t.Parallel()
	state := filepath.Join(reachableTempDir(t), "dev")
	bin := buildPgquectl(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	t.Cleanup(func() { _, _ = exec.Command(bin, "dev", "destroy", "--state-dir", state).CombinedOutput() })
	cmd := exec.Command(bin, "dev", "--state-dir", state, "--fast", "--no-tick", "--broker-listen", l.Addr().String())
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("dev with the broker port taken: %v\n%s\n%s", err, out, stderr.String())
	}
	if !strings.Contains(stderr.String(), "the broker is not") || !strings.Contains(string(out), "PGQUE_DSN") {
		t.Fatalf("stdout:\n%s\nstderr:\n%s", out, stderr.String())
	}
	if _, err := os.Stat(filepath.Join(state, "broker.pid")); !os.IsNotExist(err) {
		t.Fatalf("pid file of a broker that did not start: %v", err)
	}
}
