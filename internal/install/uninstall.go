package install

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgquectl/pgquectl/internal/cron"
	"github.com/pgquectl/pgquectl/internal/db"
)

// ErrPendingEvents: uninstall refused because queues hold unconsumed events.
var ErrPendingEvents = errors.New("queues hold unconsumed events")

// ErrRolesInUse: --drop-roles failed because the roles are still used
// (typically by the engine in another database of the cluster).
var ErrRolesInUse = errors.New("the pgque roles are still in use")

// Roles are the cluster-wide roles the engine creates.
var Roles = []string{"pgque_admin", "pgque_writer", "pgque_reader"}

// UninstallOptions control Uninstall.
type UninstallOptions struct {
	// Force uninstalls even when queues hold unconsumed events (they are
	// lost), and goes on when pg_cron jobs in another database cannot be
	// removed.
	Force bool
	// DropRoles also drops pgque_reader, pgque_writer and pgque_admin.
	DropRoles bool
	// DryRun writes the SQL that would run to Out and changes nothing.
	DryRun bool
	Out    io.Writer
	Log    *slog.Logger
}

// UninstallResult reports what Uninstall did.
type UninstallResult struct {
	Database string
	// Previous is the engine version that was installed ("" when none).
	Previous string
	// SchemaDropped tells whether a pgque schema was there to remove.
	SchemaDropped bool
	// CronJobs are the pg_cron jobs removed (name@cron database).
	CronJobs     []string
	RolesDropped bool
	DryRun       bool
	// Warnings are problems --force went past.
	Warnings []string
}

// String is the summary a user reads.
func (r UninstallResult) String() string {
	var parts []string
	verb := "removed"
	if r.DryRun {
		verb = "would remove"
	}
	if r.SchemaDropped {
		v := r.Previous
		if v == "" {
			v = "unknown version"
		}
		parts = append(parts, fmt.Sprintf("%s the pgque engine (%s) from database %q", verb, v, r.Database))
	} else {
		parts = append(parts, fmt.Sprintf("no pgque engine in database %q", r.Database))
	}
	if len(r.CronJobs) > 0 {
		parts = append(parts, fmt.Sprintf("%s %d pg_cron job(s): %s", verb, len(r.CronJobs), strings.Join(r.CronJobs, ", ")))
	}
	if r.RolesDropped {
		parts = append(parts, fmt.Sprintf("%s roles %s", verb, strings.Join(Roles, ", ")))
	}
	for _, w := range r.Warnings {
		parts = append(parts, "warning: "+w)
	}
	return strings.Join(parts, "\n")
}

// Queries Uninstall runs (the engine's removal SQL is sql/uninstall/).
const (
	sqlHasSchema = `SELECT to_regnamespace('pgque') IS NOT NULL`
	// sqlPendingQueues: per queue, events a consumer has still to read
	// (pending_events counts unread events, also those committed after the
	// tick that numbered them, and retries waiting in retry_queue) and dead
	// letters (kept for inspection and replay): all of it is data an
	// uninstall would destroy.
	sqlPendingQueues = `SELECT i.queue_name, i.pending_events,
       (SELECT count(*) FROM pgque.dead_letter d JOIN pgque.queue q ON q.queue_id = d.dl_queue_id
         WHERE q.queue_name = i.queue_name)
  FROM pgque.get_queue_info() i
 ORDER BY i.queue_name`
	sqlRevokeDatabase = `REVOKE ALL ON DATABASE %s FROM pgque_admin, pgque_writer, pgque_reader`
	sqlExistingRoles  = `SELECT count(*) FROM pg_roles WHERE rolname = ANY($1)`
	sqlDropRoles      = `DROP ROLE IF EXISTS pgque_admin, pgque_writer, pgque_reader`
)

