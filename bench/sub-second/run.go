package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/schollz/progressbar/v3"

	"github.com/pgquectl/pgquectl/internal/cron"
	"github.com/pgquectl/pgquectl/internal/install"
	"github.com/pgquectl/pgquectl/internal/localpg"
)

// Databases of the benchmark cluster.
const (
	pgqueDB = "pgque_bench"
	pgqDB   = "pgq_bench"
	// pgque020DB holds PgQue 0.2.0 on the pg_cron 1.6 cluster: pg_cron's
	// own database there, as on a managed provider (its start() schedules
	// with pg_cron in its database); our engine's jobs run in pgque_bench
	// via cron.schedule_in_database.
	pgque020DB = localpg.CronDatabase
)

// EnvPgCron16BinDir names the bin directory of a PostgreSQL 15 tree with
// pg_cron 1.6 (scripts/pgcron16.sh builds one); unset, the pg_cron 1.6
// phases are skipped with a note in the report.
const EnvPgCron16BinDir = "PGQUE_PGCRON16_BINDIR"

// EnvPgQue020SQL names PgQue 0.2.0's single-file install (pgque.sql);
// unset, the PgQue 0.2.0 phases are skipped with a note in the report.
const EnvPgQue020SQL = "PGQUE_PGQUE020_SQL"

// Named setup statements.
const (
	qCreateDB       = `CREATE DATABASE ` // + identifier
	qCronExt        = `CREATE EXTENSION IF NOT EXISTS pg_cron`
	qStattupleExt   = `CREATE EXTENSION IF NOT EXISTS pgstattuple`
	qWalinspectExt  = `CREATE EXTENSION IF NOT EXISTS pg_walinspect`
	qPgqExt         = `CREATE EXTENSION IF NOT EXISTS pgq`
	qBystanderTable = `CREATE TABLE IF NOT EXISTS bench_bystander (id int PRIMARY KEY, v text NOT NULL)`
	qBystanderFill  = `INSERT INTO bench_bystander SELECT g, md5(g::text) FROM generate_series(1, 10000) g ON CONFLICT DO NOTHING`
	qServerVersion  = `SELECT current_setting('server_version')`
	qExtVersionOf   = `SELECT coalesce((SELECT extversion FROM pg_extension WHERE extname = $1), '')`
	qSetDefaultTick = `SELECT pgque.set_tick_period_ms($1::int)`
	qTickerLoopRuns = `SELECT count(*) FROM cron.job_run_details d JOIN cron.job j USING (jobid) WHERE j.jobname LIKE 'pgque\_ticker%' AND d.status = 'running'`
	qEngineVersion  = `SELECT pgque.version()`
)

// Machine describes where the run happened.
type Machine struct {
	CPUs        int    `json:"nproc"`
	CPUModel    string `json:"cpu_model"`
	MemoryBytes int64  `json:"memory_bytes"`
	Kernel      string `json:"kernel"`
	PostgreSQL  string `json:"postgresql"`
	PgCron      string `json:"pg_cron"`
	PgQ         string `json:"pgq"`
	Pgqd        string `json:"pgqd"`
	PgCron16    string `json:"pg_cron_16,omitempty"` // pg_cron of the 1.6 cluster
	PgQue020    string `json:"pgque_020,omitempty"`  // sha256 of PgQue 0.2.0's pgque.sql (prefix)
	Engine      string `json:"pgque_engine"`
	EngineSQL   string `json:"pgque_engine_sql_sha256"` // of the embedded install script
	Go          string `json:"go"`
}

// Results is the JSON document of a run.
type Results struct {
	Profile  string     `json:"profile"`
	Started  time.Time  `json:"started"`
	Finished time.Time  `json:"finished"`
	Machine  Machine    `json:"machine"`
	Config   ConfigEcho `json:"config"`
	CronJobs []cron.Job `json:"cron_jobs"`
	// WALPerTick: bytes of WAL one materialized tick of one active queue
	// writes (probeWALPerTick), the basis of ticker.BytesPerTick.
	WALPerTick float64       `json:"wal_bytes_per_tick"`
	Phases     []PhaseResult `json:"phases"`
	// Skipped: phases not run, with why (e.g. no pg_cron 1.6 build).
	Skipped []string `json:"skipped,omitempty"`
	// Interrupted: the run stopped early (signal); the phases done are kept.
	Interrupted bool   `json:"interrupted,omitempty"`
	Error       string `json:"error,omitempty"`
}

