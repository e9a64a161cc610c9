package install

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgquectl/pgquectl/internal/db"
)

// ErrForeignSchema: schema pgque exists but the install did not create it,
// or another role owns it. Whoever owns schema pgque (or may create in it)
// can run code as every caller of the engine, so the install refuses it.
var ErrForeignSchema = errors.New("schema pgque was not created by this role's pgque install")

// foreignSchemaHint says what to do about ErrForeignSchema.
const foreignSchemaHint = "inspect the schema, drop it (DROP SCHEMA pgque CASCADE) and install again"

// foreignSchemaMarker is in the message of every refusal of
// sql/install/00_preamble.sql that concerns schema pgque (its checks of
// other roles' objects and CREATE grants run there only).
const foreignSchemaMarker = "refusing to install into"

const (
	// sqlPinSearchPath: nothing the installer runs resolves a name through
	// a schema another role may write (00_preamble.sql sets the same).
	sqlPinSearchPath = `SET LOCAL search_path = pg_catalog, pg_temp`
	// sqlSchemaTrust: who owns schema pgque, whether that is exactly the
	// installing role, and whether pgque.engine_version is a plain table of
	// the installing role (a previous install made the schema). No row: no
	// schema. Reads the catalog only, never an object in pgque.
	sqlSchemaTrust = `
SELECT pg_catalog.pg_get_userbyid(n.nspowner)::text, current_user::text,
       n.nspowner OPERATOR(pg_catalog.=) r.oid,
       EXISTS (SELECT 1 FROM pg_catalog.pg_class c
                WHERE c.relnamespace OPERATOR(pg_catalog.=) n.oid
                  AND c.relname OPERATOR(pg_catalog.=) 'engine_version'::pg_catalog.name
                  AND c.relkind OPERATOR(pg_catalog.=) 'r'::"char"
                  AND c.relowner OPERATOR(pg_catalog.=) r.oid)
  FROM pg_catalog.pg_namespace n, pg_catalog.pg_roles r
 WHERE n.nspname OPERATOR(pg_catalog.=) 'pgque'::pg_catalog.name
   AND r.rolname OPERATOR(pg_catalog.=) current_user`
)

// checkSchema refuses a schema pgque that the installing role did not create
// with a pgque install, before anything in it is read. q runs in the
// install transaction.
func checkSchema(ctx context.Context, q Querier, database string) error {
	var owner, me string
	var mine, installed bool
	err := q.QueryRow(ctx, sqlSchemaTrust).Scan(&owner, &me, &mine, &installed)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil // no schema: the install creates it
	}
	if err != nil {
		return fmt.Errorf("checking who owns schema pgque: %w", db.MapError(err))
	}
	switch {
	case !mine:
		return fmt.Errorf("%w: in database %q schema pgque is owned by role %q, not by the installing role %q (membership is not enough); if a pgque install by %q made it, run the install as %q, otherwise %s (nothing was changed)",
			ErrForeignSchema, database, owner, me, owner, owner, foreignSchemaHint)
	case !installed:
		return fmt.Errorf("%w: in database %q schema pgque already exists but was not created by a pgque install (no pgque.engine_version table of the installing role); %s (nothing was changed)",
			ErrForeignSchema, database, foreignSchemaHint)
	}
	return nil
}

// foreignSchemaError turns a refusal of 00_preamble.sql into ErrForeignSchema
// (nil when err is something else).
func foreignSchemaError(err error, database string) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "42501" || !strings.Contains(pgErr.Message, foreignSchemaMarker) {
		return nil
	}
	msg := strings.TrimPrefix(pgErr.Message, "pgque: ")
	hint := foreignSchemaHint
	if strings.HasPrefix(pgErr.Hint, "Revoke") {
		hint = strings.TrimSuffix(strings.TrimSuffix(pgErr.Hint, " Nothing was changed."), ".")
	}
	return fmt.Errorf("%w: in database %q %s; %s (nothing was changed)", ErrForeignSchema, database, msg, hint)
}