// Uninstall removes the engine from the database conn is connected to: it
// checks for unconsumed events (unless Force), runs the [uninstall] files
// of sql/manifest.txt, removes the engine's pg_cron jobs (also when pg_cron lives in another
// database) and, with DropRoles, the three roles — all in one transaction
// on conn, the jobs in another database just before it commits.
func Uninstall(ctx context.Context, conn *pgx.Conn, opts UninstallOptions) (UninstallResult, error) {
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	res := UninstallResult{DryRun: opts.DryRun}
	fs, err := UninstallFiles()
	if err != nil {
		return res, err
	}
	sc := newScript(fs)

	tx, err := beginLocked(ctx, conn, "uninstall", !opts.DryRun, &res.Database)
	if err != nil {
		return res, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, sqlPinSearchPath); err != nil {
		return res, fmt.Errorf("pinning the uninstall's search_path: %w", db.MapError(err))
	}
	if err := tx.QueryRow(ctx, sqlHasSchema).Scan(&res.SchemaDropped); err != nil {
		return res, fmt.Errorf("looking for the pgque schema: %w", db.MapError(err))
	}
	if res.SchemaDropped {
		if err := checkUninstall(ctx, tx, res.Database); err != nil {
			return res, err
		}
		if res.Previous, _, err = InstalledVersion(ctx, tx); err != nil {
			return res, err
		}
		if !opts.Force {
			if err := checkPending(ctx, tx); err != nil {
				return res, err
			}
		}
	}

	// Which jobs are ours is the engine's answer: ask before dropping it.
	var names []string
	if res.SchemaDropped {
		if names, err = cron.OurJobNames(ctx, tx); err != nil {
			return res, err
		}
	}
	cronDB, err := cronDatabase(ctx, tx)
	if err != nil {
		return res, err
	}
	remote := cronDB != "" && cronDB != res.Database
	var jobs []cron.Job
	if cronDB == res.Database {
		if jobs, err = listCronJobs(ctx, tx, names); err != nil {
			return res, err
		}
	}

	if opts.DryRun {
		return res, dryRunUninstall(ctx, conn, &res, sc, cronDB, names, jobs, opts)
	}

	if res.SchemaDropped {
		log.Info("removing the pgque engine", "database", res.Database, "version", res.Previous)
		if _, err := tx.Exec(ctx, sc.text); err != nil {
			return res, fmt.Errorf("uninstall failed%s, nothing was changed: %w", sc.where(err), db.Described(err))
		}
	}
	// Jobs in this database that pgque.stop() (run by the script) left.
	if cronDB == res.Database {
		if jobs, err = listCronJobs(ctx, tx, names); err != nil {
			return res, err
		}
		if err := unschedule(ctx, tx, jobs, cronDB, &res); err != nil {
			return res, err
		}
	}
	if opts.DropRoles {
		if err := dropRoles(ctx, tx, res.Database); err != nil {
			return res, err
		}
		res.RolesDropped = true
	}
	if remote {
		if err := removeRemoteCronJobs(ctx, conn, cronDB, names, &res, log); err != nil {
			if !opts.Force {
				return res, err
			}
			res.Warnings = append(res.Warnings, err.Error())
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return res, fmt.Errorf("committing the uninstall: %w", db.MapError(err))
	}
	log.Info("uninstalled", "database", res.Database, "cron_jobs", len(res.CronJobs), "roles_dropped", res.RolesDropped)
	return res, nil
}

// checkPending refuses when any queue holds unconsumed events: unread or
// waiting for a retry (pending_events), or dead letters.
func checkPending(ctx context.Context, tx pgx.Tx) error {
	rows, err := tx.Query(ctx, sqlPendingQueues)
	if err != nil {
		return fmt.Errorf("checking for unconsumed events with pgque.get_queue_info() failed: %w; repair the engine (pgquectl install --reinstall), or pass --force to uninstall anyway", db.Described(err))
	}
	var pending []string
	var total, totalDead int64
	for rows.Next() {
		var name string
		var n *int64
		var dead int64
		if err := rows.Scan(&name, &n, &dead); err != nil {
			rows.Close()
			return fmt.Errorf("reading pgque.get_queue_info(): %w", err)
		}
		var p int64
		if n != nil {
			p = *n
		}
		if p == 0 && dead == 0 {
			continue
		}
		what := fmt.Sprintf("%s: %d", name, p)
		if dead > 0 {
			what += fmt.Sprintf(" + %d dead letter(s)", dead)
		}
		pending = append(pending, what)
		total += p
		totalDead += dead
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("checking for unconsumed events with pgque.get_queue_info() failed: %w; repair the engine (pgquectl install --reinstall), or pass --force to uninstall anyway", db.Described(err))
	}
	if len(pending) > 0 {
		return fmt.Errorf("%w: %d event(s) and %d dead letter(s) in %d queue(s) (%s); consume them (pgque.dlq_purge for dead letters) first, or pass --force to drop them (nothing was changed)", ErrPendingEvents, total, totalDead, len(pending), strings.Join(pending, ", "))
	}
	return nil
}

// cronDatabase returns the database pg_cron keeps its jobs in, "" when
// pg_cron is not loaded. Like install and tick it works without
// pg_read_all_settings (internal/cron finds the extension instead).
func cronDatabase(ctx context.Context, tx pgx.Tx) (string, error) {
	info, err := cron.Detect(ctx, tx.Conn())
	if err != nil {
		return "", fmt.Errorf("looking for pg_cron: %w", err)
	}
	if !info.Loaded {
		return "", nil
	}
	return info.Database, nil
}

// listCronJobs lists the engine's jobs (named in names) in the cron
// database q is connected to (none when pg_cron is not installed there).
func listCronJobs(ctx context.Context, q db.Querier, names []string) ([]cron.Job, error) {
	jobs, err := cron.JobsNamed(ctx, q, names)
	if err != nil {
		return nil, fmt.Errorf("listing pg_cron jobs: %w", err)
	}
	return jobs, nil
}

func unschedule(ctx context.Context, q db.Querier, jobs []cron.Job, cronDB string, res *UninstallResult) error {
	for _, j := range jobs {
		if err := cron.Unschedule(ctx, q, j.ID); err != nil {
			return fmt.Errorf("removing pg_cron job %q (id %d) in database %q: %w; remove it as its owner or a superuser: %s", j.Name, j.ID, cronDB, db.Described(err), cron.UnscheduleSQL(j.ID))
		}
		res.CronJobs = append(res.CronJobs, j.Name+" (in "+cronDB+")")
	}
	return nil
}

// removeRemoteCronJobs removes the engine's jobs from the cron database when
// it is not this one: a connection with the same credentials to cronDB.
func removeRemoteCronJobs(ctx context.Context, conn *pgx.Conn, cronDB string, names []string, res *UninstallResult, log *slog.Logger) error {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cc, err := db.ConnectToDatabase(cctx, conn, cronDB)
	if err != nil {
		return fmt.Errorf("connecting to pg_cron's database %q to remove the engine's jobs: %w; remove them there by hand (%s), or pass --force", cronDB, err, strings.TrimSuffix(cron.UnscheduleNamedSQL(names), ";"))
	}
	defer cc.Close(context.WithoutCancel(ctx))
	jobs, err := listCronJobs(cctx, cc, names)
	if err != nil {
		return err
	}
	log.Info("removing pg_cron jobs", "cron_database", cronDB, "jobs", len(jobs))
	return unschedule(cctx, cc, jobs, cronDB, res)
}

// dropRoles drops the three roles; it fails with ErrRolesInUse when another
// database still uses them.
func dropRoles(ctx context.Context, tx pgx.Tx, database string) error {
	var n int
	if err := tx.QueryRow(ctx, sqlExistingRoles, Roles).Scan(&n); err != nil {
		return fmt.Errorf("looking for the pgque roles: %w", db.MapError(err))
	}
	if n == 0 {
		return nil
	}
	// Privileges on this database would block the drop; other databases'
	// are reported below.
	sp, err := tx.Begin(ctx)
	if err != nil {
		return fmt.Errorf("savepoint: %w", db.MapError(err))
	}
	if _, err := sp.Exec(ctx, fmt.Sprintf(sqlRevokeDatabase, pgx.Identifier{database}.Sanitize())); err != nil {
		_ = sp.Rollback(ctx)
	} else if err := sp.Commit(ctx); err != nil {
		return fmt.Errorf("releasing savepoint: %w", db.MapError(err))
	}
	if _, err := tx.Exec(ctx, sqlDropRoles); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "2BP01" {
			return fmt.Errorf("%w: %s; uninstall the engine from the other databases first, or run without --drop-roles (nothing was changed)", ErrRolesInUse, db.Describe(err))
		}
		return fmt.Errorf("dropping the pgque roles: %w (nothing was changed)", db.MapError(err))
	}
	return nil
}

