package pgstats

import (
	"context"
	"time"

	"github.com/pgquectl/pgquectl/internal/db"
)

// SessionInfo describes the connected role and server: what status needs to
// know to say which sections it can read.
type SessionInfo struct {
	User             string    `json:"user"`
	Database         string    `json:"database"`
	ServerVersion    string    `json:"server_version"`
	ServerVersionNum int       `json:"server_version_num"`
	Superuser        bool      `json:"superuser"`
	BypassRLS        bool      `json:"bypass_rls"`
	PgMonitor        bool      `json:"pg_monitor"`        // member of pg_monitor
	PgReadAllStats   bool      `json:"pg_read_all_stats"` // sees every pg_stat_activity row
	InRecovery       bool      `json:"in_recovery"`
	BackendPID       int32     `json:"backend_pid"`
	Now              time.Time `json:"now"` // the server's clock_timestamp()
}

// QuerySession reads the role, its monitoring privileges and the server version.
const QuerySession = `
SELECT current_user::text,
       current_database()::text,
       current_setting('server_version'),
       current_setting('server_version_num')::int,
       r.rolsuper,
       r.rolbypassrls,
       pg_has_role(current_user, 'pg_monitor', 'USAGE'),
       pg_has_role(current_user, 'pg_read_all_stats', 'USAGE'),
       pg_is_in_recovery(),
       pg_backend_pid(),
       clock_timestamp()
  FROM pg_roles r
 WHERE r.rolname = current_user`

// Session reads [SessionInfo].
func Session(ctx context.Context, q db.Querier) (SessionInfo, error) {
	var s SessionInfo
	err := queryOne(ctx, q, "reading session info", QuerySession, nil,
		&s.User, &s.Database, &s.ServerVersion, &s.ServerVersionNum, &s.Superuser, &s.BypassRLS,
		&s.PgMonitor, &s.PgReadAllStats, &s.InRecovery, &s.BackendPID, &s.Now)
	return s, err
}

// QueryForceStatsFlush asks PostgreSQL 15+ to flush this backend's pending
// statistics at the end of the current transaction instead of up to a second later.
const QueryForceStatsFlush = `SELECT pg_stat_force_next_flush()`

// ForceStatsFlush makes this session's table counters (inserts, updates,
// dead tuples) visible to other sessions as soon as its transaction ends.
// Call it in the session that does the work (e.g. a churn generator), not
// in the reader. Returns ErrUnavailable before PostgreSQL 15.
func ForceStatsFlush(ctx context.Context, q db.Querier) error {
	var ignored any
	return queryOne(ctx, q, "forcing a statistics flush", QueryForceStatsFlush, nil, &ignored)
}

// QueryClearStatsSnapshot discards the statistics snapshot cached in the
// current transaction.
const QueryClearStatsSnapshot = `SELECT pg_stat_clear_snapshot()`

// ClearStatsSnapshot makes the next statistics read inside the same
// transaction fetch fresh values (stats_fetch_consistency caches them).
func ClearStatsSnapshot(ctx context.Context, q db.Querier) error {
	var ignored any
	return queryOne(ctx, q, "clearing the statistics snapshot", QueryClearStatsSnapshot, nil, &ignored)
}
