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

	"github.com/pgquectl/pgquectl/internal/config"
	"github.com/pgquectl/pgquectl/internal/ticker"
)

func init() { commands = append(commands, newTickCmd) }

// tickTimeout bounds `tick` without --run (detection, settings, pg_cron).
const tickTimeout = time.Minute

// tick's settings (flags).
var (
	keyTickHz = config.Key[int]{Name: "hz",
		Help: "ticks per second, 1..1000 (or --period)"}
	keyTickPeriod = config.Key[time.Duration]{Name: "period",
		Help: "tick period in whole milliseconds, " + ticker.MinPeriod.String() + ".." + ticker.MaxPeriod.String() + " (the engine's range; or --hz)"}
	keyTickQueue = config.Key[string]{Name: "queue",
		Help: "set the period of this queue only (default: the installation default)"}
	keyTickRotationPeriod = config.Key[time.Duration]{Name: "rotation-period",
		Help: "pin the metadata rotation period, 100ms..1h (default: derived by the engine, clamp(300 × period, 1s, 30s))"}
	keyTickDryRun = config.Key[bool]{Name: "dry-run",
		Help: "print the plan (what the engine would use), change nothing"}
	keyTickOff = config.Key[bool]{Name: "off",
		Help: "stop ticking through pg_cron: end the running loop, remove our pg_cron jobs"}
	keyTickRun = config.Key[bool]{Name: "run",
		Help: "run the ticker daemon in the foreground instead of pg_cron jobs"}
	keyTickStatus = config.Key[bool]{Name: "status",
		Help: "show the current ticking (the default without other flags), change nothing"}
)

func newTickCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tick [--status] | (--hz N | --period D) [--queue Q] [--rotation-period D] [--dry-run] | --off | --run",
		Short: "Show or configure sub-second ticking (pg_cron jobs), or run the ticker daemon",
		Long: `tick sets how often the engine ticks, i.e. how soon a committed event becomes
visible to consumers (the end-to-end latency is bounded by the tick period).

Alone (or with --status) it only shows the current ticking: the default and
per-queue tick periods the engine uses, the rotation period, our pg_cron jobs,
and whether the pg_cron loop and a ticker daemon leader are alive.

With --hz / --period it sets the tick period (for the installation, or one
queue with --queue) and registers the engine's pg_cron jobs: CALL
pgque.ticker_loop(), which ticks and commits at the period (on pg_cron >= 1.5
a second job's run stands by on the loop's lock and takes over the moment the
first one ends), plus maintenance, retry draining, rotation and a purge of
old cron.job_run_details rows. The engine validates the values (the period's
range: see --period) and derives the metadata rotation period clamp(300 × period, 1s,
30s) unless --rotation-period pins it; the plan shows what the engine will
use, then "applied: X → Y". All or nothing: when registering fails, no
setting changes. Running it again updates the jobs in place.

Idle queues tick only at their idle period, so a fast tick rate costs WAL only
for queues that receive events; the table shows the projection per active queue.

--off stops ticking through pg_cron: the running ticker_loop() ends within a
second and our jobs are removed.

Without pg_cron (or on a standby-free setup where you prefer a process), run
the ticker daemon instead: --run keeps one connection and ticks at the period
like PgQ's pgqd; start several for failover, one leads (advisory lock).`,
		Example: `  # what ticks this database now
  pgquectl tick

  # tick every 10 ms (100 Hz) through pg_cron, and see the plan first
  pgquectl tick --hz 100 --dry-run
  pgquectl tick --hz 100

  # one queue faster than the rest
  pgquectl tick --period 5ms --queue orders

  # pin the metadata rotation period instead of deriving it
  pgquectl tick --hz 100 --rotation-period 3s

  # no pg_cron here: run the daemon (SIGTERM / Ctrl-C stops it)
  pgquectl tick --run --hz 100

  # stop ticking through pg_cron (the running loop ends within a second)
  pgquectl tick --off`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			off, run, dry, status := get(a, keyTickOff), get(a, keyTickRun), get(a, keyTickDryRun), get(a, keyTickStatus)
			queue := get(a, keyTickQueue)
			setting := isSet(a, keyTickHz) || isSet(a, keyTickPeriod) || isSet(a, keyTickRotationPeriod) || queue != ""
			if status || (!off && !run && !dry && !setting) {
				if status && (off || run || dry || setting) {
					return usagef("--status only shows the current ticking: pass it alone")
				}
				ctx, cancel := context.WithTimeout(cmd.Context(), tickTimeout)
				defer cancel()
				st, err := ticker.CurrentStatus(ctx, a.conn())
				if err != nil {
					return fmt.Errorf("reading the current ticking: %w", err)
				}
				return st.Render(cmd.OutOrStdout())
			}
			if off {
				if setting || run {
					return usagef("--off stops ticking for the whole database: pass it alone (to pause one queue: SELECT pgque.set_queue_config('Q', 'ticker_paused', 'true'))")
				}
				if dry {
					fmt.Fprintln(cmd.OutOrStdout(), "Dry run: would stop the running ticker_loop() and remove our pg_cron jobs (pgque.cron_job_names()).")
					return nil
				}
				ctx, cancel := context.WithTimeout(cmd.Context(), tickTimeout)
				defer cancel()
				n, err := ticker.TurnOff(ctx, a.conn())
				if err != nil {
					return fmt.Errorf("stopping ticking: %w", err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "applied: pg_cron jobs %d → 0; the running ticker_loop() ends within a second. Nothing ticks this database through pg_cron now.\n", n)
				return nil
			}
			period, err := tickPeriod(a)
			if err != nil {
				return err
			}
			rot := get(a, keyTickRotationPeriod)
			if isSet(a, keyTickRotationPeriod) && (rot <= 0 || rot%time.Millisecond != 0) {
				return usagef("--rotation-period %s: use a positive whole number of milliseconds (default: derived by the engine)", rot)
			}
			o := ticker.Options{Period: period, Queue: queue, Rotation: rot, DryRun: dry}
			if run {
				if dry {
					return usagef("--dry-run and --run do not go together")
				}
				ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
				defer stop()
				return ticker.Serve(ctx, a.conn(), o, a.log)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), tickTimeout)
			defer cancel()
			plan, err := ticker.Apply(ctx, a.conn(), o)
			if err != nil {
				if errors.Is(err, ticker.ErrInvalid) {
					return usageError{fmt.Errorf("%w (nothing was changed)", err)}
				}
				return fmt.Errorf("%w (nothing was changed)", err)
			}
			return plan.Render(cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	addFlag(f, keyTickHz)
	addFlag(f, keyTickPeriod)
	addFlag(f, keyTickQueue)
	addFlag(f, keyTickRotationPeriod)
	addFlag(f, keyTickDryRun)
	addFlag(f, keyTickOff)
	addFlag(f, keyTickRun)
	addFlag(f, keyTickStatus)
	return cmd
}

// tickPeriod reads --hz / --period (exactly one).
func tickPeriod(a *app) (time.Duration, error) {
	hz, period := get(a, keyTickHz), get(a, keyTickPeriod)
	switch {
	case isSet(a, keyTickHz) && isSet(a, keyTickPeriod):
		return 0, usagef("pass --hz or --period, not both")
	case isSet(a, keyTickHz):
		if hz < 1 || hz > 1000 {
			return 0, usagef("--hz %d out of range: use 1..1000 (e.g. --hz 100 ticks every 10ms)", hz)
		}
		// Periods are whole milliseconds: --hz 3 ticks every 333ms.
		return (time.Second / time.Duration(hz)).Round(time.Millisecond), nil
	case isSet(a, keyTickPeriod):
		if err := ticker.ValidatePeriod(period); err != nil {
			return 0, usagef("--period: %w", err)
		}
		return period, nil
	}
	return 0, usagef("pass --hz N (1..1000) or --period D (e.g. --hz 100 or --period 10ms); --off to stop ticking; no flags to see the current ticking")
}
