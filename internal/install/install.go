package install

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgquectl/pgquectl/internal/db"
	"github.com/pgquectl/pgquectl/internal/locks"
)

// ErrNewerEngine: the database carries a newer engine than this binary.
var ErrNewerEngine = errors.New("the database has a newer pgque engine than this pgquectl")

// ErrRolesNotGrantable: the pgque roles exist but the installing role could
// not grant them to applications (PostgreSQL 16+: it lacks ADMIN OPTION on
// them; before 16: it has neither CREATEROLE nor ADMIN OPTION). The install
// changed nothing; the error says which GRANT ... WITH ADMIN OPTION to run.
var ErrRolesNotGrantable = errors.New("the installing role cannot grant the pgque roles to applications")

// rolesNotGrantable is the CONSTRAINT field sql/engine/010_roles.sql puts on
// that refusal.
const rolesNotGrantable = "pgque_roles_grantable"

// Options control Install.
type Options struct {
	// DryRun writes the SQL that would run to Out and changes nothing.
	DryRun bool
	// Reinstall runs the script even when the same version is installed.
	Reinstall bool
	// Out receives the SQL of a dry run. Nil discards it.
	Out io.Writer
	// Log receives progress messages. Nil discards them.
	Log *slog.Logger
}

// Action says what Install did (or, in a dry run, would do).
type Action string

// Actions.
const (
	ActionInstalled   Action = "installed"   // no engine before
	ActionUpgraded    Action = "upgraded"    // an older engine before
	ActionReinstalled Action = "reinstalled" // the same version, Reinstall set
	// ActionRefreshed: the same version, but the installed engine was made
	// by a script other than this binary's (a newer build of the same
	// version, or an install older than the script checksum): it ran again.
	ActionRefreshed Action = "refreshed"
	ActionNone      Action = "none" // the same version: nothing to do
)

// Result reports what Install did.
type Result struct {
	Database string
	// Previous is the engine version found before ("" when none).
	Previous string
	// Version is the version this binary installs.
	Version string
	Action  Action
	DryRun  bool
	Elapsed time.Duration
}

// String is the one line a user reads.
func (r Result) String() string {
	prefix := ""
	if r.DryRun {
		prefix = "dry run: would have "
	}
	switch r.Action {
	case ActionNone:
		return fmt.Sprintf("pgque engine already at %s in database %q; nothing to do (use --reinstall to run the script again)", r.Version, r.Database)
	case ActionUpgraded:
		return fmt.Sprintf("%supgraded the pgque engine in database %q from %s to %s", prefix, r.Database, r.Previous, r.Version)
	case ActionReinstalled:
		return fmt.Sprintf("%sreinstalled pgque engine %s in database %q", prefix, r.Version, r.Database)
	case ActionRefreshed:
		return fmt.Sprintf("%srefreshed pgque engine %s in database %q (its SQL differed from this binary's)", prefix, r.Version, r.Database)
	default:
		return fmt.Sprintf("%sinstalled pgque engine %s in database %q", prefix, r.Version, r.Database)
	}
}

// Queries the installer runs; the engine's own SQL is in sql/.
const (
	sqlInstallLock = `SELECT pg_advisory_xact_lock($1::int4, $2::int4)`
	// sqlInstalledVersion: the newest engine_version row, when the table exists.
	// sqlHasVersionTable: whether pgque.engine_version exists, and whether it
	// is a plain table without row security (reading a view or a table with
	// policies could run its owner's code as this role).
	// Operators qualified: callers other than install may not pin the path.
	sqlHasVersionTable = `SELECT c.oid IS NOT NULL,
	                             coalesce(c.relkind OPERATOR(pg_catalog.=) 'r'::"char" AND NOT c.relrowsecurity, false)
	                        FROM (SELECT pg_catalog.to_regclass('pgque.engine_version'::pg_catalog.text)::pg_catalog.oid AS oid) r
	                        LEFT JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) r.oid`
	sqlInstalledVersion = `SELECT version, version_num FROM pgque.engine_version ORDER BY version_num DESC, installed_at DESC LIMIT 1`
	sqlCurrentDatabase  = `SELECT current_database()`
	// sqlInstalledSum: the script checksum recorded with the version (NULL
	// when an older install had no such column or did not record it).
	sqlInstalledSum = `SELECT pg_catalog.to_jsonb(e) OPERATOR(pg_catalog.->>) 'script_sha256'::pg_catalog.text
	                     FROM pgque.engine_version e WHERE e.version_num OPERATOR(pg_catalog.=) $1::pg_catalog.int4`
)

