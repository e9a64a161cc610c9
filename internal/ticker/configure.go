package ticker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/tw"

	"github.com/pgquectl/pgquectl/internal/config"
	"github.com/pgquectl/pgquectl/internal/cron"
	"github.com/pgquectl/pgquectl/internal/db"
	"github.com/pgquectl/pgquectl/internal/locks"
)

// Named queries of `pgquectl tick` (configuration, not the daemon loop).
// The engine owns the tick-period rule: its range (set_setting /
// set_queue_config validate it), each queue's effective period
// (get_queue_info) and the derived rotation period (meta_rotation_ms); this
// file only asks.
const (
	qSetDefaultPeriod = `SELECT pgque.set_tick_period_ms($1::int)`
	qSetQueuePeriod   = `SELECT pgque.set_queue_config($1, 'tick_period_ms', $2::text)`
	qSetMetaRotation  = `SELECT pgque.set_setting('meta_rotation_period_ms', $1::text)`
	qQueueExists      = `SELECT EXISTS (SELECT 1 FROM pgque.queue WHERE queue_name = $1)`
	// qEffective: what the engine uses - each queue's effective tick
	// period (NULL: classic thresholds) and the rotation period.
	qEffective = `SELECT queue_name, queue_tick_period_ms FROM pgque.get_queue_info() ORDER BY queue_name`
	qRotation  = `SELECT pgque.meta_rotation_ms()`
	// qDefaults: the default tick period (NULL: classic), whether the
	// rotation period is pinned, and whether ticker_loop() may run.
	qDefaults = `SELECT pgque.get_setting('tick_period_ms')::int,
	                    pgque.get_setting('meta_rotation_period_ms') IS NOT NULL,
	                    coalesce(pgque.get_setting('ticker_loop_enabled'), 'true')::boolean`
	// qLockHolder: the backend holding one of our session advisory locks in
	// this database (0 when none): the ticker daemon's leader lock, the
	// pg_cron loop's liveness lock (internal/locks).
	qLockHolder = `SELECT coalesce(min(l.pid), 0) FROM pg_catalog.pg_locks l
	                WHERE l.locktype = 'advisory' AND l.granted
	                  AND l.database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = current_database())
	                  AND l.classid::int8 = $1 AND l.objid::int8 = $2 AND l.objsubid = 2`
)

// BytesPerTick is the WAL one materialized tick of one active queue writes
// (the tick row with its snapshot, its index entry, the tick sequence, the
// commit record). Measured on PostgreSQL 15 by bench/sub-second's probe
// (WAL of 400 × (send; tick) minus 400 × send, over 400, alone on the
// cluster): 236 bytes (bench/sub-second/results/2026-11-29). It projects WAL
// per day in `pgquectl tick`'s plan; consumers add their own cursor updates.
const BytesPerTick = 236

// MinPeriod and MaxPeriod are the engine's tick-period range, for help
// texts and messages. Its one definition is pgque.setting_spec()
// (tick_period_ms, in ms), which set_setting and set_queue_config enforce;
// TestPeriodRangeIsTheEngines fails when these differ from it.
const (
	MinPeriod = time.Millisecond
	MaxPeriod = 60 * time.Second
)

// ValidatePeriod checks the form of a tick period before anything is
// changed: a positive whole number of milliseconds. Its range
// (MinPeriod..MaxPeriod) is the engine's rule, checked when it is set.
// Configure (`pgquectl tick`) and New (the ticker daemon) call it.
func ValidatePeriod(p time.Duration) error {
	if p <= 0 {
		return fmt.Errorf("tick period %s out of range: must be positive (e.g. 10ms; --hz 1..1000)", p)
	}
	if p%time.Millisecond != 0 {
		return fmt.Errorf("tick period %s is not a whole number of milliseconds", p)
	}
	return nil
}

// ErrInvalid marks a value the engine rejected (SQLSTATE 22023, or P0001 from
// the PgQue-compatible setters): the command's input was wrong, nothing was
// changed.
var ErrInvalid = errors.New("invalid value")

