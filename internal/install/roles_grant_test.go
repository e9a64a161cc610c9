package install_test

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgquectl/pgquectl/internal/db"
	"github.com/pgquectl/pgquectl/internal/install"
	"github.com/pgquectl/pgquectl/internal/pgtest"
)

// hintedGrant is the statement the refusal tells the administrator to run.
var hintedGrant = regexp.MustCompile(`run: (GRANT [^;]+ WITH ADMIN OPTION;)`)

// ownedDB creates a NOSUPERUSER login role (with the given attributes) that
// owns a fresh empty database, plus an application role; both are dropped
// at cleanup. It returns the superuser DSN of the database, the owner's
// connection, and the two role names.
func ownedDB(t *testing.T, attrs string) (dsn string, owner *pgx.Conn, ownerName, app string) {
	t.Helper()
	server := pgtest.Server(t)
	suffix := uniq()
	ownerName, app = "pgqt_inst_"+suffix, "pgqt_app_"+suffix
	pgtest.Exec(t, server, fmt.Sprintf(`CREATE ROLE %s LOGIN NOSUPERUSER %s PASSWORD 'pw'`, ownerName, attrs))
	pgtest.Exec(t, server, fmt.Sprintf(`CREATE ROLE %s LOGIN NOSUPERUSER PASSWORD 'pw'`, app))
	// Before NewEmptyDB: cleanups run last-in first-out, so the roles go
	// after the database. The app first: the owner granted it a role.
	t.Cleanup(func() {
		for _, r := range []string{app, ownerName} {
			pgtest.Exec(t, server, fmt.Sprintf(`DROP ROLE IF EXISTS %s`, r))
		}
	})
	dsn = pgtest.NewEmptyDB(t)
	dbName := pgtest.Conn(t, dsn).Config().Database
	pgtest.Exec(t, server, fmt.Sprintf(`ALTER DATABASE %s OWNER TO %s`, dbName, ownerName))
	return dsn, pgtest.Conn(t, asUser(t, dsn, ownerName, "pw")), ownerName, app
}

func serverVersionNum(t *testing.T, conn *pgx.Conn) int {
	t.Helper()
	var v int
	if err := conn.QueryRow(ctx(t), `SELECT current_setting('server_version_num')::int`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// assertRefused: the install failed with ErrRolesNotGrantable naming the
// exact GRANT to run, and changed nothing. Returns that GRANT.
func assertRefused(t *testing.T, err error, owner *pgx.Conn, ownerName string) string {
	t.Helper()
	if !errors.Is(err, install.ErrRolesNotGrantable) {
		t.Fatalf("install: %v, want ErrRolesNotGrantable", err)
	}
	t.Log(err)
	m := hintedGrant.FindStringSubmatch(err.Error())
	want := "GRANT pgque_admin, pgque_reader, pgque_writer TO " + ownerName + " WITH ADMIN OPTION;"
	if m == nil || m[1] != want {
		t.Fatalf("the error does not say to run %q: %v", want, err)
	}
	if !strings.Contains(err.Error(), "nothing was changed") {
		t.Errorf("the error does not say nothing was changed: %v", err)
	}
	if schemaExists(t, owner) {
		t.Fatal("a refused install left schema pgque behind")
	}
	return m[1]
}

// roundTrip: the owner hands pgque_writer to the application role, which
// can then send.
func roundTrip(t *testing.T, dsn string, owner *pgx.Conn, app string) {
	t.Helper()
	if _, err := owner.Exec(ctx(t), fmt.Sprintf(`GRANT pgque_writer TO %s`, app)); err != nil {
		t.Fatalf("GRANT pgque_writer TO %s as the installing role: %v", app, db.Describe(err))
	}
	if _, err := owner.Exec(ctx(t), `SELECT pgque.create_queue('orders')`); err != nil {
		t.Fatal(db.Describe(err))
	}
	a := pgtest.Conn(t, asUser(t, dsn, app, "pw"))
	if _, err := a.Exec(ctx(t), `SELECT pgque.send('orders', 'hello'::text)`); err != nil {
		t.Fatalf("send as %s: %v", app, db.Describe(err))
	}
}

// TestInstallRolesCreatedByAnother: the pgque roles exist already (the
// shared test server's superuser created them). A CREATEROLE database owner
// without ADMIN OPTION on them
//   - on PostgreSQL 16+, where it could not GRANT pgque_writer TO app, is
//     refused, nothing changed, with the GRANT ... WITH ADMIN OPTION to run;
//     after a superuser ran exactly that, the install and the hand-out work;
//   - on 14 and 15, where CREATEROLE suffices, installs and hands out.
func TestInstallRolesCreatedByAnother(t *testing.T) {
	t.Parallel()
	pgtest.NewDB(t) // the roles exist: the engine template made them
	dsn, owner, ownerName, app := ownedDB(t, "CREATEROLE")
	_, err := install.Install(ctx(t), owner, install.Options{})
	if serverVersionNum(t, owner) < 160000 {
		if err != nil {
			t.Fatalf("install as a CREATEROLE owner before PostgreSQL 16: %v", err)
		}
		roundTrip(t, dsn, owner, app)
		return
	}
	grant := assertRefused(t, err, owner, ownerName)
	pgtest.Exec(t, pgtest.Server(t), grant)
	if _, err := install.Install(ctx(t), owner, install.Options{}); err != nil {
		t.Fatalf("install after %s: %v", grant, err)
	}
	roundTrip(t, dsn, owner, app)
}

// TestInstallRolesNotGrantable: an owner with neither CREATEROLE nor ADMIN
// OPTION on the existing roles is refused on every version, and the printed
// GRANT fixes it.
func TestInstallRolesNotGrantable(t *testing.T) {
	t.Parallel()
	pgtest.NewDB(t)
	dsn, owner, ownerName, app := ownedDB(t, "NOCREATEROLE")
	_, err := install.Install(ctx(t), owner, install.Options{})
	grant := assertRefused(t, err, owner, ownerName)
	pgtest.Exec(t, pgtest.Server(t), grant)
	if _, err := install.Install(ctx(t), owner, install.Options{}); err != nil {
		t.Fatalf("install after %s: %v", grant, err)
	}
	roundTrip(t, dsn, owner, app)
}