// ConfigEcho is the part of Config worth recording.
type ConfigEcho struct {
	PollIntervalMs   float64 `json:"poll_interval_ms"`
	ListenFallbackMs float64 `json:"listen_fallback_ms"`
	SampleEveryMs    float64 `json:"sample_every_ms"`
	ProducerTxPerSec int     `json:"producer_tx_per_sec"`
	ClusterSettings  map[string]string
}

// clusterSettings: durable commits (a real server), few checkpoints (so a
// checkpoint's full-page images do not land in one phase and not another;
// each phase starts with CHECKPOINT).
var clusterSettings = map[string]string{
	"shared_buffers":     "'512MB'",
	"max_wal_size":       "'8GB'",
	"checkpoint_timeout": "'1h'",
	"max_connections":    "300",
	// Diagnostics: log every lock wait longer than 100 ms (with its holder),
	// and checkpoints (the stall diagnostics match them to tick gaps).
	"log_lock_waits":   "on",
	"deadlock_timeout": "'100ms'",
	"log_checkpoints":  "on",
	// The diagnostics parse the log's timestamps: keep them in UTC.
	"log_timezone": "'UTC'",
}

// Run runs the benchmark: it wipes and starts its own cluster, runs every
// phase, and writes results.json, report.md and the charts to cfg.OutDir.
// On ctx's end (first signal) it stops the current phase, cleans up and
// still writes what it measured.
func Run(ctx context.Context, cfg Config) (*Results, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	log := cfg.Log
	res := &Results{Profile: cfg.Profile, Started: time.Now(), Config: ConfigEcho{
		PollIntervalMs: ms(cfg.PollInterval), ListenFallbackMs: ms(cfg.ListenFallback),
		SampleEveryMs: ms(cfg.SampleEvery), ProducerTxPerSec: cfg.ProducerTxPerSec, ClusterSettings: clusterSettings,
	}}
	if err := os.MkdirAll(cfg.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", cfg.OutDir, err)
	}

	// Reset: a stale pgqd, then the whole cluster.
	pgqDir := filepath.Join(cfg.StateDir, "pgqd")
	killStalePgqd(pgqDir)
	opts := localpg.Options{StateDir: cfg.StateDir, Settings: clusterSettings, Log: log}
	if c, err := localpg.Open(opts); err == nil {
		if err := c.Destroy(context.WithoutCancel(ctx)); err != nil {
			return nil, fmt.Errorf("resetting %s: %w", cfg.StateDir, err)
		}
	}
	log.Info("starting the benchmark cluster", "state_dir", cfg.StateDir)
	cluster, err := localpg.EnsureRunning(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("starting the benchmark cluster: %w", err)
	}
	if !cluster.CronPreloaded {
		return nil, errors.New("pg_cron is not installed for this PostgreSQL (apt-get install postgresql-15-cron; scripts/setup.sh installs it)")
	}
	defer func() {
		if !cfg.KeepCluster {
			_ = cluster.Stop(context.Background())
		}
	}()
	if err := os.MkdirAll(pgqDir, 0o755); err != nil {
		return nil, err
	}
	e := &env{cfg: cfg, dsn: cluster.DSN, cronDB: localpg.CronDatabase, serverLog: cluster.LogFile}
	pgque := &pgqueSystem{db: pgqueDB}
	pgq := &pgqSystem{db: pgqDB, dir: pgqDir,
		connstr: fmt.Sprintf("host=%s port=%d user=%s", cluster.SocketDir, cluster.Port, localpg.Superuser)}
	defer func() { _ = pgq.Close(context.Background()) }()

	// The pg_cron 1.6 cluster, when its phases are asked for and built.
	var e16 *env
	var pgque16 *pgqueSystem
	var p020 *pgque020System
	var phases []Phase
	for _, p := range cfg.Phases {
		switch {
		case p.Cron == Cron16 && cfg.PgCron16BinDir == "":
			res.Skipped = append(res.Skipped, fmt.Sprintf("%s: %s is not set (scripts/pgcron16.sh builds PostgreSQL 15 with pg_cron 1.6)", p.Name, EnvPgCron16BinDir))
		case p.System == SystemPgque020 && cfg.PgQue020SQL == "":
			res.Skipped = append(res.Skipped, fmt.Sprintf("%s: %s is not set (the path of PgQue 0.2.0's pgque.sql)", p.Name, EnvPgQue020SQL))
		default:
			phases = append(phases, p)
		}
	}
	if needsCron16(phases) {
		c16, err := startCron16(ctx, cfg)
		if err != nil {
			return res, err
		}
		defer func() {
			if !cfg.KeepCluster {
				_ = c16.Stop(context.Background())
			}
		}()
		e16 = &env{cfg: cfg, dsn: c16.DSN, cronDB: localpg.CronDatabase, serverLog: c16.LogFile}
	}

	if err := setup(ctx, e, res, cfg, e16); err != nil {
		return res, err
	}
	defer func() { // leave no job ticking a cluster we stop
		for _, ce := range []*env{e, e16} {
			if ce == nil {
				continue
			}
			if c, err := ce.connect(context.Background(), pgqueDB, "bench-cleanup"); err == nil {
				_, _ = cron.Unregister(context.Background(), c)
				_ = c.Close(context.Background())
			}
		}
	}()
	if e16 != nil {
		register := func(ctx context.Context) error { // ours on: the phase's ticker
			c, err := e16.connect(ctx, pgqueDB, "bench-setup")
			if err != nil {
				return err
			}
			defer c.Close(context.WithoutCancel(ctx))
			if _, _, err := cron.Register(ctx, c); err != nil {
				return fmt.Errorf("registering our pg_cron jobs on the pg_cron 1.6 cluster: %w", err)
			}
			return nil
		}
		pause := func(ctx context.Context) error { // ours off while the peer runs
			c, err := e16.connect(ctx, pgqueDB, "bench-setup")
			if err != nil {
				return err
			}
			defer c.Close(context.WithoutCancel(ctx))
			if _, err := cron.Unregister(ctx, c); err != nil {
				return fmt.Errorf("pausing our pg_cron jobs: %w", err)
			}
			return nil
		}
		pgque16 = &pgqueSystem{db: pgqueDB, prepare: register}
		p020 = &pgque020System{pgqueSystem: pgqueSystem{db: pgque020DB, prepare: pause},
			connect: func(ctx context.Context) (*pgx.Conn, error) { return e16.connect(ctx, pgque020DB, "bench-setup") }}
	}

	// Progress bar over the measured seconds.
	var total time.Duration
	for _, p := range phases {
		total += p.Duration
	}
	var bar *progressbar.ProgressBar
	if cfg.Progress != nil {
		bar = progressbar.NewOptions64(int64(total/time.Second),
			progressbar.OptionSetWriter(cfg.Progress),
			progressbar.OptionSetDescription("setup"),
			progressbar.OptionShowCount(),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionThrottle(500*time.Millisecond),
			progressbar.OptionClearOnFinish())
	}
	var done time.Duration
	e.progress = func(phase string, elapsed time.Duration) {
		if bar != nil {
			bar.Describe(phase)
			_ = bar.Set64(int64((done + min(elapsed, total)) / time.Second))
		}
	}
	if e16 != nil {
		e16.progress = e.progress
	}

	for i, p := range phases {
		if ctx.Err() != nil {
			break
		}
		pe, sys := e, system(pgque)
		switch {
		case p.System == SystemPgQ:
			sys = pgq
		case p.System == SystemPgque020:
			pe, sys = e16, p020
		case p.Cron == Cron16:
			pe, sys = e16, pgque16
		}
		log.Info("phase", "n", i+1, "of", len(phases), "name", p.Name, "duration", p.Duration)
		r, err := runPhase(ctx, pe, sys, p)
		done += p.Duration
		if err != nil && !errors.Is(err, context.Canceled) {
			r.Errors = append(r.Errors, err.Error())
			log.Error("phase failed", "name", p.Name, "err", err)
		}
		if err == nil || r.Seconds > 0 {
			res.Phases = append(res.Phases, r)
		}
		log.Info("phase done", "name", p.Name, "p50_ms", r.Latency.P50, "p99_ms", r.Latency.P99, "max_ms", r.Latency.Max,
			"wal_bytes_per_sec", int64(r.WALBytesPerSec), "peak_dead_tick", r.PeakDeadTick, "peak_dead_sub", r.PeakDeadSub,
			"max_tick_gap_ms", r.MaxTickGapMs, "ack_p50_ms", r.Ack.P50)
	}
	if bar != nil {
		_ = bar.Finish()
	}
	res.Interrupted = ctx.Err() != nil
	res.Finished = time.Now()
	if err := writeOutputs(cfg.OutDir, res); err != nil {
		return res, err
	}
	return res, nil
}

