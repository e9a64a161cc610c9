package pgstats

import (
	"context"

	"github.com/pgquectl/pgquectl/internal/db"
)

// Engine says whether the pgque engine is installed and readable here.
type Engine struct {
	Installed   bool   `json:"installed"`    // schema pgque exists
	SchemaUsage bool   `json:"schema_usage"` // the role may use it
	Version     string `json:"version"`      // pgque.version(); "" when not readable
}

// QueryEngine checks for schema pgque and the role's USAGE on it.
const QueryEngine = `
SELECT to_regnamespace('pgque') IS NOT NULL,
       coalesce(has_schema_privilege(to_regnamespace('pgque')::oid, 'USAGE'), false)`

// QueryEngineVersion reads the installed engine version.
const QueryEngineVersion = `SELECT pgque.version()`

// ReadEngine reads [Engine]. A missing EXECUTE privilege on pgque.version()
// is reported as ErrPermission with Installed and SchemaUsage filled in.
func ReadEngine(ctx context.Context, q db.Querier) (Engine, error) {
	var e Engine
	if err := queryOne(ctx, q, "checking for the pgque schema", QueryEngine, nil, &e.Installed, &e.SchemaUsage); err != nil {
		return e, err
	}
	if !e.Installed || !e.SchemaUsage {
		return e, nil
	}
	err := queryOne(ctx, q, "reading pgque.version()", QueryEngineVersion, nil, &e.Version)
	return e, err
}

// QueryMetaRotation reads the effective rotation period of the tick and
// subscription tables, in milliseconds.
const QueryMetaRotation = `SELECT pgque.meta_rotation_ms()`

// MetaRotationPeriod returns pgque.meta_rotation_ms() in seconds.
func MetaRotationPeriod(ctx context.Context, q db.Querier) (float64, error) {
	var ms int64
	err := queryOne(ctx, q, "reading pgque.meta_rotation_ms()", QueryMetaRotation, nil, &ms)
	return float64(ms) / 1000, err
}
