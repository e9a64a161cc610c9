package localpg

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

const lockFileName = ".lock"

// EnsureRunning creates the cluster in opts.StateDir if needed and starts it
// if it is not running. A file lock serializes callers, so concurrent test
// binaries (or two `pgquectl dev`) share one cluster instead of racing.
func EnsureRunning(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.StateDir == "" {
		return nil, errors.New("localpg: no state directory given")
	}
	_, statErr := os.Stat(opts.StateDir)
	fresh := errors.Is(statErr, fs.ErrNotExist)
	if fresh && opts.Port > 0 && !portFree(opts.Port) {
		// Refuse before creating anything: a taken --port leaves no state behind.
		return nil, fmt.Errorf("%w: port %d on localhost is taken by another process: pass another --port, or stop that process", ErrPortInUse, opts.Port)
	}
	if err := mkStateDir(opts.StateDir); err != nil {
		return nil, err
	}
	unlock, err := lockDir(ctx, opts.StateDir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	c, err := Open(opts)
	if err != nil {
		return nil, err
	}
	if err := c.Init(ctx); err != nil {
		if fresh && !c.Initialized() {
			// Nothing usable was created: leave nothing behind.
			_ = os.RemoveAll(c.StateDir)
		}
		return nil, err
	}
	if err := c.Start(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// WithLock runs fn while holding the state directory's file lock, for
// callers (dev stop / destroy) that must not race EnsureRunning.
func WithLock(ctx context.Context, stateDir string, fn func() error) error {
	if _, err := os.Stat(stateDir); err != nil {
		return fn()
	}
	unlock, err := lockDir(ctx, stateDir)
	if err != nil {
		return err
	}
	defer unlock()
	return fn()
}

// lockDir takes an exclusive flock on <dir>/.lock, waiting until ctx ends.
func lockDir(ctx context.Context, dir string) (func(), error) {
	path := filepath.Join(dir, lockFileName)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening the lock file %s: %w", path, err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("waiting for the lock on %s (another pgquectl or test is setting up this cluster): %w", path, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