// Options of Configure.
type Options struct {
	// Period is the tick period (required).
	Period time.Duration
	// Queue limits the setting to one queue; "" sets the installation default.
	Queue string
	// Rotation pins the metadata rotation period (0 = let the engine derive it).
	Rotation time.Duration
	// DryRun computes and returns the plan without changing anything.
	DryRun bool
	// NoCron sets the period but does not register pg_cron jobs (for the
	// ticker daemon, `tick --run`).
	NoCron bool
}

// QueuePlan is one row of the plan: what the engine uses for the queue.
type QueuePlan struct {
	Queue string `json:"queue"`
	// Period is the queue's effective tick period (0: classic thresholds).
	Period   time.Duration `json:"period"`
	Rotation time.Duration `json:"rotation_period"`
	// WALPerDay projects the WAL of ticking one active queue for a day.
	WALPerDay int64 `json:"wal_per_day_bytes"`
}

// State is the ticking configuration as the engine sees it.
type State struct {
	// Default is the installation's tick period (0: classic thresholds).
	Default time.Duration `json:"default_period"`
	// Rotation is the metadata rotation period the engine uses.
	Rotation        time.Duration `json:"rotation_period"`
	RotationDerived bool          `json:"rotation_derived"`
	Queues          []QueuePlan   `json:"queues"`
	// LoopEnabled: ticker_loop() may run (false after `tick --off`).
	LoopEnabled bool `json:"loop_enabled"`
	// Jobs are our registered pg_cron jobs.
	Jobs []cron.Job `json:"jobs"`
}

// Plan is what Configure did (or would do, on a dry run): the state before
// and after, both read from the engine.
type Plan struct {
	DryRun bool  `json:"dry_run"`
	Before State `json:"before"`
	State
	Cron cron.Info `json:"cron"`
	// CronNote explains why no jobs are listed, when none are.
	CronNote string `json:"cron_note,omitempty"`
}

// errDryRun rolls the dry run's transaction back.
var errDryRun = errors.New("dry run")

// Configure sets the tick period (for one queue or the installation) and
// the metadata rotation period, and registers the pg_cron jobs: all or
// nothing, in one transaction (the jobs in another database are scheduled
// before it commits; a failure there rolls the settings back). A dry run
// does the same and rolls back, so its plan shows exactly what the engine
// would use. It refuses before changing anything when pg_cron cannot be
// used (unless NoCron).
func Configure(ctx context.Context, conn *pgx.Conn, o Options) (Plan, error) {
	if err := ValidatePeriod(o.Period); err != nil {
		return Plan{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if o.Rotation < 0 || o.Rotation%time.Millisecond != 0 {
		return Plan{}, fmt.Errorf("%w: rotation period %s: use a positive whole number of milliseconds", ErrInvalid, o.Rotation)
	}
	ctx, cancel := context.WithTimeout(ctx, cron.Timeout)
	defer cancel()
	p := Plan{DryRun: o.DryRun}
	if o.Queue != "" {
		if err := queueExists(ctx, conn, o.Queue); err != nil {
			return p, err
		}
	}
	var cronErr error
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		var err error
		if p.Before, err = readState(ctx, tx, o.Queue); err != nil {
			return err
		}
		if !o.NoCron {
			p.Cron, err = cron.Detect(ctx, tx.Conn())
			if err != nil {
				return fmt.Errorf("detecting pg_cron: %w", err)
			}
			if cronErr = p.Cron.Check(); cronErr != nil {
				p.CronNote = cronErr.Error()
			} else if p.Before.Jobs, err = cron.Jobs(ctx, tx.Conn(), p.Cron); err != nil {
				return err
			}
		}
		if err := applySettings(ctx, tx, o); err != nil {
			return err
		}
		if p.State, err = readState(ctx, tx, o.Queue); err != nil {
			return err
		}
		switch {
		case o.NoCron && o.DryRun:
			return errDryRun
		case o.NoCron:
			return nil
		case cronErr != nil:
			return cronErr
		case o.DryRun:
			if p.Jobs, err = cron.Planned(ctx, tx, p.Cron); err != nil {
				return err
			}
			return errDryRun
		}
		if _, p.Jobs, err = cron.RegisterTx(ctx, tx); err != nil {
			return err
		}
		p.LoopEnabled = true
		return nil
	})
	if errors.Is(err, errDryRun) {
		return p, nil
	}
	return p, err
}

