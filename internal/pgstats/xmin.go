package pgstats

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgquectl/pgquectl/internal/db"
)

// Backend is a session that holds back the xmin horizon: it has a snapshot
// (backend_xmin) or an assigned transaction id (backend_xid).
//
// Without pg_monitor (pg_read_all_stats), PostgreSQL still shows the pid,
// user, application, database and xmin of other roles' sessions but hides
// their backend type, state and timestamps: Hidden is then true and the
// durations are nil.
type Backend struct {
	PID            int32      `json:"pid"`
	User           string     `json:"user"`
	Application    string     `json:"application"`
	Database       string     `json:"database"`
	SameDatabase   bool       `json:"same_database"` // connected to the database we measure
	BackendType    string     `json:"backend_type"`
	State          string     `json:"state"`
	ClientAddr     string     `json:"client_addr"`
	XminHolder     string     `json:"xmin_holder"` // "backend_xmin" or "backend_xid": what pins the horizon
	BackendXmin    *string    `json:"backend_xmin"`
	BackendXID     *string    `json:"backend_xid"`
	XminAgeXIDs    int64      `json:"xmin_age_xids"` // age() of the older of backend_xmin / backend_xid
	XactStart      *time.Time `json:"xact_start"`
	QueryStart     *time.Time `json:"query_start"`
	BackendStart   *time.Time `json:"backend_start"`
	XactAge        *float64   `json:"xact_age_s"`  // seconds since xact_start: how long the horizon may have been held
	StateAge       *float64   `json:"state_age_s"` // seconds since state_change
	WaitEventType  string     `json:"wait_event_type"`
	WaitEvent      string     `json:"wait_event"`
	Query          string     `json:"query"` // first 200 characters
	Hidden         bool       `json:"hidden"`
	ExemptFromXmin bool       `json:"exempt_from_xmin"` // autovacuum workers: other vacuums ignore their xmin
}

// QueryXminBackends lists sessions with a backend_xmin or backend_xid, oldest
// first, leaving out the caller's own backend.
const QueryXminBackends = `
SELECT a.pid,
       coalesce(a.usename::text, ''),
       coalesce(a.application_name, ''),
       coalesce(a.datname::text, ''),
       coalesce(a.datname = current_database(), false),
       coalesce(a.backend_type, ''),
       coalesce(a.state, ''),
       coalesce(host(a.client_addr), ''),
       CASE WHEN a.backend_xid IS NOT NULL
             AND (a.backend_xmin IS NULL OR age(a.backend_xid) >= age(a.backend_xmin))
            THEN 'backend_xid' ELSE 'backend_xmin' END,
       a.backend_xmin::text,
       a.backend_xid::text,
       greatest(age(a.backend_xmin), age(a.backend_xid))::bigint,
       a.xact_start, a.query_start, a.backend_start,
       extract(epoch FROM clock_timestamp() - a.xact_start)::float8,
       extract(epoch FROM clock_timestamp() - a.state_change)::float8,
       coalesce(a.wait_event_type, ''),
       coalesce(a.wait_event, ''),
       coalesce(left(a.query, 200), ''),
       a.backend_type IS NULL,
       coalesce(a.backend_type = 'autovacuum worker', false)
  FROM pg_stat_activity a
 WHERE (a.backend_xmin IS NOT NULL OR a.backend_xid IS NOT NULL)
   AND a.pid <> pg_backend_pid()
 ORDER BY greatest(age(a.backend_xmin), age(a.backend_xid)) DESC, a.pid`

// XminBackends reads the sessions holding the xmin horizon, oldest first.
func XminBackends(ctx context.Context, q db.Querier) ([]Backend, error) {
	return queryAll(ctx, q, "reading xmin holders from pg_stat_activity", QueryXminBackends,
		func(row pgx.CollectableRow) (Backend, error) {
			var b Backend
			err := row.Scan(&b.PID, &b.User, &b.Application, &b.Database, &b.SameDatabase, &b.BackendType,
				&b.State, &b.ClientAddr, &b.XminHolder, &b.BackendXmin, &b.BackendXID, &b.XminAgeXIDs,
				&b.XactStart, &b.QueryStart, &b.BackendStart, &b.XactAge, &b.StateAge,
				&b.WaitEventType, &b.WaitEvent, &b.Query, &b.Hidden, &b.ExemptFromXmin)
			return b, err
		})
}

// Slot is a replication slot that holds xmin or catalog_xmin.
type Slot struct {
	Name           string  `json:"name"`
	Type           string  `json:"type"` // physical / logical
	Database       string  `json:"database"`
	Active         bool    `json:"active"`
	ActivePID      *int32  `json:"active_pid"`
	Xmin           *string `json:"xmin"`         // holds every table's horizon
	CatalogXmin    *string `json:"catalog_xmin"` // holds only the system catalogs
	XminAgeXIDs    *int64  `json:"xmin_age_xids"`
	CatalogAgeXIDs *int64  `json:"catalog_xmin_age_xids"`
	RestartLSN     string  `json:"restart_lsn"`
	WALStatus      string  `json:"wal_status"`
}

// QuerySlots lists replication slots with an xmin or catalog_xmin.
const QuerySlots = `
SELECT slot_name::text, slot_type, coalesce(database::text, ''), active, active_pid,
       xmin::text, catalog_xmin::text, age(xmin)::bigint, age(catalog_xmin)::bigint,
       coalesce(restart_lsn::text, ''), coalesce(wal_status, '')
  FROM pg_replication_slots
 WHERE xmin IS NOT NULL OR catalog_xmin IS NOT NULL
 ORDER BY greatest(age(xmin), age(catalog_xmin)) DESC`

// Slots reads the replication slots that hold a horizon.
func Slots(ctx context.Context, q db.Querier) ([]Slot, error) {
	return queryAll(ctx, q, "reading replication slots", QuerySlots,
		func(row pgx.CollectableRow) (Slot, error) {
			var s Slot
			err := row.Scan(&s.Name, &s.Type, &s.Database, &s.Active, &s.ActivePID, &s.Xmin, &s.CatalogXmin,
				&s.XminAgeXIDs, &s.CatalogAgeXIDs, &s.RestartLSN, &s.WALStatus)
			return s, err
		})
}

// PreparedXact is a two-phase transaction waiting for COMMIT/ROLLBACK PREPARED;
// it holds the horizon until then, across restarts.
type PreparedXact struct {
	GID          string    `json:"gid"`
	XID          string    `json:"xid"`
	AgeXIDs      int64     `json:"age_xids"`
	Prepared     time.Time `json:"prepared"`
	Age          float64   `json:"age_s"` // seconds since PREPARE TRANSACTION
	Owner        string    `json:"owner"`
	Database     string    `json:"database"`
	SameDatabase bool      `json:"same_database"`
}

// QueryPreparedXacts lists prepared transactions, oldest first.
const QueryPreparedXacts = `
SELECT gid, transaction::text, age(transaction)::bigint, prepared,
       extract(epoch FROM clock_timestamp() - prepared)::float8,
       owner::text, database::text, database = current_database()
  FROM pg_prepared_xacts
 ORDER BY prepared`

// PreparedXacts reads [PreparedXact]s.
func PreparedXacts(ctx context.Context, q db.Querier) ([]PreparedXact, error) {
	return queryAll(ctx, q, "reading prepared transactions", QueryPreparedXacts,
		func(row pgx.CollectableRow) (PreparedXact, error) {
			var p PreparedXact
			err := row.Scan(&p.GID, &p.XID, &p.AgeXIDs, &p.Prepared, &p.Age, &p.Owner, &p.Database, &p.SameDatabase)
			return p, err
		})
}
