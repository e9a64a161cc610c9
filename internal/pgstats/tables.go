package pgstats

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgquectl/pgquectl/internal/db"
)

// TableKind groups the engine's tables by how they are expected to churn.
type TableKind string

// Table kinds.
const (
	// KindEvent: pgque.event_<queue_id>_<n>, insert-only, rotated by TRUNCATE.
	KindEvent TableKind = "event"
	// KindTick: children of pgque.tick, rotated metadata.
	KindTick TableKind = "tick"
	// KindSubscription: children of pgque.subscription, rotated metadata.
	KindSubscription TableKind = "subscription"
	// KindCursor: the broker's per-partition group cursors (rotated metadata).
	KindCursor TableKind = "cursor"
	// KindOther: everything else in the schema (queue, consumer, retry_queue, ...).
	KindOther TableKind = "other"
)

var (
	eventTableRE = regexp.MustCompile(`^event_([0-9]+)(?:_[0-9]+)?$`)
	childRE      = regexp.MustCompile(`^(.*)_[0-9]+$`)
)

// ClassifyTable says which kind a table of the pgque schema is, from its own
// name and its parent's name (empty when it has none). For event tables it
// also returns the queue id.
func ClassifyTable(name, parent string) (TableKind, int64) {
	if m := eventTableRE.FindStringSubmatch(name); m != nil {
		id, _ := strconv.ParseInt(m[1], 10, 64)
		return KindEvent, id
	}
	base := parent
	if base == "" {
		base = name
		if m := childRE.FindStringSubmatch(name); m != nil {
			base = m[1]
		}
	}
	switch {
	case base == "tick":
		return KindTick, 0
	case base == "subscription":
		return KindSubscription, 0
	case base == "cursor" || base == "group_cursor" || base == "partition_cursor" || base == "consumer_cursor":
		return KindCursor, 0
	case eventTableRE.MatchString(base):
		m := eventTableRE.FindStringSubmatch(base)
		id, _ := strconv.ParseInt(m[1], 10, 64)
		return KindEvent, id
	}
	return KindOther, 0
}

// TableStat is one table's row of pg_stat_user_tables plus its kind.
type TableStat struct {
	Schema     string    `json:"schema"`
	Name       string    `json:"name"`
	Parent     string    `json:"parent,omitempty"` // partitioned parent or inheritance parent
	Kind       TableKind `json:"kind"`
	QueueID    int64     `json:"queue_id,omitempty"` // event tables only
	LiveTuples int64     `json:"live_tuples"`
	DeadTuples int64     `json:"dead_tuples"` // by DeadMethod
	// DeadMethod says how DeadTuples was measured (DeadByStats,
	// DeadByPgstattuple, DeadByPages); StatsDeadTuples is n_dead_tup.
	DeadMethod      string     `json:"dead_method"`
	StatsDeadTuples int64      `json:"stats_dead_tuples"`
	Pages           int64      `json:"pages,omitempty"` // heap pages, when measured by pages
	Inserts         int64      `json:"inserts"`
	Updates         int64      `json:"updates"`
	HOTUpdates      int64      `json:"hot_updates"`
	Deletes         int64      `json:"deletes"`
	SizeBytes       int64      `json:"size_bytes"` // heap + indexes + toast (estimated from relpages when the table is locked)
	LastVacuum      *time.Time `json:"last_vacuum"`
	LastAutovacuum  *time.Time `json:"last_autovacuum"`
	VacuumCount     int64      `json:"vacuum_count"`
	AutovacuumCount int64      `json:"autovacuum_count"`
	AutovacuumOff   bool       `json:"autovacuum_off"` // reloption autovacuum_enabled=false
}

// QueryTableStats lists the tables (not partitioned parents) of one schema
// with their counters. Sizes come from pg_class (no lock taken, so a
// rotation's TRUNCATE cannot block status): relpages of the table and its
// indexes, refreshed by VACUUM / ANALYZE / TRUNCATE.
const QueryTableStats = `
SELECT s.schemaname::text,
       s.relname::text,
       coalesce(p.relname::text, ''),
       s.n_live_tup, s.n_dead_tup, s.n_tup_ins, s.n_tup_upd, s.n_tup_hot_upd, s.n_tup_del,
       ((c.relpages::bigint
         + coalesce((SELECT sum(ic.relpages) FROM pg_index x JOIN pg_class ic ON ic.oid = x.indexrelid
                      WHERE x.indrelid = c.oid), 0)
         + coalesce((SELECT t.relpages FROM pg_class t WHERE t.oid = c.reltoastrelid), 0))
        * current_setting('block_size')::bigint)::bigint,
       s.last_vacuum, s.last_autovacuum, s.vacuum_count, s.autovacuum_count,
       coalesce((SELECT NOT o.option_value::bool FROM pg_options_to_table(c.reloptions) o
                  WHERE o.option_name = 'autovacuum_enabled'), false)
  FROM pg_stat_user_tables s
  JOIN pg_class c ON c.oid = s.relid
  LEFT JOIN pg_inherits i ON i.inhrelid = s.relid
  LEFT JOIN pg_class p ON p.oid = i.inhparent
 WHERE s.schemaname = $1
   AND c.relkind <> 'p'
 ORDER BY s.relname`

