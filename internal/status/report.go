// Package status answers "is the queue healthy right now?": it gathers a
// [Report] from one database (queues, consumers, bloat, WAL, xmin horizon,
// pg_cron or the ticker daemon, NOTIFY, connections), judges every check
// row OK / WARN / CRIT / UNKNOWN against [Thresholds], and renders it as
// tables, JSON or a one-line summary for monitoring plugins.
//
// The measurements come from internal/pgstats; this package only decides
// what they mean. A section the role cannot read is reported with the grant
// that fixes it, never as an error of the whole report.
package status

import (
	"time"

	"github.com/pgquectl/pgquectl/internal/pgstats"

	"github.com/pgquectl/pgquectl/internal/cron"
)

// SchemaVersion is the version of the JSON report's layout (the
// "schema_version" field): raised when a field is removed, renamed or
// changes meaning; adding fields does not raise it. docs/reference/status.md
// describes version 1.
const SchemaVersion = 1

// Report is everything `pgquectl status` shows. JSON field names are stable.
type Report struct {
	// SchemaVersion is set by WriteJSON (SchemaVersion).
	SchemaVersion int       `json:"schema_version"`
	Time          time.Time `json:"time"`
	Level         Level     `json:"level"` // the worst check: CRIT > WARN > UNKNOWN > OK
	// Summary is the one-line form printed by --check.
	Summary string `json:"summary"`
	// Error is set when the database could not be reached (Level UNKNOWN);
	// the sections are then empty.
	Error       string               `json:"error,omitempty"`
	Session     *pgstats.SessionInfo `json:"session,omitempty"`
	Engine      EngineSection        `json:"engine"`
	Queues      QueueSection         `json:"queues"`
	Consumers   ConsumerSection      `json:"consumers"`
	Bloat       BloatSection         `json:"bloat"`
	WAL         WALSection           `json:"wal"`
	Xmin        XminSection          `json:"xmin"`
	Cron        CronSection          `json:"cron"`
	Notify      NotifySection        `json:"notify"`
	Connections ConnectionsSection   `json:"connections"`
	// Checks lists every check row of every section, in display order.
	Checks     []Check    `json:"checks"`
	Thresholds Thresholds `json:"thresholds"`
}

// Check is one check row as --check and monitors see it.
type Check struct {
	Section string `json:"section"`
	Name    string `json:"name"`
	Verdict
}

// Problem is something a section could not read, and what fixes it.
type Problem struct {
	What  string `json:"what"`  // e.g. "pg_stat_activity of other roles' sessions"
	Fix   string `json:"fix"`   // e.g. "GRANT pg_monitor TO app"
	Error string `json:"error"` // the server's message, if any
}

// EngineSection: is the engine installed and readable.
type EngineSection struct {
	pgstats.Engine
	MetaRotationPeriod *float64   `json:"meta_rotation_period_s"` // tick / subscription rotation; nil when not readable
	LastMetaRotation   *time.Time `json:"last_meta_rotation"`     // last subscription-table rotation; nil when not readable
	Problems           []Problem  `json:"problems"`
	Verdict
}

// QueueSection: one row per queue.
type QueueSection struct {
	Rows     []QueueRow `json:"rows"`
	Problems []Problem  `json:"problems"`
}

// QueueRow is a queue with its tick-lag and rotation verdict.
type QueueRow struct {
	pgstats.QueueInfo
	ExpectedTickEvery float64  `json:"expected_tick_every_s"` // tick period, else (or without a classic consumer) ticker_max_lag
	TickLagWarnAt     float64  `json:"tick_lag_warn_at_s"`
	TickLagCritAt     float64  `json:"tick_lag_crit_at_s"`
	SinceRotation     *float64 `json:"since_rotation_s"` // since queue_switch_time
	PinnedBy          string   `json:"pinned_by"`        // the slowest consumer: its cursor pins event-table rotation
	PinnedByLag       *float64 `json:"pinned_by_lag_s"`
	TicksInSample     *int64   `json:"ticks_in_sample"` // ticks during the WAL sample
	// NoClassicConsumer: no classic consumer (subscribe/receive/ack) reads
	// the queue, or the consumers were not readable. The engine then ticks
	// it by the classic thresholds even with a tick period (consumer groups
	// need no ticks): its tick lag is judged against ticker_max_lag.
	NoClassicConsumer bool `json:"no_classic_consumer"`
	Verdict
}

// ConsumerSection: one row per classic consumer.
type ConsumerSection struct {
	Rows     []ConsumerRow `json:"rows"`
	Problems []Problem     `json:"problems"`
}

