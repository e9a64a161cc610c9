package pgtest

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgquectl/pgquectl/internal/localpg"
)

// sqlServerBinDir asks the shared server where its binaries are (the
// pg_config view; superuser only).
const sqlServerBinDir = `SELECT setting FROM pg_config WHERE name = 'BINDIR'`

// PrivateCluster starts a throwaway cluster of its own for a test that
// changes cluster-wide state (roles, pg_hba.conf), from the same binaries
// as the shared server: PGQUE_TEST_PG_BINDIR; with PGQUE_TEST_DSN, the
// server's own binaries when they are on this machine (else the test is
// skipped); else those pg_config finds. Destroyed at cleanup.
func PrivateCluster(t testing.TB) *localpg.Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("starts its own cluster")
	}
	bin := privateBinaries(t)
	dir := t.TempDir()
	// Run as root, the postgres user must reach the state directory.
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := localpg.EnsureRunning(ctx, localpg.Options{StateDir: filepath.Join(dir, "pg"), Fast: true, Binaries: bin})
	if err != nil {
		t.Fatalf("pgtest: starting a private cluster: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := c.Destroy(ctx); err != nil {
			t.Logf("pgtest: destroying the private cluster in %s: %v", c.StateDir, err)
		}
	})
	return c
}

// privateBinaries: the binaries of the shared server (nil: FindBinaries).
func privateBinaries(t testing.TB) *localpg.Binaries {
	t.Helper()
	bin, err := envBinaries()
	if err != nil {
		t.Fatal(err)
	}
	if bin != nil || os.Getenv(EnvDSN) == "" {
		return bin
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var dir string
	if err := Conn(t, Server(t)).QueryRow(ctx, sqlServerBinDir).Scan(&dir); err != nil {
		t.Fatalf("pgtest: asking the server for its binaries: %v", err)
	}
	b, err := localpg.BinariesIn(dir)
	if err != nil {
		t.Skipf("needs a private cluster of the %s server's version, whose binaries (%s) are not usable here: %v; set %s instead", EnvDSN, dir, err, EnvPGBinDir)
	}
	return &b
}

// PrivateEngineDB starts a private cluster (PrivateCluster), creates the
// database name in it with the engine installed, and returns its DSN: for a
// test whose cluster-wide effects (a held transaction id pins every
// database's rotation) must not reach other tests, or the reverse.
func PrivateEngineDB(t testing.TB, name string) string {
	t.Helper()
	c := PrivateCluster(t)
	Exec(t, c.DSN("postgres"), `CREATE DATABASE `+pgx.Identifier{name}.Sanitize())
	dsn := c.DSN(name)
	InstallEngine(t, dsn)
	return dsn
}
