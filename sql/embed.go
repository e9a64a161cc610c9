// Package sql embeds the engine's SQL files so the binary can install them.
// The same files install with psql: see README.md.
package sql

import "embed"

// FS holds manifest.txt and the SQL files it orders: engine/, broker/,
// procedures/ and uninstall/.
//
//go:embed manifest.txt engine/*.sql broker/*.sql procedures/*.sql uninstall/*.sql
var FS embed.FS
