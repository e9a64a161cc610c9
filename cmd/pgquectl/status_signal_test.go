package main

import (
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgquectl/pgquectl/internal/logbuf"
	"github.com/pgquectl/pgquectl/internal/pgtest"
)

// mainUntilSIGINT runs Main with args, sends the process SIGINT (Ctrl-C)
// once ready says so, and returns what Main returned. Not parallel: the
// signal goes to the whole test process (a Notify of our own keeps an
// early signal from killing it).
func mainUntilSIGINT(t *testing.T, ready func(stdout string) bool, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	guard := make(chan os.Signal, 1)
	signal.Notify(guard, os.Interrupt)
	defer signal.Stop(guard)
	var out, errOut logbuf.Buffer
	done := make(chan int, 1)
	go func() { done <- Main(args, &out, &errOut) }()
	deadline := time.Now().Add(time.Minute)
	for !ready(out.String()) {
		if time.Now().After(deadline) {
			t.Fatalf("not ready within a minute: %q %q", out.String(), errOut.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case code = <-done:
	case <-time.After(time.Minute):
		t.Fatal("Main did not return within a minute of SIGINT")
	}
	return code, out.String(), errOut.String()
}

// TestStatusWatchToFileAndCtrlC: --watch into a file (not a terminal)
// writes no clear-screen codes; Ctrl-C ends it with exit 0. Ctrl-C during
// the WAL sample of a single run is "interrupted" (exit 130), not
// "database unreachable" (exit 3 under --check).
func TestStatusWatchToFileAndCtrlC(t *testing.T) {
	dsn := pgtest.NewDB(t)
	code, out, errOut := mainUntilSIGINT(t, func(out string) bool { return strings.Count(out, "PGQUE OK - ") >= 2 },
		"status", "--dsn", dsn, "--watch", "200ms", "--sample", "50ms")
	if code != 0 || strings.Contains(out, "\033[") {
		t.Errorf("--watch into a buffer: exit %d, clear-screen codes: %v\n%q", code, strings.Contains(out, "\033["), errOut)
	}

	started := time.Now()
	code, out, errOut = mainUntilSIGINT(t, func(string) bool { return time.Since(started) > 1500*time.Millisecond },
		"status", "--dsn", dsn, "--check", "--sample", "30s")
	if code != exitInterrupted || strings.Contains(out+errOut, "unreachable") || !strings.Contains(errOut, "interrupted") {
		t.Errorf("Ctrl-C while sampling: exit %d (want %d)\nstdout %q\nstderr %q", code, exitInterrupted, out, errOut)
	}
}
