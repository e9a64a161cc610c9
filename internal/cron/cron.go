// Package cron registers the engine's pg_cron jobs.
//
// pg_cron runs in exactly one database of a cluster (cron.database_name).
// When that is the engine's database, the engine registers its own jobs
// (pgque.start() / pgque.stop()). When it is another database, this package
// connects there with the same credentials and schedules each job with
// cron.schedule_in_database(..., <engine db>). Either way the job set comes
// from the engine: pgque.cron_jobs(<pg_cron version>), and the job names are
// 'pgque_<what>@<engine db>' so that exactly our jobs can be found and removed.
package cron

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgquectl/pgquectl/internal/db"
)

// Named queries: every statement this package runs.
const (
	// qPreload lists the preloaded libraries; superuser or pg_read_all_settings only.
	qPreload = `SHOW shared_preload_libraries`
	// qCronDatabase reads cron.database_name (SQLSTATE 42704 when pg_cron is not loaded).
	qCronDatabase = `SHOW cron.database_name`
	// qCurrentDB names the engine database and the role we act as.
	qCurrentDB = `SELECT current_database(), current_user`
	// qExtVersion is pg_cron's extension version in the database we are connected to.
	qExtVersion = `SELECT extversion FROM pg_extension WHERE extname = 'pg_cron'`
	// qCronUsage says whether we may use schema cron.
	qCronUsage = `SELECT has_schema_privilege('cron', 'USAGE')`
	// qEngineJobs is the job set the engine wants for a pg_cron version.
	// run_in_cron_db: the command belongs to the cron database (the purge of
	// cron.job_run_details), not to the engine's.
	qEngineJobs = `SELECT jobname, schedule, command, run_in_cron_db FROM pgque.cron_jobs($1) ORDER BY jobname`
	// qSetCronVersion sizes ticker_loop()'s slot to the schedule pg_cron can
	// run (start() does it itself when cron lives in the engine database).
	qSetCronVersion = `SELECT pgque.set_cron_version($1)`
	// qStart / qStop register / remove the jobs when pg_cron lives in the engine database.
	qStart = `SELECT pgque.start()`
	qStop  = `SELECT pgque.stop()`
	// qSchedule registers (or updates, same name and user) a job in another database.
	qSchedule = `SELECT cron.schedule_in_database($1, $2, $3, $4)`
	// qUnschedule removes one job by id.
	qUnschedule = `SELECT cron.unschedule($1::bigint)`
	// QueryOurJobs lists the jobs named 'pgque_<what>@<db>' (ours for that
	// database). pg_cron stores job names as type name (63 bytes): a long
	// database name arrives truncated, so a 63-byte name whose database part
	// is a prefix of <db> is ours too.
	QueryOurJobs = `SELECT jobid, jobname, schedule, command, database, active
	              FROM (SELECT j.*, substring(j.jobname FROM '@(.*)$') AS jobdb FROM cron.job j) j
	             WHERE left(jobname, 6) = 'pgque_'
	               AND (jobdb = $1::text OR (octet_length(jobname) = 63 AND starts_with($1::text, jobdb)))
	             ORDER BY jobname`
	// qOurJobs: uninstall (internal/install) should match jobs the same way.
	qOurJobs = QueryOurJobs
	// qHasEngine says whether schema pgque exists (stop() can be called).
	qHasEngine = `SELECT to_regnamespace('pgque') IS NOT NULL`
)

// Errors callers can test for with errors.Is.
var (
	// ErrNotAvailable: pg_cron is not loaded in this cluster.
	ErrNotAvailable = errors.New("pg_cron is not available here; use `pgquectl tick --run --hz N` (ticker daemon)")
	// ErrNoExtension: pg_cron is loaded but CREATE EXTENSION was not run in the cron database.
	ErrNoExtension = errors.New("pg_cron is loaded but its extension is not created in the cron database")
	// ErrNoUsage: our role may not use schema cron.
	ErrNoUsage = errors.New("permission denied for schema cron")
)

