package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/pgquectl/pgquectl/internal/ticker"
)

func init() { commands = append(commands, newTickCmd) }

// tickTimeout bounds `tick` without --run (detection, settings, pg_cron).
const tickTimeout = time.Minute

func newTickCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tick (--hz N | --period D) [--queue Q] [--rotation-period D] [--dry-run] [--off] [--run]",
		Short: "Configure sub-second ticking (pg_cron jobs), or run the ticker daemon",
		Long: `tick sets how often the engine ticks, i.e. how soon a committed event becomes
visible to consumers (the end-to-end latency is bounded by the tick period).

It sets the tick period (for the installation, or one queue with --queue),
derives the metadata rotation period clamp(300 × period, 1s, 30s) unless
--rotation-period is given, and registers the engine's pg_cron jobs: one
CALL pgque.ticker_loop() that ticks and commits at the period inside each cron
slot, plus maintenance, retry draining, rotation and a purge of old
cron.job_run_details rows. Running it again updates the jobs in place.

Idle queues tick only at their idle period, so a fast tick rate costs WAL only
for queues that receive events; the table shows the projection per active queue.

Without pg_cron (or on a standby-free setup where you prefer a process), run
the ticker daemon instead: --run keeps one connection and ticks at the period
like PgQ's pgqd; start several for failover, one leads (advisory lock).`,
		Example: `  # tick every 10 ms (100 Hz) through pg_cron, and see the plan first
  pgquectl tick --hz 100 --dry-run
  pgquectl tick --hz 100

  # one queue faster than the rest
  pgquectl tick --period 5ms --queue orders

  # pin the metadata rotation period instead of deriving it
  pgquectl tick --hz 100 --rotation-period 3s

  # no pg_cron here: run the daemon (SIGTERM / Ctrl-C stops it)
  pgquectl tick --run --hz 100

  # stop ticking through pg_cron (removes exactly our jobs)
  pgquectl tick --off`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			off, run, dry := a.v.GetBool("off"), a.v.GetBool("run"), a.v.GetBool("dry-run")
			queue := a.v.GetString("queue")
			if off {
				if a.v.IsSet("hz") || a.v.IsSet("period") || queue != "" || run {
					return usagef("--off stops ticking for the whole database: pass it alone (to pause one queue: SELECT pgque.set_queue_config('Q', 'ticker_paused', 'true'))")
				}
				if dry {
					fmt.Fprintln(cmd.OutOrStdout(), "Dry run: would remove the pg_cron jobs named pgque_*@<this database>.")
					return nil
				}
				ctx, cancel := context.WithTimeout(cmd.Context(), tickTimeout)
				defer cancel()
				n, err := ticker.TurnOff(ctx, a.conn())
				if err != nil {
					return fmt.Errorf("stopping ticking: %w", err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Removed %d pg_cron job(s); nothing ticks this database through pg_cron now.\n", n)
				return nil
			}
			period, err := tickPeriod(a)
			if err != nil {
				return err
			}
			rot := a.v.GetDuration("rotation-period")
			if a.v.IsSet("rotation-period") && (rot < 100*time.Millisecond || rot%time.Millisecond != 0) {
				return usagef("--rotation-period %s: use whole milliseconds, at least 100ms (default: derived)", rot)
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
			if rerr := plan.Render(cmd.OutOrStdout()); rerr != nil && err == nil {
				err = rerr
			}
			return err
		},
	}
	f := cmd.Flags()
	f.Int("hz", 0, "ticks per second, 1..1000 (or --period)")
	f.Duration("period", 0, "tick period, 1ms..1s in whole milliseconds (or --hz)")
	f.String("queue", "", "set the period of this queue only (default: the installation default)")
	f.Duration("rotation-period", 0, "metadata rotation period (default: clamp(300 × period, 1s, 30s))")
	f.Bool("dry-run", false, "print the plan, change nothing")
	f.Bool("off", false, "stop ticking through pg_cron: remove our pg_cron jobs")
	f.Bool("run", false, "run the ticker daemon in the foreground instead of pg_cron jobs")
	return cmd
}

// tickPeriod reads --hz / --period (exactly one).
func tickPeriod(a *app) (time.Duration, error) {
	hz, period := a.v.GetInt("hz"), a.v.GetDuration("period")
	switch {
	case a.v.IsSet("hz") && a.v.IsSet("period"):
		return 0, usagef("pass --hz or --period, not both")
	case a.v.IsSet("hz"):
		if hz < 1 || hz > 1000 {
			return 0, usagef("--hz %d out of range: use 1..1000 (e.g. --hz 100 ticks every 10ms)", hz)
		}
		// Periods are whole milliseconds: --hz 3 ticks every 333ms.
		return (time.Second / time.Duration(hz)).Round(time.Millisecond), nil
	case a.v.IsSet("period"):
		if err := ticker.ValidatePeriod(period); err != nil {
			return 0, usagef("--period: %w", err)
		}
		return period, nil
	}
	return 0, usagef("pass --hz N (1..1000) or --period D (e.g. --hz 100 or --period 10ms); --off to stop ticking")
}
