// Package config holds the typed configuration that cmd/pgquectl builds from
// flags, environment and the config file. Nothing in internal/ reads viper or
// the environment itself: it receives these structs.
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
