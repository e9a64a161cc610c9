package install_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgquectl/pgquectl/internal/db"
	"github.com/pgquectl/pgquectl/internal/install"
	"github.com/pgquectl/pgquectl/internal/pgtest"
)

func ctx(t *testing.T) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

// fingerprintQuery describes the engine's catalog footprint: functions
// (signature, body hash, settings, security definer, ACL), relations and
// their columns, indexes, constraints, schema ACL, and the roles with their
// memberships. Object OIDs are left out: they may change, the shape may not.
const fingerprintQuery = `
SELECT 'function ' || p.oid::regprocedure::text || ' src=' || md5(p.prosrc)
       || ' config=' || coalesce(p.proconfig::text, '-') || ' secdef=' || p.prosecdef
       || ' acl=' || coalesce(p.proacl::text, '-') || ' kind=' || p.prokind::text
  FROM pg_proc p WHERE p.pronamespace = 'pgque'::regnamespace
UNION ALL
SELECT 'relation ' || c.relname || ' kind=' || c.relkind::text || ' acl=' || coalesce(c.relacl::text, '-')
       || ' persistence=' || c.relpersistence::text
  FROM pg_class c WHERE c.relnamespace = 'pgque'::regnamespace AND c.relkind <> 'i'
UNION ALL
SELECT 'column ' || c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
       || ' notnull=' || a.attnotnull || ' default=' || coalesce(pg_get_expr(d.adbin, d.adrelid), '-')
  FROM pg_class c
  JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
  LEFT JOIN pg_attrdef d ON d.adrelid = c.oid AND d.adnum = a.attnum
 WHERE c.relnamespace = 'pgque'::regnamespace AND c.relkind IN ('r', 'p', 'v')
UNION ALL
SELECT 'index ' || pg_get_indexdef(i.indexrelid)
  FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid
 WHERE c.relnamespace = 'pgque'::regnamespace
UNION ALL
SELECT 'constraint ' || conrelid::regclass::text || ' ' || conname || ' ' || pg_get_constraintdef(oid)
  FROM pg_constraint WHERE connamespace = 'pgque'::regnamespace
UNION ALL
SELECT 'type ' || t.typname FROM pg_type t
 WHERE t.typnamespace = 'pgque'::regnamespace AND t.typtype IN ('c', 'e', 'd') AND t.typrelid = 0
UNION ALL
SELECT 'schema acl=' || coalesce(nspacl::text, '-') FROM pg_namespace WHERE nspname = 'pgque'
UNION ALL
SELECT 'role ' || r.rolname || ' login=' || r.rolcanlogin || ' member_of=' ||
       coalesce((SELECT string_agg(g.rolname || CASE WHEN m.admin_option THEN '(admin)' ELSE '' END, ',' ORDER BY g.rolname)
                   FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid
                  WHERE m.member = r.oid), '-')
  FROM pg_roles r WHERE r.rolname IN ('pgque_reader', 'pgque_writer', 'pgque_admin')
ORDER BY 1`

func fingerprint(t *testing.T, conn *pgx.Conn) []string {
	t.Helper()
	rows, err := conn.Query(ctx(t), fingerprintQuery)
	if err != nil {
		t.Fatal(err)
	}
	fp, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return fp
}

func diff(a, b []string) string {
	in := func(xs []string) map[string]bool {
		m := map[string]bool{}
		for _, x := range xs {
			m[x] = true
		}
		return m
	}
	ma, mb := in(a), in(b)
	var out []string
	for _, x := range a {
		if !mb[x] {
			out = append(out, "- "+x)
		}
	}
	for _, x := range b {
		if !ma[x] {
			out = append(out, "+ "+x)
		}
	}
	if len(out) == 0 && len(a) != len(b) {
		out = append(out, fmt.Sprintf("duplicates differ: %d vs %d lines", len(a), len(b)))
	}
	return strings.Join(out, "\n")
}

