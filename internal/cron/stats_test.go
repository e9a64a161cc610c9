package cron_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pgquectl/pgquectl/internal/cron"
	"github.com/pgquectl/pgquectl/internal/pgtest"
)

func TestCronCatalog(t *testing.T) {
	t.Parallel()
	server := pgtest.RequireCron(t)
	conn := pgtest.Conn(t, server)
	ctx := t.Context()
	s, err := cron.ReadSettings(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Loaded {
		t.Fatalf("pg_cron is preloaded on the test server, yet: %+v", s)
	}
	if s.DatabaseName != "postgres" || s.MaxRunningJobs <= 0 {
		t.Errorf("settings %+v", s)
	}
	a, err := cron.ReadAccess(ctx, conn)
	if err != nil || !a.Installed || !a.SchemaUsage || !a.SeesAllJobs {
		t.Fatalf("access %+v, %v", a, err)
	}
	// A job named in the list, for a database that does not exist: found,
	// with no runs. A name differing in one byte is not (exact match: '_'
	// in a database name is no wildcard).
	name := "pgque_stats_test@nodb_" + time.Now().Format("150405.000000")
	var id int64
	if err := conn.QueryRow(ctx, `SELECT cron.schedule($1, '0 0 1 1 *', 'SELECT 1')`, name).Scan(&id); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = conn.Exec(context.Background(), `SELECT cron.unschedule($1::bigint)`, id) })
	jobs, err := cron.ReadJobRuns(ctx, conn, []string{name}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 1 || jobs[0].JobID != id || jobs[0].Runs != 0 || jobs[0].LastStart != nil {
		t.Errorf("jobs %+v", jobs)
	}
	jobs, err = cron.ReadJobRuns(ctx, conn, []string{strings.Replace(name, "_", "x", 1), name[:len(name)-1]}, time.Hour)
	if err != nil || len(jobs) != 0 {
		t.Errorf("a name for another job matched: %+v, %v", jobs, err)
	}
	if _, err := cron.CountRunning(ctx, conn); err != nil {
		t.Error(err)
	}
}

// TestJobsNamedAndUnschedule: JobsNamed finds exactly the named jobs in the
// cron database and none where pg_cron's extension is not created;
// Unschedule removes one.
func TestJobsNamedAndUnschedule(t *testing.T) {
	t.Parallel()
	server := pgtest.RequireCron(t)
	conn := pgtest.Conn(t, server)
	engine := pgtest.Conn(t, pgtest.NewDB(t))
	ctx := t.Context()
	name := "pgque_jobsnamed_test@nodb_" + time.Now().Format("150405.000000")
	var id int64
	if err := conn.QueryRow(ctx, `SELECT cron.schedule($1, '0 0 1 1 *', 'SELECT 1')`, name).Scan(&id); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = conn.Exec(context.Background(), `SELECT cron.unschedule($1::bigint)`, id) })
	if jobs, err := cron.JobsNamed(ctx, engine, []string{name}); err != nil || len(jobs) != 0 {
		t.Fatalf("JobsNamed where pg_cron is not created: %+v, %v", jobs, err)
	}
	jobs, err := cron.JobsNamed(ctx, conn, []string{name, strings.Replace(name, "_", "x", 1)})
	if err != nil || len(jobs) != 1 || jobs[0].ID != id || jobs[0].Name != name {
		t.Fatalf("JobsNamed: %+v, %v", jobs, err)
	}
	if err := cron.Unschedule(ctx, conn, id); err != nil {
		t.Fatal(err)
	}
	if jobs, err := cron.JobsNamed(ctx, conn, []string{name}); err != nil || len(jobs) != 0 {
		t.Fatalf("after Unschedule: %+v, %v", jobs, err)
	}
	if got, want := cron.UnscheduleNamedSQL([]string{"a'b", "c"}), `SELECT cron.unschedule(jobid) FROM cron.job WHERE jobname = ANY (ARRAY['a''b', 'c']);`; got != want {
		t.Errorf("UnscheduleNamedSQL = %s, want %s", got, want)
	}
}