func queueExists(ctx context.Context, conn *pgx.Conn, queue string) error {
	var ok bool
	if err := conn.QueryRow(ctx, qQueueExists, queue).Scan(&ok); err != nil {
		return fmt.Errorf("looking up queue %q: %w", queue, db.MapError(err))
	}
	if !ok {
		return fmt.Errorf("%w: queue %q does not exist: create it with SELECT pgque.create_queue(%s); or drop --queue", ErrInvalid, queue, quoteLiteral(queue))
	}
	return nil
}

// quoteLiteral quotes s as an SQL string literal (a hint that pastes).
func quoteLiteral(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// readState reads what the engine uses: the default period, every queue's
// effective period (only queue when given), the rotation period.
func readState(ctx context.Context, q db.Querier, queue string) (State, error) {
	var st State
	var def *int64
	var pinned bool
	if err := q.QueryRow(ctx, qDefaults).Scan(&def, &pinned, &st.LoopEnabled); err != nil {
		return st, fmt.Errorf("reading the tick settings: %w", db.MapError(err))
	}
	if def != nil {
		st.Default = time.Duration(*def) * time.Millisecond
	}
	st.RotationDerived = !pinned
	var rot int64
	if err := q.QueryRow(ctx, qRotation).Scan(&rot); err != nil {
		return st, fmt.Errorf("reading the rotation period (pgque.meta_rotation_ms()): %w", db.MapError(err))
	}
	st.Rotation = time.Duration(rot) * time.Millisecond
	rows, err := q.Query(ctx, qEffective)
	if err != nil {
		return st, fmt.Errorf("reading the queues' tick periods: %w", db.MapError(err))
	}
	all, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (QueuePlan, error) {
		var qp QueuePlan
		var ms *int64
		err := r.Scan(&qp.Queue, &ms)
		if ms != nil {
			qp.Period = time.Duration(*ms) * time.Millisecond
		}
		qp.Rotation = st.Rotation
		qp.WALPerDay = WALPerDay(qp.Period)
		return qp, err
	})
	if err != nil {
		return st, fmt.Errorf("reading the queues' tick periods: %w", db.MapError(err))
	}
	for _, qp := range all {
		if queue == "" || qp.Queue == queue {
			st.Queues = append(st.Queues, qp)
		}
	}
	if len(all) == 0 {
		st.Queues = []QueuePlan{{Queue: "(default)", Period: st.Default, Rotation: st.Rotation, WALPerDay: WALPerDay(st.Default)}}
	}
	return st, nil
}

func applySettings(ctx context.Context, tx pgx.Tx, o Options) error {
	ms := strconv.FormatInt(o.Period.Milliseconds(), 10)
	var rot any // NULL: the engine derives it
	if o.Rotation != 0 {
		rot = strconv.FormatInt(o.Rotation.Milliseconds(), 10)
	}
	if o.Queue != "" {
		if _, err := tx.Exec(ctx, qSetQueuePeriod, o.Queue, ms); err != nil {
			return fmt.Errorf("setting the tick period of queue %q to %s: %w", o.Queue, o.Period, engineErr(err))
		}
	} else if _, err := tx.Exec(ctx, qSetDefaultPeriod, o.Period.Milliseconds()); err != nil {
		return fmt.Errorf("setting the default tick period to %s: %w", o.Period, engineErr(err))
	}
	if _, err := tx.Exec(ctx, qSetMetaRotation, rot); err != nil {
		return fmt.Errorf("setting the metadata rotation period to %s: %w", o.Rotation, engineErr(err))
	}
	return nil
}

// engineErr marks the engine's rejection of a value as ErrInvalid, keeping
// its message: SQLSTATE 22023, or P0001 from the PgQue-compatible
// set_queue_config and set_tick_period_ms (PgQue raises plain exceptions);
// other errors are mapped.
func engineErr(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == pgerrcode.InvalidParameterValue || pe.Code == pgerrcode.RaiseException) {
		return fmt.Errorf("%w: %s", ErrInvalid, db.Describe(err))
	}
	return db.MapError(err)
}

