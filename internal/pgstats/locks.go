package pgstats

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgquectl/pgquectl/internal/db"
)

// AdvisoryHolder is a session holding or waiting for a two-key advisory lock.
type AdvisoryHolder struct {
	PID          int32      `json:"pid"`
	Granted      bool       `json:"granted"` // false: waiting for it
	User         string     `json:"user"`
	Application  string     `json:"application"`
	ClientAddr   string     `json:"client_addr"`
	BackendStart *time.Time `json:"backend_start"` // nil when hidden (no pg_monitor)
	State        string     `json:"state"`
}

// QueryAdvisoryHolders lists the sessions holding or awaiting the two-key
// advisory lock ($1, $2) in the current database. pg_locks is readable by
// every role; the pg_stat_activity columns are hidden for other roles'
// sessions without pg_monitor.
const QueryAdvisoryHolders = `
SELECT l.pid, l.granted,
       coalesce(a.usename::text, ''), coalesce(a.application_name, ''),
       coalesce(host(a.client_addr), ''), a.backend_start, coalesce(a.state, '')
  FROM pg_locks l
  LEFT JOIN pg_stat_activity a ON a.pid = l.pid
 WHERE l.locktype = 'advisory'
   AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
   AND l.classid::bigint = $1
   AND l.objid::bigint = $2
   AND l.objsubid = 2
 ORDER BY l.granted DESC, l.pid`

// AdvisoryHolders reads who holds (Granted) or waits for the advisory lock
// (classID, objID), e.g. (locks.ClassID, locks.TickerLeader) for the ticker
// daemon's leader.
func AdvisoryHolders(ctx context.Context, q db.Querier, classID, objID int32) ([]AdvisoryHolder, error) {
	return queryAll(ctx, q, "reading advisory lock holders", QueryAdvisoryHolders,
		func(row pgx.CollectableRow) (AdvisoryHolder, error) {
			var h AdvisoryHolder
			err := row.Scan(&h.PID, &h.Granted, &h.User, &h.Application, &h.ClientAddr, &h.BackendStart, &h.State)
			return h, err
		}, int64(uint32(classID)), int64(uint32(objID)))
}
