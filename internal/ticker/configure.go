package ticker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/tw"

	"github.com/pgquectl/pgquectl/internal/config"
	"github.com/pgquectl/pgquectl/internal/cron"
	"github.com/pgquectl/pgquectl/internal/db"
)

// Named queries of `pgquectl tick` (configuration, not the daemon loop).
const (
	qSetDefaultPeriod = `SELECT pgque.set_tick_period_ms($1::int)`
	qSetQueuePeriod   = `SELECT pgque.set_queue_config($1, 'tick_period_ms', $2::text)`
	qSetMetaRotation  = `SELECT pgque.set_setting('meta_rotation_period_ms', $1::text)`
	qQueueNames       = `SELECT queue_name FROM pgque.get_queue_info() ORDER BY queue_name`
	qQueueExists      = `SELECT EXISTS (SELECT 1 FROM pgque.queue WHERE queue_name = $1)`
)

// Period limits of `pgquectl tick` (1000 Hz .. 1 Hz).
const (
	MinPeriod = time.Millisecond
	MaxPeriod = time.Second
)

// Rotation period derivation: clamp(RotationFactor × tick period,
// MinRotation, MaxRotation) (DESIGN.md, metadata rotation).
const (
	RotationFactor = 300
	MinRotation    = time.Second
	MaxRotation    = 30 * time.Second
)

// BytesPerTick is the WAL one materialized tick of one active queue writes
// (the tick row with its snapshot, its index entry, the tick sequence, the
// commit record). Measured on PostgreSQL 15 by bench/sub-second's probe
// (WAL of 400 × (send; tick) minus 400 × send, over 400, alone on the
// cluster): 236 bytes (bench/sub-second/results/2026-11-29). It projects WAL
// per day in `pgquectl tick`'s plan; consumers add their own cursor updates.
const BytesPerTick = 236

// DerivedRotation is the metadata rotation period derived from a tick period.
func DerivedRotation(period time.Duration) time.Duration {
	return min(max(RotationFactor*period, MinRotation), MaxRotation)
}

// ValidatePeriod checks a tick period: whole milliseconds, 1 ms .. 1 s.
func ValidatePeriod(p time.Duration) error {
	if p < MinPeriod || p > MaxPeriod {
		return fmt.Errorf("tick period %s out of range: use 1ms .. 1s (--hz 1..1000)", p)
	}
	if p%time.Millisecond != 0 {
		return fmt.Errorf("tick period %s is not a whole number of milliseconds", p)
	}
	return nil
}

// Options of Configure.
type Options struct {
	// Period is the tick period (required).
	Period time.Duration
	// Queue limits the setting to one queue; "" sets the installation default.
	Queue string
	// Rotation overrides the derived metadata rotation period (0 = derive).
	Rotation time.Duration
	// DryRun computes and returns the plan without changing anything.
	DryRun bool
	// NoCron sets the period but does not register pg_cron jobs (for the
	// ticker daemon, `tick --run`).
	NoCron bool
}

// QueuePlan is one row of the plan.
type QueuePlan struct {
	Queue    string        `json:"queue"`
	Period   time.Duration `json:"period"`
	Rotation time.Duration `json:"rotation_period"`
	// WALPerDay projects the WAL of ticking one active queue for a day.
	WALPerDay int64 `json:"wal_per_day_bytes"`
}

// Plan is what Configure did (or would do, on a dry run).
type Plan struct {
	DryRun          bool          `json:"dry_run"`
	Period          time.Duration `json:"period"`
	Rotation        time.Duration `json:"rotation_period"`
	RotationDerived bool          `json:"rotation_derived"`
	Queues          []QueuePlan   `json:"queues"`
	Cron            cron.Info     `json:"cron"`
	Jobs            []cron.Job    `json:"jobs"`
	// CronNote explains why no jobs are listed, when none are.
	CronNote string `json:"cron_note,omitempty"`
}

// Configure sets the tick period (for one queue or the installation), the
// metadata rotation period, and registers the pg_cron jobs. It refuses
// before changing anything when pg_cron is missing (unless NoCron).
func Configure(ctx context.Context, conn *pgx.Conn, o Options) (Plan, error) {
	if err := ValidatePeriod(o.Period); err != nil {
		return Plan{}, err
	}
	if o.Rotation < 0 {
		return Plan{}, errors.New("rotation period must be > 0")
	}
	p := Plan{DryRun: o.DryRun, Period: o.Period, Rotation: o.Rotation}
	if p.Rotation == 0 {
		p.Rotation, p.RotationDerived = DerivedRotation(o.Period), true
	}
	names, err := queueNames(ctx, conn, o.Queue)
	if err != nil {
		return p, err
	}
	for _, n := range names {
		p.Queues = append(p.Queues, QueuePlan{Queue: n, Period: o.Period, Rotation: p.Rotation,
			WALPerDay: WALPerDay(o.Period)})
	}
	var cronErr error
	if !o.NoCron {
		p.Cron, err = cron.Detect(ctx, conn)
		if err != nil {
			return p, fmt.Errorf("detecting pg_cron: %w", err)
		}
		if cronErr = p.Cron.Check(); cronErr != nil {
			p.CronNote = cronErr.Error()
		} else if p.Jobs, err = cron.Planned(ctx, conn, p.Cron); err != nil {
			return p, err
		}
	}
	if o.DryRun {
		return p, cronErr
	}
	if cronErr != nil {
		return p, cronErr
	}
	if err := applySettings(ctx, conn, o, p); err != nil {
		return p, err
	}
	if o.NoCron {
		return p, nil
	}
	if _, p.Jobs, err = cron.Register(ctx, conn); err != nil {
		return p, err
	}
	return p, nil
}

