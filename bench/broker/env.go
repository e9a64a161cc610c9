package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgquectl/pgquectl/internal/localpg"
)

// benchDB is the database the engine is installed in.
const benchDB = "pgque_bench"

// clusterSettings: a durable server (fsync on, synchronous commits), few
// checkpoints (each cell starts with CHECKPOINT, so full-page images land
// alike in every cell), and pg_stat_statements for the time PostgreSQL
// spends per pop. shared_preload_libraries is set here for this cluster
// only (it overrides localpg's 'pg_cron' line: the later line wins).
func clusterSettings(cron bool, track string, extra map[string]string) map[string]string {
	preload := "'pg_stat_statements'"
	if cron {
		preload = "'pg_cron,pg_stat_statements'"
	}
	m := map[string]string{
		"shared_buffers":             "'512MB'",
		"max_wal_size":               "'8GB'",
		"checkpoint_timeout":         "'1h'",
		"max_connections":            "300",
		"shared_preload_libraries":   preload,
		"pg_stat_statements.track":   "'top'",
		"pg_stat_statements.max":     "5000",
		"pg_stat_statements.save":    "off",
		"track_io_timing":            "off",
		"log_min_duration_statement": "-1",
		"log_timezone":               "'UTC'",
	}
	if track == "all" {
		m["pg_stat_statements.track"] = "'all'"
		m["pg_stat_statements.track_planning"] = "on"
	}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

// env is the running benchmark environment: the cluster, the binary, the
// brokers.
type env struct {
	cfg     Config
	cluster *localpg.Cluster
	dsn     string // the bench database, superuser
	bin     string
	hotlist bool // serve knows --hotlist
	pprof   bool // serve knows --pprof
	db      *pgx.Conn
	brokers []*brokerProc
	ticker  *brokerProc // the ticker daemon (--ticker daemon)
	seq     int
	// clientPid is the latency cell's load client while one runs (its CPU
	// is the cell's client CPU); 0: this process is the client.
	clientPid int
}

// Ticker modes (--ticker).
const (
	TickerDaemon = "daemon" // pgquectl tick --run --hz 100 beside the brokers
	TickerCron   = "cron"   // pgquectl tick --hz 100: pg_cron jobs
	TickerNone   = "none"   // no scheduled ticking (no rotation, no ticks for classic consumers)
)

// startTicker starts the scheduled ticking the engine runs in production
// beside the brokers (rotation and maintenance included).
func (e *env) startTicker(ctx context.Context) error {
	switch e.cfg.Ticker {
	case TickerNone:
		return nil
	case TickerCron:
		if !e.cluster.CronPreloaded {
			return errors.New("--ticker cron: pg_cron is not installed for this PostgreSQL (scripts/setup.sh installs it); use --ticker daemon")
		}
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		out, err := exec.CommandContext(cctx, e.bin, "tick", "--hz", "100", "--dsn", e.dsn).CombinedOutput()
		if err != nil {
			return fmt.Errorf("pgquectl tick --hz 100: %w\n%s", err, out)
		}
		return nil
	}
	logPath := filepath.Join(e.cfg.StateDir, "ticker.log")
	lf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	cmd := exec.Command(e.bin, "tick", "--run", "--hz", "100", "--dsn", e.dsn, "--log-level", "warn")
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = lf.Close()
		return fmt.Errorf("starting %s tick --run: %w", e.bin, err)
	}
	t := &brokerProc{cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); _ = lf.Close(); close(t.done) }()
	e.ticker = t
	e.writePids()
	e.cfg.Log.Info("ticker daemon started", "hz", 100, "log", logPath)
	select {
	case <-t.done:
		tail, _ := os.ReadFile(logPath)
		return fmt.Errorf("the ticker daemon exited: %s", lastLines(string(tail), 10))
	case <-time.After(500 * time.Millisecond):
	}
	return nil
}

