package cron_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/pgquectl/pgquectl/internal/cron"
	"github.com/pgquectl/pgquectl/internal/db"
	"github.com/pgquectl/pgquectl/internal/install"
	"github.com/pgquectl/pgquectl/internal/pgtest"
)

// qJobsFor lists cron.job rows by name, plus any other job running in the
// engine database.
const qJobsFor = `SELECT jobid, jobname, schedule, command, database FROM cron.job
                   WHERE jobname = ANY($1) OR database = $2 ORDER BY jobname`

type setup struct {
	ctx    context.Context
	dsn    string
	dbname string
	engine *pgx.Conn
	server *pgx.Conn // the cron database (postgres)
}

func newSetup(t *testing.T) setup {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	cronServer := pgtest.RequireCron(t)
	dsn := pgtest.NewDB(t)
	s := setup{ctx: ctx, dsn: dsn, engine: pgtest.Conn(t, dsn), server: pgtest.Conn(t, cronServer)}
	if err := s.engine.QueryRow(ctx, "SELECT current_database()").Scan(&s.dbname); err != nil {
		t.Fatal(err)
	}
	names, err := cron.OurJobNames(ctx, s.engine)
	if err != nil {
		t.Fatal(err)
	}
	// Leave no job behind in the shared cron database (the purge job runs
	// there, so dropping the engine database does not remove it).
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, pgtest.Server(t))
		if err != nil {
			return
		}
		defer c.Close(ctx)
		_, _ = c.Exec(ctx, `SELECT cron.unschedule(jobid) FROM (`+cron.QueryJobsNamed+`) j`, names)
	})
	return s
}

func (s setup) jobs(t *testing.T) []cron.Job {
	t.Helper()
	var names []string
	for _, what := range []string{"ticker", "ticker_2", "maint", "retry", "rotate_step2", "rotate_meta", "cron_purge"} {
		names = append(names, cron.StoredName("pgque_"+what+"@"+s.dbname))
	}
	rows, err := s.server.Query(s.ctx, qJobsFor, names, s.dbname)
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (cron.Job, error) {
		var j cron.Job
		return j, r.Scan(&j.ID, &j.Name, &j.Schedule, &j.Command, &j.Database)
	})
	if err != nil {
		t.Fatal(err)
	}
	return jobs
}

func TestDetect(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	info, err := cron.Detect(s.ctx, s.engine)
	if err != nil {
		t.Fatal(err)
	}
	if !info.Loaded || info.Database != "postgres" || info.Version == "" || !info.Usage {
		t.Fatalf("Detect = %+v, want pg_cron loaded in postgres with a version and usage", info)
	}
	if info.SameDatabase || info.EngineDB != s.dbname {
		t.Fatalf("Detect = %+v, want the engine in %s, another database than cron's", info, s.dbname)
	}
	if err := info.Check(); err != nil {
		t.Fatalf("Check: %v", err)
	}
}

func TestRegisterIdempotentAndUnregister(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	_, first, err := cron.Register(s.ctx, s.engine)
	if err != nil {
		t.Fatal(err)
	}
	want, err := cron.Planned(s.ctx, s.engine, mustDetect(t, s))
	if err != nil {
		t.Fatal(err)
	}
	if len(want) == 0 {
		t.Fatal("pgque.cron_jobs returned no jobs")
	}
	got := s.jobs(t)
	if len(got) != len(want) {
		t.Fatalf("cron.job has %d jobs for %s, want %d: %+v", len(got), s.dbname, len(want), got)
	}
	for i, j := range got {
		w := want[i]
		if j.Name != cron.StoredName(w.Name) || j.Schedule != w.Schedule || j.Command != w.Command || j.Database != w.Database {
			t.Errorf("job %d = %+v, want %+v", i, j, w)
		}
		if j.Database != s.dbname && j.Database != "postgres" {
			t.Errorf("job %s runs in %q, want the engine database or the cron database", j.Name, j.Database)
		}
	}
	if len(first) != len(got) {
		t.Errorf("Register returned %d jobs, cron.job has %d", len(first), len(got))
	}

	// Again: same jobs, same ids (updated in place, not duplicated).
	if _, _, err := cron.Register(s.ctx, s.engine); err != nil {
		t.Fatal(err)
	}
	again := s.jobs(t)
	if fmt.Sprint(again) != fmt.Sprint(got) {
		t.Fatalf("second Register changed the job set:\nfirst  %+v\nsecond %+v", got, again)
	}

	// A stale job of ours (a name in cron_job_names() this pg_cron version
	// does not want: the standby ticker of pg_cron >= 1.5 on 1.4) is pruned;
	// a job of someone else is left alone, also one named like ours.
	if _, err := s.server.Exec(s.ctx, `SELECT cron.schedule_in_database($1, '* * * * *', 'SELECT 1', $2)`,
		"pgque_ticker_2@"+s.dbname, s.dbname); err != nil {
		t.Fatal(err)
	}
	if _, err := s.server.Exec(s.ctx, `SELECT cron.schedule_in_database($1, '* * * * *', 'SELECT 1', $2)`,
		"theirs@"+s.dbname, s.dbname); err != nil {
		t.Fatal(err)
	}
	if _, _, err := cron.Register(s.ctx, s.engine); err != nil {
		t.Fatal(err)
	}
	if n := len(s.jobs(t)); n != len(want)+1 {
		t.Fatalf("after pruning: %d jobs, want %d of ours + 1 of theirs", n, len(want))
	}

	n, err := cron.Unregister(s.ctx, s.engine)
	if err != nil {
		t.Fatal(err)
	}
	if n != len(want) {
		t.Errorf("Unregister removed %d, want %d", n, len(want))
	}
	left := s.jobs(t)
	if len(left) != 1 || left[0].Name != "theirs@"+s.dbname {
		t.Fatalf("after Unregister: %+v, want only the foreign job", left)
	}
}