// dryRunUninstall writes what Uninstall would run.
func dryRunUninstall(ctx context.Context, conn *pgx.Conn, res *UninstallResult, sc script, cronDB string, names []string, jobs []cron.Job, opts UninstallOptions) error {
	out := opts.Out
	if out == nil {
		out = io.Discard
	}
	fmt.Fprintf(out, "-- pgquectl uninstall --dry-run on database %q\n", res.Database)
	if res.SchemaDropped {
		if _, err := io.WriteString(out, sc.text); err != nil {
			return fmt.Errorf("writing the SQL: %w", err)
		}
	} else {
		fmt.Fprintln(out, "-- no pgque schema: nothing to remove")
	}
	if cronDB != "" && cronDB != res.Database {
		fmt.Fprintf(out, "-- in pg_cron's database %q:\n", cronDB)
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if cc, err := db.ConnectToDatabase(cctx, conn, cronDB); err != nil {
			fmt.Fprintf(out, "-- (cannot connect to list the jobs: %v)\n", err)
		} else {
			jobs, err = listCronJobs(cctx, cc, names)
			cc.Close(context.WithoutCancel(ctx))
			if err != nil {
				fmt.Fprintf(out, "-- (cannot list the jobs: %v)\n", err)
			}
		}
	}
	for _, j := range jobs {
		fmt.Fprintf(out, "%s -- %s\n", cron.UnscheduleSQL(j.ID), j.Name)
		res.CronJobs = append(res.CronJobs, j.Name+" (in "+cronDB+")")
	}
	if opts.DropRoles {
		fmt.Fprintln(out, fmt.Sprintf(sqlRevokeDatabase, pgx.Identifier{res.Database}.Sanitize())+";")
		fmt.Fprintln(out, sqlDropRoles+";")
		res.RolesDropped = true
	}
	return nil
}

// where names the file and line of a server error position, if any.
func (s script) where(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		if name, line, ok := s.locate(int(pgErr.Position)); ok {
			return fmt.Sprintf(" at sql/%s line %d", name, line)
		}
	}
	return ""
}
