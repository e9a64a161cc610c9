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
// sql/engine/000_preamble.sql that concerns schema pgque (its checks of
// other roles' objects and CREATE grants run there only).
const foreignSchemaMarker = "refusing to install into"

const (
	// sqlPinSearchPath: nothing the installer runs resolves a name through
	// a schema another role may write (000_preamble.sql sets the same).
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
func checkSchema(ctx context.Context, q db.Querier, database string) error {
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

// foreignSchemaError turns a refusal of 000_preamble.sql into ErrForeignSchema
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

// sqlUninstallTrust lists what makes schema pgque unsafe to uninstall:
// the uninstall calls pgque.get_queue_info() and pgque.stop() and reads
// pgque.engine_version, so those must be the engine's (SECURITY DEFINER:
// they run as the schema owner, never as the uninstalling role) and nobody
// but the owner may have put anything there. NULL: nothing. Runs with the
// search_path pinned (sqlPinSearchPath).
const sqlUninstallTrust = `
WITH s AS (SELECT n.oid, n.nspowner, n.nspacl FROM pg_namespace n WHERE n.nspname = 'pgque')
SELECT nullif(concat_ws('; ',
  CASE WHEN NOT EXISTS (SELECT 1 FROM pg_class c, s WHERE c.relnamespace = s.oid AND c.relname = 'engine_version'
                           AND c.relkind = 'r' AND c.relowner = s.nspowner)
       THEN 'it holds no pgque.engine_version table of its owner ' || quote_ident(pg_get_userbyid((SELECT nspowner FROM s)))
  END,
  (SELECT 'objects of other roles than its owner: ' || string_agg(o.what, ', ' ORDER BY o.what)
     FROM (SELECT format('%s (owned by %s)', c.oid::regclass, pg_get_userbyid(c.relowner)) AS what
             FROM pg_class c, s WHERE c.relnamespace = s.oid AND c.relowner <> s.nspowner
           UNION ALL
           SELECT format('%s (owned by %s)', p.oid::regprocedure, pg_get_userbyid(p.proowner))
             FROM pg_proc p, s WHERE p.pronamespace = s.oid AND p.proowner <> s.nspowner
           UNION ALL
           SELECT format('type %s (owned by %s)', t.oid::regtype, pg_get_userbyid(t.typowner))
             FROM pg_type t, s WHERE t.typnamespace = s.oid AND t.typowner <> s.nspowner
           UNION ALL
           SELECT format('operator %s (owned by %s)', o.oid::regoperator, pg_get_userbyid(o.oprowner))
             FROM pg_operator o, s WHERE o.oprnamespace = s.oid AND o.oprowner <> s.nspowner) o),
  (SELECT 'CREATE on it granted to ' || string_agg(DISTINCT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE pg_get_userbyid(a.grantee)::text END, ', ')
     FROM s, aclexplode(s.nspacl) a WHERE a.privilege_type = 'CREATE' AND a.grantee <> s.nspowner),
  (SELECT 'functions the uninstall calls are not SECURITY DEFINER: ' || string_agg(p.oid::regprocedure::text, ', ' ORDER BY 1)
     FROM pg_proc p, s WHERE p.pronamespace = s.oid AND p.proname IN ('get_queue_info', 'stop') AND NOT p.prosecdef),
  (SELECT 'views or row security in it: ' || string_agg(c.oid::regclass::text, ', ' ORDER BY 1)
     FROM pg_class c, s WHERE c.relnamespace = s.oid AND (c.relrowsecurity OR c.relkind IN ('v', 'm')))
), '')`

// checkUninstall refuses to run anything in a schema pgque that is not the
// engine's (see sqlUninstallTrust). q runs in the uninstall transaction.
func checkUninstall(ctx context.Context, q db.Querier, database string) error {
	var problem *string
	if err := q.QueryRow(ctx, sqlUninstallTrust).Scan(&problem); err != nil {
		return fmt.Errorf("checking schema pgque before the uninstall: %w", db.MapError(err))
	}
	if problem == nil {
		return nil
	}
	return fmt.Errorf("%w: in database %q schema pgque does not look like a pgque install (%s), so the uninstall would run code someone else put there; refusing. Inspect the schema and drop it by hand (DROP SCHEMA pgque CASCADE) if it is not needed (nothing was changed)",
		ErrForeignSchema, database, *problem)
}
