// Package devenv brings up the local development environment of
// `pgquectl dev`: a local PostgreSQL cluster (internal/localpg) with pg_cron
// preloaded when installed, a database with the engine installed, and
// whatever later steps add (ticking, the broker).
//
// Bring-up is a list of Steps run in order; each step is idempotent, so
// running `pgquectl dev` again re-checks everything and changes nothing.
// A feature that needs to be running in the dev environment appends its
// step to DefaultSteps.
package devenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"

	"github.com/pgquectl/pgquectl/internal/config"
	"github.com/pgquectl/pgquectl/internal/cron"
	"github.com/pgquectl/pgquectl/internal/db"
	"github.com/pgquectl/pgquectl/internal/install"
	"github.com/pgquectl/pgquectl/internal/localpg"
	"github.com/pgquectl/pgquectl/internal/ticker"
)

// DefaultDatabase is the database `pgquectl dev` installs the engine into.
const DefaultDatabase = "pgque"

// Options describe the dev environment.
type Options struct {
	// StateDir holds the cluster (required).
	StateDir string
	// Port fixes the port; 0 keeps the previous one or picks a free one.
	Port int
	// Database to create and install into; "" means DefaultDatabase.
	Database string
	// Fast turns durability off (throwaway test clusters).
	Fast bool
	// NoTick skips registering the pg_cron ticker (test clusters).
	NoTick bool
	// Out receives one line per step.
	Out io.Writer
	Log *slog.Logger
}

func (o Options) database() string {
	if o.Database == "" {
		return DefaultDatabase
	}
	return o.Database
}

// Env is what the steps share and what Up returns.
type Env struct {
	Options
	Cluster *localpg.Cluster
	// DSN of the engine database (superuser, trust auth, localhost).
	DSN string
	// Conn is DSN as connection settings for internal packages.
	Conn config.Connection

	createdDB bool // the database step created the database in this run
}

// Step is one idempotent bring-up step.
type Step struct {
	Name string
	Run  func(ctx context.Context, e *Env) error
}

// DefaultSteps is the bring-up sequence of `pgquectl dev`. Later features
// (ticking, broker) append their steps here.
func DefaultSteps() []Step {
	return []Step{
		{Name: "cluster", Run: stepCluster},
		{Name: "database", Run: stepDatabase},
		{Name: "engine", Run: stepEngine},
		{Name: "ticking", Run: stepTicking},
	}
}

// DevTickPeriod is the tick period `pgquectl dev` sets up (100 Hz).
const DevTickPeriod = 10 * time.Millisecond

// stepTicking registers the engine's pg_cron jobs at DevTickPeriod, once
// per database: when dev set ticking up before (recorded in the state
// directory) or jobs are registered, it leaves ticking alone, so a user's
// `pgquectl tick --off` or tuned rate survives the next `pgquectl dev`.
func stepTicking(ctx context.Context, e *Env) error {
	if e.NoTick {
		fmt.Fprintln(e.Out, "not ticking (--no-tick): start it with pgquectl tick --hz 100")
		return nil
	}
	if !e.Cluster.CronPreloaded {
		fmt.Fprintln(e.Out, "no pg_cron, no scheduled ticking: the dev broker (unless --no-broker) ticks the queues it pushes to and stands in as ticker while it runs (classic PgQ thresholds); for 100 Hz run `pgquectl tick --run --hz 100` next to it, or install pg_cron (bash scripts/setup.sh)")
		return nil
	}
	marks, err := readMarks(e.Cluster.StateDir)
	if err != nil {
		return err
	}
	if marks.TickingSetUp[e.database()] && !e.createdDB {
		fmt.Fprintln(e.Out, "ticking: set up by an earlier pgquectl dev; left as it is (pgquectl tick shows and changes it)")
		return nil
	}
	conn, err := db.Connect(ctx, e.Conn)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	info, err := cron.Detect(ctx, conn)
	if err != nil {
		return fmt.Errorf("looking for pg_cron: %w", err)
	}
	jobs, err := cron.Jobs(ctx, conn, info)
	if err != nil {
		return fmt.Errorf("listing pg_cron jobs: %w", err)
	}
	if len(jobs) > 0 {
		fmt.Fprintf(e.Out, "ticking through pg_cron: %d job(s) already registered (change with pgquectl tick)\n", len(jobs))
		return marks.markTicking(e.Cluster.StateDir, e.database())
	}
	plan, err := ticker.Configure(ctx, conn, ticker.Options{Period: DevTickPeriod})
	if err != nil {
		return fmt.Errorf("setting up ticking: %w", err)
	}
	if err := marks.markTicking(e.Cluster.StateDir, e.database()); err != nil {
		return err
	}
	fmt.Fprintf(e.Out, "ticking every %s through pg_cron (%d jobs registered)\n", DevTickPeriod, len(plan.Jobs))
	return nil
}