// Info describes pg_cron as seen from the engine database.
type Info struct {
	// Loaded: pg_cron is in shared_preload_libraries (its launcher runs).
	Loaded bool
	// Database is cron.database_name: where cron.job lives.
	Database string
	// EngineDB is the database the engine is installed in.
	EngineDB string
	// User is the role the jobs will run as.
	User string
	// Version is pg_cron's extversion in Database ("" when not created).
	Version string
	// SameDatabase: the engine lives in the cron database.
	SameDatabase bool
	// Usage: the role has USAGE on schema cron (meaningful when Version != "").
	Usage bool
}

// Job is one pg_cron job.
type Job struct {
	ID       int64  `json:"jobid,omitempty"`
	Name     string `json:"jobname"`
	Schedule string `json:"schedule"`
	Command  string `json:"command"`
	Database string `json:"database,omitempty"`
	Active   bool   `json:"active"`
}

// Timeout bounds every call of this package that has no deadline of its own.
const Timeout = 30 * time.Second

func withDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, Timeout)
}

// Detect finds pg_cron, its database and version, from a connection to the
// engine database.
func Detect(ctx context.Context, engine *pgx.Conn) (Info, error) {
	ctx, cancel := withDeadline(ctx)
	defer cancel()
	var info Info
	if err := engine.QueryRow(ctx, qCurrentDB).Scan(&info.EngineDB, &info.User); err != nil {
		return info, fmt.Errorf("reading the current database: %w", err)
	}
	var libs string
	err := engine.QueryRow(ctx, qPreload).Scan(&libs)
	switch {
	case err == nil:
		info.Loaded = preloaded(libs)
		if !info.Loaded {
			return info, nil
		}
		if err := engine.QueryRow(ctx, qCronDatabase).Scan(&info.Database); err != nil {
			if isCode(err, "42704") { // listed, but the GUC is not there: not loaded after all
				info.Loaded = false
				return info, nil
			}
			return info, fmt.Errorf("reading cron.database_name: %w", err)
		}
	case isCode(err, "42501"):
		// Without pg_read_all_settings neither setting is visible: find the
		// extension instead, here or in pg_cron's default database.
		if err := findCronDB(ctx, engine, &info); err != nil {
			return info, err
		}
		if !info.Loaded {
			return info, nil
		}
	default:
		return info, fmt.Errorf("reading shared_preload_libraries: %w", err)
	}
	info.SameDatabase = info.Database == info.EngineDB
	err = inCronDB(ctx, engine, info, func(c *pgx.Conn) error {
		err := c.QueryRow(ctx, qExtVersion).Scan(&info.Version)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading pg_cron's version: %w", err)
		}
		return c.QueryRow(ctx, qCronUsage).Scan(&info.Usage)
	})
	return info, err
}

// StoredName is a job name as pg_cron stores it: clipped to 63 bytes (its
// jobname column is of type name), at a character boundary.
func StoredName(n string) string {
	const maxName = 63
	if len(n) <= maxName {
		return n
	}
	cut := maxName
	for cut > 0 && !utf8.RuneStart(n[cut]) {
		cut--
	}
	return n[:cut]
}

// DefaultCronDB is pg_cron's default cron.database_name.
const DefaultCronDB = "postgres"

// findCronDB locates pg_cron when the settings cannot be read: the engine
// database when the extension is there, else DefaultCronDB when it is there.
func findCronDB(ctx context.Context, engine *pgx.Conn, info *Info) error {
	var v string
	err := engine.QueryRow(ctx, qExtVersion).Scan(&v)
	if err == nil {
		info.Loaded, info.Database = true, info.EngineDB
		return nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("looking for pg_cron: %w", err)
	}
	if info.EngineDB == DefaultCronDB {
		return nil
	}
	c, err := db.ConnectToDatabase(ctx, engine, DefaultCronDB)
	if err != nil {
		return nil // cannot look: report pg_cron as not found
	}
	defer c.Close(context.WithoutCancel(ctx))
	if err := c.QueryRow(ctx, qExtVersion).Scan(&v); err == nil {
		info.Loaded, info.Database = true, DefaultCronDB
	}
	return nil
}

