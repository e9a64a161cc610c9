// Package cron is all of pgquectl's pg_cron I/O: detecting pg_cron (where it
// lives, its version, the role's access), the engine's job names, listing,
// registering and removing our jobs, and what status reads of their runs.
// No other package queries schema cron (a test in this package checks).
//
// pg_cron runs in exactly one database of a cluster (cron.database_name).
// When that is the engine's database, the engine registers its own jobs
// (pgque.start() / pgque.stop()). When it is another database, this package
// connects there with the same credentials and schedules each job with
// cron.schedule_in_database(..., <engine db>). Either way the job set comes
// from the engine: pgque.cron_jobs(<pg_cron version>), and which jobs are
// ours is the engine's answer too: pgque.cron_job_names(), matched exactly
// (database names may hold '_' and '%', so never with LIKE). Every caller
// that needs our jobs (tick, status, uninstall) asks [OurJobNames].
package cron

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgquectl/pgquectl/internal/db"
)

// Named queries: every statement this package runs.
const (
	// qCanReadSettings: superuser or pg_read_all_settings, who may read
	// shared_preload_libraries and cron.database_name. Asked first, so that
	// Detect raises no error and can run inside the caller's transaction.
	qCanReadSettings = `SELECT coalesce((SELECT rolsuper FROM pg_roles WHERE rolname = current_user), false)
	                           OR pg_has_role(current_user, 'pg_read_all_settings', 'USAGE')`
	// qPreload lists the preloaded libraries.
	qPreload = `SELECT current_setting('shared_preload_libraries')`
	// qCronDatabase reads cron.database_name (NULL when pg_cron is not loaded).
	qCronDatabase = `SELECT current_setting('cron.database_name', true)`
	// qCurrentDB names the engine database and the role we act as.
	qCurrentDB = `SELECT current_database(), current_user`
	// qExtVersion is pg_cron's extension version in the database we are connected to.
	qExtVersion = `SELECT extversion FROM pg_extension WHERE extname = 'pg_cron'`
	// qCronUsage says whether we may use schema cron.
	qCronUsage = `SELECT has_schema_privilege('cron', 'USAGE')`
	// qCronExecute lists the pg_cron functions registering needs that the
	// role may not execute (pg_cron revokes schedule_in_database from PUBLIC).
	qCronExecute = `SELECT p.oid::regprocedure::text
	                  FROM pg_proc p
	                 WHERE p.pronamespace = 'cron'::regnamespace
	                   AND p.proname = ANY ($1::text[])
	                   AND NOT has_function_privilege(p.oid, 'EXECUTE')
	                 ORDER BY 1`
	// qEngineJobs is the job set the engine wants for a pg_cron version.
	// run_in_cron_db: the command belongs to the cron database (the purge of
	// cron.job_run_details), not to the engine's.
	qEngineJobs = `SELECT jobname, schedule, command, run_in_cron_db FROM pgque.cron_jobs($1) ORDER BY jobname`
	// qOurJobNames: every job name that is the engine's in this database
	// (the engine owns the answer; matched exactly, never with LIKE).
	qOurJobNames = `SELECT pgque.cron_job_names()`
	// qSetCronVersion sizes ticker_loop()'s slot to the schedule pg_cron can
	// run and lets the loop run (start() does it itself when cron lives in
	// the engine database).
	qSetCronVersion = `SELECT pgque.set_cron_version($1)`
	// qStart / qStop register / remove the jobs when pg_cron lives in the
	// engine database; qStop also tells running ticker_loop()s to end
	// (wherever pg_cron lives).
	qStart = `SELECT pgque.start()`
	qStop  = `SELECT pgque.stop()`
	// qSchedule registers (or updates, same name and user) a job in another database.
	qSchedule = `SELECT cron.schedule_in_database($1, $2, $3, $4)`
	// qUnschedule removes one job by id.
	qUnschedule = `SELECT cron.unschedule($1::bigint)`
	// QueryJobsNamed lists the cron.job rows whose names are in $1 (the
	// engine's cron_job_names()). Runs in the cron database.
	QueryJobsNamed = `SELECT jobid, jobname, schedule, command, database, active
	                    FROM cron.job
	                   WHERE jobname::text = ANY ($1::text[])
	                   ORDER BY jobname`
	// qHasJobTable says whether pg_cron's extension is created in the
	// connected database (its cron.job table exists).
	qHasJobTable = `SELECT to_regclass('cron.job') IS NOT NULL`
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
	// ErrNoExecute: our role may not execute a pg_cron function registering needs.
	ErrNoExecute = errors.New("permission denied for a pg_cron function")
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
	// NoExecute lists the pg_cron functions registering and removing jobs
	// needs that the role may not execute (regprocedure signatures).
	NoExecute []string `json:",omitempty"`
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
		return info, fmt.Errorf("reading the current database: %w", db.MapError(err))
	}
	var canRead bool
	if err := engine.QueryRow(ctx, qCanReadSettings).Scan(&canRead); err != nil {
		return info, fmt.Errorf("checking whether settings are readable: %w", db.MapError(err))
	}
	if canRead {
		var libs string
		if err := engine.QueryRow(ctx, qPreload).Scan(&libs); err != nil {
			return info, fmt.Errorf("reading shared_preload_libraries: %w", db.MapError(err))
		}
		if info.Loaded = preloaded(libs); !info.Loaded {
			return info, nil
		}
		var name *string
		if err := engine.QueryRow(ctx, qCronDatabase).Scan(&name); err != nil {
			return info, fmt.Errorf("reading cron.database_name: %w", db.MapError(err))
		}
		if name == nil { // listed, but the setting is not there: not loaded after all
			info.Loaded = false
			return info, nil
		}
		info.Database = *name
	} else {
		// Without pg_read_all_settings neither setting is visible: find the
		// extension instead, here or in pg_cron's default database.
		if err := findCronDB(ctx, engine, &info); err != nil {
			return info, err
		}
		if !info.Loaded {
			return info, nil
		}
	}
	info.SameDatabase = info.Database == info.EngineDB
	err := inCronDB(ctx, engine, info, func(c *pgx.Conn) error {
		err := c.QueryRow(ctx, qExtVersion).Scan(&info.Version)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading pg_cron's version: %w", db.MapError(err))
		}
		if err := c.QueryRow(ctx, qCronUsage).Scan(&info.Usage); err != nil {
			return fmt.Errorf("checking USAGE on schema cron: %w", db.MapError(err))
		}
		if !info.Usage {
			return nil
		}
		rows, err := c.Query(ctx, qCronExecute, info.neededFunctions())
		if err != nil {
			return fmt.Errorf("checking EXECUTE on pg_cron's functions: %w", db.MapError(err))
		}
		info.NoExecute, err = pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("checking EXECUTE on pg_cron's functions: %w", db.MapError(err))
		}
		return nil
	})
	return info, err
}