// setupEnv wipes and starts the cluster, builds pgquectl, installs the
// engine and opens the measuring connection.
func setupEnv(ctx context.Context, cfg Config) (*env, error) {
	log := cfg.Log
	binaries, err := localpg.FindBinaries()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.StateDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", cfg.StateDir, err)
	}
	killStaleBrokers(cfg.StateDir)
	// The cluster lives in a subdirectory: the state directory also holds
	// the binary and the broker logs, and localpg hands its directory to
	// the postgres user when run as root.
	opts := localpg.Options{StateDir: filepath.Join(cfg.StateDir, "pg"), Settings: clusterSettings(binaries.HasPgCron(), cfg.StatementsTrack, cfg.ClusterSettings), Log: log}
	if c, err := localpg.Open(opts); err == nil {
		if err := c.Destroy(context.WithoutCancel(ctx)); err != nil {
			return nil, fmt.Errorf("resetting %s: %w", opts.StateDir, err)
		}
	}
	e := &env{cfg: cfg, bin: cfg.Binary}
	if e.bin == "" {
		e.bin = filepath.Join(cfg.StateDir, "pgquectl")
		log.Info("building pgquectl", "out", e.bin)
		bctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		out, err := exec.CommandContext(bctx, "go", "build", "-o", e.bin, "github.com/pgquectl/pgquectl/cmd/pgquectl").CombinedOutput()
		cancel()
		if err != nil {
			return nil, fmt.Errorf("go build ./cmd/pgquectl: %w\n%s", err, out)
		}
	}
	help, err := exec.CommandContext(ctx, e.bin, "serve", "--help").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%s serve --help: %w\n%s", e.bin, err, help)
	}
	e.hotlist = strings.Contains(string(help), "--hotlist")
	e.pprof = strings.Contains(string(help), "--pprof")
	if cfg.ServePprof && !e.pprof {
		return nil, fmt.Errorf("--serve-pprof: %s serve has no --pprof flag", e.bin)
	}

	log.Info("starting the benchmark cluster", "state_dir", opts.StateDir)
	e.cluster, err = localpg.EnsureRunning(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("starting the benchmark cluster: %w", err)
	}
	pg, err := pgx.Connect(ctx, e.cluster.DSN("postgres"))
	if err != nil {
		e.close()
		return nil, fmt.Errorf("connecting to the benchmark cluster: %w", err)
	}
	_, err = pg.Exec(ctx, "CREATE DATABASE "+benchDB)
	_ = pg.Close(ctx)
	if err != nil {
		e.close()
		return nil, fmt.Errorf("creating %s: %w", benchDB, err)
	}
	e.dsn = e.cluster.DSN(benchDB)
	ictx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	out, err := exec.CommandContext(ictx, e.bin, "install", "--dsn", e.dsn).CombinedOutput()
	cancel()
	if err != nil {
		e.close()
		return nil, fmt.Errorf("pgquectl install: %w\n%s", err, out)
	}
	if e.db, err = pgx.Connect(ctx, e.dsn); err != nil {
		e.close()
		return nil, fmt.Errorf("connecting to %s: %w", benchDB, err)
	}
	if _, err := e.db.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"); err != nil {
		e.close()
		return nil, fmt.Errorf("creating pg_stat_statements (is it preloaded?): %w", err)
	}
	return e, nil
}

// close stops the brokers, the ticker and (unless kept) the cluster.
func (e *env) close() {
	e.stopBrokers()
	if e.ticker != nil {
		stopProc(e.ticker)
		e.ticker = nil
		e.writePids()
	}
	if e.db != nil {
		_ = e.db.Close(context.Background())
	}
	if e.cluster != nil && !e.cfg.KeepCluster {
		_ = e.cluster.Stop(context.Background())
	}
}

// brokerProc is one running `pgquectl serve`.
type brokerProc struct {
	cmd   *exec.Cmd
	url   string
	pprof string // host:port of its profiler (--serve-pprof), else ""
	log   string
	done  chan struct{}
}

