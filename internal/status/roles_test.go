package status_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgquectl/pgquectl/internal/pgtest"
	"github.com/pgquectl/pgquectl/internal/status"
)

// loginRole creates a NOSUPERUSER LOGIN role (roles are cluster-wide, so
// the name is unique per test), runs grants as superuser in the engine
// database and cronGrants in the cron database, and returns a DSN that
// logs in as it. Everything is revoked and the role dropped at cleanup.
func loginRole(t *testing.T, s *setup, grants, cronGrants []string) (dsn, role string) {
	t.Helper()
	ctx := ctxT(t)
	var suffix string
	if err := s.conn.QueryRow(ctx, `SELECT substr(md5(random()::text), 1, 10)`).Scan(&suffix); err != nil {
		t.Fatal(err)
	}
	role = "status_test_" + suffix
	const password = "status-test-pw"
	ident := pgx.Identifier{role}.Sanitize()
	exec(t, s.conn, `CREATE ROLE `+ident+` LOGIN NOSUPERUSER PASSWORD '`+password+`'`)
	server := pgtest.Conn(t, pgtest.Server(t))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		// pg_cron's schema lives in the shared postgres database: take the grant back there.
		if _, err := server.Exec(ctx, `DO $$BEGIN IF to_regnamespace('cron') IS NOT NULL THEN EXECUTE 'REVOKE ALL ON SCHEMA cron FROM `+ident+`'; END IF; END$$`); err != nil {
			t.Errorf("revoking cron grants: %v", err)
		}
		if _, err := s.conn.Exec(ctx, `DROP OWNED BY `+ident); err != nil {
			t.Errorf("dropping what the role owns: %v", err)
		}
		if _, err := server.Exec(ctx, `DROP ROLE `+ident); err != nil {
			t.Errorf("dropping role %s: %v", role, err)
		}
	})
	for _, g := range grants {
		exec(t, s.conn, strings.ReplaceAll(g, "ROLE", ident))
	}
	for _, g := range cronGrants {
		exec(t, server, strings.ReplaceAll(g, "ROLE", ident))
	}
	return asUser(t, s.dsn, role, password), role
}

// asUser rewrites dsn (URL or keyword/value) to log in as user.
func asUser(t *testing.T, dsn, user, password string) string {
	t.Helper()
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		u.User = url.UserPassword(user, password)
		return u.String()
	}
	return dsn + " user='" + user + "' password='" + password + "'"
}

// TestMonitorRole: a NOSUPERUSER role with pg_monitor (plus pgque_reader
// and USAGE on schema cron) reads every section: all OK, nothing hidden.
func TestMonitorRole(t *testing.T) {
	t.Parallel()
	pgtest.RequireCron(t) // grants USAGE on schema cron
	s := newSetup(t)
	dsn, role := loginRole(t, s,
		[]string{`GRANT pg_monitor TO ROLE`, `GRANT pgque_reader TO ROLE`},
		[]string{`GRANT USAGE ON SCHEMA cron TO ROLE`})
	// Someone else's (a superuser's) open snapshot: pg_monitor sees its age.
	holder := pgtest.Conn(t, s.dsn)
	exec(t, holder, `BEGIN ISOLATION LEVEL REPEATABLE READ`)
	exec(t, holder, `SELECT 1`)

	r := collect(t, collector(t, dsn, s.th, 100*time.Millisecond))
	t.Logf("%s", r.Summary)
	if r.Session.Superuser || !r.Session.PgMonitor || r.Session.User != role {
		t.Fatalf("session: %+v", r.Session)
	}
	if r.Level != status.OK {
		t.Fatalf("as %s with pg_monitor: level %s: %+v", role, r.Level, notOK(r))
	}
	found := false
	for _, b := range r.Xmin.Backends {
		if b.PID == int32(holder.PgConn().PID()) {
			found = true
			if b.Hidden || b.XactAge == nil || b.State == "" {
				t.Errorf("pg_monitor should see the holder's age and state: %+v", b)
			}
		}
	}
	if !found || r.Xmin.Hidden != 0 {
		t.Errorf("holder not visible (hidden %d): %+v", r.Xmin.Hidden, r.Xmin.Backends)
	}
	if !r.Cron.Settings.Loaded || !r.Cron.Access.Installed {
		t.Fatalf("pg_cron is set up on the test server, yet status says: %+v", r.Cron)
	}
	if !r.Cron.Access.SchemaUsage || r.Cron.Access.SeesAllJobs {
		t.Errorf("cron access: %+v", r.Cron.Access)
	}
}

