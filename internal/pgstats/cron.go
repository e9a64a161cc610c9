package pgstats

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// CronSettings are pg_cron's server-wide settings, readable from any
// database once pg_cron is in shared_preload_libraries.
type CronSettings struct {
	Loaded         bool   `json:"loaded"`        // pg_cron's GUCs exist: the library is preloaded
	DatabaseName   string `json:"database_name"` // cron.database_name: where cron.job lives
	MaxRunningJobs int    `json:"max_running_jobs"`
	LogRun         bool   `json:"log_run"` // cron.log_run: job_run_details is written
}

// QueryCronSettings reads pg_cron's settings; missing_ok makes them NULL when
// pg_cron is not loaded.
const QueryCronSettings = `
SELECT current_setting('cron.database_name', true),
       current_setting('cron.max_running_jobs', true),
       current_setting('cron.log_run', true)`

// ReadCronSettings reads [CronSettings]. Loaded is false without pg_cron.
func ReadCronSettings(ctx context.Context, q Querier) (CronSettings, error) {
	var db, maxJobs, logRun *string
	var s CronSettings
	if err := queryOne(ctx, q, "reading pg_cron settings", QueryCronSettings, nil, &db, &maxJobs, &logRun); err != nil {
		return s, err
	}
	if db == nil || *db == "" {
		return s, nil
	}
	s.Loaded, s.DatabaseName = true, *db
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

// CronAccess says what the connected role can see in the cron database.
type CronAccess struct {
	Installed     bool   `json:"installed"` // CREATE EXTENSION pg_cron was run in this database
	Version       string `json:"version"`
	SchemaUsage   bool   `json:"schema_usage"`     // USAGE on schema cron
	SeesAllJobs   bool   `json:"sees_all_jobs"`    // superuser or BYPASSRLS: pg_cron's row-level security does not hide other roles' jobs
	RunDetailRows int64  `json:"run_detail_rows"`  // n_live_tup of cron.job_run_details (all roles' rows)
	RunDetailSize int64  `json:"run_detail_bytes"` // its total size
}

// QueryCronAccess checks the pg_cron extension and the role's access to it.
// It must run in the cron database (cron.database_name). It goes through
// the catalogs, so it works without USAGE on schema cron.
const QueryCronAccess = `
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

// ReadCronAccess reads [CronAccess]; Installed is false when the extension
// does not exist in the connected database.
func ReadCronAccess(ctx context.Context, q Querier) (CronAccess, error) {
	var a CronAccess
	err := queryOne(ctx, q, "checking the pg_cron extension", QueryCronAccess, nil,
		&a.Version, &a.SchemaUsage, &a.SeesAllJobs, &a.RunDetailRows, &a.RunDetailSize)
	if err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return CronAccess{}, nil
		}
		return a, err
	}
	a.Installed = true
	return a, nil
}

// CronJob is one pg_cron job with its recent runs.
type CronJob struct {
	JobID    int64  `json:"jobid"`
	Name     string `json:"jobname"`
	Schedule string `json:"schedule"`
	Command  string `json:"command"`
	Database string `json:"database"`
	Username string `json:"username"`
	Active   bool   `json:"active"`
	// Over the window passed to CronJobs (counted among the most recent runs):
	Runs      int64 `json:"runs"`
	Succeeded int64 `json:"succeeded"`
	Failed    int64 `json:"failed"`
	Running   int64 `json:"running"` // starting, connecting, sending or running now
	// The newest run of any age (among the most recent runs scanned).
	LastStatus  string     `json:"last_status"`
	LastMessage string     `json:"last_message"`
	LastStart   *time.Time `json:"last_start"`
	LastEnd     *time.Time `json:"last_end"`
	// The newest successful run and the newest failure.
	LastSuccessEnd     *time.Time `json:"last_success_end"`
	LastFailureStart   *time.Time `json:"last_failure_start"`
	LastFailureMessage string     `json:"last_failure_message"`
}

// CronRunScanLimit bounds how many of the newest job_run_details rows
// CronJobs reads (backwards along the runid primary key), so the cost stays
// flat however large the history grows.
const CronRunScanLimit = 20000

// QueryCronJobs reads the jobs named in $1 (exact names: the engine's
// pgque.cron_job_names(), see internal/cron.OurJobNames) and
// summarizes their runs among the newest $3 rows, counting those that
// started within the last $2 seconds. Runs in the cron database.
const QueryCronJobs = `
WITH recent AS (
    SELECT d.jobid, d.runid, d.status, d.return_message, d.start_time, d.end_time
      FROM cron.job_run_details d
     ORDER BY d.runid DESC
     LIMIT $3
)
SELECT j.jobid, coalesce(j.jobname::text, ''), j.schedule, j.command, j.database, j.username, j.active,
       coalesce(w.runs, 0), coalesce(w.succeeded, 0), coalesce(w.failed, 0), coalesce(w.running, 0),
       coalesce(l.status, ''), coalesce(l.return_message, ''), l.start_time, l.end_time,
       s.end_time, f.start_time, coalesce(f.return_message, '')
  FROM cron.job j
  LEFT JOIN LATERAL (
       SELECT count(*) AS runs,
              count(*) FILTER (WHERE r.status = 'succeeded') AS succeeded,
              count(*) FILTER (WHERE r.status = 'failed') AS failed,
              count(*) FILTER (WHERE r.status IN ('starting', 'connecting', 'sending', 'running')) AS running
         FROM recent r
        WHERE r.jobid = j.jobid
          AND (r.start_time >= clock_timestamp() - make_interval(secs => $2)
               OR r.status IN ('starting', 'connecting', 'sending', 'running'))) w ON true
  LEFT JOIN LATERAL (SELECT * FROM recent r WHERE r.jobid = j.jobid ORDER BY r.runid DESC LIMIT 1) l ON true
  LEFT JOIN LATERAL (SELECT * FROM recent r WHERE r.jobid = j.jobid AND r.status = 'succeeded'
                      ORDER BY r.runid DESC LIMIT 1) s ON true
  LEFT JOIN LATERAL (SELECT * FROM recent r WHERE r.jobid = j.jobid AND r.status = 'failed'
                      ORDER BY r.runid DESC LIMIT 1) f ON true
 WHERE j.jobname::text = ANY ($1::text[])
 ORDER BY j.jobname, j.jobid`

// CronJobs reads the jobs named in names (the engine's answer to "which
// jobs are ours", internal/cron.OurJobNames) with their runs in the last
// window. Must run in the cron database. pg_cron's row-level security shows
// a non-superuser only the jobs it owns.
func CronJobs(ctx context.Context, q Querier, names []string, window time.Duration) ([]CronJob, error) {
	return queryAll(ctx, q, "reading pg_cron jobs", QueryCronJobs,
		func(row pgx.CollectableRow) (CronJob, error) {
			var j CronJob
			err := row.Scan(&j.JobID, &j.Name, &j.Schedule, &j.Command, &j.Database, &j.Username, &j.Active,
				&j.Runs, &j.Succeeded, &j.Failed, &j.Running,
				&j.LastStatus, &j.LastMessage, &j.LastStart, &j.LastEnd,
				&j.LastSuccessEnd, &j.LastFailureStart, &j.LastFailureMessage)
			return j, err
		}, names, window.Seconds(), CronRunScanLimit)
}

// QueryCronRunning counts runs of any job in progress (among the newest
// CronRunScanLimit runs visible to the role), to compare with cron.max_running_jobs.
const QueryCronRunning = `
SELECT count(*)
  FROM (SELECT d.status FROM cron.job_run_details d ORDER BY d.runid DESC LIMIT $1) r
 WHERE r.status IN ('starting', 'connecting', 'sending', 'running')`

// CronRunning counts in-progress runs of all jobs the role can see.
func CronRunning(ctx context.Context, q Querier) (int64, error) {
	var n int64
	err := queryOne(ctx, q, "counting running pg_cron jobs", QueryCronRunning, []any{CronRunScanLimit}, &n)
	return n, err
}
