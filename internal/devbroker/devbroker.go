// Package devbroker runs `pgquectl serve` in the background for
// `pgquectl dev`: one process per state directory, its pid and address in
// <state dir>/broker.pid and its log in <state dir>/broker.log.
package devbroker

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// DefaultListen is where the dev broker listens.
const DefaultListen = "127.0.0.1:6632"

// Files in the state directory.
const (
	PIDFile = "broker.pid"
	LogFile = "broker.log"
)

// Options say how to start the broker.
type Options struct {
	StateDir string
	DSN      string
	Listen   string // DefaultListen when empty
	// Exe is the pgquectl binary (os.Executable() when empty).
	Exe string
	// StartTimeout bounds the wait for the broker to answer (10 s).
	StartTimeout time.Duration
}

// Info describes the dev broker.
type Info struct {
	Running bool
	PID     int
	URL     string
	Log     string
	// DSN is the database the running broker serves (read from its
	// command line; "" when unknown).
	DSN string
}

// ErrTestBinary: Start was called from a Go test binary (which would run
// its tests, not `serve`) without Options.Exe.
var ErrTestBinary = errors.New("not starting the broker from a test binary")

// Status reads the pid file and checks that the process is ours and alive.
func Status(stateDir string) Info {
	info := Info{Log: filepath.Join(stateDir, LogFile)}
	b, err := os.ReadFile(filepath.Join(stateDir, PIDFile))
	if err != nil {
		return info
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) < 2 {
		return info
	}
	pid, err := strconv.Atoi(lines[0])
	if err != nil || pid <= 0 {
		return info
	}
	info.PID, info.URL = pid, lines[1]
	info.Running, info.DSN = isOurs(pid, strings.TrimPrefix(info.URL, "http://"))
	return info
}

// isOurs: the process exists and is a `pgquectl serve` listening on listen
// (a recycled pid of another program, or of another broker, is not ours);
// it returns the process's --dsn too when it can read its command line.
func isOurs(pid int, listen string) (bool, string) {
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false, ""
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		// No /proc (macOS): trust the signal check.
		return true, ""
	}
	args := strings.Split(string(cmdline), "\x00")
	serve, dsn, addr := false, "", ""
	for i, a := range args {
		switch {
		case a == "serve":
			serve = true
		case a == "--dsn" && i+1 < len(args):
			dsn = args[i+1]
		case a == "--listen" && i+1 < len(args):
			addr = args[i+1]
		}
	}
	return serve && addr == listen, dsn
}

// Start starts the broker unless it runs already on o.DSN (then it returns
// the running one): idempotent, also when several callers start it at once
// (they serialize on a lock file in the state directory). A running broker
// that serves another DSN (the cluster came back on another port) is
// stopped and started again.
func Start(ctx context.Context, o Options) (Info, error) {
	var info Info
	err := withLock(ctx, o.StateDir, func() error {
		var err error
		info, err = start(ctx, o)
		return err
	})
	return info, err
}

func start(ctx context.Context, o Options) (Info, error) {
	if st := Status(o.StateDir); st.Running {
		if st.DSN == "" || st.DSN == o.DSN {
			return st, nil
		}
		if err := stop(ctx, o.StateDir, 15*time.Second); err != nil {
			return Info{}, fmt.Errorf("restarting the broker for %s: %w", o.DSN, err)
		}
	}
	if o.Listen == "" {
		o.Listen = DefaultListen
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 10 * time.Second
	}
	exe := o.Exe
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return Info{}, fmt.Errorf("finding the pgquectl binary to start the broker: %w", err)
		}
		if strings.HasSuffix(exe, ".test") {
			return Info{}, ErrTestBinary
		}
	}
	logPath := filepath.Join(o.StateDir, LogFile)
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return Info{}, fmt.Errorf("opening the broker log: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(exe, "serve", "--dsn", o.DSN, "--listen", o.Listen)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // outlives `pgquectl dev`
	if err := cmd.Start(); err != nil {
		return Info{}, fmt.Errorf("starting the broker (%s serve): %w", exe, err)
	}
	info := Info{Running: true, PID: cmd.Process.Pid, URL: "http://" + o.Listen, Log: logPath}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	if err := os.WriteFile(filepath.Join(o.StateDir, PIDFile), []byte(fmt.Sprintf("%d\n%s\n", info.PID, info.URL)), 0o644); err != nil {
		_ = cmd.Process.Kill()
		return Info{}, fmt.Errorf("writing the broker pid file: %w", err)
	}
	deadline := time.Now().Add(o.StartTimeout)
	client := &http.Client{Timeout: time.Second}
	for {
		if resp, err := client.Get(info.URL + "/status"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				_ = cmd.Process.Release()
				return info, nil
			}
		}
		select {
		case err := <-exited:
			_ = os.Remove(filepath.Join(o.StateDir, PIDFile))
			return Info{}, fmt.Errorf("the broker exited at start (%v); see %s (is %s in use? pass another --broker-listen)", err, logPath, o.Listen)
		case <-ctx.Done():
			return Info{}, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			_ = os.Remove(filepath.Join(o.StateDir, PIDFile))
			return Info{}, fmt.Errorf("the broker did not answer on %s within %v; see %s", info.URL, o.StartTimeout, logPath)
		}
	}
}

// Stop stops the broker (SIGTERM: it drains; SIGKILL after timeout) and
// removes its pid file. Not running is not an error.
func Stop(ctx context.Context, stateDir string, timeout time.Duration) error {
	return withLock(ctx, stateDir, func() error { return stop(ctx, stateDir, timeout) })
}

func stop(ctx context.Context, stateDir string, timeout time.Duration) error {
	st := Status(stateDir)
	pidPath := filepath.Join(stateDir, PIDFile)
	if !st.Running {
		_ = os.Remove(pidPath)
		return nil
	}
	if err := syscall.Kill(st.PID, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("stopping the broker (pid %d): %w", st.PID, err)
	}
	deadline := time.Now().Add(timeout)
	for running(st.PID) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(st.PID, syscall.SIGKILL)
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	_ = os.Remove(pidPath)
	return nil
}

// running: the process exists and has not exited (a zombie has).
func running(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	return !zombie(pid)
}

// LockFile serializes Start and Stop of one state directory's broker.
const LockFile = "broker.lock"

// withLock runs fn holding an exclusive flock on <stateDir>/broker.lock,
// waiting for it until ctx ends.
func withLock(ctx context.Context, stateDir string, fn func() error) error {
	if _, err := os.Stat(stateDir); err != nil {
		return fn() // no state directory: nothing to serialize with
	}
	path := filepath.Join(stateDir, LockFile)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("opening the broker lock file %s: %w", path, err)
	}
	defer f.Close()
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return fmt.Errorf("locking %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the lock on %s (another pgquectl dev is starting or stopping the broker): %w", path, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	defer func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }()
	return fn()
}

// zombie reports a process that exited but was not reaped (its parent is
// gone or busy): it is stopped for our purpose.
func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] == 'Z'
}