// startBrokers (re)starts n brokers on the bench database, with the
// hot-list on or off (when the build has the switch), and waits until each
// answers /health.
func (e *env) startBrokers(ctx context.Context, n int, hotlist bool) error {
	e.stopBrokers()
	for range n {
		e.seq++
		port, err := freePort()
		if err != nil {
			return err
		}
		args := []string{"serve", "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--dsn", e.dsn, "--log-level", "warn"}
		if e.hotlist {
			args = append(args, fmt.Sprintf("--hotlist=%t", hotlist))
		}
		pprofAddr := ""
		if e.cfg.ServePprof {
			pport, err := freePort()
			if err != nil {
				return err
			}
			pprofAddr = fmt.Sprintf("127.0.0.1:%d", pport)
			args = append(args, "--pprof", pprofAddr)
		}
		args = append(args, e.cfg.ServeFlags...)
		logPath := filepath.Join(e.cfg.StateDir, fmt.Sprintf("broker-%02d.log", e.seq))
		lf, err := os.Create(logPath)
		if err != nil {
			return err
		}
		cmd := exec.Command(e.bin, args...)
		cmd.Stdout, cmd.Stderr = lf, lf
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			_ = lf.Close()
			return fmt.Errorf("starting %s serve: %w", e.bin, err)
		}
		b := &brokerProc{cmd: cmd, url: fmt.Sprintf("http://127.0.0.1:%d", port), pprof: pprofAddr, log: logPath, done: make(chan struct{})}
		go func() { _ = cmd.Wait(); _ = lf.Close(); close(b.done) }()
		e.writePids()
		e.brokers = append(e.brokers, b)
		e.cfg.Log.Info("broker started", "url", b.url, "hotlist", hotlist && e.hotlist, "log", logPath, "args", strings.Join(args[5:], " "))
		if err := waitHealthy(ctx, b); err != nil {
			return err
		}
	}
	return nil
}

func (e *env) stopBrokers() {
	for _, b := range e.brokers {
		stopProc(b)
	}
	e.brokers = nil
	e.writePids()
}

// stopProc sends SIGTERM, and SIGKILL after 15 s.
func stopProc(b *brokerProc) {
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.done:
	case <-time.After(15 * time.Second):
		_ = b.cmd.Process.Kill()
		<-b.done
	}
}

// brokersPidFile lists the running brokers' pids, so that a run killed
// before it stopped them (SIGKILL) does not leave them behind: the next
// run stops them first.
const brokersPidFile = "brokers.pid"

func (e *env) writePids() {
	var b strings.Builder
	procs := e.brokers
	if e.ticker != nil {
		procs = append(procs[:len(procs):len(procs)], e.ticker)
	}
	for _, p := range procs {
		fmt.Fprintf(&b, "%d %s\n", p.cmd.Process.Pid, p.cmd.Args[0])
	}
	_ = os.WriteFile(filepath.Join(e.cfg.StateDir, brokersPidFile), []byte(b.String()), 0o644)
}

// killStaleBrokers stops the `pgquectl serve` / `tick --run` processes a
// previous run left (by pid, and only when the process is still one).
func killStaleBrokers(stateDir string) {
	raw, err := os.ReadFile(filepath.Join(stateDir, brokersPidFile))
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(raw), "\n") {
		pidText, bin, ok := strings.Cut(line, " ")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil || pid <= 1 {
			continue
		}
		// Only when that pid still runs that binary (pids are reused).
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if argv0, _, _ := strings.Cut(string(cmdline), "\x00"); err != nil || argv0 != bin {
			continue
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	_ = os.Remove(filepath.Join(stateDir, brokersPidFile))
}

func waitHealthy(ctx context.Context, b *brokerProc) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, b.url+"/health", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-b.done:
			tail, _ := os.ReadFile(b.log)
			return fmt.Errorf("broker exited before answering /health: %s", lastLines(string(tail), 10))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("broker %s not healthy after 30 s (log %s)", b.url, b.log)
		}
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// pgSnapshot is what a cell reads from PostgreSQL at its start and end.
type pgSnapshot struct {
	lsn string
	cpu cpuSnap
}