func TestUninstallRemovesRegisteredJobs(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	if _, _, err := cron.Register(s.ctx, s.engine); err != nil {
		t.Fatal(err)
	}
	if len(s.jobs(t)) == 0 {
		t.Fatal("no jobs registered")
	}
	if _, err := install.Uninstall(s.ctx, s.engine, install.UninstallOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if left := s.jobs(t); len(left) != 0 {
		t.Fatalf("uninstall left jobs: %+v", left)
	}
}

func TestNoUsageOnCronSaysWhichGrant(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	role := "nocron_" + strings.ReplaceAll(s.dbname, "-", "_")
	role = role[:min(len(role), 60)]
	ident := pgx.Identifier{role}.Sanitize()
	if _, err := s.server.Exec(s.ctx, "CREATE ROLE "+ident+" LOGIN"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, pgtest.Server(t))
		if err == nil {
			_, _ = c.Exec(ctx, "DROP ROLE IF EXISTS "+ident)
			_ = c.Close(ctx)
		}
	})
	dsn, err := db.WithDatabase(s.dsn, s.dbname)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cc.User = role
	c, err := pgx.ConnectConfig(s.ctx, cc)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	info, err := cron.Detect(s.ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	err = info.Check()
	if !errors.Is(err, cron.ErrNoUsage) {
		t.Fatalf("Check = %v, want ErrNoUsage", err)
	}
	if !strings.Contains(err.Error(), "GRANT USAGE ON SCHEMA cron TO "+ident) {
		t.Fatalf("error %q does not name the GRANT to ask for", err)
	}
}

func mustDetect(t *testing.T, s setup) cron.Info {
	t.Helper()
	info, err := cron.Detect(s.ctx, s.engine)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

func TestCheckPointsToTheDaemonWithoutPgCron(t *testing.T) {
	t.Parallel()
	err := cron.Info{Loaded: false}.Check()
	if !errors.Is(err, cron.ErrNotAvailable) || !strings.Contains(err.Error(), "pgquectl tick --run") {
		t.Fatalf("Check without pg_cron = %v, want ErrNotAvailable pointing to tick --run", err)
	}
	err = cron.Info{Loaded: true, Database: "postgres"}.Check()
	if !errors.Is(err, cron.ErrNoExtension) || !strings.Contains(err.Error(), "CREATE EXTENSION pg_cron") {
		t.Fatalf("Check without the extension = %v", err)
	}
}

func TestStoredName(t *testing.T) {
	t.Parallel()
	long := "pgque_rotate_step2@" + strings.Repeat("d", 60)
	if got := cron.StoredName(long); len(got) != 63 || !strings.HasPrefix(long, got) {
		t.Fatalf("StoredName(%d bytes) = %q (%d bytes)", len(long), got, len(got))
	}
	if got := cron.StoredName("pgque_x@db"); got != "pgque_x@db" {
		t.Fatalf("StoredName(short) = %q", got)
	}
	multi := "pgque_ticker@" + strings.Repeat("é", 40) // 2 bytes each
	if got := cron.StoredName(multi); len(got) > 63 || !utf8.ValidString(got) {
		t.Fatalf("StoredName cut a character: %q", got)
	}
}