func queueNames(ctx context.Context, conn *pgx.Conn, queue string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, cron.Timeout)
	defer cancel()
	if queue != "" {
		var ok bool
		if err := conn.QueryRow(ctx, qQueueExists, queue).Scan(&ok); err != nil {
			return nil, fmt.Errorf("looking up queue %q: %w (is the engine installed? run `pgquectl install`)", queue, err)
		}
		if !ok {
			return nil, fmt.Errorf("queue %q does not exist: create it with SELECT pgque.create_queue('%s') or drop --queue", queue, strings.ReplaceAll(queue, "'", "''"))
		}
		return []string{queue}, nil
	}
	rows, err := conn.Query(ctx, qQueueNames)
	if err != nil {
		return nil, fmt.Errorf("listing queues: %w (is the engine installed? run `pgquectl install`)", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("listing queues: %w", err)
	}
	if len(names) == 0 {
		names = []string{"(default)"}
	}
	return names, nil
}

func applySettings(ctx context.Context, conn *pgx.Conn, o Options, p Plan) error {
	ctx, cancel := context.WithTimeout(ctx, cron.Timeout)
	defer cancel()
	ms := o.Period.Milliseconds()
	var rot any // NULL: the engine derives it
	if !p.RotationDerived {
		rot = strconv.FormatInt(p.Rotation.Milliseconds(), 10)
	}
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if o.Queue != "" {
			if _, err := tx.Exec(ctx, qSetQueuePeriod, o.Queue, strconv.FormatInt(ms, 10)); err != nil {
				return fmt.Errorf("setting the tick period of queue %q: %w", o.Queue, err)
			}
		} else if _, err := tx.Exec(ctx, qSetDefaultPeriod, ms); err != nil {
			return fmt.Errorf("setting the default tick period: %w", err)
		}
		if _, err := tx.Exec(ctx, qSetMetaRotation, rot); err != nil {
			return fmt.Errorf("setting the metadata rotation period: %w", err)
		}
		return nil
	})
}

// Off removes our pg_cron jobs; it returns how many there were.
func Off(ctx context.Context, conn *pgx.Conn) (int, error) {
	return cron.Unregister(ctx, conn)
}

// WALPerDay projects the WAL of one active queue ticking at period for a day.
func WALPerDay(period time.Duration) int64 {
	return int64(BytesPerTick) * int64(24*time.Hour/period)
}

// Render writes the plan as tables.
func (p Plan) Render(w io.Writer) error {
	if p.DryRun {
		fmt.Fprintln(w, "Dry run: nothing was changed. The plan:")
	}
	if len(p.Queues) == 0 {
		return nil // failed before a plan existed; the error says why
	}
	t := tablewriter.NewTable(w, tablewriter.WithHeaderAutoFormat(tw.Off))
	t.Header("queue", "period", "rotation period", "cron jobs", "projected WAL/day per active queue")
	rot := p.Rotation.String()
	if p.RotationDerived {
		rot += " (derived)"
	}
	for _, q := range p.Queues {
		if err := t.Append(q.Queue, q.Period.String(), rot, strconv.Itoa(len(p.Jobs)), humanBytes(q.WALPerDay)); err != nil {
			return err
		}
	}
	if err := t.Render(); err != nil {
		return err
	}
	if len(p.Jobs) > 0 {
		j := tablewriter.NewTable(w, tablewriter.WithHeaderAutoFormat(tw.Off))
		j.Header("cron job", "schedule", "runs in", "command")
		for _, job := range p.Jobs {
			if err := j.Append(job.Name, job.Schedule, job.Database, clip(job.Command, 60)); err != nil {
				return err
			}
		}
		if err := j.Render(); err != nil {
			return err
		}
		where := fmt.Sprintf("pg_cron %s in database %q", p.Cron.Version, p.Cron.Database)
		if !p.Cron.SameDatabase {
			where += fmt.Sprintf(", jobs run in %q via cron.schedule_in_database", p.Cron.EngineDB)
		}
		fmt.Fprintln(w, where)
	}
	if p.CronNote != "" {
		fmt.Fprintln(w, "pg_cron:", p.CronNote)
	}
	fmt.Fprintf(w, "WAL projection: %d bytes per tick × ticks per day; idle queues tick only at their idle period.\n", BytesPerTick)
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

// Serve is `pgquectl tick --run`: it sets the tick period (no pg_cron jobs),
// warns when pg_cron jobs of ours tick the same database, then runs the
// daemon until ctx ends (SIGTERM / SIGINT).
func Serve(ctx context.Context, c config.Connection, o Options, log *slog.Logger) error {
	o.NoCron, o.DryRun = true, false
	cc, err := db.ParseConfig(c)
	if err != nil {
		return err
	}
	conn, err := db.ConnectConfig(ctx, cc)
	if err != nil {
		return err
	}
	_, err = Configure(ctx, conn, o)
	if err == nil {
		if info, derr := cron.Detect(ctx, conn); derr == nil {
			if jobs, _ := cron.Jobs(ctx, conn, info); len(jobs) > 0 {
				log.Warn("pg_cron jobs of ours also tick this database; run `pgquectl tick --off` to leave ticking to this daemon", "jobs", len(jobs))
			}
		}
	}
	_ = conn.Close(context.WithoutCancel(ctx))
	if err != nil {
		return err
	}
	d, err := New(Config{ConnConfig: cc, Period: o.Period, Logger: log})
	if err != nil {
		return err
	}
	if err := d.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}
