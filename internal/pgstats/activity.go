package pgstats

import (
	"context"

	"github.com/pgquectl/pgquectl/internal/db"
)

// Connections counts client connections against the server's limit.
// It reads pg_stat_database.numbackends, which every role may see.
type Connections struct {
	Total             int64 `json:"total"` // client backends, all databases
	ThisDatabase      int64 `json:"this_database"`
	MaxConnections    int64 `json:"max_connections"`
	ReservedSuperuser int64 `json:"reserved_superuser"` // superuser_reserved_connections
}

// QueryConnections counts backends per pg_stat_database and reads the limits.
const QueryConnections = `
SELECT coalesce(sum(numbackends), 0)::bigint,
       coalesce(sum(numbackends) FILTER (WHERE datname = current_database()), 0)::bigint,
       current_setting('max_connections')::bigint,
       current_setting('superuser_reserved_connections')::bigint
  FROM pg_stat_database`

// ReadConnections reads [Connections].
func ReadConnections(ctx context.Context, q db.Querier) (Connections, error) {
	var c Connections
	err := queryOne(ctx, q, "counting connections", QueryConnections, nil,
		&c.Total, &c.ThisDatabase, &c.MaxConnections, &c.ReservedSuperuser)
	return c, err
}

// QueryNotifyUsage reads the fraction (0..1) of the NOTIFY queue in use.
const QueryNotifyUsage = `SELECT pg_notification_queue_usage()`

// NotifyQueueUsage returns pg_notification_queue_usage(): the share of the
// server's NOTIFY queue held by notifications some listener has not read
// yet. A listener sitting in a long transaction makes it grow.
func NotifyQueueUsage(ctx context.Context, q db.Querier) (float64, error) {
	var u float64
	err := queryOne(ctx, q, "reading the NOTIFY queue usage", QueryNotifyUsage, nil, &u)
	return u, err
}
