package main

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/spf13/cobra"

	"github.com/pgquectl/pgquectl/internal/db"
	"github.com/pgquectl/pgquectl/internal/install"
)

func init() { commands = append(commands, newVersionCmd) }

// version is the binary's version; release builds set it with
// -ldflags "-X main.version=v0.1.0".
var version = ""

// versionTimeout bounds the optional look at the database.
const versionTimeout = 5 * time.Second

// commit is the source revision; release builds may set it with
// -ldflags "-X main.commit=<sha>", else it comes from the VCS stamp Go
// embeds when building inside a git checkout (vcs.revision).
var commit = ""

func binaryVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// buildCommit returns the revision the binary was built from (with
// "-dirty" when the tree had changes), or "unknown" when not recorded
// (go test, go run, a build with -buildvcs=false).
func buildCommit() string {
	if commit != "" {
		return commit
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev == "" {
		return "unknown"
	}
	if modified == "true" {
		rev += "-dirty"
	}
	return rev
}

// versionLine is what --version prints.
func versionLine() string {
	return fmt.Sprintf("pgquectl %s (commit %s, engine %s)", binaryVersion(), buildCommit(), install.Version)
}

func newVersionCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the binary version, the engine version it installs and, if reachable, the installed one",
		Long: `version prints the pgquectl version and the engine version it installs. When
the database (--dsn, PGQUE_DSN, DATABASE_URL or PG* variables) is reachable it
also prints the engine version installed there; an unreachable database is
reported, not an error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "pgquectl  %s\n", binaryVersion())
			fmt.Fprintf(out, "commit    %s\n", buildCommit())
			fmt.Fprintf(out, "engine    %s (installed by this binary)\n", install.Version)
			c := a.conn()
			if c.ConnectTimeout > versionTimeout {
				c.ConnectTimeout = versionTimeout
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 2*versionTimeout)
			defer cancel()
			v, where, err := install.Installed(ctx, c)
			switch {
			case err == nil:
				fmt.Fprintf(out, "database  %s installed in %s\n", v, where)
			case errors.Is(err, db.ErrNotInstalled):
				fmt.Fprintf(out, "database  engine not installed in %s (run pgquectl install)\n", where)
			default:
				fmt.Fprintf(out, "database  not checked: %v\n", err)
			}
			return nil
		},
	}
}
