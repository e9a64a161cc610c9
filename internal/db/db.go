// Package db opens connections to PostgreSQL from a config.Connection and
// maps database errors to typed errors whose messages say what to do next.
//
// Every package that talks to the database connects through here, so a wrong
// password, an unreachable host or a missing engine reads the same way in
// every command.
package db

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgquectl/pgquectl/internal/config"
)

// ParseConfig turns c into a pgx connection config. An empty DSN means the
// standard PG* environment variables and libpq defaults (pgx reads them).
// ConnectTimeout and ApplicationName are applied unless the DSN sets them.
func ParseConfig(c config.Connection) (*pgx.ConnConfig, error) {
	cfg, err := pgx.ParseConfig(c.DSN)
	if err != nil {
		return nil, fmt.Errorf("parsing the connection string: %w (check --dsn, PGQUE_DSN or DATABASE_URL)", err)
	}
	applyConnection(cfg, c)
	return cfg, nil
}

func applyConnection(cfg *pgx.ConnConfig, c config.Connection) {
	timeout := c.ConnectTimeout
	if timeout <= 0 {
		timeout = config.DefaultConnectTimeout
	}
	if cfg.ConnectTimeout == 0 || cfg.ConnectTimeout > timeout {
		cfg.ConnectTimeout = timeout
	}
	if c.ApplicationName != "" && cfg.RuntimeParams["application_name"] == "" {
		cfg.RuntimeParams["application_name"] = c.ApplicationName
	}
}

// Connect opens one connection described by c. Errors are mapped to the
// typed errors of this package (see MapError).
func Connect(ctx context.Context, c config.Connection) (*pgx.Conn, error) {
	cfg, err := ParseConfig(c)
	if err != nil {
		return nil, err
	}
	return ConnectConfig(ctx, cfg)
}

// ConnectConfig opens one connection from an already parsed config.
func ConnectConfig(ctx context.Context, cfg *pgx.ConnConfig) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, mapConnectError(err, cfg.Host, cfg.Port, cfg.Database, cfg.User)
	}
	return conn, nil
}

// ConnectToDatabase opens a new connection with the same settings and
// credentials as conn, but to database dbname. Uninstall and the pg_cron
// helpers use it to reach the database pg_cron lives in.
func ConnectToDatabase(ctx context.Context, conn *pgx.Conn, dbname string) (*pgx.Conn, error) {
	cfg := conn.Config().Copy()
	cfg.Database = dbname
	return ConnectConfig(ctx, cfg)
}

// NewPool opens a connection pool described by c and checks that it can
// connect, so a wrong DSN fails here and not at the first query.
func NewPool(ctx context.Context, c config.Connection) (*pgxpool.Pool, error) {
	pcfg, err := pgxpool.ParseConfig(c.DSN)
	if err != nil {
		return nil, fmt.Errorf("parsing the connection string: %w (check --dsn, PGQUE_DSN or DATABASE_URL)", err)
	}
	applyConnection(pcfg.ConnConfig, c)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("creating the connection pool: %w", err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, pcfg.ConnConfig.ConnectTimeout)
	defer cancel()
	if err := pool.Ping(pingCtx); err != nil {
		pool.Close()
		cc := pcfg.ConnConfig
		return nil, mapConnectError(err, cc.Host, cc.Port, cc.Database, cc.User)
	}
	return pool, nil
}

// WithDatabase returns dsn changed to name database dbname. It handles URLs
// (postgres://...) and keyword/value strings; an empty dsn becomes
// "dbname=<dbname>" so the PG* variables still supply the rest.
func WithDatabase(dsn, dbname string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", fmt.Errorf("parsing the connection URL: %w", err)
		}
		u.Path = "/" + dbname
		u.RawPath = ""
		return u.String(), nil
	}
	quoted := "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(dbname) + "'"
	if strings.TrimSpace(dsn) == "" {
		return "dbname=" + quoted, nil
	}
	// libpq and pgx both let a later keyword override an earlier one.
	return dsn + " dbname=" + quoted, nil
}
