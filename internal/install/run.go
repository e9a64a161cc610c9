package install

import (
	"context"
	"errors"
	"fmt"

	"github.com/pgquectl/pgquectl/internal/config"
	"github.com/pgquectl/pgquectl/internal/db"
)

// Run connects with c and installs (see Install).
func Run(ctx context.Context, c config.Connection, opts Options) (Result, error) {
	conn, err := db.Connect(ctx, c)
	if err != nil {
		return Result{Version: Version}, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return Install(ctx, conn, opts)
}

// RunUninstall connects with c and uninstalls (see Uninstall).
func RunUninstall(ctx context.Context, c config.Connection, opts UninstallOptions) (UninstallResult, error) {
	conn, err := db.Connect(ctx, c)
	if err != nil {
		return UninstallResult{}, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return Uninstall(ctx, conn, opts)
}

// Installed connects with c and returns the installed engine version and
// where it looked ("database X on host:port"). A database without the
// engine returns an error matching db.ErrNotInstalled.
func Installed(ctx context.Context, c config.Connection) (version, where string, err error) {
	conn, err := db.Connect(ctx, c)
	if err != nil {
		return "", "", err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	cfg := conn.Config()
	where = fmt.Sprintf("database %q on %s:%d", cfg.Database, cfg.Host, cfg.Port)
	v, _, err := InstalledVersion(ctx, conn)
	if err != nil {
		return "", where, err
	}
	if v == "" {
		return "", where, &db.Error{Kind: db.ErrNotInstalled, What: fmt.Sprintf("in database %q", conn.Config().Database),
			Err: errors.New("no pgque.engine_version row"), Hint: "run pgquectl install (with the same --dsn) to install the engine"}
	}
	return v, where, nil
}