// setup creates both databases, installs the engine, registers its pg_cron
// jobs and waits for the first ticker_loop run. With e16 it prepares the
// pg_cron 1.6 cluster too (while pg_cron 1.4 waits for its minute).
func setup(ctx context.Context, e *env, res *Results, cfg Config, e16 *env) error {
	ctx, cancel := context.WithTimeout(ctx, cfg.WarmupTimeout+2*time.Minute)
	defer cancel()
	pg, err := e.connect(ctx, e.cronDB, "bench-setup")
	if err != nil {
		return err
	}
	defer pg.Close(context.Background())
	for _, db := range []string{pgqueDB, pgqDB} {
		if _, err := pg.Exec(ctx, qCreateDB+pgx.Identifier{db}.Sanitize()); err != nil {
			return fmt.Errorf("creating database %s: %w", db, err)
		}
	}
	if _, err := pg.Exec(ctx, qCronExt); err != nil {
		return fmt.Errorf("creating extension pg_cron: %w", err)
	}
	m := machine()
	_ = pg.QueryRow(ctx, qServerVersion).Scan(&m.PostgreSQL)
	_ = pg.QueryRow(ctx, qExtVersionOf, "pg_cron").Scan(&m.PgCron)

	// PgQ side.
	q, err := e.connect(ctx, pgqDB, "bench-setup")
	if err != nil {
		return err
	}
	defer q.Close(context.Background())
	for _, s := range []string{qPgqExt, qStattupleExt, qWalinspectExt, qBystanderTable, qBystanderFill} {
		if _, err := q.Exec(ctx, s); err != nil {
			return fmt.Errorf("preparing %s (%s): %w (PgQ: apt-get install postgresql-15-pgq3; scripts/setup.sh installs it)", pgqDB, s, err)
		}
	}
	_ = q.QueryRow(ctx, qExtVersionOf, "pgq").Scan(&m.PgQ)

	// pgque side.
	c, err := e.connect(ctx, pgqueDB, "bench-setup")
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	if _, err := install.Install(ctx, c, install.Options{Log: cfg.Log}); err != nil {
		return fmt.Errorf("installing the engine: %w", err)
	}
	for _, s := range []string{qStattupleExt, qWalinspectExt, qBystanderTable, qBystanderFill} {
		if _, err := c.Exec(ctx, s); err != nil {
			return fmt.Errorf("preparing %s: %w", pgqueDB, err)
		}
	}
	_ = c.QueryRow(ctx, qEngineVersion).Scan(&m.Engine)
	if script, err := install.Script(); err == nil {
		m.EngineSQL = fmt.Sprintf("%x", sha256.Sum256([]byte(script)))[:16]
	}
	first := 100
	for _, p := range cfg.Phases {
		if p.System == SystemPgque {
			first = p.Hz
			break
		}
	}
	if _, err := c.Exec(ctx, qSetDefaultTick, (time.Second / time.Duration(first)).Milliseconds()); err != nil {
		return fmt.Errorf("setting the tick period: %w", err)
	}
	if res.WALPerTick, err = probeWALPerTick(ctx, c); err != nil {
		return err
	}
	cfg.Log.Info("WAL per tick measured", "bytes", int64(res.WALPerTick))
	info, jobs, err := cron.Register(ctx, c)
	if err != nil {
		return fmt.Errorf("registering the pg_cron jobs: %w", err)
	}
	res.CronJobs = jobs
	cfg.Log.Info("pg_cron jobs registered", "pg_cron", info.Version, "cron_db", info.Database, "jobs", len(jobs))
	if e16 != nil {
		if err := setupCron16(ctx, e16, cfg, &m, needsPgque020(cfg.Phases) && cfg.PgQue020SQL != ""); err != nil {
			return err
		}
	}
	res.Machine = m

	// pg_cron 1.4 starts minute jobs at the next minute boundary. When the
	// pg_cron 1.6 phases come first they run meanwhile; the first main
	// phase's warm-up then waits for the loop (WarmupTimeout).
	if e16 != nil && len(cfg.Phases) > 0 && cfg.Phases[0].Cron == Cron16 {
		return nil
	}
	cfg.Log.Info("waiting for pg_cron to start the ticker loop (up to the next minute boundary)")
	for {
		var n int64
		if err := pg.QueryRow(ctx, qTickerLoopRuns).Scan(&n); err != nil {
			return fmt.Errorf("watching cron.job_run_details: %w", err)
		}
		if n > 0 {
			return nil
		}
		if !sleepCtx(ctx, 250*time.Millisecond) {
			return fmt.Errorf("pg_cron did not start the ticker loop within %s: check the cluster log in %s (%w)",
				cfg.WarmupTimeout, cfg.StateDir, ctx.Err())
		}
	}
}

