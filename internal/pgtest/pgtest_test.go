package pgtest

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgquectl/pgquectl/internal/install"
)

func ctx(t *testing.T) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

func TestServerIsSuperuser(t *testing.T) {
	t.Parallel()
	conn := Conn(t, Server(t))
	var super bool
	if err := conn.QueryRow(ctx(t), `SELECT rolsuper FROM pg_roles WHERE rolname = current_user`).Scan(&super); err != nil {
		t.Fatal(err)
	}
	if !super {
		t.Fatal("Server() must return a superuser DSN")
	}
}

// TestServerRunsTheChosenBinaries: with PGQUE_TEST_PG_BINDIR the shared
// server is of that major (the version matrix relies on it).
func TestServerRunsTheChosenBinaries(t *testing.T) {
	t.Parallel()
	bin, err := envBinaries()
	if err != nil {
		t.Fatal(err)
	}
	var num int
	var version string
	if err := Conn(t, Server(t)).QueryRow(ctx(t), `SELECT current_setting('server_version_num')::int, current_setting('server_version')`).Scan(&num, &version); err != nil {
		t.Fatal(err)
	}
	t.Logf("the shared test server is PostgreSQL %s", version)
	if bin != nil && os.Getenv(EnvDSN) == "" && num/10000 != bin.Major {
		t.Fatalf("%s names PostgreSQL %d binaries, the server is %s", EnvPGBinDir, bin.Major, version)
	}
}

// TestNewEmptyDBIsolatedAndDropped: two databases are distinct and empty,
// and a database is gone once its test's cleanup ran.
func TestNewEmptyDBIsolatedAndDropped(t *testing.T) {
	t.Parallel()
	var name string
	t.Run("inner", func(t *testing.T) {
		a, b := NewEmptyDB(t), NewEmptyDB(t)
		if a == b {
			t.Fatal("same DSN twice")
		}
		Exec(t, a, `CREATE TABLE only_in_a (x int)`)
		var n int
		conn := Conn(t, b)
		if err := conn.QueryRow(ctx(t), `SELECT count(*) FROM pg_class WHERE relname = 'only_in_a'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Error("databases are not isolated")
		}
		ca := Conn(t, a)
		if err := ca.QueryRow(ctx(t), `SELECT current_database()`).Scan(&name); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(name, "pgqt_testnewemptydbisola") {
			t.Errorf("database name %q does not carry the test name", name)
		}
	})
	var n int
	if err := Conn(t, Server(t)).QueryRow(ctx(t), `SELECT count(*) FROM pg_database WHERE datname = $1`, name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("database %s still exists after cleanup", name)
	}
}

// TestNewDBHasEngine: NewDB clones an installed engine (the template), also
// under concurrent use, and the clone equals a plain install.
func TestNewDBHasEngine(t *testing.T) {
	t.Parallel()
	var wg sync.WaitGroup
	dsns := make([]string, 4)
	for i := range dsns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dsns[i] = NewDB(t)
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for _, dsn := range dsns {
		conn := Conn(t, dsn)
		var v string
		if err := conn.QueryRow(ctx(t), `SELECT pgque.version()`).Scan(&v); err != nil {
			t.Fatal(err)
		}
		if v != install.Version {
			t.Errorf("pgque.version() = %q, want %q", v, install.Version)
		}
		got, _, err := install.InstalledVersion(ctx(t), conn)
		if err != nil || got != install.Version {
			t.Errorf("installed version = %q, %v", got, err)
		}
	}
}

func TestDBName(t *testing.T) {
	t.Parallel()
	long := "TestSomething/with a very long sub-test name, quotes ' and émoji 🎉 that goes on and on"
	a, b := dbName(long), dbName(long)
	if a == b {
		t.Error("names are not unique")
	}
	if len(a) > 40 {
		t.Errorf("%q is %d bytes", a, len(a))
	}
	if quoted := (pgx.Identifier{a}).Sanitize(); quoted != `"`+a+`"` {
		t.Errorf("%q needs escaping", a)
	}
	for _, r := range a {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
			t.Errorf("%q has %q", a, r)
		}
	}
}
