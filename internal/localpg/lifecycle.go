package localpg

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// Status describes a cluster at one moment.
type Status struct {
	StateDir    string
	DataDir     string
	Initialized bool
	Running     bool
	PID         int
	Port        int
	Version     string
	// DSN of the postgres database (empty when not initialized).
	DSN           string
	LogFile       string
	CronPreloaded bool
}

// startTimeout bounds pg_ctl start and stop.
const startTimeout = 60 * time.Second

// Status reports whether the cluster exists and runs.
func (c *Cluster) Status(context.Context) (Status, error) {
	st := Status{
		StateDir: c.StateDir, DataDir: c.DataDir, Initialized: c.Initialized(),
		Port: c.Port, Version: c.Bin.Version, LogFile: c.LogFile, CronPreloaded: c.CronPreloaded,
	}
	if !st.Initialized {
		return st, nil
	}
	st.DSN = c.DSN("postgres")
	pid, alive, err := c.postmaster()
	if err != nil {
		return st, err
	}
	st.PID, st.Running = pid, alive
	if alive {
		c.Port = c.runningPort()
		st.Port, st.DSN = c.Port, c.DSN("postgres")
	}
	return st, nil
}

// postmaster reads postmaster.pid and checks that its process is a live
// PostgreSQL server. pid is 0 when there is no pid file.
func (c *Cluster) postmaster() (pid int, alive bool, err error) {
	raw, err := os.ReadFile(filepath.Join(c.DataDir, "postmaster.pid"))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("reading postmaster.pid: %w", err)
	}
	first, _, _ := strings.Cut(string(raw), "\n")
	pid, err = strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 0 {
		// Being written right now, or garbage: treat as not running.
		return 0, false, nil
	}
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return pid, false, nil
	}
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err == nil {
		name := strings.TrimSpace(string(comm))
		if name != "postgres" && name != "postmaster" {
			return pid, false, nil // pid reused by another program
		}
	}
	return pid, true, nil
}

// Start starts the cluster and waits until it accepts connections. Starting
// a running cluster is a no-op. When pg_cron is preloaded it also creates the
// extension in the postgres database.
func (c *Cluster) Start(ctx context.Context) error {
	if !c.Initialized() {
		return fmt.Errorf("%w in %s: run `pgquectl dev` to create it", ErrNotInitialized, c.StateDir)
	}
	if err := c.checkMajor(); err != nil {
		return err
	}
	pid, alive, err := c.postmaster()
	if err != nil {
		return err
	}
	if alive {
		if c.fixedPort && c.Port != c.runningPort() {
			return fmt.Errorf("the cluster in %s already runs on port %d, not %d: run `pgquectl dev stop` first to move it", c.StateDir, c.runningPort(), c.Port)
		}
		c.Port = c.runningPort()
		if err := c.writeConfig(); err != nil {
			return err
		}
		if c.configChanged {
			// Settings that need a restart (port, preload) wait for one.
			c.log.Info("configuration changed, reloading", "data_dir", c.DataDir)
			if err := c.Reload(ctx); err != nil {
				return err
			}
		}
		return c.afterStart(ctx)
	}
	if pid != 0 {
		c.log.Warn("removing stale postmaster.pid", "pid", pid, "data_dir", c.DataDir)
		if err := os.Remove(filepath.Join(c.DataDir, "postmaster.pid")); err != nil {
			return fmt.Errorf("removing the stale %s (pid %d is not a running PostgreSQL): %w", filepath.Join(c.DataDir, "postmaster.pid"), pid, err)
		}
	}
	if c.Port == 0 || !portFree(c.Port) {
		if c.fixedPort {
			return c.portTaken()
		}
		old := c.Port
		if c.Port, err = freePort(); err != nil {
			return err
		}
		if old != 0 {
			c.log.Warn("port taken, moving the cluster", "old_port", old, "port", c.Port)
		}
	}
	restore, err := c.saveConfig()
	if err != nil {
		return err
	}
	if err := c.writeConfig(); err != nil {
		restore()
		return err
	}
	c.log.Info("starting PostgreSQL", "data_dir", c.DataDir, "port", c.Port, "log", c.LogFile)
	out, err := c.run(ctx, c.Bin.Path("pg_ctl"), "-D", c.DataDir, "-l", c.LogFile, "-w",
		"-t", strconv.Itoa(int(startTimeout/time.Second)), "start")
	if err != nil {
		// Persist only on success: the next run starts from the settings
		// that last worked.
		restore()
		logTail := c.logTail(20)
		if strings.Contains(logTail, "Address already in use") {
			return fmt.Errorf("%w: PostgreSQL could not bind port %d: pass another --port, or stop the process using it\n%s", ErrPortInUse, c.Port, logTail)
		}
		return fmt.Errorf("pg_ctl start failed: %w\n%s\n--- %s (last lines) ---\n%s", err, tail(out, 10), c.LogFile, logTail)
	}
	return c.afterStart(ctx)
}

