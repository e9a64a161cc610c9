package cron

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgquectl/pgquectl/internal/db"
)

// What `pgquectl status` reads of pg_cron: its settings, the role's access
// to the extension, our jobs with a summary of their runs, and how many runs
// are in progress. Errors are classified by internal/db (errors.Is(err,
// db.ErrPrivilege) for a missing grant).

// Settings are pg_cron's server-wide settings, readable from any
// database once pg_cron is in shared_preload_libraries.
type Settings struct {
	Loaded         bool   `json:"loaded"`        // pg_cron's GUCs exist: the library is preloaded
	DatabaseName   string `json:"database_name"` // cron.database_name: where cron.job lives
	MaxRunningJobs int    `json:"max_running_jobs"`
	LogRun         bool   `json:"log_run"` // cron.log_run: job_run_details is written
}

// QuerySettings reads pg_cron's settings; missing_ok makes them NULL when
// pg_cron is not loaded.
const QuerySettings = `
SELECT current_setting('cron.database_name', true),
       current_setting('cron.max_running_jobs', true),
       current_setting('cron.log_run', true)`

// ReadSettings reads [Settings]. Loaded is false without pg_cron.
func ReadSettings(ctx context.Context, q db.Querier) (Settings, error) {
	var name, maxJobs, logRun *string
	var s Settings
	if err := queryOne(ctx, q, "reading pg_cron settings", QuerySettings, nil, &name, &maxJobs, &logRun); err != nil {
		return s, err
	}
	if name == nil || *name == "" {
		return s, nil
	}
	s.Loaded, s.DatabaseName = true, *name
	if maxJobs != nil {
		for _, c := range *maxJobs {
			if c < '0' || c > '9' {
				break
			}
			s.MaxRunningJobs = s.MaxRunningJobs*10 + int(c-'0')
		}
	}
	s.LogRun = logRun == nil || *logRun == "on"
	return s, nil
}

// Access says what the connected role can see in the cron database.
type Access struct {
	Installed     bool   `json:"installed"` // CREATE EXTENSION pg_cron was run in this database
	Version       string `json:"version"`
	SchemaUsage   bool   `json:"schema_usage"`     // USAGE on schema cron
	SeesAllJobs   bool   `json:"sees_all_jobs"`    // superuser or BYPASSRLS: pg_cron's row-level security does not hide other roles' jobs
	RunDetailRows int64  `json:"run_detail_rows"`  // n_live_tup of cron.job_run_details (all roles' rows)
	RunDetailSize int64  `json:"run_detail_bytes"` // its total size
}

// QueryAccess checks the pg_cron extension and the role's access to it.
// It must run in the cron database (cron.database_name). It goes through
// the catalogs, so it works without USAGE on schema cron.
const QueryAccess = `
SELECT e.extversion,
       coalesce(has_schema_privilege(n.oid, 'USAGE'), false),
       r.rolsuper OR r.rolbypassrls,
       coalesce(pg_stat_get_live_tuples(d.oid), 0),
       coalesce(pg_total_relation_size(d.oid), 0)
  FROM pg_extension e
  JOIN pg_roles r ON r.rolname = current_user
  LEFT JOIN pg_namespace n ON n.nspname = 'cron'
  LEFT JOIN pg_class d ON d.relnamespace = n.oid AND d.relname = 'job_run_details'
 WHERE e.extname = 'pg_cron'`

// ReadAccess reads [Access]; Installed is false when the extension does not
// exist in the connected database.
func ReadAccess(ctx context.Context, q db.Querier) (Access, error) {
	var a Access
	err := queryOne(ctx, q, "checking the pg_cron extension", QueryAccess, nil,
		&a.Version, &a.SchemaUsage, &a.SeesAllJobs, &a.RunDetailRows, &a.RunDetailSize)
	if err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return Access{}, nil
		}
		return a, err
	}
	a.Installed = true
	return a, nil
}

