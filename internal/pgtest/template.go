package pgtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgquectl/pgquectl/internal/db"
	"github.com/pgquectl/pgquectl/internal/install"
)

// NewDB creates a fresh database with the engine installed and returns its
// superuser DSN. It clones a template database that holds the engine (built
// once per engine script, shared by all test binaries), which is much faster
// than running the install script per test.
func NewDB(t testing.TB) string {
	t.Helper()
	if os.Getenv(EnvNoTemplate) == "1" {
		dsn := NewEmptyDB(t)
		InstallEngine(t, dsn)
		return dsn
	}
	tpl, err := engineTemplate(Server(t))
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return newDB(t, tpl)
}

// InstallEngine installs the engine into dsn with internal/install.
func InstallEngine(t testing.TB, dsn string) {
	t.Helper()
	if err := installInto(dsn); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
}

func installInto(dsn string) error {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("connecting to install the engine: %w", db.MapError(err))
	}
	defer conn.Close(context.Background())
	if _, err := install.Install(ctx, conn, install.Options{}); err != nil {
		return fmt.Errorf("installing the engine: %w", err)
	}
	return nil
}

// Queries that build the template.
const (
	// sqlTemplateLock serializes template builds across test binaries.
	sqlTemplateLock   = `SELECT pg_advisory_lock(hashtext('pgquectl.pgtest.template'))`
	sqlTemplateUnlock = `SELECT pg_advisory_unlock(hashtext('pgquectl.pgtest.template'))`
	// A template is complete once it is marked datistemplate.
	sqlTemplateState = `SELECT datistemplate FROM pg_database WHERE datname = $1`
	sqlSealTemplate  = `ALTER DATABASE %s WITH IS_TEMPLATE true ALLOW_CONNECTIONS false`
	// Older templates (other engine scripts) nobody uses any more.
	sqlOldTemplates = `SELECT datname FROM pg_database WHERE datname LIKE 'pgqt\_tpl\_%' AND datname <> $1`
	sqlUnsealDB     = `ALTER DATABASE %s WITH IS_TEMPLATE false`
)

var (
	templateMu    sync.Mutex
	templateNames = map[string]templateResult{} // server DSN -> template
)

type templateResult struct {
	name string
	err  error
}

// engineTemplate returns the name of a template database holding the
// current engine, building it if needed. The name carries a hash of the
// install script, so a changed engine gets a new template.
func engineTemplate(server string) (string, error) {
	templateMu.Lock()
	defer templateMu.Unlock()
	if r, ok := templateNames[server]; ok {
		return r.name, r.err
	}
	name, err := buildTemplate(server)
	// A failed build fails every NewDB of this process the same way.
	templateNames[server] = templateResult{name, err}
	return name, err
}

func buildTemplate(server string) (string, error) {
	script, err := install.Script()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(install.Version + "\x00" + script))
	name := "pgqt_tpl_" + hex.EncodeToString(sum[:8])

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, server)
	if err != nil {
		return "", fmt.Errorf("connecting to the test server: %w", db.MapError(err))
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, sqlTemplateLock); err != nil {
		return "", fmt.Errorf("locking the template build: %w", err)
	}
	defer func() { _, _ = conn.Exec(context.Background(), sqlTemplateUnlock) }()

	var sealed bool
	err = conn.QueryRow(ctx, sqlTemplateState, name).Scan(&sealed)
	switch {
	case err == nil && sealed:
		return name, nil
	case err == nil: // a half-built template: a build died
		if _, err := conn.Exec(ctx, fmt.Sprintf(sqlDropDB, pgx.Identifier{name}.Sanitize())); err != nil {
			return "", fmt.Errorf("dropping the unfinished template %s: %w", name, err)
		}
	case !errors.Is(err, pgx.ErrNoRows):
		return "", fmt.Errorf("looking for the template %s: %w", name, err)
	}
	dropOldTemplates(ctx, conn, name)

	ident := pgx.Identifier{name}.Sanitize()
	if _, err := conn.Exec(ctx, fmt.Sprintf(sqlCreateDB, ident, "template0")); err != nil {
		return "", fmt.Errorf("creating the template %s: %w", name, db.Described(err))
	}
	dsn, err := db.WithDatabase(server, name)
	if err != nil {
		return "", err
	}
	if err := installInto(dsn); err != nil {
		_, _ = conn.Exec(ctx, fmt.Sprintf(sqlDropDB, ident))
		return "", fmt.Errorf("building the engine template: %w", err)
	}
	if _, err := conn.Exec(ctx, fmt.Sprintf(sqlSealTemplate, ident)); err != nil {
		return "", fmt.Errorf("sealing the template %s: %w", name, err)
	}
	return name, nil
}

// dropOldTemplates removes templates of other engine scripts. One still in
// use by an older test binary fails to drop; it is left for a later run.
func dropOldTemplates(ctx context.Context, conn *pgx.Conn, keep string) {
	rows, err := conn.Query(ctx, sqlOldTemplates, keep)
	if err != nil {
		return
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return
	}
	for _, n := range names {
		ident := pgx.Identifier{n}.Sanitize()
		if _, err := conn.Exec(ctx, fmt.Sprintf(sqlUnsealDB, ident)); err != nil {
			continue
		}
		_, _ = conn.Exec(ctx, fmt.Sprintf(sqlDropDB, ident))
	}
}

func isObjectInUse(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "55006"
}