// InstalledVersion returns the engine version installed in the database
// ("" and 0 when none).
func InstalledVersion(ctx context.Context, q db.Querier) (version string, num int, err error) {
	var has, plain bool
	if err := q.QueryRow(ctx, sqlHasVersionTable).Scan(&has, &plain); err != nil {
		return "", 0, fmt.Errorf("looking for pgque.engine_version: %w", db.MapError(err))
	}
	if !has {
		return "", 0, nil
	}
	if !plain {
		return "", 0, fmt.Errorf("%w: pgque.engine_version is not a plain table (a view, or row security is on), so pgquectl does not read it; %s", ErrForeignSchema, foreignSchemaHint)
	}
	err = q.QueryRow(ctx, sqlInstalledVersion).Scan(&version, &num)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", 0, nil
	}
	if err != nil {
		return "", 0, fmt.Errorf("reading pgque.engine_version: %w", db.MapError(err))
	}
	return version, num, nil
}

// ParseVersionNum turns "major.minor.patch" into major*10000+minor*100+patch.
func ParseVersionNum(v string) (int, error) {
	parts := strings.Split(v, ".")
	if len(parts) != 3 {
		return 0, fmt.Errorf("version %q is not major.minor.patch", v)
	}
	num := 0
	for _, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || n > 99 {
			return 0, fmt.Errorf("version %q is not major.minor.patch with parts 0..99", v)
		}
		num = num*100 + n
	}
	return num, nil
}

// retryable tells whether an install failed only because another install in
// another database of the same cluster created the same cluster-wide roles
// at the same moment (the advisory lock is per database).
func retryable(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	switch pgErr.Code {
	case "23505": // unique_violation: pg_authid / pg_auth_members
		return strings.Contains(pgErr.ConstraintName, "pg_auth") || strings.Contains(pgErr.Message, "pg_auth")
	case "XX000":
		return strings.Contains(pgErr.Message, "tuple concurrently updated")
	case "40001", "40P01":
		return true
	}
	return false
}

// Install installs (or upgrades) the engine in the database conn is
// connected to, in one transaction under the install advisory lock. A
// database whose engine is newer is refused with ErrNewerEngine; the same
// version is a no-op unless opts.Reinstall. With opts.DryRun the SQL goes to
// opts.Out and nothing changes.
func Install(ctx context.Context, conn *pgx.Conn, opts Options) (Result, error) {
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	for attempt := 1; ; attempt++ {
		res, err := installOnce(ctx, conn, opts, log)
		if err == nil || attempt == 3 || !retryable(err) {
			return res, err
		}
		log.Warn("install raced another install on the same cluster; retrying", "attempt", attempt, "err", err)
		select {
		case <-ctx.Done():
			return res, err
		case <-time.After(time.Duration(attempt) * 100 * time.Millisecond):
		}
	}
}

