package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/pgquectl/pgquectl/internal/install"
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
				Force:     a.v.GetBool("force"),
				DropRoles: a.v.GetBool("drop-roles"),
				DryRun:    a.v.GetBool("dry-run"),
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
	cmd.Flags().Bool("force", false, "uninstall even though queues hold unconsumed events (they are lost)")
	cmd.Flags().Bool("drop-roles", false, "also drop the roles pgque_reader, pgque_writer, pgque_admin")
	cmd.Flags().Bool("dry-run", false, "print what would be removed and change nothing")
	return cmd
}
