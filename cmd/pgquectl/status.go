package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/pgquectl/pgquectl/internal/status"
)

func init() { commands = append(commands, newStatusCmd) }

// exitInterrupted is the exit code after Ctrl-C (128 + SIGINT, as shells report it).
const exitInterrupted = 130

// statusTimeout bounds one status run without --watch beyond its sample.
const statusTimeout = 2 * time.Minute

func newStatusCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "status [--sample 5s] [--check] [-o table|wide|json] [--watch 2s] [threshold flags]",
		Short: "Is it healthy right now? Dead tuples, WAL rate, xmin holders, tick lag, cron health",
		Long: `status reads one database and judges every check OK, WARN or CRIT:
queues (tick lag against the tick period, rotation), consumers (lag),
bloat (dead tuples of the event, tick, subscription and cursor tables against
their bounds), WAL (bytes/s over --sample, the share ticking accounts for),
the xmin horizon (sessions, prepared transactions, replication slots),
pg_cron (our jobs, failures, staleness) or the ticker daemon's leader, and
PostgreSQL's NOTIFY queue. docs/status.md lists every check and threshold.

A non-superuser needs pg_monitor (and pgque_reader, and USAGE on schema cron
in the pg_cron database); a section the role cannot read says which grant
fixes it and counts as UNKNOWN.

--check prints one line and exits 0 OK, 1 WARN, 2 CRIT, 3 UNKNOWN (the
monitoring-plugin convention; 3 also when the database cannot be reached).`,
		Example: `  pgquectl status
  pgquectl status --check --sample 2s          # for Nagios / Icinga / cron
  pgquectl status -o wide                      # every column
  pgquectl status -o json | jq '.checks[] | select(.level != "OK")'
  pgquectl status --watch 2s                   # refresh until Ctrl-C
  pgquectl status --xmin-warn 30s --xmin-crit 2m`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o, err := statusOptions(a)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if o.Watch == 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, statusTimeout+o.Sample)
				defer cancel()
			}
			level, err := status.Run(ctx, o, cmd.OutOrStdout())
			if errors.Is(err, status.ErrInterrupted) {
				return exitCodeError{code: exitInterrupted, err: errors.New("status: interrupted (Ctrl-C): no report")}
			}
			if o.Check {
				// The summary already says what is wrong: exit with the level alone.
				return exitCodeError{code: level.ExitCode()}
			}
			if err != nil {
				return fmt.Errorf("status: %w", err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.Duration("sample", 5*time.Second, "how long to sample the WAL rate (0: skip)")
	f.Bool("check", false, "print a one-line summary and exit 0 OK / 1 WARN / 2 CRIT / 3 UNKNOWN")
	f.StringP("output", "o", status.FormatTable, "output format: table (fits 120 columns), wide (every column) or json")
	f.Duration("watch", 0, "refresh every interval until Ctrl-C (e.g. 2s)")
	f.Duration("query-timeout", 10*time.Second, "bound for each query")
	addThresholdFlags(f, status.DefaultThresholds())
	return cmd
}

// thresholdFlags maps each threshold flag to its field, so the flag list,
// its defaults and the reading of values stay in one table.
func thresholdFlags(t *status.Thresholds) []struct {
	name, help string
	ptr        any
} {
	type fl = struct {
		name, help string
		ptr        any
	}
	return []fl{
		{"xmin-warn", "xmin horizon held this long → WARN", &t.XminWarn},
		{"xmin-crit", "xmin horizon held this long → CRIT", &t.XminCrit},
		{"tick-lag-warn-factor", "events waiting and no tick for factor × tick period (classic: ticker_max_lag) → WARN", &t.TickLagWarnFactor},
		{"tick-lag-warn-min", "tick lag WARN limit is never below this", &t.TickLagWarnMin},
		{"tick-lag-crit-factor", "events waiting and no tick for factor × tick period (classic: ticker_max_lag) → CRIT", &t.TickLagCritFactor},
		{"tick-lag-crit-min", "tick lag CRIT limit is never below this", &t.TickLagCritMin},
		{"idle-tick-factor", "idle queue without a tick for factor × idle period → WARN (0: off)", &t.IdleTickFactor},
		{"rotation-overdue-factor", "event tables not rotated for factor × rotation period → WARN (0: off)", &t.RotationOverdueFactor},
		{"consumer-lag-warn", "consumer with pending events lagging this much → WARN (0: off)", &t.ConsumerLagWarn},
		{"consumer-lag-crit", "consumer with pending events lagging this much → CRIT (0: off)", &t.ConsumerLagCrit},
		{"tick-dead-max", "dead tuples in the tick tables above this → WARN", &t.TickDeadMax},
		{"subscription-dead-max", "dead tuples in the subscription tables above this → WARN", &t.SubscriptionDeadMax},
		{"cursor-dead-max", "dead tuples in the broker cursor tables above this → WARN", &t.CursorDeadMax},
		{"event-dead-max", "dead tuples in the event tables above this → WARN", &t.EventDeadMax},
		{"dead-crit-factor", "dead tuples at factor × bound → CRIT (0: off)", &t.DeadCritFactor},
		{"cron-window", "a failed run of our pg_cron jobs within this window → CRIT", &t.CronWindow},
		{"cron-stale-warn-factor", "newest run older than factor × schedule interval + grace → WARN", &t.CronStaleWarnFactor},
		{"cron-stale-crit-factor", "newest run older than factor × schedule interval + grace → CRIT", &t.CronStaleCritFactor},
		{"cron-stale-grace", "grace added to the cron staleness limits", &t.CronStaleGrace},
		{"cron-run-details-warn", "cron.job_run_details rows above this → WARN (0: off)", &t.CronRunDetailsWarn},
		{"cron-running-warn", "running jobs at this share of cron.max_running_jobs → WARN", &t.CronRunningWarn},
		{"notify-warn", "NOTIFY queue usage (0..1) → WARN", &t.NotifyWarn},
		{"notify-crit", "NOTIFY queue usage (0..1) → CRIT", &t.NotifyCrit},
		{"connections-warn", "share of max_connections in use → WARN", &t.ConnectionsWarn},
		{"connections-crit", "share of max_connections in use → CRIT", &t.ConnectionsCrit},
		{"wal-warn", "WAL bytes/s → WARN (0: off)", &t.WALWarn},
		{"wal-crit", "WAL bytes/s → CRIT (0: off)", &t.WALCrit},
	}
}

func addThresholdFlags(f *pflag.FlagSet, def status.Thresholds) {
	for _, fl := range thresholdFlags(&def) {
		switch p := fl.ptr.(type) {
		case *time.Duration:
			f.Duration(fl.name, *p, fl.help)
		case *float64:
			f.Float64(fl.name, *p, fl.help)
		case *int64:
			f.Int64(fl.name, *p, fl.help)
		}
	}
}

// statusOptions reads and validates the flags.
func statusOptions(a *app) (status.RunOptions, error) {
	var t status.Thresholds
	for _, fl := range thresholdFlags(&t) {
		switch p := fl.ptr.(type) {
		case *time.Duration:
			*p = a.v.GetDuration(fl.name)
		case *float64:
			*p = a.v.GetFloat64(fl.name)
		case *int64:
			*p = a.v.GetInt64(fl.name)
		}
	}
	c := a.conn()
	c.ApplicationName = "pgquectl status"
	o := status.RunOptions{
		Options: status.Options{Conn: c, Sample: a.durationFlag("sample"), Thresholds: t,
			QueryTimeout: a.durationFlag("query-timeout"), Log: a.log},
		Format: a.v.GetString("output"),
		Check:  a.v.GetBool("check"),
		Watch:  a.durationFlag("watch"),
	}
	if err := o.Validate(); err != nil {
		return o, usagef("%w", err)
	}
	return o, nil
}