// neededFunctions names the pg_cron functions registering and removing our
// jobs calls: cron.schedule in the engine database (pgque.start()), or
// cron.schedule_in_database from another one; cron.unschedule either way.
func (i Info) neededFunctions() []string {
	if i.SameDatabase {
		return []string{"schedule", "unschedule"}
	}
	return []string{"schedule_in_database", "unschedule"}
}

// StoredName is a job name as pg_cron stores it: clipped to 63 bytes (its
// jobname column is of type name), at a character boundary. The engine's
// names (cron_job_names) always fit.
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
		return fmt.Errorf("looking for pg_cron: %w", db.MapError(err))
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
// be registered and removed.
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
	case len(i.NoExecute) > 0:
		grants := make([]string, len(i.NoExecute))
		for n, f := range i.NoExecute {
			grants[n] = fmt.Sprintf("GRANT EXECUTE ON FUNCTION %s TO %s;", f, pgx.Identifier{i.User}.Sanitize())
		}
		return fmt.Errorf("%w (role %q may not execute %s): ask a superuser to run `%s` in database %q, or use `pgquectl tick --run --hz N` (ticker daemon)",
			ErrNoExecute, i.User, strings.Join(i.NoExecute, ", "), strings.Join(grants, " "), i.Database)
	}
	return nil
}

// Planned returns the jobs the engine wants for the detected pg_cron version.
func Planned(ctx context.Context, engine db.Querier, info Info) ([]Job, error) {
	ctx, cancel := withDeadline(ctx)
	defer cancel()
	rows, err := engine.Query(ctx, qEngineJobs, info.Version)
	if err != nil {
		return nil, fmt.Errorf("reading the job set from pgque.cron_jobs(%q): %w", info.Version, db.MapError(err))
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
		return nil, fmt.Errorf("reading the job set from pgque.cron_jobs(%q): %w", info.Version, db.MapError(err))
	}
	return jobs, nil
}