// stepTimeout bounds each step.
const stepTimeout = 5 * time.Minute

// Up runs steps (DefaultSteps when nil) in order and returns the
// environment. It stops at the first failing step.
func Up(ctx context.Context, opts Options, steps []Step) (*Env, error) {
	if opts.StateDir == "" {
		return nil, errors.New("devenv: no state directory given")
	}
	if opts.Out == nil {
		opts.Out = io.Discard
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if steps == nil {
		steps = DefaultSteps()
	}
	e := &Env{Options: opts}
	for _, s := range steps {
		sctx, cancel := context.WithTimeout(ctx, stepTimeout)
		err := s.Run(sctx, e)
		cancel()
		if err != nil {
			return e, fmt.Errorf("dev %s: %w", s.Name, err)
		}
	}
	return e, nil
}

func stepCluster(ctx context.Context, e *Env) error {
	before, err := localpg.Open(localpg.Options{StateDir: e.StateDir, Port: e.Port})
	if err != nil {
		return err
	}
	wasRunning := false
	if st, err := before.Status(ctx); err == nil {
		wasRunning = st.Running
	}
	c, err := localpg.EnsureRunning(ctx, localpg.Options{StateDir: e.StateDir, Port: e.Port, Fast: e.Fast, Log: e.Log})
	if err != nil {
		return err
	}
	e.Cluster = c
	e.DSN = c.DSN(e.database())
	e.Conn = config.Connection{DSN: e.DSN, ConnectTimeout: 10 * time.Second, ApplicationName: "pgquectl-dev"}
	state := "started"
	if wasRunning {
		state = "already running"
	}
	fmt.Fprintf(e.Out, "PostgreSQL %s %s on port %d (state %s)\n", c.Bin.Version, state, c.Port, c.StateDir)
	if c.CronPreloaded {
		fmt.Fprintf(e.Out, "pg_cron preloaded, jobs live in database %q\n", localpg.CronDatabase)
	} else {
		fmt.Fprintln(e.Out, "pg_cron not installed: ticking needs `pgquectl tick --run` (or bash scripts/setup.sh)")
	}
	return nil
}

// Queries of the database step.
const (
	sqlDatabaseExists = `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`
	sqlCreateDatabase = `CREATE DATABASE %s`
)

func stepDatabase(ctx context.Context, e *Env) error {
	conn, err := db.Connect(ctx, config.Connection{DSN: e.Cluster.DSN("postgres"), ApplicationName: "pgquectl-dev"})
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var exists bool
	if err := conn.QueryRow(ctx, sqlDatabaseExists, e.database()).Scan(&exists); err != nil {
		return fmt.Errorf("looking for database %q: %w", e.database(), db.MapError(err))
	}
	if exists {
		fmt.Fprintf(e.Out, "database %q exists\n", e.database())
		return nil
	}
	e.createdDB = true
	_, err = conn.Exec(ctx, fmt.Sprintf(sqlCreateDatabase, pgx.Identifier{e.database()}.Sanitize()))
	if err != nil && db.Code(err) != pgerrcode.DuplicateDatabase { // a concurrent dev created it
		return fmt.Errorf("creating database %q: %w", e.database(), db.MapError(err))
	}
	fmt.Fprintf(e.Out, "database %q created\n", e.database())
	return nil
}

func stepEngine(ctx context.Context, e *Env) error {
	res, err := install.Run(ctx, e.Conn, install.Options{Log: e.Log})
	if err != nil {
		return err
	}
	if res.Action == install.ActionNone {
		// install's own line advises `install --reinstall`, a flag dev lacks.
		fmt.Fprintf(e.Out, "pgque engine %s already installed in database %q (to run its script again: pgquectl install --reinstall --dsn '%s')\n",
			res.Version, res.Database, e.DSN)
		return nil
	}
	fmt.Fprintln(e.Out, res)
	return nil
}

// Summary writes how to use the environment.
func (e *Env) Summary(w io.Writer, stateFlag string) {
	fmt.Fprintf(w, `
Ready. Use it with:
  export PGQUE_DSN='%s'
  psql "$PGQUE_DSN"
  pgquectl status
Server log: %s
Stop / inspect / remove: pgquectl dev stop%s | pgquectl dev status%s | pgquectl dev destroy%s
`, e.DSN, e.Cluster.LogFile, stateFlag, stateFlag, stateFlag)
}

// exists tells whether the state directory exists.
func exists(stateDir string) bool {
	_, err := os.Stat(stateDir)
	return !errors.Is(err, fs.ErrNotExist)
}

// open opens the cluster of an existing state directory.
func open(opts Options) (*localpg.Cluster, error) {
	if !exists(opts.StateDir) {
		abs, _ := filepath.Abs(opts.StateDir)
		return nil, fmt.Errorf("%w in %s (run `pgquectl dev` to create one)", ErrNoCluster, abs)
	}
	return localpg.Open(localpg.Options{StateDir: opts.StateDir, Log: opts.Log})
}

// ErrNoCluster: the state directory holds no dev cluster.
var ErrNoCluster = errors.New("no dev cluster")

// Stop stops the dev cluster (a stopped or missing one is fine).
func Stop(ctx context.Context, opts Options) error {
	c, err := open(opts)
	if errors.Is(err, ErrNoCluster) {
		return nil
	}
	if err != nil {
		return err
	}
	return localpg.WithLock(ctx, c.StateDir, func() error { return c.Stop(ctx) })
}

// Destroy stops the dev cluster and removes its state directory.
func Destroy(ctx context.Context, opts Options) error {
	c, err := open(opts)
	if errors.Is(err, ErrNoCluster) {
		return nil
	}
	if err != nil {
		return err
	}
	return localpg.WithLock(ctx, c.StateDir, func() error { return c.Destroy(ctx) })
}

// Status describes the dev environment.
type Status struct {
	localpg.Status
	Database string
	// EngineDSN is the DSN of the engine database.
	EngineDSN string
	// Engine is the installed engine version ("" when none or not running).
	Engine string
	// EngineErr explains why Engine could not be read.
	EngineErr error
	BinDir    string
}

// GetStatus reports the dev cluster's state; it returns ErrNoCluster when
// there is none.
func GetStatus(ctx context.Context, opts Options) (Status, error) {
	c, err := open(opts)
	if err != nil {
		return Status{}, err
	}
	st, err := c.Status(ctx)
	if err != nil {
		return Status{}, err
	}
	out := Status{Status: st, Database: opts.database(), BinDir: c.Bin.BinDir}
	if !st.Initialized {
		return out, nil
	}
	out.EngineDSN = c.DSN(opts.database())
	if st.Running {
		out.Engine, _, out.EngineErr = install.Installed(ctx, config.Connection{DSN: out.EngineDSN, ConnectTimeout: 5 * time.Second, ApplicationName: "pgquectl-dev"})
	}
	return out, nil
}

// DSN returns the DSN of database dbname in the dev cluster ("" dbname:
// the engine database), without starting anything.
func DSN(opts Options, dbname string) (string, error) {
	c, err := open(opts)
	if err != nil {
		return "", err
	}
	if !c.Initialized() {
		return "", fmt.Errorf("%w: %s holds no cluster yet (run `pgquectl dev`)", ErrNoCluster, c.StateDir)
	}
	if dbname == "" {
		dbname = opts.database()
	}
	return c.DSN(dbname), nil
}
