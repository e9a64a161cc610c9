// Package config holds the typed configuration that cmd/pgquectl builds from
// flags, environment and the config file: each setting declared once as a
// Key (name, default, help), the hot-list's tunables (Hotlist) and the
// structs other packages receive. Nothing in internal/ reads viper or the
// environment itself: cmd/pgquectl's viper is passed in as a Source.
package config

import "time"

// Connection says how to reach the database.
type Connection struct {
	// DSN is a libpq connection string or URL. Empty means "use the
	// standard PG* environment variables and libpq defaults".
	DSN string
	// ConnectTimeout bounds connection attempts.
	ConnectTimeout time.Duration
	// ApplicationName is reported in pg_stat_activity.
	ApplicationName string
}

// DefaultConnectTimeout is used when Connection.ConnectTimeout is zero.
const DefaultConnectTimeout = 10 * time.Second