// Off stops ticking through pg_cron: running ticker_loop()s end within a
// round and our jobs are removed; it returns how many jobs there were.
func Off(ctx context.Context, conn *pgx.Conn) (int, error) {
	return cron.Unregister(ctx, conn)
}

// Status is the read-only view of `pgquectl tick --status`.
type Status struct {
	State
	Cron     cron.Info `json:"cron"`
	CronNote string    `json:"cron_note,omitempty"`
	// LoopPID is the backend holding the pg_cron loop's lock (0: no loop).
	LoopPID int64 `json:"loop_pid"`
	// LeaderPID is the leading ticker daemon's backend (0: none).
	LeaderPID int64 `json:"daemon_leader_pid"`
}

// ReadStatus reads the current ticking: periods, rotation, pg_cron jobs,
// whether a pg_cron loop and a daemon leader are alive. It changes nothing.
func ReadStatus(ctx context.Context, conn *pgx.Conn) (Status, error) {
	ctx, cancel := context.WithTimeout(ctx, cron.Timeout)
	defer cancel()
	var s Status
	var err error
	if s.State, err = readState(ctx, conn, ""); err != nil {
		return s, err
	}
	for _, l := range []struct {
		key int32
		pid *int64
	}{{locks.TickerLoop, &s.LoopPID}, {locks.TickerLeader, &s.LeaderPID}} {
		if err := conn.QueryRow(ctx, qLockHolder, locks.ClassID, l.key).Scan(l.pid); err != nil {
			return s, fmt.Errorf("reading pg_locks: %w", db.MapError(err))
		}
	}
	if s.Cron, err = cron.Detect(ctx, conn); err != nil {
		return s, fmt.Errorf("detecting pg_cron: %w", err)
	}
	if cerr := s.Cron.Check(); cerr != nil && !errors.Is(cerr, cron.ErrNoExecute) {
		s.CronNote = cerr.Error()
		return s, nil
	}
	s.Jobs, err = cron.Jobs(ctx, conn, s.Cron)
	return s, err
}

// Render writes the status view.
func (s Status) Render(w io.Writer) error {
	fmt.Fprintf(w, "default tick period: %s\n", periodText(s.Default))
	rot := s.Rotation.String()
	if s.RotationDerived {
		rot += " (derived)"
	}
	fmt.Fprintf(w, "rotation period:     %s\n", rot)
	if err := renderQueues(w, s.Queues, s.RotationDerived); err != nil {
		return err
	}
	switch {
	case s.LoopPID != 0:
		fmt.Fprintf(w, "pg_cron loop:        alive (backend %d)\n", s.LoopPID)
	case !s.LoopEnabled:
		fmt.Fprintln(w, "pg_cron loop:        stopped (tick --off); none running")
	default:
		fmt.Fprintln(w, "pg_cron loop:        none running")
	}
	if s.LeaderPID != 0 {
		fmt.Fprintf(w, "ticker daemon:       leader alive (backend %d)\n", s.LeaderPID)
	} else {
		fmt.Fprintln(w, "ticker daemon:       none")
	}
	if s.CronNote != "" {
		fmt.Fprintln(w, "pg_cron:", s.CronNote)
		return nil
	}
	return renderJobs(w, s.Jobs, s.Cron)
}

func periodText(d time.Duration) string {
	if d == 0 {
		return "classic (PgQ thresholds: ticker_max_count / ticker_max_lag)"
	}
	return d.String()
}

// WALPerDay projects the WAL of one active queue ticking at period for a
// day (0 for classic thresholds, which tick by volume).
func WALPerDay(period time.Duration) int64 {
	if period <= 0 {
		return 0
	}
	return int64(BytesPerTick) * int64(24*time.Hour/period)
}