// OurJobNames asks the engine (pgque.cron_job_names()) which pg_cron job
// names are this database's: the one answer every caller matches exactly.
func OurJobNames(ctx context.Context, engine db.Querier) ([]string, error) {
	ctx, cancel := withDeadline(ctx)
	defer cancel()
	var names []string
	if err := engine.QueryRow(ctx, qOurJobNames).Scan(&names); err != nil {
		return nil, fmt.Errorf("asking the engine for its pg_cron job names (pgque.cron_job_names()): %w", db.MapError(err))
	}
	return names, nil
}

// Register detects pg_cron and (re)registers the engine's jobs, all or
// nothing. Registering again is idempotent: jobs keep their ids and are
// updated in place, and jobs of ours that the engine no longer wants are
// removed. It returns the jobs registered, as read back from cron.job.
func Register(ctx context.Context, engine *pgx.Conn) (Info, []Job, error) {
	ctx, cancel := withDeadline(ctx)
	defer cancel()
	var info Info
	var jobs []Job
	err := pgx.BeginFunc(ctx, engine, func(tx pgx.Tx) error {
		var err error
		info, jobs, err = RegisterTx(ctx, tx)
		return err
	})
	return info, jobs, err
}

// RegisterTx is Register inside the caller's transaction on the engine
// database, so that settings changed in it and the jobs commit together:
// when pg_cron lives in the engine database everything happens in tx; when
// it lives elsewhere the jobs are scheduled there (one transaction) before
// this returns, and a failure there returns an error for the caller to roll
// tx back.
func RegisterTx(ctx context.Context, tx pgx.Tx) (Info, []Job, error) {
	ctx, cancel := withDeadline(ctx)
	defer cancel()
	info, err := Detect(ctx, tx.Conn())
	if err != nil {
		return info, nil, err
	}
	if err := info.Check(); err != nil {
		return info, nil, err
	}
	want, err := Planned(ctx, tx, info)
	if err != nil {
		return info, nil, err
	}
	names, err := OurJobNames(ctx, tx)
	if err != nil {
		return info, nil, err
	}
	if info.SameDatabase {
		if _, err := tx.Exec(ctx, qStart); err != nil {
			return info, nil, fmt.Errorf("registering the pg_cron jobs with pgque.start(): %w", cronHint(err, info))
		}
		jobs, err := jobsNamed(ctx, tx, names)
		return info, jobs, err
	}
	if _, err := tx.Exec(ctx, qSetCronVersion, info.Version); err != nil {
		return info, nil, fmt.Errorf("sizing the ticker loop's slot with pgque.set_cron_version(%q): %w", info.Version, db.MapError(err))
	}
	var jobs []Job
	err = inCronDB(ctx, tx.Conn(), info, func(c *pgx.Conn) error {
		return pgx.BeginFunc(ctx, c, func(ctx2 pgx.Tx) error {
			for _, j := range want {
				if _, err := ctx2.Exec(ctx, qSchedule, j.Name, j.Schedule, j.Command, j.Database); err != nil {
					return fmt.Errorf("scheduling %s in database %q: %w", j.Name, info.Database, cronHint(err, info))
				}
			}
			have, err := jobsNamed(ctx, ctx2, names)
			if err != nil {
				return err
			}
			for _, h := range have {
				if slices.ContainsFunc(want, func(w Job) bool { return w.Name == h.Name }) {
					jobs = append(jobs, h)
					continue
				}
				if err := Unschedule(ctx, ctx2, h.ID); err != nil {
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

// Unregister stops ticking through pg_cron, all or nothing: it tells running
// ticker_loop()s to end within a round (pgque.stop() sets
// ticker_loop_enabled = false) and removes exactly our jobs (names from
// pgque.cron_job_names()). It returns how many jobs there were. Without
// pg_cron it only stops running loops.
func Unregister(ctx context.Context, engine *pgx.Conn) (int, error) {
	ctx, cancel := withDeadline(ctx)
	defer cancel()
	if !hasEngine(ctx, engine) {
		return 0, fmt.Errorf("cannot tell which pg_cron jobs are ours: %w", db.ErrNotInstalled)
	}
	info, err := Detect(ctx, engine)
	if err != nil {
		return 0, err
	}
	cronHere := info.Loaded && info.Version != ""
	if cronHere {
		if err := info.Check(); err != nil {
			return 0, err
		}
	}
	names, err := OurJobNames(ctx, engine)
	if err != nil {
		return 0, err
	}
	n := 0
	err = pgx.BeginFunc(ctx, engine, func(tx pgx.Tx) error {
		// stop() removes the jobs itself when pg_cron lives here.
		if err := tx.QueryRow(ctx, qStop).Scan(&n); err != nil {
			return fmt.Errorf("stopping the ticker loop with pgque.stop(): %w", cronHint(err, info))
		}
		if !cronHere || info.SameDatabase {
			return nil
		}
		return inCronDB(ctx, engine, info, func(c *pgx.Conn) error {
			have, err := jobsNamed(ctx, c, names)
			if err != nil {
				return err
			}
			for _, h := range have {
				if err := Unschedule(ctx, c, h.ID); err != nil {
					return fmt.Errorf("removing job %s: %w", h.Name, cronHint(err, info))
				}
				n++
			}
			return nil
		})
	})
	if err != nil {
		return 0, fmt.Errorf("stopping ticking through pg_cron: %w", err)
	}
	return n, nil
}

// Jobs lists our registered jobs for the engine database.
func Jobs(ctx context.Context, engine *pgx.Conn, info Info) ([]Job, error) {
	ctx, cancel := withDeadline(ctx)
	defer cancel()
	if !info.Loaded || info.Version == "" || !info.Usage {
		return nil, nil
	}
	names, err := OurJobNames(ctx, engine)
	if err != nil {
		return nil, err
	}
	var jobs []Job
	err = inCronDB(ctx, engine, info, func(c *pgx.Conn) error {
		var err error
		jobs, err = jobsNamed(ctx, c, names)
		return err
	})
	return jobs, err
}

// JobsNamed lists the cron.job rows named in names (the engine's
// [OurJobNames]) in the database q is connected to: the cron database. It
// returns none when pg_cron's extension is not created there (no cron.job).
func JobsNamed(ctx context.Context, q db.Querier, names []string) ([]Job, error) {
	ctx, cancel := withDeadline(ctx)
	defer cancel()
	if len(names) == 0 {
		return nil, nil
	}
	var has bool
	if err := q.QueryRow(ctx, qHasJobTable).Scan(&has); err != nil {
		return nil, fmt.Errorf("looking for cron.job: %w", db.MapError(err))
	}
	if !has {
		return nil, nil
	}
	return jobsNamed(ctx, q, names)
}

// Unschedule removes the pg_cron job id (run in the cron database): the job
// owner or a superuser may.
func Unschedule(ctx context.Context, q db.Querier, id int64) error {
	ctx, cancel := withDeadline(ctx)
	defer cancel()
	_, err := q.Exec(ctx, qUnschedule, id)
	return err
}

// UnscheduleSQL is the statement that removes job id, for a user to run
// (a dry run's output, an error's hint).
func UnscheduleSQL(id int64) string {
	return fmt.Sprintf("SELECT cron.unschedule(%d);", id)
}

// UnscheduleNamedSQL is the statement that removes every job named in
// names, for a user to run in the cron database.
func UnscheduleNamedSQL(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = "'" + strings.ReplaceAll(n, "'", "''") + "'"
	}
	return "SELECT cron.unschedule(jobid) FROM cron.job WHERE jobname = ANY (ARRAY[" + strings.Join(q, ", ") + "]);"
}

// jobsNamed lists the cron.job rows named in names (run in the cron database).
func jobsNamed(ctx context.Context, q db.Querier, names []string) ([]Job, error) {
	rows, err := q.Query(ctx, QueryJobsNamed, names)
	if err != nil {
		return nil, fmt.Errorf("listing our jobs in cron.job: %w", db.MapError(err))
	}
	jobs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Job, error) {
		var j Job
		return j, r.Scan(&j.ID, &j.Name, &j.Schedule, &j.Command, &j.Database, &j.Active)
	})
	if err != nil {
		return nil, fmt.Errorf("listing our jobs in cron.job: %w", db.MapError(err))
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
		return fmt.Errorf("connecting to the pg_cron database %q with the same credentials: %w (the role needs CONNECT on it)", info.Database, db.MapError(err))
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

// cronHint maps err and, for a permission error, names the grant to ask for.
func cronHint(err error, info Info) error {
	if isCode(err, pgerrcode.InsufficientPrivilege) {
		if e := info.Check(); e != nil {
			return fmt.Errorf("%w (%v)", db.MapError(err), e)
		}
		return fmt.Errorf("%w (ask a superuser for EXECUTE on the pg_cron function named above, in database %q)", db.MapError(err), info.Database)
	}
	return db.MapError(err)
}