// preloaded reports whether pg_cron is in a shared_preload_libraries value.
func preloaded(libs string) bool {
	for l := range strings.SplitSeq(libs, ",") {
		l = strings.Trim(strings.TrimSpace(l), `"`)
		if l == "pg_cron" || strings.HasSuffix(l, "/pg_cron") || strings.HasSuffix(l, "/pg_cron.so") {
			return true
		}
	}
	return false
}

// Check turns an Info into the error a user should see, or nil when jobs can
// be registered.
func (i Info) Check() error {
	switch {
	case !i.Loaded:
		return ErrNotAvailable
	case i.Version == "":
		return fmt.Errorf("%w %q: ask a superuser to run `CREATE EXTENSION pg_cron` in database %q, or use `pgquectl tick --run --hz N` (ticker daemon)",
			ErrNoExtension, i.Database, i.Database)
	case !i.Usage:
		return fmt.Errorf("%w (role %q): ask a superuser to run `GRANT USAGE ON SCHEMA cron TO %s` in database %q",
			ErrNoUsage, i.User, pgx.Identifier{i.User}.Sanitize(), i.Database)
	}
	return nil
}

// Planned returns the jobs the engine wants for the detected pg_cron version.
func Planned(ctx context.Context, engine *pgx.Conn, info Info) ([]Job, error) {
	ctx, cancel := withDeadline(ctx)
	defer cancel()
	rows, err := engine.Query(ctx, qEngineJobs, info.Version)
	if err != nil {
		return nil, fmt.Errorf("reading the job set from pgque.cron_jobs(%q): %w (is the engine installed? run `pgquectl install`)", info.Version, err)
	}
	jobs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Job, error) {
		j := Job{Database: info.EngineDB, Active: true}
		var inCron bool
		err := r.Scan(&j.Name, &j.Schedule, &j.Command, &inCron)
		if inCron && info.Database != "" {
			j.Database = info.Database
		}
		return j, err
	})
	if err != nil {
		return nil, fmt.Errorf("reading the job set from pgque.cron_jobs(%q): %w", info.Version, err)
	}
	return jobs, nil
}

// Register detects pg_cron and (re)registers the engine's jobs. Registering
// again is idempotent: jobs keep their ids and are updated in place, and
// jobs of ours that the engine no longer wants are removed. It returns the
// jobs registered, as read back from cron.job.
func Register(ctx context.Context, engine *pgx.Conn) (Info, []Job, error) {
	ctx, cancel := withDeadline(ctx)
	defer cancel()
	info, err := Detect(ctx, engine)
	if err != nil {
		return info, nil, err
	}
	if err := info.Check(); err != nil {
		return info, nil, err
	}
	want, err := Planned(ctx, engine, info)
	if err != nil {
		return info, nil, err
	}
	if info.SameDatabase {
		if _, err := engine.Exec(ctx, qStart); err != nil {
			return info, nil, fmt.Errorf("registering the pg_cron jobs with pgque.start(): %w", cronHint(err, info))
		}
		jobs, err := Jobs(ctx, engine, info)
		return info, jobs, err
	}
	if _, err := engine.Exec(ctx, qSetCronVersion, info.Version); err != nil {
		return info, nil, fmt.Errorf("sizing the ticker loop's slot with pgque.set_cron_version(%q): %w", info.Version, err)
	}
	var jobs []Job
	err = inCronDB(ctx, engine, info, func(c *pgx.Conn) error {
		return pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
			for _, j := range want {
				if _, err := tx.Exec(ctx, qSchedule, j.Name, j.Schedule, j.Command, j.Database); err != nil {
					return fmt.Errorf("scheduling %s in database %q: %w", j.Name, info.Database, cronHint(err, info))
				}
			}
			have, err := ourJobs(ctx, tx, info.EngineDB)
			if err != nil {
				return err
			}
			for _, h := range have {
				if slices.ContainsFunc(want, func(w Job) bool { return StoredName(w.Name) == h.Name }) {
					jobs = append(jobs, h)
					continue
				}
				if _, err := tx.Exec(ctx, qUnschedule, h.ID); err != nil {
					return fmt.Errorf("removing stale job %s: %w", h.Name, cronHint(err, info))
				}
			}
			return nil
		})
	})
	if err != nil {
		return info, nil, fmt.Errorf("registering the pg_cron jobs: %w", err)
	}
	return info, jobs, nil
}