func mustInstall(t *testing.T, conn *pgx.Conn, opts install.Options) install.Result {
	t.Helper()
	res, err := install.Install(ctx(t), conn, opts)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestInstallIdempotent: a second install (plain: no-op; --reinstall: the
// script runs again) leaves the catalog exactly as the first left it, and
// the version the SQL reports agrees with install.Version.
func TestInstallIdempotent(t *testing.T) {
	t.Parallel()
	conn := pgtest.Conn(t, pgtest.NewEmptyDB(t))
	res := mustInstall(t, conn, install.Options{})
	if res.Action != install.ActionInstalled || res.Previous != "" {
		t.Errorf("first install: %+v", res)
	}
	first := fingerprint(t, conn)
	if len(first) < 20 {
		t.Fatalf("fingerprint suspiciously small: %v", first)
	}

	res = mustInstall(t, conn, install.Options{})
	if res.Action != install.ActionNone || !strings.Contains(res.String(), "nothing to do") {
		t.Errorf("second install: %+v %q", res, res)
	}
	if d := diff(first, fingerprint(t, conn)); d != "" {
		t.Errorf("catalog changed by a no-op install:\n%s", d)
	}

	res = mustInstall(t, conn, install.Options{Reinstall: true})
	if res.Action != install.ActionReinstalled {
		t.Errorf("reinstall: %+v", res)
	}
	if d := diff(first, fingerprint(t, conn)); d != "" {
		t.Errorf("catalog changed by --reinstall:\n%s", d)
	}

	var fnVersion, rowVersion string
	var rowNum int
	if err := conn.QueryRow(ctx(t), `SELECT pgque.version()`).Scan(&fnVersion); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx(t), `SELECT version, version_num FROM pgque.engine_version ORDER BY version_num DESC LIMIT 1`).Scan(&rowVersion, &rowNum); err != nil {
		t.Fatal(err)
	}
	if fnVersion != install.Version || rowVersion != install.Version || rowNum != install.VersionNum {
		t.Errorf("versions disagree: pgque.version()=%q engine_version=%q/%d install.Version=%q/%d",
			fnVersion, rowVersion, rowNum, install.Version, install.VersionNum)
	}
}

// TestInstallRefusesNewerEngine: a database recording a newer engine is
// refused and left untouched.
func TestInstallRefusesNewerEngine(t *testing.T) {
	t.Parallel()
	conn := pgtest.Conn(t, pgtest.NewDB(t))
	pgtest.Exec(t, conn.Config().ConnString(), `INSERT INTO pgque.engine_version (version, version_num) VALUES ('9.9.9', 90909)`)
	before := fingerprint(t, conn)
	for _, opts := range []install.Options{{}, {Reinstall: true}} {
		_, err := install.Install(ctx(t), conn, opts)
		if !errors.Is(err, install.ErrNewerEngine) {
			t.Fatalf("Install(%+v) = %v, want ErrNewerEngine", opts, err)
		}
		for _, want := range []string{"9.9.9", install.Version, "nothing was changed"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("message %q lacks %q", err, want)
			}
		}
	}
	if d := diff(before, fingerprint(t, conn)); d != "" {
		t.Errorf("refused install changed the catalog:\n%s", d)
	}
	v, _, err := install.InstalledVersion(ctx(t), conn)
	if err != nil || v != "9.9.9" {
		t.Errorf("installed version = %q, %v", v, err)
	}
}

