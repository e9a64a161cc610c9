package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestKillStaleBrokers: a process a killed run left is stopped by the next
// run only while its pid still runs the recorded binary (pids are reused).
func TestKillStaleBrokers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	start := func() (*exec.Cmd, chan struct{}) {
		cmd := exec.Command("sleep", "60")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		t.Cleanup(func() { _ = cmd.Process.Kill() })
		return cmd, done
	}
	ours, oursDone := start()
	other, otherDone := start()
	pids := fmt.Sprintf("%d %s\n%d /some/other/pgquectl\n", ours.Process.Pid, ours.Args[0], other.Process.Pid)
	if err := os.WriteFile(filepath.Join(dir, brokersPidFile), []byte(pids), 0o644); err != nil {
		t.Fatal(err)
	}
	killStaleBrokers(dir)
	select {
	case <-oursDone:
	case <-time.After(10 * time.Second):
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", ours.Process.Pid))
		t.Fatalf("the recorded process still runs (recorded as %q; /proc cmdline %q, %v)", ours.Args[0], cmdline, err)
	}
	select {
	case <-otherDone:
		t.Fatal("a process running another binary than the recorded one was killed")
	case <-time.After(200 * time.Millisecond):
	}
	if _, err := os.Stat(filepath.Join(dir, brokersPidFile)); !os.IsNotExist(err) {
		t.Errorf("pid file left: %v", err)
	}
}