// JobRuns is one pg_cron job with its recent runs.
//
// pg_cron records a run that fails before it starts (it could not connect:
// "connection failed", a job pointing at a port the server no longer uses)
// with status 'failed' and no start_time, end_time or job_pid. Such runs
// have no time of their own, so a run's place in time is its runid: the
// window holds every run newer than the newest run known to have started
// (or ended) before the window.
type JobRuns struct {
	JobID    int64  `json:"jobid"`
	Name     string `json:"jobname"`
	Schedule string `json:"schedule"`
	Command  string `json:"command"`
	Database string `json:"database"`
	Username string `json:"username"`
	NodeName string `json:"nodename"`
	NodePort int32  `json:"nodeport"`
	Active   bool   `json:"active"`
	// Over the window passed to ReadJobRuns (counted among the most recent runs):
	Runs      int64 `json:"runs"`
	Succeeded int64 `json:"succeeded"`
	Failed    int64 `json:"failed"`
	Running   int64 `json:"running"` // starting, connecting, sending or running now
	// FailedSinceSuccess counts the failed runs newer than the newest
	// successful one (all failed runs scanned when none succeeded).
	FailedSinceSuccess int64 `json:"failed_since_success"`
	// The newest run of any age (among the most recent runs scanned).
	LastStatus  string     `json:"last_status"`
	LastMessage string     `json:"last_message"`
	LastStart   *time.Time `json:"last_start"`
	LastEnd     *time.Time `json:"last_end"`
	// The newest finished run (succeeded or failed): what the job does now.
	LastFinishedStatus string `json:"last_finished_status"`
	// The newest successful run, the newest run in progress and the newest failure.
	LastSuccessStart   *time.Time `json:"last_success_start"`
	LastSuccessEnd     *time.Time `json:"last_success_end"`
	RunningSince       *time.Time `json:"running_since"`
	LastFailureStart   *time.Time `json:"last_failure_start"` // nil also for a run that failed before starting
	LastFailureMessage string     `json:"last_failure_message"`
	// LargestGap is the longest time in the window between the end of one
	// run and the start of the next (seconds; nil with fewer than two timed
	// runs): for the ticker job, how long nothing ticked between loops.
	LargestGap   *float64   `json:"largest_gap_s"`
	LargestGapAt *time.Time `json:"largest_gap_at"` // when that gap began
}

// RunScanLimit bounds how many of the newest job_run_details rows
// ReadJobRuns reads (backwards along the runid primary key), so the cost stays
// flat however large the history grows.
const RunScanLimit = 20000

// QueryJobRuns reads the jobs named in $1 (exact names: the engine's
// pgque.cron_job_names(), see [OurJobNames]) and
// summarizes their runs among the newest $3 rows, counting those that
// started within the last $2 seconds. Runs in the cron database.
const QueryJobRuns = `
WITH recent AS (
    SELECT d.jobid, d.runid, d.status, d.return_message, d.start_time, d.end_time,
           coalesce(d.start_time, d.end_time) AS at
      FROM cron.job_run_details d
     ORDER BY d.runid DESC
     LIMIT $3
), cutoff AS (
    SELECT r.jobid, max(r.runid) AS runid
      FROM recent r
     WHERE r.at < clock_timestamp() - make_interval(secs => $2)
     GROUP BY r.jobid
)
SELECT j.jobid, coalesce(j.jobname::text, ''), j.schedule, j.command, j.database, j.username,
       j.nodename, j.nodeport, j.active,
       coalesce(w.runs, 0), coalesce(w.succeeded, 0), coalesce(w.failed, 0), coalesce(w.running, 0),
       (SELECT count(*) FROM recent r WHERE r.jobid = j.jobid AND r.status = 'failed' AND r.runid > coalesce(s.runid, 0)),
       coalesce(l.status, ''), coalesce(l.return_message, ''), l.start_time, l.end_time,
       coalesce(fin.status, ''),
       s.start_time, s.end_time, run.start_time, f.start_time, coalesce(f.return_message, ''),
       g.gap, g.gap_at
  FROM cron.job j
  LEFT JOIN cutoff c ON c.jobid = j.jobid
  LEFT JOIN LATERAL (
       SELECT count(*) AS runs,
              count(*) FILTER (WHERE r.status = 'succeeded') AS succeeded,
              count(*) FILTER (WHERE r.status = 'failed') AS failed,
              count(*) FILTER (WHERE r.status IN ('starting', 'connecting', 'sending', 'running')) AS running
         FROM recent r
        WHERE r.jobid = j.jobid
          AND (r.runid > coalesce(c.runid, 0)
               OR r.status IN ('starting', 'connecting', 'sending', 'running'))) w ON true
  LEFT JOIN LATERAL (SELECT * FROM recent r WHERE r.jobid = j.jobid ORDER BY r.runid DESC LIMIT 1) l ON true
  LEFT JOIN LATERAL (SELECT * FROM recent r WHERE r.jobid = j.jobid AND r.status IN ('succeeded', 'failed')
                      ORDER BY r.runid DESC LIMIT 1) fin ON true
  LEFT JOIN LATERAL (SELECT * FROM recent r WHERE r.jobid = j.jobid AND r.status = 'succeeded'
                      ORDER BY r.runid DESC LIMIT 1) s ON true
  LEFT JOIN LATERAL (SELECT * FROM recent r WHERE r.jobid = j.jobid AND r.status IN ('starting', 'connecting', 'sending', 'running')
                      ORDER BY r.runid DESC LIMIT 1) run ON true
  LEFT JOIN LATERAL (SELECT * FROM recent r WHERE r.jobid = j.jobid AND r.status = 'failed'
                      ORDER BY r.runid DESC LIMIT 1) f ON true
  LEFT JOIN LATERAL (
       SELECT extract(epoch FROM x.next_start - x.end_time)::float8 AS gap, x.end_time AS gap_at
         FROM (SELECT r.end_time, lead(r.start_time) OVER (ORDER BY r.runid) AS next_start
                 FROM recent r
                WHERE r.jobid = j.jobid AND r.start_time IS NOT NULL
                  AND r.runid > coalesce(c.runid, 0)) x
        WHERE x.end_time IS NOT NULL AND x.next_start IS NOT NULL
        ORDER BY x.next_start - x.end_time DESC
        LIMIT 1) g ON true
 WHERE j.jobname::text = ANY ($1::text[])
 ORDER BY j.jobname, j.jobid`

