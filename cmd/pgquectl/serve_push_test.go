package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/pgquectl/pgquectl/internal/broker"
	"github.com/pgquectl/pgquectl/internal/pgtest"
)

func TestServePushAndPprofFlags(t *testing.T) {
	t.Parallel()
	out, _, code := runMain(t, "serve", "--help")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"--push-concurrency", fmt.Sprintf("(default %d)", broker.DefaultPushConcurrency), "the number of CPUs, between 2 and 4", "--pprof"} {
		if !strings.Contains(out, want) {
			t.Errorf("serve --help lacks %q", want)
		}
	}
	for _, bad := range []string{"0", "1001"} {
		if _, stderr, code := runMain(t, "serve", "--push-concurrency", bad); code != exitUsage || !strings.Contains(stderr, "--push-concurrency") {
			t.Errorf("--push-concurrency %s: exit %d %q, want a usage error", bad, code, stderr)
		}
	}
	if _, stderr, code := runMain(t, "serve", "--pprof", "no-such-host.invalid:x"); code == 0 || !strings.Contains(stderr, "--pprof") {
		t.Errorf("--pprof with a bad address: exit %d %q, want an error naming --pprof", code, stderr)
	}
}

// --pprof serves Go's profiler on its own address (and not on the broker's).
func TestServePprof(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDB(t)
	bin := buildPgquectl(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(bin, "serve", "--dsn", dsn, "--listen", "127.0.0.1:0", "--pprof", addr, "--standby-ticker=false")
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the listen line: %v", err)
	}
	url := strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(line), "Broker listening on "), " (Ctrl-C to stop)")
	get := func(u string) (int, string) {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatalf("GET %s: %v", u, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("http://" + addr + "/debug/pprof/cmdline"); code != 200 || !strings.Contains(body, "serve") {
		t.Errorf("pprof cmdline: %d %q", code, body)
	}
	if code, _ := get(url + "/debug/pprof/cmdline"); code != 404 {
		t.Errorf("the broker's port serves pprof: %d, want 404", code)
	}
}