// ConsumerRow is a consumer with its lag verdict.
type ConsumerRow struct {
	pgstats.ConsumerInfo
	Verdict
}

// BloatSection: tables of schema pgque and their dead tuples per family.
type BloatSection struct {
	// MetadataMethod: how the dead tuples of the tick, subscription and
	// cursor tables were measured: "pgstattuple" (exact), "pages" (an upper
	// bound from their size) or "stats" (n_dead_tup, when neither worked).
	MetadataMethod string              `json:"metadata_method"`
	Families       []FamilyRow         `json:"families"`
	Tables         []pgstats.TableStat `json:"tables"`
	Problems       []Problem           `json:"problems"`
}

// FamilyRow sums the children of one table family against its bound.
type FamilyRow struct {
	pgstats.KindTotals
	Bound     int64  `json:"bound"` // WARN above it
	CritAt    int64  `json:"crit_at"`
	WorstName string `json:"worst_table"` // the child with most dead tuples
	WorstDead int64  `json:"worst_dead"`
	Verdict
}

// WALSection: WAL volume over the sample.
type WALSection struct {
	Sampled bool             `json:"sampled"`
	Rate    *pgstats.WALRate `json:"rate,omitempty"`
	// Ticks made during the sample (all queues) and the WAL they account
	// for, estimated as Ticks × TickWALBytes.
	Ticks        int64     `json:"ticks"`
	TickWALBytes int64     `json:"tick_wal_bytes_each"`
	TickBytes    int64     `json:"tick_bytes"`
	TickShare    float64   `json:"tick_share"` // TickBytes / Rate.Bytes (0..1)
	Problems     []Problem `json:"problems"`
	Verdict
}

// XminSection: who holds the xmin horizon.
type XminSection struct {
	Backends []BackendRow  `json:"backends"`
	Slots    []SlotRow     `json:"slots"`
	Prepared []PreparedRow `json:"prepared"`
	// Oldest is the verdict on the worst visible holder of this database's horizon.
	Oldest   Verdict   `json:"oldest"`
	Hidden   int       `json:"hidden"` // holders whose age the role cannot see
	Problems []Problem `json:"problems"`
}

// BackendRow is a session holding the horizon.
type BackendRow struct {
	pgstats.Backend
	Verdict
}

// SlotRow is a replication slot holding a horizon.
type SlotRow struct {
	pgstats.Slot
	Verdict
}

// PreparedRow is a prepared transaction.
type PreparedRow struct {
	pgstats.PreparedXact
	Verdict
}

// CronSection: pg_cron jobs of this database, or the ticker daemon.
type CronSection struct {
	Settings cron.Settings `json:"settings"`
	Access   cron.Access   `json:"access"`
	Jobs     []JobRow      `json:"jobs"`
	// Running runs of all jobs the role can see, against cron.max_running_jobs.
	Running        int64                    `json:"running"`
	RunningVerdict Verdict                  `json:"running_verdict"`
	History        Verdict                  `json:"history"` // job_run_details size
	Daemon         []pgstats.AdvisoryHolder `json:"daemon"`  // ticker daemon leader (granted) and standbys
	// Loop: the session holding the pg_cron loop's liveness lock
	// (pgque.ticker_loop() while it runs) and any waiting for it.
	Loop []pgstats.AdvisoryHolder `json:"loop"`
	// LoopAlive: the loop holds its lock, or pg_cron reports the ticker
	// job's run in progress.
	LoopAlive bool `json:"loop_alive"`
	// DownFor: how long the queue with events waiting longest has gone
	// without a tick, when that is over its WARN limit (nil otherwise).
	DownFor *float64 `json:"down_for_s"`
	// LargestGap: the longest pause between two runs of the ticker job in
	// the cron window (nil when under a second or unknown), and when it began.
	LargestGap   *float64   `json:"largest_gap_s"`
	LargestGapAt *time.Time `json:"largest_gap_at"`
	// TickGap: the longest pause between two ticks of a queue that both
	// carried events, in the tick rows the engine keeps (nil when none, or
	// when the role may not read pgque.tick).
	TickGap *pgstats.TickGap `json:"tick_gap"`
	// Ticking says what drives the ticks of this database's queues.
	Ticking  Verdict   `json:"ticking"`
	Problems []Problem `json:"problems"`
}

// JobRow is one of our pg_cron jobs.
type JobRow struct {
	cron.JobRuns
	Interval     *float64 `json:"interval_s"` // from the schedule; nil: not understood
	SinceLastRun *float64 `json:"since_last_start_s"`
	Verdict
}

// NotifySection and ConnectionsSection are defined with their checks
// (check_notify.go, check_connections.go).