func machine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), Go: runtime.Version()}
	if raw, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for l := range strings.SplitSeq(string(raw), "\n") {
			if strings.HasPrefix(l, "model name") {
				m.CPUModel = strings.TrimSpace(l[strings.Index(l, ":")+1:])
				break
			}
		}
	}
	if raw, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		for l := range strings.SplitSeq(string(raw), "\n") {
			if _, err := fmt.Sscanf(l, "MemTotal: %d kB", &kb); err == nil {
				m.MemoryBytes = kb * 1024
				break
			}
		}
	}
	if raw, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(raw))
	}
	if out, err := exec.Command("dpkg-query", "-W", "-f=${Version}", "pgqd").Output(); err == nil {
		m.Pgqd = string(out)
	}
	return m
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func needsPgque020(ps []Phase) bool {
	for _, p := range ps {
		if p.System == SystemPgque020 {
			return true
		}
	}
	return false
}

func needsCron16(ps []Phase) bool {
	for _, p := range ps {
		if p.Cron == Cron16 {
			return true
		}
	}
	return false
}

// startCron16 wipes and starts the pg_cron 1.6 cluster (same settings as
// the main one) from cfg.PgCron16BinDir.
func startCron16(ctx context.Context, cfg Config) (*localpg.Cluster, error) {
	bin, err := binariesIn(cfg.PgCron16BinDir)
	if err != nil {
		return nil, fmt.Errorf("%s=%s: %w", EnvPgCron16BinDir, cfg.PgCron16BinDir, err)
	}
	opts := localpg.Options{StateDir: cfg.StateDir + "-pgcron16", Settings: clusterSettings, Log: cfg.Log, Binaries: &bin}
	if c, err := localpg.Open(opts); err == nil {
		if err := c.Destroy(context.WithoutCancel(ctx)); err != nil {
			return nil, fmt.Errorf("resetting %s: %w", opts.StateDir, err)
		}
	}
	cfg.Log.Info("starting the pg_cron 1.6 cluster", "state_dir", opts.StateDir, "bin", bin.BinDir)
	c, err := localpg.EnsureRunning(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("starting the pg_cron 1.6 cluster: %w", err)
	}
	if !c.CronPreloaded {
		_ = c.Stop(context.Background())
		return nil, fmt.Errorf("%s has no pg_cron.so in %s", cfg.PgCron16BinDir, bin.PkgLibDir)
	}
	return c, nil
}

