// Package sql embeds the engine's SQL files so the binary can install them.
// The same files install with psql: see README.md.
package sql

import "embed"

// FS holds install/*.sql, procedures/*.sql and uninstall/*.sql.
//
//go:embed install/*.sql procedures/*.sql uninstall/*.sql
var FS embed.FS
