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

	"github.com/pgquectl/pgquectl/internal/config"
	"github.com/pgquectl/pgquectl/internal/status"
)

func init() { commands = append(commands, newStatusCmd) }

// exitInterrupted is the exit code after Ctrl-C (128 + SIGINT, as shells report it).
const exitInterrupted = 130

// statusTimeout bounds one status run without --watch beyond its sample.
const statusTimeout = 2 * time.Minute

// status's settings (flags; the threshold flags come from
// status.ThresholdFlags).
var (
	keyStatusSample = config.Key[time.Duration]{Name: "sample", Default: 5 * time.Second,
		Help: "how long to sample the WAL rate (0: skip)"}
	keyStatusCheck = config.Key[bool]{Name: "check",
		Help: "print a one-line summary and exit 0 OK / 1 WARN / 2 CRIT / 3 UNKNOWN"}
	keyStatusOutput = config.Key[string]{Name: "output", Short: "o", Default: status.FormatTable,
		Help: "output format: table (fits 120 columns), wide (every column) or json"}
	keyStatusWatch = config.Key[time.Duration]{Name: "watch",
		Help: "refresh every interval until Ctrl-C (e.g. 2s)"}
	keyStatusQueryTimeout = config.Key[time.Duration]{Name: "query-timeout", Default: 10 * time.Second,
		Help: "bound for each query"}
)

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
PostgreSQL's NOTIFY queue. docs/reference/status.md lists every check and
threshold.

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
	addFlag(f, keyStatusSample)
	addFlag(f, keyStatusCheck)
	addFlag(f, keyStatusOutput)
	addFlag(f, keyStatusWatch)
	addFlag(f, keyStatusQueryTimeout)
	addThresholdFlags(f, status.DefaultThresholds())
	return cmd
}

func addThresholdFlags(f *pflag.FlagSet, def status.Thresholds) {
	for _, fl := range status.ThresholdFlags(&def) {
		switch p := fl.Ptr.(type) {
		case *time.Duration:
			f.Duration(fl.Name, *p, fl.Help)
		case *float64:
			f.Float64(fl.Name, *p, fl.Help)
		case *int64:
			f.Int64(fl.Name, *p, fl.Help)
		}
	}
}

// statusOptions reads and validates the flags.
func statusOptions(a *app) (status.RunOptions, error) {
	var t status.Thresholds
	for _, fl := range status.ThresholdFlags(&t) {
		switch p := fl.Ptr.(type) {
		case *time.Duration:
			*p = a.v.GetDuration(fl.Name)
		case *float64:
			*p = a.v.GetFloat64(fl.Name)
		case *int64:
			*p = a.v.GetInt64(fl.Name)
		}
	}
	c := a.conn()
	c.ApplicationName = "pgquectl status"
	o := status.RunOptions{
		Options: status.Options{Conn: c, Sample: get(a, keyStatusSample), Thresholds: t,
			QueryTimeout: get(a, keyStatusQueryTimeout), Log: a.log},
		Format: get(a, keyStatusOutput),
		Check:  get(a, keyStatusCheck),
		Watch:  get(a, keyStatusWatch),
	}
	if err := o.Validate(); err != nil {
		return o, usagef("%w", err)
	}
	return o, nil
}