// beginCell checkpoints (when asked: not while load runs), resets
// pg_stat_statements and reads the WAL position.
func (e *env) beginCell(ctx context.Context, checkpoint bool) (pgSnapshot, error) {
	var s pgSnapshot
	if checkpoint {
		if _, err := e.db.Exec(ctx, "CHECKPOINT"); err != nil {
			return s, fmt.Errorf("CHECKPOINT: %w", err)
		}
	}
	if _, err := e.db.Exec(ctx, "SELECT pg_stat_statements_reset()"); err != nil {
		return s, fmt.Errorf("pg_stat_statements_reset: %w", err)
	}
	err := e.db.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&s.lsn)
	s.cpu = e.readCPU()
	return s, err
}

// readCPU reads the CPU used so far by the cluster, brokers, ticker daemon
// and this process (cpu.go).
func (e *env) readCPU() cpuSnap {
	var brokers []int
	for _, b := range e.brokers {
		if b.cmd != nil && b.cmd.Process != nil {
			brokers = append(brokers, b.cmd.Process.Pid)
		}
	}
	ticker := 0
	if e.ticker != nil && e.ticker.cmd != nil && e.ticker.cmd.Process != nil {
		ticker = e.ticker.cmd.Process.Pid
	}
	client := e.clientPid
	if client == 0 {
		client = os.Getpid()
	}
	return readCPU(e.cluster.DataDir, brokers, ticker, client)
}

// profileBrokers records each broker's CPU profile for d (--serve-pprof;
// else it does nothing) into <out>/<cell>-serve[-k].pprof, in the
// background; the returned function waits for the files and names them.
func (e *env) profileBrokers(ctx context.Context, cell string, d time.Duration) func() ([]string, error) {
	type got struct {
		name string
		err  error
	}
	var ch []chan got
	for k, b := range e.brokers {
		if b.pprof == "" {
			continue
		}
		name := cell + "-serve.pprof"
		if len(e.brokers) > 1 {
			name = fmt.Sprintf("%s-serve-%d.pprof", cell, k+1)
		}
		c := make(chan got, 1)
		ch = append(ch, c)
		go func() { c <- got{name, fetchProfile(ctx, b.pprof, d, filepath.Join(e.cfg.OutDir, name))} }()
	}
	return func() ([]string, error) {
		var names []string
		var errs []error
		for _, c := range ch {
			g := <-c
			if g.err != nil {
				errs = append(errs, g.err)
				continue
			}
			names = append(names, g.name)
		}
		return names, errors.Join(errs...)
	}
}

// fetchProfile saves the CPU profile of the next d (whole seconds, at
// least 1) from the Go profiler at addr to path.
func fetchProfile(ctx context.Context, addr string, d time.Duration, path string) error {
	secs := max(1, int((d+time.Second-1)/time.Second))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, secs), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("fetching serve's CPU profile: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("fetching serve's CPU profile: HTTP %d: %s", resp.StatusCode, msg)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return f.Close()
}

// endCell reads the WAL written since s and pg_stat_statements by class.
func (e *env) endCell(ctx context.Context, s pgSnapshot, c *Cell) error {
	c.CPU = cpuBetween(s.cpu, e.readCPU())
	if err := e.db.QueryRow(ctx, "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::bigint", s.lsn).Scan(&c.WALBytes); err != nil {
		return fmt.Errorf("reading the WAL position: %w", err)
	}
	rows, err := e.db.Query(ctx, `SELECT query, calls, total_exec_time FROM pg_stat_statements
		WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND toplevel`)
	if err != nil {
		return fmt.Errorf("reading pg_stat_statements: %w", err)
	}
	defer rows.Close()
	c.Statements = map[string]*StmtStats{}
	for rows.Next() {
		var q string
		var calls int64
		var ms float64
		if err := rows.Scan(&q, &calls, &ms); err != nil {
			return err
		}
		class := statementClass(q)
		if strings.Contains(q, "pg_stat_statements") || strings.Contains(q, "pg_current_wal_lsn") || q == "CHECKPOINT" {
			continue // the harness's own
		}
		st := c.Statements[class]
		if st == nil {
			st = &StmtStats{}
			c.Statements[class] = st
		}
		st.Calls += calls
		st.TotalMs += ms
	}
	return rows.Err()
}