// ReadJobRuns reads the jobs named in names (the engine's answer to "which
// jobs are ours", [OurJobNames]) with their runs in the last window. Must
// run in the cron database. pg_cron's row-level security shows a
// non-superuser only the jobs it owns.
func ReadJobRuns(ctx context.Context, q db.Querier, names []string, window time.Duration) ([]JobRuns, error) {
	return queryAll(ctx, q, "reading pg_cron jobs", QueryJobRuns,
		func(row pgx.CollectableRow) (JobRuns, error) {
			var j JobRuns
			err := row.Scan(&j.JobID, &j.Name, &j.Schedule, &j.Command, &j.Database, &j.Username,
				&j.NodeName, &j.NodePort, &j.Active,
				&j.Runs, &j.Succeeded, &j.Failed, &j.Running, &j.FailedSinceSuccess,
				&j.LastStatus, &j.LastMessage, &j.LastStart, &j.LastEnd, &j.LastFinishedStatus,
				&j.LastSuccessStart, &j.LastSuccessEnd, &j.RunningSince, &j.LastFailureStart, &j.LastFailureMessage,
				&j.LargestGap, &j.LargestGapAt)
			return j, err
		}, names, window.Seconds(), RunScanLimit)
}

// QueryRunning counts runs of any job in progress (among the newest
// RunScanLimit runs visible to the role), to compare with cron.max_running_jobs.
const QueryRunning = `
SELECT count(*)
  FROM (SELECT d.status FROM cron.job_run_details d ORDER BY d.runid DESC LIMIT $1) r
 WHERE r.status IN ('starting', 'connecting', 'sending', 'running')`

// CountRunning counts in-progress runs of all jobs the role can see.
func CountRunning(ctx context.Context, q db.Querier) (int64, error) {
	var n int64
	err := queryOne(ctx, q, "counting running pg_cron jobs", QueryRunning, []any{RunScanLimit}, &n)
	return n, err
}

// queryAll runs sql and scans every row with scan.
func queryAll[T any](ctx context.Context, q db.Querier, doing, sql string, scan func(pgx.CollectableRow) (T, error), args ...any) ([]T, error) {
	ctx, cancel := withDeadline(ctx)
	defer cancel()
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", doing, db.MapError(err))
	}
	out, err := pgx.CollectRows(rows, scan)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", doing, db.MapError(err))
	}
	return out, nil
}

// queryOne runs sql and scans its single row into dest; pgx.ErrNoRows stays
// testable with errors.Is.
func queryOne(ctx context.Context, q db.Querier, doing, sql string, args []any, dest ...any) error {
	ctx, cancel := withDeadline(ctx)
	defer cancel()
	if err := q.QueryRow(ctx, sql, args...).Scan(dest...); err != nil {
		return fmt.Errorf("%s: %w", doing, db.MapError(err))
	}
	return nil
}
