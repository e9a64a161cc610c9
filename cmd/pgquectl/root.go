package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"

	"github.com/pgquectl/pgquectl/internal/config"
)

// defaultConfigFile is read when present and --config is not given.
const defaultConfigFile = "pgquectl.yaml"

// exitUsage is the exit code for usage errors (bad flags, bad arguments).
const exitUsage = 2

// usageError marks an error as the user's invocation being wrong.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// exitCodeError lets a command choose its exit code (status --check).
type exitCodeError struct {
	code int
	err  error
}

func (e exitCodeError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

// app carries what every command needs: viper, writers and the logger.
type app struct {
	v      *viper.Viper
	stdout io.Writer
	stderr io.Writer
	log    *slog.Logger
}

// Main runs pgquectl with args and returns the process exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	a := &app{v: viper.New(), stdout: stdout, stderr: stderr}
	root := a.rootCmd()
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.Execute()
	if err == nil {
		return 0
	}
	var ec exitCodeError
	if errors.As(err, &ec) {
		if ec.err != nil {
			fmt.Fprintln(stderr, "pgquectl:", ec.err)
		}
		return ec.code
	}
	fmt.Fprintln(stderr, "pgquectl:", err)
	var ue usageError
	if errors.As(err, &ue) || isCobraUsage(err) {
		return exitUsage
	}
	return 1
}

// isCobraUsage recognises cobra's own flag and argument errors.
func isCobraUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown flag", "unknown shorthand", "unknown command", "invalid argument", "flag needs an argument", "accepts ", "requires at least", "requires at most", "required flag"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}

func (a *app) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "pgquectl",
		Short: "A PostgreSQL-native message queue: install, tick, serve, watch",
		Long: `pgquectl turns any PostgreSQL 14+ into a message queue in the PgQ tradition:
insert-only rotated event tables, snapshot-based batches, sub-second ticking
through pg_cron, no C extension and no superuser.

Connection: --dsn, else PGQUE_DSN, else DATABASE_URL, else the standard PG*
variables (PGHOST, PGPORT, PGUSER, PGDATABASE, PGPASSWORD, ...).
Configuration file: ./pgquectl.yaml, or --config FILE. Precedence:
flags > environment (PGQUE_ prefix) > file > defaults.

Start here:
  pgquectl dev                     throwaway local PostgreSQL with everything running
  pgquectl install --dsn URL       put the engine into your database
  pgquectl tick --hz 100           tick ten times faster than a second
  pgquectl status                  is it healthy right now?`,
		Version:       versionLine(),
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return a.loadConfig(cmd)
		},
	}
	pf := root.PersistentFlags()
	addFlag(pf, keyDSN)
	addFlag(pf, keyConfig)
	addFlag(pf, keyConnectTimeout)
	addFlag(pf, keyLogLevel)
	for _, name := range []string{keyDSN.Name, keyConnectTimeout.Name, keyLogLevel.Name} {
		_ = a.v.BindPFlag(name, pf.Lookup(name))
	}
	_ = a.v.BindEnv(keyDSN.Name, keyDSN.Env(), "DATABASE_URL")
	a.v.SetEnvPrefix(strings.TrimSuffix(config.EnvPrefix, "_"))
	a.v.SetEnvKeyReplacer(strings.NewReplacer("-", "_"))
	a.v.AutomaticEnv()

	for _, add := range commands {
		root.AddCommand(add(a))
	}
	return root
}

// The settings every command has (persistent flags).
var (
	keyDSN = config.Key[string]{Name: "dsn",
		Help: "PostgreSQL connection string or URL (env PGQUE_DSN or DATABASE_URL; default: PG* variables)"}
	keyConfig = config.Key[string]{Name: "config",
		Help: "config file (default ./pgquectl.yaml when present)"}
	keyConnectTimeout = config.Key[time.Duration]{Name: "connect-timeout", Default: config.DefaultConnectTimeout,
		Help: "how long to wait for a connection"}
	keyLogLevel = config.Key[string]{Name: "log-level", Default: "info",
		Help: "log level: debug, info, warn (or warning), error"}
)

// commands lists the constructors of the sub-commands; each command's file
// appends to it from init so root.go does not change when one is added.
var commands []func(*app) *cobra.Command

func (a *app) loadConfig(cmd *cobra.Command) error {
	file, _ := cmd.Flags().GetString(keyConfig.Name)
	if file == "" {
		// Only ./pgquectl.yaml: viper's name lookup would also match the
		// extension-less binary a `go build` leaves in the working directory.
		if _, err := os.Stat(defaultConfigFile); err == nil {
			file = defaultConfigFile
		}
	}
	if file != "" {
		a.v.SetConfigFile(file)
		if err := a.v.ReadInConfig(); err != nil {
			return usagef("reading config file %s: %w (fix the file or pass --config with another path)", file, err)
		}
	}
	// Bind this command's own flags so file and env values reach them too.
	if err := a.v.BindPFlags(cmd.Flags()); err != nil {
		return fmt.Errorf("binding flags: %w", err)
	}
	if err := a.checkValues(cmd); err != nil {
		return err
	}
	level, err := parseLogLevel(get(a, keyLogLevel))
	if err != nil {
		return err
	}
	a.log = slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: level}))
	return nil
}

// parseLogLevel accepts debug, info, warn (or warning) and error, in any case.
func parseLogLevel(s string) (slog.Level, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "debug":
		return slog.LevelDebug, nil
	case "info", "":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, usagef("--log-level %q: use debug, info, warn or error", s)
}

// checkValues validates every flag value that comes from the environment
// (PGQUE_*) or the config file rather than the command line (pflag checked
// those): viper would read a malformed number or duration as 0 and a
// malformed boolean as false, silently. Durations must not be negative.
func (a *app) checkValues(cmd *cobra.Command) error {
	var errs []error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Changed {
			if f.Value.Type() == "duration" && strings.HasPrefix(strings.TrimSpace(f.Value.String()), "-") {
				errs = append(errs, fmt.Errorf("--%s %s: must not be negative", f.Name, f.Value.String()))
			}
			return
		}
		if !a.v.IsSet(f.Name) {
			return
		}
		raw := fmt.Sprint(a.v.Get(f.Name))
		if raw == f.DefValue {
			return
		}
		source := fmt.Sprintf("%s (env %s or the config file)", f.Name, config.EnvName(f.Name))
		var err error
		switch f.Value.Type() {
		case "duration":
			var d time.Duration
			if d, err = time.ParseDuration(raw); err == nil && d < 0 {
				err = errors.New("must not be negative")
			}
		case "bool":
			_, err = strconv.ParseBool(raw)
		case "int", "int64":
			_, err = strconv.ParseInt(raw, 10, 64)
		case "float64":
			_, err = strconv.ParseFloat(raw, 64)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s = %q: not a valid %s: %w", source, raw, f.Value.Type(), err))
		}
	})
	if len(errs) > 0 {
		return usageError{errors.Join(errs...)}
	}
	return nil
}

// conn returns the connection settings from flags, env and file.
func (a *app) conn() config.Connection {
	timeout := get(a, keyConnectTimeout)
	if timeout <= 0 {
		timeout = config.DefaultConnectTimeout
	}
	return config.Connection{DSN: get(a, keyDSN), ConnectTimeout: timeout, ApplicationName: "pgquectl"}
}