// TestInstallDryRun prints the script and changes nothing.
func TestInstallDryRun(t *testing.T) {
	t.Parallel()
	conn := pgtest.Conn(t, pgtest.NewEmptyDB(t))
	var out bytes.Buffer
	res, err := install.Install(ctx(t), conn, install.Options{DryRun: true, Out: &out})
	if err != nil {
		t.Fatal(err)
	}
	if !res.DryRun || res.Action != install.ActionInstalled {
		t.Errorf("dry run result: %+v", res)
	}
	script, err := install.Script()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), script) {
		t.Error("dry run did not print the install script")
	}
	var n int
	if err := conn.QueryRow(ctx(t), `SELECT count(*) FROM pg_namespace WHERE nspname = 'pgque'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Error("dry run created the pgque schema")
	}
}

// TestDryRunOutputInstallsWithPsqlStyle: the dry-run output is a script that
// installs on its own (as psql -1 -f would run it).
func TestDryRunOutputInstallsWithPsqlStyle(t *testing.T) {
	t.Parallel()
	conn := pgtest.Conn(t, pgtest.NewEmptyDB(t))
	var out bytes.Buffer
	if _, err := install.Install(ctx(t), conn, install.Options{DryRun: true, Out: &out}); err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx(t), out.String()); err != nil {
		t.Fatalf("running the dry-run output: %v", db.Describe(err))
	}
	if err := tx.Commit(ctx(t)); err != nil {
		t.Fatal(err)
	}
	res := mustInstall(t, conn, install.Options{})
	if res.Action != install.ActionNone {
		t.Errorf("after a script install, Install did %s", res.Action)
	}
}

// asUser returns dsn connecting as user with password.
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
	return dsn + " user=" + user + " password=" + password
}

func uniq() string { return strconv.FormatInt(time.Now().UnixNano(), 36) }

// TestNonSuperuserInstall: a NOSUPERUSER role that owns the database, has
// CREATEROLE and, as README's managed-database recipe says, ADMIN OPTION on
// the existing pgque roles (PostgreSQL 16+ needs it) installs the engine,
// hands the roles out, and a message makes the round trip between members
// of pgque_writer and pgque_reader.
func TestNonSuperuserInstall(t *testing.T) {
	t.Parallel()
	server := pgtest.Server(t)
	suffix := uniq()
	owner, writer, reader := "pgqt_owner_"+suffix, "pgqt_w_"+suffix, "pgqt_r_"+suffix
	pgtest.Exec(t, server, fmt.Sprintf(`CREATE ROLE %s LOGIN NOSUPERUSER CREATEROLE PASSWORD 'pw'`, owner))
	for _, r := range []string{writer, reader} {
		pgtest.Exec(t, server, fmt.Sprintf(`CREATE ROLE %s LOGIN NOSUPERUSER PASSWORD 'pw'`, r))
	}
	// Registered before NewEmptyDB: cleanups run last-in first-out, so the
	// roles are dropped after the database they own.
	t.Cleanup(func() {
		for _, r := range []string{writer, reader, owner} {
			pgtest.Exec(t, server, fmt.Sprintf(`DROP ROLE IF EXISTS %s`, r))
		}
	})
	dsn := pgtest.NewEmptyDB(t)
	dbName := pgtest.Conn(t, dsn).Config().Database
	pgtest.Exec(t, server, fmt.Sprintf(`ALTER DATABASE %s OWNER TO %s`, dbName, owner))

	pgtest.NewDB(t) // the roles exist (the engine template made them)
	pgtest.Exec(t, server, fmt.Sprintf(`GRANT pgque_reader, pgque_writer, pgque_admin TO %s WITH ADMIN OPTION`, owner))

	ownerConn := pgtest.Conn(t, asUser(t, dsn, owner, "pw"))
	res, err := install.Install(ctx(t), ownerConn, install.Options{})
	if err != nil {
		t.Fatalf("install as a non-superuser owner: %v", err)
	}
	if res.Action == install.ActionNone {
		t.Fatalf("install did nothing: %+v", res)
	}
	pgtest.Exec(t, asUser(t, dsn, owner, "pw"), fmt.Sprintf(`GRANT pgque_writer TO %s; GRANT pgque_reader TO %s`, writer, reader))

	exec := func(c *pgx.Conn, sql string, args ...any) {
		t.Helper()
		if _, err := c.Exec(ctx(t), sql, args...); err != nil {
			t.Fatalf("%s as %s: %v", sql, c.Config().User, db.Describe(err))
		}
	}
	exec(ownerConn, `SELECT pgque.create_queue('orders')`)
	exec(ownerConn, `SELECT pgque.subscribe('orders', 'billing')`)

	w := pgtest.Conn(t, asUser(t, dsn, writer, "pw"))
	exec(w, `SELECT pgque.send('orders', '{"id": 42}'::jsonb)`)
	exec(ownerConn, `SELECT pgque.force_next_tick('orders')`)
	exec(ownerConn, `SELECT pgque.ticker()`)

	r := pgtest.Conn(t, asUser(t, dsn, reader, "pw"))
	rows, err := r.Query(ctx(t), `SELECT batch_id, payload FROM pgque.receive('orders', 'billing', 10)`)
	if err != nil {
		t.Fatalf("receive as reader: %v", db.Describe(err))
	}
	type msg struct {
		Batch   int64
		Payload string
	}
	msgs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[msg])
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 1 || !strings.Contains(msgs[0].Payload, "42") {
		t.Fatalf("received %+v, want the one message", msgs)
	}
	var acked int
	if err := r.QueryRow(ctx(t), `SELECT pgque.ack($1)`, msgs[0].Batch).Scan(&acked); err != nil {
		t.Fatal(db.Describe(err))
	}
	if acked != 1 {
		t.Errorf("ack = %d, want 1", acked)
	}
	// The reader may not produce: the error maps to ErrPrivilege.
	_, err = r.Exec(ctx(t), `SELECT pgque.send('orders', '{}'::jsonb)`)
	if !errors.Is(db.MapError(err), db.ErrPrivilege) {
		t.Errorf("send as reader: %v, want a privilege error", err)
	}
}

// pendingDB returns a database with the engine and one queue holding one
// unconsumed event for consumer c.
func pendingDB(t *testing.T) (string, *pgx.Conn) {
	t.Helper()
	dsn := pgtest.NewDB(t)
	conn := pgtest.Conn(t, dsn)
	for _, sql := range []string{
		`SELECT pgque.create_queue('jobs')`,
		`SELECT pgque.subscribe('jobs', 'c')`,
		`SELECT pgque.send('jobs', 'hello')`,
		`SELECT pgque.force_next_tick('jobs')`,
		`SELECT pgque.ticker()`,
	} {
		if _, err := conn.Exec(ctx(t), sql); err != nil {
			t.Fatalf("%s: %v", sql, db.Describe(err))
		}
	}
	return dsn, conn
}

func schemaExists(t *testing.T, conn *pgx.Conn) bool {
	t.Helper()
	var ok bool
	if err := conn.QueryRow(ctx(t), `SELECT to_regnamespace('pgque') IS NOT NULL`).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

// TestUninstall: refused while events wait (and on dry run nothing
// changes), forced removal drops the schema and the engine's pg_cron jobs,
// a second uninstall is harmless, and the roles stay.
func TestUninstall(t *testing.T) {
	t.Parallel()
	dsn, conn := pendingDB(t)
	dbName := conn.Config().Database

	_, err := install.Uninstall(ctx(t), conn, install.UninstallOptions{})
	if !errors.Is(err, install.ErrPendingEvents) {
		t.Fatalf("uninstall with a pending event: %v, want ErrPendingEvents", err)
	}
	for _, want := range []string{"jobs: 1", "--force"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}
	if !schemaExists(t, conn) {
		t.Fatal("refused uninstall removed the schema")
	}

	// A pg_cron job registered from the cron database for this database.
	server := pgtest.Server(t)
	srv := pgtest.Conn(t, server)
	withCron := pgtest.HasCron(t)
	jobName := "pgque_ticker@" + dbName
	if withCron {
		pgtest.Exec(t, server, `SELECT cron.schedule_in_database($1, '0 0 1 1 *', 'SELECT 1', $2)`, jobName, dbName)
		// Another database's job must survive.
		pgtest.Exec(t, server, `SELECT cron.schedule($1, '0 0 1 1 *', 'SELECT 1')`, "pgque_ticker@"+dbName+"x")
		t.Cleanup(func() {
			pgtest.Exec(t, server, `SELECT cron.unschedule(jobid) FROM cron.job WHERE jobname = $1`, "pgque_ticker@"+dbName+"x")
		})
		// Ours are exactly the names in pgque.cron_job_names() (long database
		// names get a hashed suffix that fits pg_cron's 63 bytes; see
		// cmd/pgquectl TestTickLongDatabaseName).
	}

	var out bytes.Buffer
	res, err := install.Uninstall(ctx(t), conn, install.UninstallOptions{Force: true, DryRun: true, Out: &out})
	if err != nil {
		t.Fatal(err)
	}
	if !res.DryRun || !schemaExists(t, conn) || !strings.Contains(out.String(), "DROP SCHEMA") {
		t.Errorf("dry run: %+v, output:\n%s", res, out.String())
	}
	if withCron && !strings.Contains(out.String(), jobName) {
		t.Errorf("dry run does not mention the cron job:\n%s", out.String())
	}

	res, err = install.Uninstall(ctx(t), conn, install.UninstallOptions{Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if !res.SchemaDropped || res.Previous != install.Version {
		t.Errorf("forced uninstall: %+v", res)
	}
	if schemaExists(t, conn) {
		t.Fatal("schema still there after a forced uninstall")
	}
	if withCron {
		var left []string
		rows, err := srv.Query(ctx(t), `SELECT jobname FROM cron.job WHERE database = $1 OR jobname LIKE '%' || $2 || '%' ORDER BY jobname`, dbName, dbName[:len(dbName)-1])
		if err != nil {
			t.Fatal(err)
		}
		if left, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			t.Fatal(err)
		}
		if len(left) != 1 || left[0] != "pgque_ticker@"+dbName+"x" {
			t.Errorf("cron jobs left: %v (want only the other database's)", left)
		}
		if len(res.CronJobs) != 1 {
			t.Errorf("reported cron jobs: %v", res.CronJobs)
		}
	}
	var roles int
	if err := conn.QueryRow(ctx(t), `SELECT count(*) FROM pg_roles WHERE rolname LIKE 'pgque\_%'`).Scan(&roles); err != nil {
		t.Fatal(err)
	}
	if roles != 3 {
		t.Errorf("%d pgque roles left, want 3 (no --drop-roles)", roles)
	}

	res, err = install.Uninstall(ctx(t), conn, install.UninstallOptions{})
	if err != nil || res.SchemaDropped {
		t.Errorf("second uninstall: %+v, %v", res, err)
	}
	// Install again works after an uninstall.
	if res := mustInstall(t, pgtest.Conn(t, dsn), install.Options{}); res.Action != install.ActionInstalled {
		t.Errorf("install after uninstall: %+v", res)
	}
}

// TestUninstallBrokenInfo: when pgque.get_queue_info() fails, uninstall says
// so instead of guessing; --force still works.
func TestUninstallBrokenInfo(t *testing.T) {
	t.Parallel()
	conn := pgtest.Conn(t, pgtest.NewDB(t))
	if _, err := conn.Exec(ctx(t), `DROP FUNCTION pgque.get_queue_info()`); err != nil {
		t.Fatal(err)
	}
	_, err := install.Uninstall(ctx(t), conn, install.UninstallOptions{})
	if err == nil || !strings.Contains(err.Error(), "get_queue_info") || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("uninstall with a broken get_queue_info: %v", err)
	}
	if !schemaExists(t, conn) {
		t.Fatal("schema removed")
	}
	if _, err := install.Uninstall(ctx(t), conn, install.UninstallOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if schemaExists(t, conn) {
		t.Fatal("schema still there")
	}
}

// TestUninstallDropRoles runs on a private cluster (the roles are
// cluster-wide): refused while another database uses the roles, then done.
func TestUninstallDropRoles(t *testing.T) {
	t.Parallel()
	c := pgtest.PrivateCluster(t)
	pgtest.Exec(t, c.DSN("postgres"), `CREATE DATABASE a`)
	pgtest.Exec(t, c.DSN("postgres"), `CREATE DATABASE b`)
	a, b := pgtest.Conn(t, c.DSN("a")), pgtest.Conn(t, c.DSN("b"))
	mustInstall(t, a, install.Options{})
	mustInstall(t, b, install.Options{})

	_, err := install.Uninstall(ctx(t), a, install.UninstallOptions{DropRoles: true})
	if !errors.Is(err, install.ErrRolesInUse) || !strings.Contains(err.Error(), "without --drop-roles") {
		t.Fatalf("drop roles while b uses them: %v, want ErrRolesInUse", err)
	}
	t.Log(err)
	if !schemaExists(t, a) {
		t.Fatal("failed uninstall removed the schema of a")
	}
	if _, err := install.Uninstall(ctx(t), b, install.UninstallOptions{}); err != nil {
		t.Fatal(err)
	}
	res, err := install.Uninstall(ctx(t), a, install.UninstallOptions{DropRoles: true})
	if err != nil {
		t.Fatal(err)
	}
	if !res.RolesDropped {
		t.Errorf("result: %+v", res)
	}
	var roles int
	if err := a.QueryRow(ctx(t), `SELECT count(*) FROM pg_roles WHERE rolname LIKE 'pgque\_%'`).Scan(&roles); err != nil {
		t.Fatal(err)
	}
	if roles != 0 {
		t.Errorf("%d pgque roles left", roles)
	}
}

// TestInstallRefreshesChangedScript: a plain install of the same version
// runs the script again when the engine was made by other SQL (a newer build
// of the same version, or an install that recorded no checksum), and is a
// no-op once the checksums agree.
func TestInstallRefreshesChangedScript(t *testing.T) {
	t.Parallel()
	conn := pgtest.Conn(t, pgtest.NewEmptyDB(t))
	mustInstall(t, conn, install.Options{})
	var sum *string
	if err := conn.QueryRow(ctx(t), `SELECT script_sha256 FROM pgque.engine_version WHERE version_num = $1`, install.VersionNum).Scan(&sum); err != nil {
		t.Fatal(err)
	}
	if sum == nil || len(*sum) != 64 {
		t.Fatalf("install recorded script_sha256 = %v, want a hex SHA-256", sum)
	}
	// An engine function changed behind the install's back stands for the
	// SQL of an older build of the same version.
	pgtest.Exec(t, conn.Config().ConnString(), `CREATE OR REPLACE FUNCTION pgque.version() RETURNS text LANGUAGE sql AS $$ SELECT 'stale'::text $$`)
	for _, stored := range []string{`'0000'`, `NULL`} {
		pgtest.Exec(t, conn.Config().ConnString(), `UPDATE pgque.engine_version SET script_sha256 = `+stored)
		res := mustInstall(t, conn, install.Options{})
		if res.Action != install.ActionRefreshed || !strings.Contains(res.String(), "refreshed") {
			t.Errorf("stored checksum %s: install = %+v %q, want refreshed", stored, res, res)
		}
		var v string
		if err := conn.QueryRow(ctx(t), `SELECT pgque.version()`).Scan(&v); err != nil {
			t.Fatal(err)
		}
		if v != install.Version {
			t.Errorf("stored checksum %s: pgque.version() = %q after the refresh, want %q", stored, v, install.Version)
		}
		pgtest.Exec(t, conn.Config().ConnString(), `CREATE OR REPLACE FUNCTION pgque.version() RETURNS text LANGUAGE sql AS $$ SELECT 'stale'::text $$`)
	}
	pgtest.Exec(t, conn.Config().ConnString(), `UPDATE pgque.engine_version SET script_sha256 = $1`, *sum)
	if res := mustInstall(t, conn, install.Options{}); res.Action != install.ActionNone {
		t.Errorf("same checksum: install = %+v, want none", res)
	}
}
