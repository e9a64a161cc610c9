package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/pgquectl/pgquectl/internal/config"
	"github.com/pgquectl/pgquectl/internal/devbroker"
	"github.com/pgquectl/pgquectl/internal/devenv"
)

func init() { commands = append(commands, newDevCmd) }

// defaultDevStateDir is relative to the working directory.
const defaultDevStateDir = ".pgquectl/dev"

// devTimeout bounds dev stop / status / destroy (bring-up bounds each step).
const devTimeout = 2 * time.Minute

// exitNotRunning is the exit code of `dev status` when the cluster is not
// running (as pg_ctl status).
const exitNotRunning = 3

// dev's settings (flags; --state-dir also for its sub-commands).
var (
	keyDevStateDir = config.Key[string]{Name: "state-dir", Default: defaultDevStateDir,
		Help: "directory holding the cluster, its socket and log"}
	keyDevPort = config.Key[int]{Name: "port",
		Help: "TCP port on localhost (default: the previous one, else a free one)"}
	keyDevFast = config.Key[bool]{Name: "fast",
		Help: "fsync=off: faster, for throwaway test clusters (set when the cluster is created)"}
	keyDevNoTick = config.Key[bool]{Name: "no-tick",
		Help: "do not register the pg_cron ticker (100 Hz) in the new database"}
	keyDevNoBroker = config.Key[bool]{Name: "no-broker",
		Help: "do not start the HTTP broker"}
	keyDevBrokerListen = config.Key[string]{Name: "broker-listen", Default: devbroker.DefaultListen,
		Help: "host:port of the dev broker"}
	keyDevDB = config.Key[string]{Name: "db", Default: devenv.DefaultDatabase,
		Help: "database name"}
)

func devOptions(a *app, cmd *cobra.Command) (devenv.Options, error) {
	opts := devenv.Options{
		StateDir: get(a, keyDevStateDir),
		Port:     get(a, keyDevPort),
		Fast:     get(a, keyDevFast),
		NoTick:   get(a, keyDevNoTick),
		Database: devenv.DefaultDatabase,
		Out:      cmd.OutOrStdout(),
		Log:      a.log,
	}
	if opts.StateDir == "" {
		return opts, usagef("--state-dir must not be empty")
	}
	if opts.Port < 0 || opts.Port > 65535 {
		return opts, usagef("--port %d: want 1..65535, or 0 for a free port", opts.Port)
	}
	return opts, nil
}

// stateFlag repeats --state-dir in printed commands when it is not the default.
func stateFlag(opts devenv.Options) string {
	if opts.StateDir == defaultDevStateDir {
		return ""
	}
	return " --state-dir " + opts.StateDir
}

func newDevCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dev [--state-dir DIR] [--port N]",
		Short: "Bring up a throwaway local PostgreSQL with pg_cron and the engine installed",
		Long: `dev finds the PostgreSQL server binaries (pg_config, then
/usr/lib/postgresql/*/bin), creates a cluster in the state directory if there
is none, preloads pg_cron when it is installed, starts the cluster on a free
port (or --port), creates the database "pgque", installs the engine, starts the HTTP broker
(pgquectl serve, in the background on --broker-listen; pid and log in the
state directory) and prints the DSN and the broker's URL. Running it again is
a no-op that prints the same DSN and URL.

As root, PostgreSQL runs as the postgres user, which owns the state directory.
Missing binaries: bash scripts/setup.sh installs them (Debian/Ubuntu).`,
		Example: `  pgquectl dev
  export PGQUE_DSN=$(pgquectl dev dsn)
  pgquectl dev status
  pgquectl dev stop
  pgquectl dev destroy`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts, err := devOptions(a, cmd)
			if err != nil {
				return err
			}
			env, err := devenv.Up(cmd.Context(), opts, nil)
			if err != nil {
				return err
			}
			env.Summary(cmd.OutOrStdout(), stateFlag(opts))
			return startDevBroker(cmd, a, opts, env.DSN)
		},
	}
	pf := cmd.PersistentFlags()
	addFlag(pf, keyDevStateDir)
	f := cmd.Flags()
	addFlag(f, keyDevPort)
	addFlag(f, keyDevFast)
	addFlag(f, keyDevNoTick)
	addFlag(f, keyDevNoBroker)
	addFlag(f, keyDevBrokerListen)
	cmd.AddCommand(newDevStopCmd(a), newDevStatusCmd(a), newDevDestroyCmd(a), newDevDSNCmd(a))
	return cmd
}

func newDevStopCmd(a *app) *cobra.Command {
	return newDevShutdownCmd(a, "stop", "Stop the dev cluster (keeps its data)", devenv.Stop,
		func(opts devenv.Options) string {
			return fmt.Sprintf("dev cluster in %s stopped (pgquectl dev%s starts it again)", opts.StateDir, stateFlag(opts))
		})
}