// runningPort reads the port from postmaster.pid (line 4).
func (c *Cluster) runningPort() int {
	raw, err := os.ReadFile(filepath.Join(c.DataDir, "postmaster.pid"))
	if err != nil {
		return c.Port
	}
	lines := strings.Split(string(raw), "\n")
	if len(lines) < 4 {
		return c.Port
	}
	port, err := strconv.Atoi(strings.TrimSpace(lines[3]))
	if err != nil {
		return c.Port
	}
	return port
}

// saveConfig reads the files writeConfig rewrites and returns a function
// that puts them back (or removes them when they did not exist).
func (c *Cluster) saveConfig() (restore func(), err error) {
	paths := []string{filepath.Join(c.DataDir, confFileName), filepath.Join(c.StateDir, stateFileName)}
	saved := make([][]byte, len(paths))
	for i, p := range paths {
		raw, err := os.ReadFile(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			saved[i] = nil
		case err != nil:
			return nil, fmt.Errorf("reading %s: %w", p, err)
		default:
			saved[i] = raw
		}
	}
	return func() {
		for i, p := range paths {
			var err error
			if saved[i] == nil {
				err = os.Remove(p)
			} else {
				err = os.WriteFile(p, saved[i], 0o600)
			}
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				c.log.Warn("could not restore the previous configuration", "file", p, "err", err)
			}
		}
	}, nil
}

// sqlCreateCron creates pg_cron in its database when it is preloaded.
const sqlCreateCron = `CREATE EXTENSION IF NOT EXISTS pg_cron`

// sqlCronFollowPort points pg_cron jobs that target this server (the socket
// directory or a loopback host) at the port it runs on now. pg_cron stores
// the port in cron.job.nodeport when a job is scheduled; after the cluster
// moved to another port every such job would fail with "connection failed".
// The update fires pg_cron's cache-invalidation trigger, so the launcher
// picks the new port up at once.
const sqlCronFollowPort = `
UPDATE cron.job
   SET nodeport = $1
 WHERE nodeport <> $1
   AND nodename IN ($2, 'localhost', '127.0.0.1', '::1', '')`

func (c *Cluster) afterStart(ctx context.Context) error {
	if !c.CronPreloaded {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.DSN(CronDatabase))
	if err != nil {
		return fmt.Errorf("connecting to the new cluster on port %d: %w (see %s)", c.Port, err, c.LogFile)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, sqlCreateCron); err != nil {
		return fmt.Errorf("creating the pg_cron extension in database %q: %w (see %s)", CronDatabase, err, c.LogFile)
	}
	tag, err := conn.Exec(ctx, sqlCronFollowPort, c.Port, c.SocketDir)
	if err != nil {
		return fmt.Errorf("pointing the pg_cron jobs at port %d: %w (see %s)", c.Port, err, c.LogFile)
	}
	if n := tag.RowsAffected(); n > 0 {
		c.log.Info("pg_cron jobs follow the new port", "jobs", n, "port", c.Port)
	}
	return nil
}

