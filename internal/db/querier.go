package db

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Querier is what a database call runs on: a *pgx.Conn, a *pgxpool.Pool or a
// pgx.Tx all satisfy it. It is the one such interface of the program; other
// packages take a db.Querier (broker names it broker.Querier, an alias).
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Deref returns *p, or T's zero value when p is nil (a NULL column scanned
// into a pointer).
func Deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}