func newDevDestroyCmd(a *app) *cobra.Command {
	return newDevShutdownCmd(a, "destroy", "Stop the dev cluster and delete its state directory (all data)", devenv.Destroy,
		func(opts devenv.Options) string { return fmt.Sprintf("dev cluster in %s destroyed", opts.StateDir) })
}

// newDevShutdownCmd builds `dev stop` and `dev destroy`: stop the dev broker,
// then run act on the cluster and print done's line.
func newDevShutdownCmd(a *app, use, short string, act func(context.Context, devenv.Options) error,
	done func(devenv.Options) string) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts, err := devOptions(a, cmd)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), devTimeout)
			defer cancel()
			if err := devbroker.Stop(ctx, opts.StateDir, devBrokerStop); err != nil {
				return fmt.Errorf("dev %s: %w", use, err)
			}
			if err := act(ctx, opts); err != nil {
				return fmt.Errorf("dev %s: %w", use, err)
			}
			fmt.Fprintln(cmd.OutOrStdout(), done(opts))
			return nil
		},
	}
}

func newDevStatusCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show the dev cluster: running or not, port, DSN, engine version (exit 3 when not running)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts, err := devOptions(a, cmd)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), devTimeout)
			defer cancel()
			st, err := devenv.GetStatus(ctx, opts)
			if errors.Is(err, devenv.ErrNoCluster) {
				return exitCodeError{exitNotRunning, err}
			}
			if err != nil {
				return fmt.Errorf("dev status: %w", err)
			}
			out := cmd.OutOrStdout()
			state := "stopped"
			switch {
			case !st.Initialized:
				state = "not created"
			case st.Running:
				state = fmt.Sprintf("running (pid %d)", st.PID)
			}
			fmt.Fprintf(out, "state dir   %s\n", st.StateDir)
			fmt.Fprintf(out, "cluster     %s\n", state)
			fmt.Fprintf(out, "postgresql  %s (%s)\n", st.Version, st.BinDir)
			fmt.Fprintf(out, "port        %d\n", st.Port)
			fmt.Fprintf(out, "dsn         %s\n", st.EngineDSN)
			fmt.Fprintf(out, "log         %s\n", st.LogFile)
			if b := devbroker.Status(opts.StateDir); b.Running {
				fmt.Fprintf(out, "broker      %s (pid %d, log %s)\n", b.URL, b.PID, b.Log)
			} else {
				fmt.Fprintln(out, "broker      not running")
			}
			if st.CronPreloaded {
				fmt.Fprintln(out, "pg_cron     preloaded (jobs in database postgres)")
			} else {
				fmt.Fprintln(out, "pg_cron     not installed")
			}
			switch {
			case st.Engine != "":
				fmt.Fprintf(out, "engine      %s in database %q\n", st.Engine, st.Database)
			case st.EngineErr != nil:
				fmt.Fprintf(out, "engine      unknown: %v\n", st.EngineErr)
			}
			if !st.Running {
				return exitCodeError{code: exitNotRunning}
			}
			return nil
		},
	}
}

func newDevDSNCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dsn [--db NAME]",
		Short: "Print the DSN of the dev database (for export PGQUE_DSN=$(pgquectl dev dsn))",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts, err := devOptions(a, cmd)
			if err != nil {
				return err
			}
			dsn, err := devenv.DSN(opts, get(a, keyDevDB))
			if err != nil {
				return fmt.Errorf("dev dsn: %w", err)
			}
			fmt.Fprintln(cmd.OutOrStdout(), dsn)
			return nil
		},
	}
	addFlag(cmd.Flags(), keyDevDB)
	return cmd
}

// devBrokerStop bounds the dev broker's drain on dev stop / destroy.
const devBrokerStop = 15 * time.Second

// startDevBroker starts (or finds) the dev broker and prints its URL.
func startDevBroker(cmd *cobra.Command, a *app, opts devenv.Options, dsn string) error {
	if get(a, keyDevNoBroker) {
		return nil
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), devTimeout)
	defer cancel()
	b, err := devbroker.Start(ctx, devbroker.Options{StateDir: opts.StateDir, DSN: dsn, Listen: get(a, keyDevBrokerListen)})
	if errors.Is(err, devbroker.ErrTestBinary) {
		return nil
	}
	if err != nil {
		// The database is what dev is for; a broker that cannot start
		// (its port taken, say) is reported, not fatal.
		fmt.Fprintf(cmd.ErrOrStderr(), "pgquectl: the database is up, the broker is not: %v (retry with --broker-listen HOST:PORT, or pass --no-broker)\n", err)
		return nil
	}
	fmt.Fprintf(cmd.OutOrStdout(), "Broker (Queen v1 HTTP API): %s  (pid %d, log %s)\n", b.URL, b.PID, b.Log)
	return nil
}
