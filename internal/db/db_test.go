package db_test

import (
	"context"
	"errors"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgquectl/pgquectl/internal/config"
	"github.com/pgquectl/pgquectl/internal/db"
	"github.com/pgquectl/pgquectl/internal/localpg"
	"github.com/pgquectl/pgquectl/internal/pgtest"
)

func ctx(t *testing.T) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

func conn(dsn string) config.Connection {
	return config.Connection{DSN: dsn, ConnectTimeout: 5 * time.Second, ApplicationName: "pgquectl-test"}
}

// withUser returns dsn connecting as user (password may be empty).
func withUser(t *testing.T, dsn, user, password string) string {
	t.Helper()
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		if password != "" {
			u.User = url.UserPassword(user, password)
		} else {
			u.User = url.User(user)
		}
		return u.String()
	}
	return dsn + " user=" + user + " password='" + password + "'"
}

func TestConnectAppliesSettings(t *testing.T) {
	t.Parallel()
	c, err := db.Connect(ctx(t), conn(pgtest.NewEmptyDB(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	var app string
	if err := c.QueryRow(ctx(t), `SELECT current_setting('application_name')`).Scan(&app); err != nil {
		t.Fatal(err)
	}
	if app != "pgquectl-test" {
		t.Errorf("application_name = %q", app)
	}
	if got := c.Config().ConnectTimeout; got != 5*time.Second {
		t.Errorf("connect timeout = %v", got)
	}
}

func TestNewPool(t *testing.T) {
	t.Parallel()
	pool, err := db.NewPool(ctx(t), conn(pgtest.NewEmptyDB(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var one int
	if err := pool.QueryRow(ctx(t), `SELECT 1`).Scan(&one); err != nil || one != 1 {
		t.Fatal(one, err)
	}
	_, err = db.NewPool(ctx(t), conn(mustWithDatabase(t, pgtest.Server(t), "pgqt_no_such_db")))
	if !errors.Is(err, db.ErrNoDatabase) {
		t.Errorf("pool on a missing database: %v, want ErrNoDatabase", err)
	}
}

// TestEmptyDSNReadsPGEnv: an empty DSN means the PG* variables.
func TestEmptyDSNReadsPGEnv(t *testing.T) {
	cfg, err := pgx.ParseConfig(pgtest.NewEmptyDB(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PGHOST", cfg.Host)
	t.Setenv("PGPORT", strconv.Itoa(int(cfg.Port)))
	t.Setenv("PGUSER", cfg.User)
	t.Setenv("PGDATABASE", cfg.Database)
	t.Setenv("PGPASSWORD", cfg.Password)
	t.Setenv("PGSSLMODE", "disable")
	c, err := db.Connect(ctx(t), conn(""))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	var name string
	if err := c.QueryRow(ctx(t), `SELECT current_database()`).Scan(&name); err != nil {
		t.Fatal(err)
	}
	if name != cfg.Database {
		t.Errorf("connected to %q, want %q", name, cfg.Database)
	}
}

func mustWithDatabase(t *testing.T, dsn, name string) string {
	t.Helper()
	out, err := db.WithDatabase(dsn, name)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// assertKind checks err's sentinel, that the driver error is still
// reachable, and that the message says what to do.
func assertKind(t *testing.T, err, kind error, advice string) {
	t.Helper()
	t.Logf("message: %v", err)
	if !errors.Is(err, kind) {
		t.Fatalf("err = %v, want %v", err, kind)
	}
	if !strings.Contains(err.Error(), advice) {
		t.Errorf("message %q lacks advice %q", err, advice)
	}
}

func TestErrNoDatabase(t *testing.T) {
	t.Parallel()
	_, err := db.Connect(ctx(t), conn(mustWithDatabase(t, pgtest.Server(t), "pgqt_no_such_db")))
	assertKind(t, err, db.ErrNoDatabase, "create it")
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "3D000" {
		t.Errorf("driver error not reachable: %#v", err)
	}
	if !strings.Contains(err.Error(), "pgqt_no_such_db") {
		t.Errorf("message does not name the database: %v", err)
	}
}

func TestErrUnreachable(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	_, err = db.Connect(ctx(t), conn("postgres://x@127.0.0.1:"+strconv.Itoa(port)+"/x?sslmode=disable"))
	assertKind(t, err, db.ErrUnreachable, "running")

	_, err = db.Connect(ctx(t), conn("postgres://x@no-such-host.invalid:5432/x?sslmode=disable"))
	assertKind(t, err, db.ErrUnreachable, "host name")

	_, err = db.Connect(ctx(t), conn("host="+t.TempDir()+" dbname=x sslmode=disable"))
	assertKind(t, err, db.ErrUnreachable, "running")
}

// TestErrAuthNoLogin: a role that may not log in (28000).
func TestErrAuthNoLogin(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewEmptyDB(t)
	role := "pgqt_nologin_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	pgtest.Exec(t, dsn, `CREATE ROLE `+role+` NOLOGIN`)
	t.Cleanup(func() { pgtest.Exec(t, dsn, `DROP ROLE IF EXISTS `+role) })
	_, err := db.Connect(ctx(t), conn(withUser(t, dsn, role, "")))
	assertKind(t, err, db.ErrAuth, "password")
}

// TestErrAuthWrongPassword needs password authentication, so it runs its
// own small cluster with scram over TCP.
func TestErrAuthWrongPassword(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts its own cluster")
	}
	dir := t.TempDir()
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	c, err := localpg.EnsureRunning(ctx(t), localpg.Options{StateDir: filepath.Join(dir, "pg"), Fast: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Destroy(context.Background()) })
	pgtest.Exec(t, c.DSN("postgres"), `ALTER ROLE postgres PASSWORD 'right'`)
	hba := "local all all trust\nhost all all 127.0.0.1/32 scram-sha-256\nhost all all ::1/128 scram-sha-256\n"
	if err := os.WriteFile(filepath.Join(c.DataDir, "pg_hba.conf"), []byte(hba), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := c.Reload(ctx(t)); err != nil {
		t.Fatal(err)
	}
	wrong := "postgres://postgres:wrong@localhost:" + strconv.Itoa(c.Port) + "/postgres?sslmode=disable"
	var lastErr error
	for i := 0; i < 50; i++ { // the reload is asynchronous
		_, lastErr = db.Connect(ctx(t), conn(wrong))
		if lastErr != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	assertKind(t, lastErr, db.ErrAuth, "PGPASSWORD")
	var pgErr *pgconn.PgError
	if !errors.As(lastErr, &pgErr) || pgErr.Code != "28P01" {
		t.Errorf("want SQLSTATE 28P01, got %v", lastErr)
	}
	right := "postgres://postgres:right@localhost:" + strconv.Itoa(c.Port) + "/postgres?sslmode=disable"
	cc, err := db.Connect(ctx(t), conn(right))
	if err != nil {
		t.Fatalf("right password: %v", err)
	}
	cc.Close(context.Background())
}

func TestErrPrivilege(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewEmptyDB(t)
	role := "pgqt_priv_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	pgtest.Exec(t, dsn, `CREATE TABLE secret (x int)`)
	pgtest.Exec(t, dsn, `CREATE ROLE `+role+` LOGIN PASSWORD 'pw'`)
	t.Cleanup(func() { pgtest.Exec(t, dsn, `DROP ROLE IF EXISTS `+role) })
	c, err := db.Connect(ctx(t), conn(withUser(t, dsn, role, "pw")))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	_, err = c.Exec(ctx(t), `SELECT * FROM secret`)
	assertKind(t, db.MapError(err), db.ErrPrivilege, "grant")
}

func TestErrNotInstalled(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewEmptyDB(t)
	c := pgtest.Conn(t, dsn)
	_, err := c.Exec(ctx(t), `SELECT pgque.version()`)
	assertKind(t, db.MapError(err), db.ErrNotInstalled, "pgquectl install")

	pgtest.Exec(t, dsn, `CREATE SCHEMA pgque`)
	_, err = c.Exec(ctx(t), `SELECT pgque.no_such_function()`)
	assertKind(t, db.MapError(err), db.ErrNotInstalled, "pgquectl install")

	// Not about pgque: left alone.
	_, err = c.Exec(ctx(t), `SELECT other.f()`)
	if errors.Is(db.MapError(err), db.ErrNotInstalled) {
		t.Errorf("unrelated error classified as not installed: %v", err)
	}
	if db.MapError(nil) != nil {
		t.Error("MapError(nil) != nil")
	}
}

func TestWithDatabase(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"postgres://u:p@h:5/old?sslmode=disable", "postgres://u:p@h:5/new?sslmode=disable"},
		{"postgresql://h/old", "postgresql://h/new"},
		{"host=h dbname=old", "host=h dbname=old dbname='new'"},
		{"", "dbname='new'"},
	} {
		got, err := db.WithDatabase(tc.in, "new")
		if err != nil || got != tc.want {
			t.Errorf("WithDatabase(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	got, _ := db.WithDatabase("host=h", "it's")
	cfg, err := pgx.ParseConfig(got)
	if err != nil || cfg.Database != "it's" {
		t.Errorf("quoting: %q -> %v %v", got, cfg, err)
	}
}