// Render writes the plan as tables, then what changed ("applied: X → Y";
// "would apply" on a dry run).
func (p Plan) Render(w io.Writer) error {
	if p.DryRun {
		fmt.Fprintln(w, "Dry run: nothing was changed. The plan:")
	}
	if len(p.Queues) == 0 {
		return nil // failed before a plan existed; the error says why
	}
	var before map[string]time.Duration
	if len(p.Before.Queues) > 0 {
		before = map[string]time.Duration{}
		for _, q := range p.Before.Queues {
			before[q.Queue] = q.Period
		}
	}
	if err := renderQueues(w, p.Queues, p.RotationDerived); err != nil {
		return err
	}
	if err := renderJobs(w, p.Jobs, p.Cron); err != nil {
		return err
	}
	if p.CronNote != "" {
		fmt.Fprintln(w, "pg_cron:", p.CronNote)
	}
	fmt.Fprintf(w, "WAL projection: %d bytes per tick × ticks per day; idle queues tick only at their idle period, "+
		"and queues no classic consumer reads (consumer groups only) at most once per ticker_max_lag or ticker_max_count events.\n", BytesPerTick)
	verb := "applied"
	if p.DryRun {
		verb = "would apply"
	}
	change := func(what, from, to string) {
		if from == to {
			fmt.Fprintf(w, "%s: %s %s (unchanged)\n", verb, what, to)
		} else {
			fmt.Fprintf(w, "%s: %s %s → %s\n", verb, what, from, to)
		}
	}
	change("default tick period", shortPeriod(p.Before.Default), shortPeriod(p.Default))
	for _, q := range p.Queues {
		if b, ok := before[q.Queue]; ok && b != q.Period {
			change("tick period of "+q.Queue, shortPeriod(b), shortPeriod(q.Period))
		}
	}
	change("rotation period", p.Before.Rotation.String(), p.Rotation.String())
	if p.Cron.Version != "" && p.CronNote == "" {
		change("pg_cron jobs", strconv.Itoa(len(p.Before.Jobs)), strconv.Itoa(len(p.Jobs)))
	}
	return nil
}

func shortPeriod(d time.Duration) string {
	if d == 0 {
		return "classic"
	}
	return d.String()
}

func renderQueues(w io.Writer, queues []QueuePlan, derived bool) error {
	t := tablewriter.NewTable(w, tablewriter.WithHeaderAutoFormat(tw.Off))
	t.Header("queue", "tick period", "rotation period", "projected WAL/day per active queue")
	for _, q := range queues {
		wal := humanBytes(q.WALPerDay)
		if q.Period == 0 {
			wal = "-"
		}
		rot := q.Rotation.String()
		if derived {
			rot += " (derived)"
		}
		if err := t.Append(q.Queue, shortPeriod(q.Period), rot, wal); err != nil {
			return err
		}
	}
	return t.Render()
}

func renderJobs(w io.Writer, jobs []cron.Job, info cron.Info) error {
	if len(jobs) == 0 {
		if info.Version != "" {
			fmt.Fprintf(w, "pg_cron %s in database %q: no jobs of ours\n", info.Version, info.Database)
		}
		return nil
	}
	j := tablewriter.NewTable(w, tablewriter.WithHeaderAutoFormat(tw.Off))
	j.Header("cron job", "schedule", "runs in", "command")
	for _, job := range jobs {
		if err := j.Append(job.Name, job.Schedule, job.Database, clip(job.Command, 60)); err != nil {
			return err
		}
	}
	if err := j.Render(); err != nil {
		return err
	}
	where := fmt.Sprintf("pg_cron %s in database %q", info.Version, info.Database)
	if !info.SameDatabase {
		where += fmt.Sprintf(", jobs run in %q via cron.schedule_in_database", info.EngineDB)
	}
	fmt.Fprintln(w, where)
	return nil
}

// clip shortens s to at most n runes, marking the cut.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// Apply connects with c and runs Configure: the entry point of `pgquectl tick`.
func Apply(ctx context.Context, c config.Connection, o Options) (Plan, error) {
	conn, err := db.Connect(ctx, c)
	if err != nil {
		return Plan{}, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return Configure(ctx, conn, o)
}

// TurnOff connects with c and runs Off: `pgquectl tick --off`.
func TurnOff(ctx context.Context, c config.Connection) (int, error) {
	conn, err := db.Connect(ctx, c)
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return Off(ctx, conn)
}

// CurrentStatus connects with c and runs ReadStatus: `pgquectl tick` alone.
func CurrentStatus(ctx context.Context, c config.Connection) (Status, error) {
	conn, err := db.Connect(ctx, c)
	if err != nil {
		return Status{}, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return ReadStatus(ctx, conn)
}