func (c *Cluster) logTail(n int) string {
	raw, err := os.ReadFile(c.LogFile)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", c.LogFile, err)
	}
	return tail(raw, n)
}

// Stop stops the cluster (fast shutdown: sessions are disconnected). Stopping
// a stopped cluster is a no-op.
func (c *Cluster) Stop(ctx context.Context) error {
	if !c.Initialized() {
		return nil
	}
	_, alive, err := c.postmaster()
	if err != nil || !alive {
		return err
	}
	c.log.Info("stopping PostgreSQL", "data_dir", c.DataDir)
	out, err := c.run(ctx, c.Bin.Path("pg_ctl"), "-D", c.DataDir, "-m", "fast", "-w",
		"-t", strconv.Itoa(int(startTimeout/time.Second)), "stop")
	if err != nil {
		if _, alive, _ := c.postmaster(); !alive {
			return nil
		}
		return fmt.Errorf("pg_ctl stop failed: %w\n%s", err, tail(out, 10))
	}
	return nil
}

// Destroy stops the cluster and removes its state directory. It refuses a
// directory that does not look like one of ours.
func (c *Cluster) Destroy(ctx context.Context) error {
	if _, err := os.Stat(c.StateDir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if !c.ours() {
		return fmt.Errorf("%s does not look like a pgquectl cluster directory (no %s, no data/PG_VERSION): not removing it", c.StateDir, stateFileName)
	}
	if err := c.Stop(ctx); err != nil {
		return err
	}
	if err := os.RemoveAll(c.StateDir); err != nil {
		return fmt.Errorf("removing %s: %w", c.StateDir, err)
	}
	if !strings.HasPrefix(c.SocketDir, c.StateDir+string(filepath.Separator)) {
		_ = os.RemoveAll(c.SocketDir)
	}
	return nil
}

func (c *Cluster) ours() bool {
	if _, err := os.Stat(filepath.Join(c.StateDir, stateFileName)); err == nil {
		return true
	}
	if c.Initialized() {
		return true
	}
	entries, err := os.ReadDir(c.StateDir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if e.Name() != lockFileName && e.Name() != "data" && e.Name() != "sock" {
			return false
		}
	}
	return true
}

// Reload makes a running cluster re-read its configuration files
// (postgresql.conf, pg_hba.conf).
func (c *Cluster) Reload(ctx context.Context) error {
	if _, alive, err := c.postmaster(); err != nil || !alive {
		if err == nil {
			err = fmt.Errorf("the cluster in %s is not running", c.StateDir)
		}
		return err
	}
	if out, err := c.run(ctx, c.Bin.Path("pg_ctl"), "-D", c.DataDir, "reload"); err != nil {
		return fmt.Errorf("pg_ctl reload failed: %w\n%s", err, tail(out, 10))
	}
	return nil
}

// CrashRestart simulates a crash of PostgreSQL and waits until the cluster
// is back: `pg_ctl -m immediate restart` (every server process quits at
// once, without a shutdown checkpoint, and the start runs crash recovery),
// on the same port. Sessions are cut; what was committed survives (fsync
// off loses data only in a crash of the machine, not of the server). For
// tests of crash safety.
func (c *Cluster) CrashRestart(ctx context.Context) error {
	if _, alive, err := c.postmaster(); err != nil || !alive {
		if err == nil {
			err = fmt.Errorf("the cluster in %s is not running", c.StateDir)
		}
		return err
	}
	out, err := c.run(ctx, c.Bin.Path("pg_ctl"), "-D", c.DataDir, "-l", c.LogFile, "-m", "immediate", "-w",
		"-t", strconv.Itoa(int(startTimeout/time.Second)), "restart")
	if err != nil {
		return fmt.Errorf("pg_ctl -m immediate restart failed: %w\n%s\n--- %s (last lines) ---\n%s", err, tail(out, 10), c.LogFile, c.logTail(20))
	}
	return nil
}
