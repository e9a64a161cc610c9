package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/pgquectl/pgquectl/internal/config"
	"github.com/pgquectl/pgquectl/internal/install"
)

// uninstall's settings (flags).
var (
	keyUninstallForce = config.Key[bool]{Name: "force",
		Help: "uninstall even though queues hold unconsumed events (they are lost)"}
	keyUninstallDropRoles = config.Key[bool]{Name: "drop-roles",
		Help: "also drop the roles pgque_reader, pgque_writer, pgque_admin"}
	keyUninstallDryRun = config.Key[bool]{Name: "dry-run",
		Help: "print what would be removed and change nothing"}
)

func newUninstallCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "uninstall [--force] [--drop-roles] [--dry-run]",
		Short: "Remove the engine (schema pgque and its pg_cron jobs) from the database",
		Long: `uninstall removes the engine's pg_cron jobs (also when pg_cron lives in another
database: it connects there with the same credentials) and drops the pgque
schema, in one transaction under the install lock.

It refuses while any queue holds unconsumed events; --force drops them. The
cluster-wide roles pgque_reader, pgque_writer and pgque_admin stay unless
--drop-roles (which fails, changing nothing, while another database still
uses them).`,
		Example: `  pgquectl uninstall --dry-run
  pgquectl uninstall --force --drop-roles`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), installTimeout)
			defer cancel()
			opts := install.UninstallOptions{
				Force:     get(a, keyUninstallForce),
				DropRoles: get(a, keyUninstallDropRoles),
				DryRun:    get(a, keyUninstallDryRun),
				Out:       cmd.OutOrStdout(),
				Log:       a.log,
			}
			res, err := install.RunUninstall(ctx, a.conn(), opts)
			if err != nil {
				return fmt.Errorf("uninstall: %w", err)
			}
			if opts.DryRun {
				fmt.Fprintln(cmd.ErrOrStderr(), res)
			} else {
				fmt.Fprintln(cmd.OutOrStdout(), res)
			}
			return nil
		},
	}
	addFlag(cmd.Flags(), keyUninstallForce)
	addFlag(cmd.Flags(), keyUninstallDropRoles)
	addFlag(cmd.Flags(), keyUninstallDryRun)
	return cmd
}
