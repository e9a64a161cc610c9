// Package pgstats measures what the queue's promises depend on: WAL volume,
// dead tuples of the pgque tables, who holds the xmin horizon, the NOTIFY
// queue, backends, pg_cron jobs, the ticker daemon's leader and per-queue
// tick lag.
//
// It is shared by `pgquectl status` (internal/status) and the sub-second
// benchmark (bench/sub-second). Every function takes a context and a
// [Querier] (a *pgx.Conn, *pgxpool.Pool or pgx.Tx), runs read-only queries
// kept as named constants in this package, and returns plain structs. When
// ctx carries no deadline the function adds [DefaultTimeout].
//
// Errors are wrapped as "pgstats: doing X: %w"; errors.Is(err,
// [ErrPermission]) says the role lacks a privilege (the caller decides which
// grant to suggest), errors.Is(err, [ErrUnavailable]) says the feature is
// absent (extension or engine not installed, function missing on this server
// version).
//
// Statistics views (pg_stat_user_tables, pg_stat_wal) are fed by backends
// that flush their counters at most about once a second (PostgreSQL 15+) so
// they lag the truth by ~0.5–1 s; a session that needs its own counters to
// show up immediately calls [ForceStatsFlush] before committing, and a reader
// inside one transaction calls [ClearStatsSnapshot] to see fresh values.
// pg_current_wal_lsn() has no such lag.
package pgstats

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgquectl/pgquectl/internal/db"
)

// DefaultTimeout bounds a call whose context has no deadline.
const DefaultTimeout = 10 * time.Second

// Sentinel errors; test with errors.Is. The classification is
// internal/db's (one mapping for the whole program): ErrPermission is
// db.ErrPrivilege, so errors.Is works with either name.
var (
	// ErrPermission: the role may not read this (insufficient_privilege).
	ErrPermission = db.ErrPrivilege
	// ErrUnavailable: the object does not exist here (schema, function,
	// extension or server feature missing; db.IsUndefined).
	ErrUnavailable = errors.New("not available")
)

// withTimeout adds DefaultTimeout when ctx has no deadline.
func withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, DefaultTimeout)
}

// wrap classifies a database error through internal/db at this one
// boundary: connection and privilege errors as db.MapError does (with its
// hint), a missing object as ErrUnavailable.
func wrap(doing string, err error) error {
	if err == nil {
		return nil
	}
	if db.IsUndefined(err) {
		mapped := db.MapError(err) // db.ErrNotInstalled when it is the engine that is missing
		if mapped == err {
			mapped = db.Described(err)
		}
		return fmt.Errorf("pgstats: %s: %w: %w", doing, ErrUnavailable, mapped)
	}
	return fmt.Errorf("pgstats: %s: %w", doing, db.MapError(err))
}

// queryAll runs sql and scans every row with scan.
func queryAll[T any](ctx context.Context, q db.Querier, doing, sql string, scan func(pgx.CollectableRow) (T, error), args ...any) ([]T, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, wrap(doing, err)
	}
	out, err := pgx.CollectRows(rows, scan)
	if err != nil {
		return nil, wrap(doing, err)
	}
	return out, nil
}

// queryOne runs sql and scans its single row into dest.
func queryOne(ctx context.Context, q db.Querier, doing, sql string, args []any, dest ...any) error {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	return wrap(doing, q.QueryRow(ctx, sql, args...).Scan(dest...))
}