// TableStats reads [TableStat] for every table of schema (usually "pgque").
// pg_stat_user_tables needs no special privilege. Counters lag ~1 s.
func TableStats(ctx context.Context, q db.Querier, schema string) ([]TableStat, error) {
	return queryAll(ctx, q, "reading table statistics of schema "+schema, QueryTableStats,
		func(row pgx.CollectableRow) (TableStat, error) {
			var t TableStat
			err := row.Scan(&t.Schema, &t.Name, &t.Parent, &t.LiveTuples, &t.DeadTuples, &t.Inserts,
				&t.Updates, &t.HOTUpdates, &t.Deletes, &t.SizeBytes, &t.LastVacuum, &t.LastAutovacuum,
				&t.VacuumCount, &t.AutovacuumCount, &t.AutovacuumOff)
			t.Kind, t.QueueID = ClassifyTable(t.Name, t.Parent)
			return t, err
		}, schema)
}

// QueryDeadTuples reads the dead-tuple counter of each relation directly
// (pg_stat_get_dead_tuples), cheaper than the view for a tight sampling loop.
const QueryDeadTuples = `
SELECT c.relname::text, pg_stat_get_dead_tuples(c.oid)
  FROM pg_class c
 WHERE c.relnamespace = $1::regnamespace
   AND c.relkind = 'r'`

// DeadTuples returns dead tuples per table name of schema, for samplers that
// poll often (bench/sub-second tracks the peak with it).
func DeadTuples(ctx context.Context, q db.Querier, schema string) (map[string]int64, error) {
	type pair struct {
		name string
		dead int64
	}
	rows, err := queryAll(ctx, q, "reading dead tuples of schema "+schema, QueryDeadTuples,
		func(row pgx.CollectableRow) (pair, error) {
			var p pair
			err := row.Scan(&p.name, &p.dead)
			return p, err
		}, schema)
	if err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(rows))
	for _, p := range rows {
		out[p.name] = p.dead
	}
	return out, nil
}

// KindTotals sums live and dead tuples per kind (event tables of all queues together).
type KindTotals struct {
	Kind       TableKind `json:"kind"`
	Tables     int       `json:"tables"`
	LiveTuples int64     `json:"live_tuples"`
	DeadTuples int64     `json:"dead_tuples"`
	SizeBytes  int64     `json:"size_bytes"`
}

// SumByKind totals tables per kind, in the order event, tick, subscription, cursor, other.
func SumByKind(tables []TableStat) []KindTotals {
	order := []TableKind{KindEvent, KindTick, KindSubscription, KindCursor, KindOther}
	idx := map[TableKind]*KindTotals{}
	out := make([]KindTotals, len(order))
	for i, k := range order {
		out[i].Kind = k
		idx[k] = &out[i]
	}
	for _, t := range tables {
		k := idx[t.Kind]
		k.Tables++
		k.LiveTuples += t.LiveTuples
		k.DeadTuples += t.DeadTuples
		k.SizeBytes += t.SizeBytes
	}
	return out
}

// Methods of measuring dead tuples ([TableStat].DeadMethod).
const (
	// DeadByStats: pg_stat_user_tables.n_dead_tup. It only goes down when
	// VACUUM runs, not when HOT pruning frees the space, and the engine's
	// metadata tables run without autovacuum: for them it overcounts (and
	// stays up after the cause ended). Used for event tables.
	DeadByStats = "stats"
	// DeadByPgstattuple: an exact count, pgstattuple(regclass).
	DeadByPgstattuple = "pgstattuple"
	// DeadByPages: an upper bound from the table's size: the tuples its
	// pages could hold beyond the live ones (0 for an empty child), capped
	// at n_dead_tup.
	DeadByPages = "pages"
)

