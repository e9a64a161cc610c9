package status

import (
	"context"
	"fmt"

	"github.com/pgquectl/pgquectl/internal/pgstats"

	"github.com/pgquectl/pgquectl/internal/db"
)

// The "connections" check: client backends (pg_stat_database.numbackends)
// as a share of max_connections - superuser_reserved_connections.
// Thresholds: ConnectionsWarn / ConnectionsCrit.

func init() {
	serverChecks = append(serverChecks, serverCheck{
		name:    "connections",
		section: SectionConnections,
		collect: func(ctx context.Context, q db.Querier, r *Report) {
			cs, err := pgstats.ReadConnections(ctx, q)
			if err != nil {
				r.Connections.Problems = appendProblem(r.Connections.Problems, "pg_stat_database", err, r)
				return
			}
			r.Connections.Connections = cs
			r.Connections.Verdict = connectionsVerdict(&r.Connections, r.Thresholds)
		},
		result: func(r *Report) (Verdict, []Problem) { return r.Connections.Verdict, r.Connections.Problems },
		value: func(r *Report) string {
			c := r.Connections
			return fmt.Sprintf("%d of %d (%.0f%%)", c.Total, c.MaxConnections-c.ReservedSuperuser, c.Share*100)
		},
	})
}

// ConnectionsSection: client connections against max_connections.
type ConnectionsSection struct {
	pgstats.Connections
	Share    float64   `json:"share"` // Total / (max - reserved)
	Problems []Problem `json:"problems"`
	Verdict
}

// connectionsVerdict judges client connections against the limit.
func connectionsVerdict(c *ConnectionsSection, t Thresholds) Verdict {
	limit := c.MaxConnections - c.ReservedSuperuser
	if limit <= 0 {
		return ok("%d connections", c.Total)
	}
	c.Share = float64(c.Total) / float64(limit)
	switch {
	case t.ConnectionsCrit > 0 && c.Share >= t.ConnectionsCrit:
		return crit("%d of %d connections in use (CRIT from %.0f%%)", c.Total, limit, t.ConnectionsCrit*100)
	case t.ConnectionsWarn > 0 && c.Share >= t.ConnectionsWarn:
		return warn("%d of %d connections in use (WARN from %.0f%%)", c.Total, limit, t.ConnectionsWarn*100)
	}
	return ok("%d of %d connections in use", c.Total, limit)
}
