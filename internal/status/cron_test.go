package status_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgquectl/pgquectl/internal/pgtest"
	"github.com/pgquectl/pgquectl/internal/status"
)

// Statements of the cron tests (run as superuser in the cron database).
const (
	sqlScheduleIn  = `SELECT cron.schedule_in_database($1, $2, $3, $4)`
	sqlUnschedule  = `SELECT cron.unschedule($1::bigint)`
	sqlDeleteRuns  = `DELETE FROM cron.job_run_details WHERE jobid = $1`
	sqlFailingFunc = `CREATE FUNCTION public.status_test_fail() RETURNS void LANGUAGE plpgsql AS
	                  $$BEGIN RAISE EXCEPTION 'status test: this job fails on purpose'; END$$`
	failingCommand = `SELECT public.status_test_fail()`
	// sqlRecordRun writes a finished run the way pg_cron's scheduler does
	// (cron.job_run_details: status 'failed', the server's error text).
	sqlRecordRun = `INSERT INTO cron.job_run_details
	                    (jobid, runid, job_pid, database, username, command, status, return_message, start_time, end_time)
	                SELECT j.jobid, nextval('cron.runid_seq'), $2, j.database, j.username, j.command, 'failed', $3, $4, $5
	                  FROM cron.job j WHERE j.jobid = $1`
)

// cronJob schedules a job named pgque_<what>@<test database> with pg_cron
// in the cron database, removed with its run history at cleanup.
func cronJob(t *testing.T, s *setup, what, schedule, command string) (jobID int64, name string, cron *pgx.Conn) {
	t.Helper()
	ctx := ctxT(t)
	cron = pgtest.Conn(t, pgtest.RequireCron(t))
	var dbName string
	if err := s.conn.QueryRow(ctx, `SELECT current_database()`).Scan(&dbName); err != nil {
		t.Fatal(err)
	}
	name = "pgque_" + what + "@" + dbName
	if err := cron.QueryRow(ctx, sqlScheduleIn, name, schedule, command, dbName).Scan(&jobID); err != nil {
		t.Fatalf("scheduling %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := cron.Exec(ctx, sqlUnschedule, jobID); err != nil {
			t.Errorf("unscheduling %s: %v", name, err)
		}
		if _, err := cron.Exec(ctx, sqlDeleteRuns, jobID); err != nil {
			t.Errorf("deleting the runs of %s: %v", name, err)
		}
	})
	return jobID, name, cron
}

// TestCronFailedRunCrit: one of our jobs failed → cron CRIT.
//
// pg_cron 1.4 (this machine's) schedules by the minute, so waiting for its
// scheduler costs up to a minute (TestCronFailedRunCritLive does that). Here
// the job is registered with pg_cron for real, its command is run for real in
// the engine database (it fails), and the failure is recorded in
// cron.job_run_details exactly as pg_cron's scheduler records a run: status
// reads only that table, so what it judges is the same either way.
func TestCronFailedRunCrit(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	exec(t, s.conn, sqlFailingFunc)
	jobID, name, cron := cronJob(t, s, "maint", "0 0 1 1 *", failingCommand) // one of cron_job_names()
	c := collector(t, s.dsn, s.th, 0)

	j := check(t, collect(t, c), "cron job "+name)
	if j.Level != status.OK || !strings.Contains(j.Reason, "no run recorded") {
		t.Errorf("before any run: %+v", j)
	}

	ctx := ctxT(t)
	start := time.Now()
	_, err := s.conn.Exec(ctx, failingCommand)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		t.Fatalf("the job's command should fail, got %v", err)
	}
	if _, err := cron.Exec(ctx, sqlRecordRun, jobID, s.conn.PgConn().PID(), "ERROR:  "+pgErr.Message, start, time.Now()); err != nil {
		t.Fatal(err)
	}

	r := collect(t, c)
	j = check(t, r, "cron job "+name)
	if j.Level != status.Crit || !strings.Contains(j.Reason, "1 run(s) failed since the last success") || !strings.Contains(j.Reason, "fails on purpose") {
		t.Fatalf("after a failed run: %+v", j)
	}
	if r.Level != status.Crit {
		t.Errorf("report level %s", r.Level)
	}
	var row *status.JobRow
	for i := range r.Cron.Jobs {
		if r.Cron.Jobs[i].JobID == jobID {
			row = &r.Cron.Jobs[i]
		}
	}
	if row == nil || row.Failed != 1 || row.Runs != 1 || row.LastStatus != "failed" || row.LastFailureStart == nil || row.Interval != nil {
		t.Errorf("job row: %+v", row)
	}
}

// TestCronFailedRunCritLive lets pg_cron itself run the failing job (its
// next minute boundary) and waits for status to see the failure.
func TestCronFailedRunCritLive(t *testing.T) {
	if testing.Short() {
		t.Skip("waits up to two minutes for pg_cron's minute schedule")
	}
	t.Parallel()
	s := newSetup(t)
	exec(t, s.conn, sqlFailingFunc)
	_, name, _ := cronJob(t, s, "retry", "* * * * *", failingCommand) // one of cron_job_names()
	c := collector(t, s.dsn, s.th, 0)
	var j status.Check
	for deadline := time.Now().Add(150 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Second) {
		if j = check(t, collect(t, c), "cron job "+name); j.Level == status.Crit {
			break
		}
	}
	if j.Level != status.Crit || !strings.Contains(j.Reason, "fails on purpose") {
		t.Fatalf("pg_cron ran the failing job, yet: %+v", j)
	}
	t.Logf("%s: %s", j.Level, j.Reason)
}
