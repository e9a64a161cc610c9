// Package pgtest gives integration tests a real PostgreSQL: a shared server
// (PGQUE_TEST_DSN, else a throwaway local cluster, with pg_cron preloaded
// when the binaries have it) and a fresh database per test.
//
//	func TestSomething(t *testing.T) {
//		t.Parallel()
//		dsn := pgtest.NewDB(t) // engine installed
//		conn := pgtest.Conn(t, dsn)
//		...
//	}
//
// Environment:
//
//	PGQUE_TEST_DSN           superuser DSN of the server to use (scripts/test.sh sets it)
//	PGQUE_TEST_PG_BINDIR     without PGQUE_TEST_DSN: start the throwaway cluster from the
//	                         server binaries in this directory (another PostgreSQL major,
//	                         e.g. `bash scripts/pgbins.sh 14`), not the ones pg_config finds
//	PGQUE_TEST_KEEP=1        keep the databases of failed tests (their DSN is logged)
//	PGQUE_TEST_NO_TEMPLATE=1 install the engine into every NewDB instead of cloning a template
//
// Without PGQUE_TEST_DSN the cluster lives in $TMPDIR/pgquectl-test-<uid>
// ($TMPDIR/pgquectl-test-<uid>-pg<major> with PGQUE_TEST_PG_BINDIR), is
// shared by every test binary and is never stopped by the tests
// (`pgquectl dev destroy --state-dir DIR` removes it).
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgquectl/pgquectl/internal/db"
	"github.com/pgquectl/pgquectl/internal/localpg"
)

// Environment variables read by this package.
const (
	EnvDSN        = "PGQUE_TEST_DSN"
	EnvPGBinDir   = "PGQUE_TEST_PG_BINDIR"
	EnvKeep       = "PGQUE_TEST_KEEP"
	EnvNoTemplate = "PGQUE_TEST_NO_TEMPLATE"
)

// opTimeout bounds each administrative statement of this package.
const opTimeout = 2 * time.Minute

var (
	serverOnce sync.Once
	serverDSN  string
	serverErr  error
)

// StateDir is where the shared test cluster lives when PGQUE_TEST_DSN is
// not set.
func StateDir() string {
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("pgquectl-test-%d", os.Getuid()))
	if b, err := envBinaries(); err == nil && b != nil {
		// One cluster per major: a data directory runs on its major only.
		dir += fmt.Sprintf("-pg%d", b.Major)
	}
	return dir
}

var (
	binOnce sync.Once
	binVal  *localpg.Binaries
	binErr  error
)

// envBinaries returns the binaries PGQUE_TEST_PG_BINDIR names, nil when it
// is not set.
func envBinaries() (*localpg.Binaries, error) {
	binOnce.Do(func() {
		dir := os.Getenv(EnvPGBinDir)
		if dir == "" {
			return
		}
		b, err := localpg.BinariesIn(dir)
		if err != nil {
			binErr = fmt.Errorf("%s=%s: %w", EnvPGBinDir, dir, err)
			return
		}
		binVal = &b
	})
	return binVal, binErr
}

// Server returns the superuser DSN of the shared test server (database
// postgres). It starts the shared local cluster on first use.
func Server(t testing.TB) string {
	t.Helper()
	serverOnce.Do(func() {
		if dsn := os.Getenv(EnvDSN); dsn != "" {
			serverDSN = dsn
			return
		}
		bin, err := envBinaries()
		if err != nil {
			serverErr = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		c, err := localpg.EnsureRunning(ctx, localpg.Options{StateDir: StateDir(), Fast: true, Binaries: bin})
		if err != nil {
			serverErr = fmt.Errorf("starting the shared test cluster in %s: %w (or set %s to a superuser DSN)", StateDir(), err, EnvDSN)
			return
		}
		serverDSN = c.DSN("postgres")
	})
	if serverErr != nil {
		t.Fatal(serverErr)
	}
	return serverDSN
}

// Conn opens a connection to dsn, closed at cleanup.
func Conn(t testing.TB, dsn string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("pgtest: connecting: %v", db.MapError(err))
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = conn.Close(ctx)
	})
	return conn
}

// Exec runs one statement on dsn (a new connection), failing the test on
// error.
func Exec(t testing.TB, dsn, sql string, args ...any) {
	t.Helper()
	if err := exec(dsn, sql, args...); err != nil {
		t.Fatalf("pgtest: %s: %v", firstLine(sql), db.Describe(err))
	}
}

func exec(dsn, sql string, args ...any) error {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return db.MapError(err)
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql, args...)
	return err
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " ..."
	}
	return s
}

// Queries of this package.
const (
	sqlCreateDB       = `CREATE DATABASE %s TEMPLATE %s`
	sqlDropDB         = `DROP DATABASE IF EXISTS %s WITH (FORCE)`
	sqlHasCronJobs    = `SELECT to_regclass('cron.job') IS NOT NULL`
	sqlDeleteCronJobs = `DELETE FROM cron.job WHERE database = $1`
)

// NewEmptyDB creates a fresh, empty database and returns its superuser DSN.
// It is dropped at cleanup (kept when the test failed and PGQUE_TEST_KEEP=1).
func NewEmptyDB(t testing.TB) string {
	t.Helper()
	return newDB(t, "template0")
}

func newDB(t testing.TB, template string) string {
	t.Helper()
	server := Server(t)
	name := dbName(t.Name())
	create := fmt.Sprintf(sqlCreateDB, pgx.Identifier{name}.Sanitize(), pgx.Identifier{template}.Sanitize())
	var err error
	for attempt := 0; attempt < 50; attempt++ {
		// A template in use by another session (55006) is retried: the
		// engine template is never connected to after it is built, but
		// template0 clones may meet autovacuum or a concurrent CREATE.
		if err = exec(server, create); err == nil || !isObjectInUse(err) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("pgtest: creating database %s from %s: %v", name, template, db.Describe(err))
	}
	dsn, err := db.WithDatabase(server, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() && os.Getenv(EnvKeep) == "1" {
			t.Logf("pgtest: keeping database %s: %s", name, dsn)
			return
		}
		dropDB(t, server, name)
	})
	return dsn
}

// dropDB drops a test database and any pg_cron jobs pointing at it (pg_cron
// would otherwise keep trying to run them).
func dropDB(t testing.TB, server, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, server)
	if err != nil {
		t.Errorf("pgtest: dropping database %s: %v", name, db.MapError(err))
		return
	}
	defer conn.Close(context.Background())
	var hasCron bool
	if err := conn.QueryRow(ctx, sqlHasCronJobs).Scan(&hasCron); err == nil && hasCron {
		if _, err := conn.Exec(ctx, sqlDeleteCronJobs, name); err != nil {
			t.Logf("pgtest: removing pg_cron jobs of %s: %v", name, err)
		}
	}
	if _, err := conn.Exec(ctx, fmt.Sprintf(sqlDropDB, pgx.Identifier{name}.Sanitize())); err != nil {
		t.Errorf("pgtest: dropping database %s: %v", name, db.Describe(err))
	}
}

// dbName builds a unique database name from the test name: lower case,
// [a-z0-9_], at most 40 bytes, so that names built from it (pg_cron job
// names 'pgque_<what>@<db>', NOTIFY channels) stay within 63 bytes.
func dbName(testName string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(testName) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	base := b.String()
	if len(base) > 22 {
		base = base[:22]
	}
	return "pgqt_" + base + "_" + randHex(6)
}

func randHex(n int) string {
	buf := make([]byte, n)
	_, _ = rand.Read(buf)
	return hex.EncodeToString(buf)
}
