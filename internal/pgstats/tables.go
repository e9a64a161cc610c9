package pgstats

import (
	"context"
	"regexp"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
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
	Schema          string     `json:"schema"`
	Name            string     `json:"name"`
	Parent          string     `json:"parent,omitempty"` // partitioned parent or inheritance parent
	Kind            TableKind  `json:"kind"`
	QueueID         int64      `json:"queue_id,omitempty"` // event tables only
	LiveTuples      int64      `json:"live_tuples"`
	DeadTuples      int64      `json:"dead_tuples"`
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
func TableStats(ctx context.Context, q Querier, schema string) ([]TableStat, error) {
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
func DeadTuples(ctx context.Context, q Querier, schema string) (map[string]int64, error) {
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