// binariesIn describes the PostgreSQL installation whose bin directory is
// dir (through its own pg_config: the trees are relocatable).
func binariesIn(dir string) (localpg.Binaries, error) {
	out, err := exec.Command(filepath.Join(dir, "pg_config"), "--bindir", "--pkglibdir", "--version").Output()
	if err != nil {
		return localpg.Binaries{}, fmt.Errorf("running %s/pg_config: %w", dir, err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 3 {
		return localpg.Binaries{}, fmt.Errorf("unexpected pg_config output %q", out)
	}
	b := localpg.Binaries{BinDir: dir, PkgLibDir: strings.TrimSpace(lines[1])}
	if f := strings.Fields(lines[2]); len(f) >= 2 {
		b.Version = f[1]
		major, _, _ := strings.Cut(b.Version, ".")
		b.Major, _ = strconv.Atoi(major)
	}
	if b.Major == 0 {
		return b, fmt.Errorf("cannot read the version from %q", lines[2])
	}
	return b, nil
}

// setupCron16 prepares the pg_cron 1.6 cluster: our engine in pgque_bench
// with its jobs registered (pg_cron 1.6: '1 seconds' schedules), and PgQue
// 0.2.0 in pgque020_bench (its jobs start with its phases).
func setupCron16(ctx context.Context, e *env, cfg Config, m *Machine, peer bool) error {
	pg, err := e.connect(ctx, localpg.CronDatabase, "bench-setup")
	if err != nil {
		return err
	}
	defer pg.Close(context.Background())
	if _, err := pg.Exec(ctx, qCreateDB+pgx.Identifier{pgqueDB}.Sanitize()); err != nil {
		return fmt.Errorf("pg_cron 1.6 cluster: creating database %s: %w", pgqueDB, err)
	}
	if _, err := pg.Exec(ctx, qCronExt); err != nil {
		return fmt.Errorf("pg_cron 1.6 cluster: creating extension pg_cron: %w", err)
	}
	_ = pg.QueryRow(ctx, qExtVersionOf, "pg_cron").Scan(&m.PgCron16)

	c, err := e.connect(ctx, pgqueDB, "bench-setup")
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	if _, err := install.Install(ctx, c, install.Options{Log: cfg.Log}); err != nil {
		return fmt.Errorf("pg_cron 1.6 cluster: installing the engine: %w", err)
	}
	for _, s := range []string{qStattupleExt, qWalinspectExt, qBystanderTable, qBystanderFill} {
		if _, err := c.Exec(ctx, s); err != nil {
			return fmt.Errorf("pg_cron 1.6 cluster: preparing %s: %w", pgqueDB, err)
		}
	}
	if _, _, err := cron.Register(ctx, c); err != nil {
		return fmt.Errorf("pg_cron 1.6 cluster: registering the pg_cron jobs: %w", err)
	}

	if !peer {
		return nil
	}
	script, err := os.ReadFile(cfg.PgQue020SQL)
	if err != nil {
		return fmt.Errorf("reading PgQue 0.2.0 (%s=%s): %w", EnvPgQue020SQL, cfg.PgQue020SQL, err)
	}
	m.PgQue020 = fmt.Sprintf("%x", sha256.Sum256(script))[:16]
	q, err := e.connect(ctx, pgque020DB, "bench-setup")
	if err != nil {
		return err
	}
	defer q.Close(context.Background())
	if _, err := q.Exec(ctx, string(script), pgx.QueryExecModeSimpleProtocol); err != nil {
		return fmt.Errorf("installing PgQue 0.2.0 into %s: %w", pgque020DB, err)
	}
	for _, s := range []string{qStattupleExt, qWalinspectExt, qBystanderTable, qBystanderFill} {
		if _, err := q.Exec(ctx, s); err != nil {
			return fmt.Errorf("pg_cron 1.6 cluster: preparing %s: %w", pgque020DB, err)
		}
	}
	return nil
}
