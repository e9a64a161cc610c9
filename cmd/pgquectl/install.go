package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/pgquectl/pgquectl/internal/config"
	"github.com/pgquectl/pgquectl/internal/db"
	"github.com/pgquectl/pgquectl/internal/install"
)

func init() {
	commands = append(commands, newInstallCmd, newUninstallCmd)
}

// installTimeout bounds install and uninstall, the wait for the install lock
// included.
const installTimeout = 5 * time.Minute

// install's settings (flags).
var (
	keyInstallDryRun = config.Key[bool]{Name: "dry-run",
		Help: "print the SQL that would run and change nothing"}
	keyInstallReinstall = config.Key[bool]{Name: "reinstall",
		Help: "run the install script even when this version is installed"}
)

func newInstallCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "install [--dry-run] [--reinstall]",
		Short: "Install or upgrade the SQL engine (schema pgque) in the database",
		Long: `install applies the engine's SQL (embedded in this binary) in one transaction
under an advisory lock and records the version in pgque.engine_version.

Running it again is a no-op, unless the engine of this version was installed
by different SQL (another build): then the script runs again ("refreshed").
--reinstall runs the script anyway (it is re-runnable). A database whose engine is newer than this binary is refused.
--dry-run prints the SQL it would run and changes nothing; that output also
installs with: psql -v ON_ERROR_STOP=1 -1 -f FILE. It works offline: when no
database can be reached it prints the whole install script (re-runnable).

Needs: ownership of the database (or CREATE on it) and CREATEROLE, or the
roles pgque_reader, pgque_writer, pgque_admin created beforehand by an
administrator (see README, "Install on a managed database").`,
		Example: `  pgquectl install --dsn postgres://app@db.example.com/app
  pgquectl install --dry-run > pgque-install.sql`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), installTimeout)
			defer cancel()
			opts := install.Options{
				DryRun:    get(a, keyInstallDryRun),
				Reinstall: get(a, keyInstallReinstall),
				Out:       cmd.OutOrStdout(),
				Log:       a.log,
			}
			c := a.conn()
			if opts.DryRun && c.ConnectTimeout > dryRunConnectTimeout {
				c.ConnectTimeout = dryRunConnectTimeout
			}
			res, err := install.Run(ctx, c, opts)
			if err != nil && opts.DryRun && isConnectError(err) {
				// The dry run needs no database: print the whole script.
				return offlineDryRun(cmd, err)
			}
			if err != nil {
				return fmt.Errorf("install: %w", err)
			}
			if !opts.DryRun {
				fmt.Fprintln(cmd.OutOrStdout(), res)
			} else {
				fmt.Fprintln(cmd.ErrOrStderr(), res)
			}
			return nil
		},
	}
	addFlag(cmd.Flags(), keyInstallDryRun)
	addFlag(cmd.Flags(), keyInstallReinstall)
	return cmd
}

// dryRunConnectTimeout bounds the look at the database of install --dry-run.
const dryRunConnectTimeout = 5 * time.Second

// isConnectError says whether err means no database could be reached.
func isConnectError(err error) bool {
	return errors.Is(err, db.ErrUnreachable) || errors.Is(err, db.ErrAuth) || errors.Is(err, db.ErrNoDatabase)
}

// offlineDryRun prints the install script without a database.
func offlineDryRun(cmd *cobra.Command, why error) error {
	text, err := install.InstallScript()
	if err != nil {
		return fmt.Errorf("install --dry-run: %w", err)
	}
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "-- pgquectl install --dry-run: the install script of pgque engine %s (no database checked)\n", install.Version)
	fmt.Fprintf(out, "-- Run it as one transaction, e.g. psql -v ON_ERROR_STOP=1 -1 -f FILE; it is re-runnable\n")
	if _, err := io.WriteString(out, text); err != nil {
		return fmt.Errorf("writing the SQL: %w", err)
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "dry run: no database reached (%v): printed the whole install script of engine %s\n", why, install.Version)
	return nil
}