// QueryPgstattuple finds the pgstattuple extension's schema and whether the
// role may call it (superuser, or pg_stat_scan_tables, part of pg_monitor).
const QueryPgstattuple = `
SELECT n.nspname::text,
       has_function_privilege(format('%I.pgstattuple(regclass)', n.nspname), 'EXECUTE')
  FROM pg_extension e
  JOIN pg_namespace n ON n.oid = e.extnamespace
 WHERE e.extname = 'pgstattuple'`

// queryExactDead counts dead tuples exactly (%s: pgstattuple's schema).
// It reads the tables named $2 of schema $1 (under ACCESS SHARE: small
// metadata tables only).
const queryExactDead = `
SELECT c.relname::text, s.dead_tuple_count
  FROM pg_class c
 CROSS JOIN LATERAL %s.pgstattuple(c.oid) s
 WHERE c.relnamespace = $1::regnamespace
   AND c.relkind = 'r'
   AND c.relname = ANY ($2::text[])`

// QueryPageCapacity reads each table's size in pages and how many tuples a
// page can hold at most: (block size - page header) / the smallest tuple
// its columns allow (tuple header + line pointer + fixed-width columns + a
// byte per variable-width one).
const QueryPageCapacity = `
SELECT c.relname::text,
       pg_relation_size(c.oid) / current_setting('block_size')::bigint,
       (current_setting('block_size')::int - 24)
       / (SELECT 24 + 4 + coalesce(sum(a.attlen) FILTER (WHERE a.attlen > 0), 0) + count(*) FILTER (WHERE a.attlen < 0)
            FROM pg_attribute a
           WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped)
  FROM pg_class c
 WHERE c.relnamespace = $1::regnamespace
   AND c.relkind = 'r'
   AND c.relname = ANY ($2::text[])`

// isMetadata says whether a table kind is rotated metadata, whose dead
// tuples are measured rather than read from the statistics.
func isMetadata(k TableKind) bool {
	return k == KindTick || k == KindSubscription || k == KindCursor
}

// MeasureDead replaces the statistics' dead-tuple counts of the metadata
// tables (tick, subscription, cursor) in tables by a measure: exact with
// pgstattuple when the extension exists in the database and the role may
// use it, else the page-based bound. It returns the method used.
// StatsDeadTuples keeps n_dead_tup.
func MeasureDead(ctx context.Context, q db.Querier, schema string, tables []TableStat) (string, error) {
	var names []string
	idx := map[string]int{}
	for i := range tables {
		tables[i].StatsDeadTuples = tables[i].DeadTuples
		tables[i].DeadMethod = DeadByStats
		if isMetadata(tables[i].Kind) {
			names = append(names, tables[i].Name)
			idx[tables[i].Name] = i
		}
	}
	if len(names) == 0 {
		return DeadByStats, nil
	}
	var extSchema string
	var usable bool
	err := queryOne(ctx, q, "looking for pgstattuple", QueryPgstattuple, nil, &extSchema, &usable)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return "", err
	}
	if err == nil && usable {
		type pair struct {
			name string
			dead int64
		}
		rows, err := queryAll(ctx, q, "counting dead tuples with pgstattuple",
			fmt.Sprintf(queryExactDead, pgx.Identifier{extSchema}.Sanitize()),
			func(row pgx.CollectableRow) (pair, error) {
				var p pair
				err := row.Scan(&p.name, &p.dead)
				return p, err
			}, schema, names)
		if err == nil {
			for _, p := range rows {
				t := &tables[idx[p.name]]
				t.DeadTuples, t.DeadMethod = p.dead, DeadByPgstattuple
			}
			return DeadByPgstattuple, nil
		}
		// Fall back to pages (e.g. a table truncated meanwhile).
	}
	type capRow struct {
		name         string
		pages, limit int64
	}
	caps, err := queryAll(ctx, q, "reading table sizes", QueryPageCapacity,
		func(row pgx.CollectableRow) (capRow, error) {
			var c capRow
			err := row.Scan(&c.name, &c.pages, &c.limit)
			return c, err
		}, schema, names)
	if err != nil {
		return "", err
	}
	for _, c := range caps {
		t := &tables[idx[c.name]]
		t.Pages = c.pages
		t.DeadTuples, t.DeadMethod = PageBoundDead(c.pages, c.limit, t.LiveTuples, t.StatsDeadTuples), DeadByPages
	}
	return DeadByPages, nil
}

// PageBoundDead is the page-based bound of a table's dead tuples: what its
// pages could hold beyond the live tuples, never more than the statistics
// counted (statsDead) nor below 0.
func PageBoundDead(pages, perPage, live, statsDead int64) int64 {
	room := pages*perPage - live
	return max(0, min(room, statsDead))
}