// Unregister removes exactly our jobs (named 'pgque_%@<engine db>') and
// returns how many there were. Without pg_cron it removes nothing.
func Unregister(ctx context.Context, engine *pgx.Conn) (int, error) {
	ctx, cancel := withDeadline(ctx)
	defer cancel()
	info, err := Detect(ctx, engine)
	if err != nil {
		return 0, err
	}
	if !info.Loaded || info.Version == "" {
		return 0, nil
	}
	if !info.Usage {
		return 0, info.Check()
	}
	before, err := Jobs(ctx, engine, info)
	if err != nil {
		return 0, err
	}
	if info.SameDatabase && hasEngine(ctx, engine) {
		if _, err := engine.Exec(ctx, qStop); err != nil {
			return 0, fmt.Errorf("removing the pg_cron jobs with pgque.stop(): %w", cronHint(err, info))
		}
	}
	// Whatever stop() left (or every job, when cron lives elsewhere).
	err = inCronDB(ctx, engine, info, func(c *pgx.Conn) error {
		have, err := ourJobs(ctx, c, info.EngineDB)
		if err != nil {
			return err
		}
		for _, h := range have {
			if _, err := c.Exec(ctx, qUnschedule, h.ID); err != nil {
				return fmt.Errorf("removing job %s: %w", h.Name, cronHint(err, info))
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("removing the pg_cron jobs: %w", err)
	}
	return len(before), nil
}

// Jobs lists our registered jobs for the engine database.
func Jobs(ctx context.Context, engine *pgx.Conn, info Info) ([]Job, error) {
	ctx, cancel := withDeadline(ctx)
	defer cancel()
	if !info.Loaded || info.Version == "" || !info.Usage {
		return nil, nil
	}
	var jobs []Job
	err := inCronDB(ctx, engine, info, func(c *pgx.Conn) error {
		var err error
		jobs, err = ourJobs(ctx, c, info.EngineDB)
		return err
	})
	return jobs, err
}

type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

func ourJobs(ctx context.Context, q querier, engineDB string) ([]Job, error) {
	rows, err := q.Query(ctx, qOurJobs, engineDB)
	if err != nil {
		return nil, fmt.Errorf("listing our jobs in cron.job: %w", err)
	}
	jobs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Job, error) {
		var j Job
		return j, r.Scan(&j.ID, &j.Name, &j.Schedule, &j.Command, &j.Database, &j.Active)
	})
	if err != nil {
		return nil, fmt.Errorf("listing our jobs in cron.job: %w", err)
	}
	return jobs, nil
}

// inCronDB runs fn on a connection to the cron database: the engine
// connection itself when they are the same, else a new connection with the
// same credentials and the database name swapped.
func inCronDB(ctx context.Context, engine *pgx.Conn, info Info, fn func(*pgx.Conn) error) error {
	if info.Database == "" || info.Database == info.EngineDB {
		return fn(engine)
	}
	c, err := db.ConnectToDatabase(ctx, engine, info.Database)
	if err != nil {
		return fmt.Errorf("connecting to the pg_cron database %q with the same credentials: %w (the role needs CONNECT on it)", info.Database, err)
	}
	defer c.Close(context.WithoutCancel(ctx))
	return fn(c)
}

func hasEngine(ctx context.Context, c *pgx.Conn) bool {
	var ok bool
	_ = c.QueryRow(ctx, qHasEngine).Scan(&ok)
	return ok
}

func isCode(err error, code string) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == code
}

// cronHint adds the next step to permission errors.
func cronHint(err error, info Info) error {
	if isCode(err, "42501") {
		return fmt.Errorf("%w (ask a superuser to run `GRANT USAGE ON SCHEMA cron TO %s` in database %q)",
			err, pgx.Identifier{info.User}.Sanitize(), info.Database)
	}
	return err
}