func installOnce(ctx context.Context, conn *pgx.Conn, opts Options, log *slog.Logger) (Result, error) {
	start := time.Now()
	res := Result{Version: Version, DryRun: opts.DryRun}
	fs, err := InstallFiles()
	if err != nil {
		return res, err
	}
	sc := newInstallScript(fs)

	tx, err := beginLocked(ctx, conn, "install", !opts.DryRun, &res.Database)
	if err != nil {
		return res, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, sqlPinSearchPath); err != nil {
		return res, fmt.Errorf("pinning the install's search_path: %w", db.MapError(err))
	}
	if err := checkSchema(ctx, tx, res.Database); err != nil {
		return res, err
	}
	prev, prevNum, err := InstalledVersion(ctx, tx)
	if err != nil {
		return res, err
	}
	res.Previous = prev
	switch {
	case prevNum > VersionNum:
		return res, fmt.Errorf("%w: database %q has engine %s, this pgquectl installs %s; use a pgquectl at least as new as the engine (nothing was changed)", ErrNewerEngine, res.Database, prev, Version)
	case prevNum == VersionNum && opts.Reinstall:
		res.Action = ActionReinstalled
	case prevNum == VersionNum:
		var sum *string
		if err := tx.QueryRow(ctx, sqlInstalledSum, VersionNum).Scan(&sum); err != nil {
			return res, fmt.Errorf("reading the installed engine's script checksum: %w", db.MapError(err))
		}
		res.Action = ActionNone
		if sum == nil || *sum != sc.sum {
			res.Action = ActionRefreshed
		}
	case prevNum > 0:
		res.Action = ActionUpgraded
	default:
		res.Action = ActionInstalled
	}

	if opts.DryRun {
		if opts.Out != nil {
			fmt.Fprintf(opts.Out, "-- pgquectl install --dry-run: %s\n", res)
			fmt.Fprintf(opts.Out, "-- Run it as one transaction, e.g. psql -v ON_ERROR_STOP=1 -1 -f FILE\n")
			if _, err := io.WriteString(opts.Out, sc.text); err != nil {
				return res, fmt.Errorf("writing the SQL: %w", err)
			}
		}
		res.Elapsed = time.Since(start)
		return res, nil
	}
	if res.Action == ActionNone {
		res.Elapsed = time.Since(start)
		return res, nil
	}

	log.Info("installing the pgque engine", "database", res.Database, "from", prev, "to", Version, "files", len(fs))
	if _, err := tx.Exec(ctx, sc.text); err != nil {
		if ferr := foreignSchemaError(err, res.Database); ferr != nil {
			return res, ferr
		}
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.ConstraintName == rolesNotGrantable {
			// The server's message, detail and hint say it all: what is
			// missing, why, and the statement to run.
			return res, fmt.Errorf("%w: %s", ErrRolesNotGrantable, db.Describe(err))
		}
		return res, sc.explain(err)
	}
	got, gotNum, err := InstalledVersion(ctx, tx)
	if err != nil {
		return res, err
	}
	if gotNum != VersionNum || got != Version {
		return res, fmt.Errorf("the install script recorded engine version %q (%d) but this pgquectl installs %s (%d): the embedded SQL and internal/install.Version disagree; nothing was changed", got, gotNum, Version, VersionNum)
	}
	if err := tx.Commit(ctx); err != nil {
		return res, fmt.Errorf("committing the install: %w (nothing was changed)", db.MapError(err))
	}
	res.Elapsed = time.Since(start)
	log.Info("installed the pgque engine", "database", res.Database, "version", Version, "elapsed", res.Elapsed)
	return res, nil
}

// explain turns a failure of the script into an error naming the file and
// line when the server reported a position.
func (s script) explain(err error) error {
	where := ""
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		if name, line, ok := s.locate(int(pgErr.Position)); ok {
			where = fmt.Sprintf(" at sql/%s line %d", name, line)
		} else if pgErr.Where != "" {
			where = " (" + strings.ReplaceAll(pgErr.Where, "\n", "; ") + ")"
		}
	}
	// A missing pgque function here is a defect of the script, not a
	// missing install: only privilege and connection problems are mapped.
	mapped := db.MapError(err)
	if errors.Is(mapped, db.ErrPrivilege) || errors.Is(mapped, db.ErrUnreachable) || errors.Is(mapped, db.ErrAuth) {
		return fmt.Errorf("install failed%s, nothing was changed: %w", where, mapped)
	}
	return fmt.Errorf("install failed%s, nothing was changed: %w", where, db.Described(err))
}

// beginLocked starts the install or uninstall transaction on conn, reads the
// database name into *database and, when lock is set, takes the install lock
// (a dry run does not wait for it). The caller rolls back or commits.
func beginLocked(ctx context.Context, conn *pgx.Conn, what string, lock bool, database *string) (pgx.Tx, error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("starting the %s transaction: %w", what, db.MapError(err))
	}
	if err := tx.QueryRow(ctx, sqlCurrentDatabase).Scan(database); err != nil {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("reading the database name: %w", db.MapError(err))
	}
	if lock {
		if _, err := tx.Exec(ctx, sqlInstallLock, locks.ClassID, locks.Install); err != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
			return nil, fmt.Errorf("waiting for the install lock (another install or uninstall is running): %w", db.MapError(err))
		}
	}
	return tx, nil
}