// TestUnprivilegedRole: without pg_monitor, pgque_reader or USAGE on
// schema cron, every section says what it could not read and the grant
// that fixes it; the report is UNKNOWN, not a crash.
func TestUnprivilegedRole(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	exec(t, s.conn, `SELECT pgque.create_queue('hidden')`)
	dsn, role := loginRole(t, s, nil, nil)
	holder := pgtest.Conn(t, s.dsn)
	exec(t, holder, `BEGIN ISOLATION LEVEL REPEATABLE READ`)
	exec(t, holder, `SELECT 1`)

	r := collect(t, collector(t, dsn, s.th, 100*time.Millisecond))
	if r.Level != status.Unknown {
		t.Errorf("level %s, want UNKNOWN: %+v", r.Level, notOK(r))
	}
	var out strings.Builder
	if err := r.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{
		"GRANT pg_monitor TO " + role,   // xmin ages, pg_cron's settings
		"GRANT pgque_reader TO " + role, // queues and consumers
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the table output does not say %q:\n%s", want, text)
		}
		if !strings.Contains(r.Summary, want) {
			t.Errorf("the summary does not say %q: %s", want, r.Summary)
		}
	}
	if r.Xmin.Hidden < 1 {
		t.Errorf("the superuser's snapshot should be a hidden holder: %+v", r.Xmin)
	}
	// pg_stat_user_tables needs no grant: bloat is still judged.
	if len(r.Bloat.Families) == 0 || len(r.Bloat.Problems) > 0 {
		t.Errorf("bloat without privileges: %+v", r.Bloat)
	}
	if tk := check(t, r, "ticking"); tk.Level != status.Unknown {
		t.Errorf("ticking with unreadable queues and cron: %+v", tk)
	}
}

// TestMonitorRoleWithoutCronUsage: pg_monitor but no USAGE on schema
// cron: the cron section names that grant.
func TestMonitorRoleWithoutCronUsage(t *testing.T) {
	t.Parallel()
	pgtest.RequireCron(t)
	s := newSetup(t)
	dsn, role := loginRole(t, s, []string{`GRANT pg_monitor TO ROLE`, `GRANT pgque_reader TO ROLE`}, nil)
	r := collect(t, collector(t, dsn, s.th, 0))
	if !r.Cron.Settings.Loaded {
		t.Fatalf("pg_cron is loaded on the test server, yet status says: %+v", r.Cron.Settings)
	}
	want := "GRANT USAGE ON SCHEMA cron TO " + role
	if r.Level != status.Unknown || !strings.Contains(r.Summary, want) {
		t.Errorf("want UNKNOWN naming %q: %s", want, r.Summary)
	}
	if len(r.Cron.Problems) != 1 || !strings.Contains(r.Cron.Problems[0].Fix, want) || !strings.Contains(r.Cron.Problems[0].Fix, "in database "+r.Cron.Settings.DatabaseName) {
		t.Errorf("cron problems: %+v", r.Cron.Problems)
	}
	for _, c := range r.Checks {
		if c.Section != "cron" && c.Level != status.OK {
			t.Errorf("only the cron section should be affected: %+v", c)
		}
	}
}

// TestUnreachable: no server → ErrUnreachable and an UNKNOWN report.
func TestUnreachable(t *testing.T) {
	t.Parallel()
	c := collector(t, "postgres://nobody@127.0.0.1:1/none?connect_timeout=2&sslmode=disable", status.DefaultThresholds(), 0)
	r, err := c.Collect(ctxT(t))
	if err == nil || r == nil || r.Level != status.Unknown || r.Error == "" {
		t.Fatalf("Collect against a closed port: %+v, %v", r, err)
	}
	if !strings.HasPrefix(r.Summary, "PGQUE UNKNOWN - ") {
		t.Errorf("summary %q", r.Summary)
	}
}
