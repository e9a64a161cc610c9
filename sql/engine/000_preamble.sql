-- 000_preamble.sql: pin the install's search_path, serialize installs, make
-- sure schema pgque is ours (create it, or refuse one we did not create),
-- refuse a downgrade.
--
-- The whole install runs in one transaction (pgquectl install, or psql -1 -f).
-- The advisory lock (classid 0x70677175 'pgqu', objid 1) serializes concurrent
-- installs; it is released at commit.
--
-- Security rules of the engine (docs/design/engine.md, "Security"; the tests in
-- sql/security_test.go check them):
-- 1. The install pins search_path = pg_catalog, pg_temp for its transaction:
--    nothing in it resolves a name through a schema another role may write
--    (defaults, constraints and DO blocks are bound while it runs).
-- 2. Schema pgque must be created by the install itself. An existing pgque
--    schema is accepted only when it is owned by exactly the installing role
--    (membership in the owner is not enough), holds pgque.engine_version
--    (so a previous install made it), contains no object owned by another
--    role and grants CREATE to nobody else. Otherwise the install stops,
--    changing nothing: whoever owns or may create in pgque can run code as
--    every caller of the engine, the installer included. The check runs
--    before anything in pgque is read.
-- 3. Every SECURITY DEFINER function carries
--      SET search_path = pg_catalog, pgque, pg_temp
--    pg_catalog first (a pgque name never shadows a built-in, and an
--    unqualified call of a name both have, e.g. version(), means pg_catalog's:
--    call ours as pgque.version()); pg_temp last, so no temporary object can
--    shadow anything. public is never on it.
-- 4. The SECURITY INVOKER procedures pg_cron runs (ticker_loop,
--    drain_retry_events) may not have a SET clause (they COMMIT), so they run
--    with the caller's search_path: every function and operator in them is
--    schema-qualified (pg_catalog.pg_sleep, OPERATOR(pg_catalog.+), ...) or
--    they pin search_path before any other statement and again after every
--    COMMIT (a transaction-local setting ends with the transaction).
-- 5. Nothing in pgque is executable by PUBLIC (90_grants.sql).
SET LOCAL client_min_messages = warning;
SET LOCAL search_path = pg_catalog, pg_temp;
DO $lock$ BEGIN PERFORM pg_catalog.pg_advisory_xact_lock(1885827445, 1); END $lock$;

DO $preamble$
DECLARE
    -- Keep in step with pgque.version() and internal/install.Version.
    c_version_num constant int := 200;  -- 0.2.0
    c_hint constant text := 'Schema pgque must be created by the pgque install, by the role that installs. '
        'If a previous install by another role made it, run the install as that role. Otherwise inspect the '
        'schema, drop it (DROP SCHEMA pgque CASCADE) and install again. Nothing was changed.';
    v_me       oid := (SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname = current_user);
    v_owner    oid;
    v_acl      aclitem[];
    v_ev_owner oid;
    v_ev_kind  "char";
    v_foreign  text;
    v_installed int;
BEGIN
    IF pg_catalog.current_setting('server_version_num')::int < 140000 THEN
        RAISE EXCEPTION 'pgque needs PostgreSQL 14 or newer (this is %)', pg_catalog.current_setting('server_version');
    END IF;

    SELECT n.nspowner, n.nspacl INTO v_owner, v_acl FROM pg_catalog.pg_namespace n WHERE n.nspname = 'pgque';
    IF NOT FOUND THEN
        BEGIN
            CREATE SCHEMA pgque;  -- owned by current_user
        EXCEPTION WHEN duplicate_schema THEN
            RAISE EXCEPTION 'pgque: schema pgque was created by another session during this install; refusing to install into it'
                USING ERRCODE = 'insufficient_privilege', HINT = c_hint;
        END;
        RETURN;  -- a new, empty schema: nothing installed to compare with
    END IF;

    IF v_owner IS DISTINCT FROM v_me THEN
        RAISE EXCEPTION 'pgque: schema pgque already exists and is owned by role "%", not by the installing role "%" (membership is not enough); refusing to install into a schema the install did not create',
            pg_catalog.pg_get_userbyid(v_owner), current_user
            USING ERRCODE = 'insufficient_privilege', HINT = c_hint;
    END IF;
    SELECT c.relowner, c.relkind INTO v_ev_owner, v_ev_kind
      FROM pg_catalog.pg_class c
     WHERE c.relnamespace = 'pgque'::regnamespace AND c.relname = 'engine_version';
    IF NOT FOUND OR v_ev_kind <> 'r' OR v_ev_owner <> v_me THEN
        RAISE EXCEPTION 'pgque: schema pgque already exists but was not created by a pgque install (no pgque.engine_version table of %); refusing to install into it',
            current_user
            USING ERRCODE = 'insufficient_privilege', HINT = c_hint;
    END IF;
    SELECT pg_catalog.string_agg(o.what, ', ' ORDER BY o.what) INTO v_foreign
      FROM (SELECT pg_catalog.format('%s (owned by %s)', c.oid::regclass, pg_catalog.pg_get_userbyid(c.relowner)) AS what
              FROM pg_catalog.pg_class c WHERE c.relnamespace = 'pgque'::regnamespace AND c.relowner <> v_me
            UNION ALL
            SELECT pg_catalog.format('%s (owned by %s)', p.oid::regprocedure, pg_catalog.pg_get_userbyid(p.proowner))
              FROM pg_catalog.pg_proc p WHERE p.pronamespace = 'pgque'::regnamespace AND p.proowner <> v_me
            UNION ALL
            SELECT pg_catalog.format('type %s (owned by %s)', t.oid::regtype, pg_catalog.pg_get_userbyid(t.typowner))
              FROM pg_catalog.pg_type t WHERE t.typnamespace = 'pgque'::regnamespace AND t.typowner <> v_me
            UNION ALL
            SELECT pg_catalog.format('operator %s (owned by %s)', o.oid::regoperator, pg_catalog.pg_get_userbyid(o.oprowner))
              FROM pg_catalog.pg_operator o WHERE o.oprnamespace = 'pgque'::regnamespace AND o.oprowner <> v_me
            UNION ALL
            SELECT pg_catalog.format('collation pgque.%s (owned by %s)', co.collname, pg_catalog.pg_get_userbyid(co.collowner))
              FROM pg_catalog.pg_collation co WHERE co.collnamespace = 'pgque'::regnamespace AND co.collowner <> v_me
            UNION ALL
            SELECT pg_catalog.format('conversion pgque.%s (owned by %s)', cv.conname, pg_catalog.pg_get_userbyid(cv.conowner))
              FROM pg_catalog.pg_conversion cv WHERE cv.connamespace = 'pgque'::regnamespace AND cv.conowner <> v_me
            UNION ALL
            SELECT pg_catalog.format('text search configuration pgque.%s (owned by %s)', ts.cfgname, pg_catalog.pg_get_userbyid(ts.cfgowner))
              FROM pg_catalog.pg_ts_config ts WHERE ts.cfgnamespace = 'pgque'::regnamespace AND ts.cfgowner <> v_me
            UNION ALL
            SELECT pg_catalog.format('text search dictionary pgque.%s (owned by %s)', td.dictname, pg_catalog.pg_get_userbyid(td.dictowner))
              FROM pg_catalog.pg_ts_dict td WHERE td.dictnamespace = 'pgque'::regnamespace AND td.dictowner <> v_me
            UNION ALL
            SELECT pg_catalog.format('statistics object pgque.%s (owned by %s)', se.stxname, pg_catalog.pg_get_userbyid(se.stxowner))
              FROM pg_catalog.pg_statistic_ext se WHERE se.stxnamespace = 'pgque'::regnamespace AND se.stxowner <> v_me
           ) o;
    IF v_foreign IS NOT NULL THEN
        RAISE EXCEPTION 'pgque: schema pgque holds objects of other roles: %; refusing to install into it', v_foreign
            USING ERRCODE = 'insufficient_privilege', HINT = c_hint;
    END IF;
    SELECT pg_catalog.string_agg(DISTINCT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE pg_catalog.pg_get_userbyid(a.grantee)::text END, ', ')
      INTO v_foreign
      FROM pg_catalog.aclexplode(v_acl) a
     WHERE a.privilege_type = 'CREATE' AND a.grantee <> v_me;
    IF v_foreign IS NOT NULL THEN
        RAISE EXCEPTION 'pgque: other roles may create objects in schema pgque (CREATE granted to %); refusing to install into it', v_foreign
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'Revoke it (REVOKE CREATE ON SCHEMA pgque FROM ...), check the schema for objects they made, and install again. Nothing was changed.';
    END IF;

    -- Only now is anything in pgque read: it is ours.
    EXECUTE 'SELECT max(version_num) FROM pgque.engine_version' INTO v_installed;
    IF v_installed > c_version_num THEN
        RAISE EXCEPTION 'pgque: this database carries engine version_num % which is newer than the one being installed (%)', v_installed, c_version_num
            USING HINT = 'Use a pgquectl binary at least as new as the engine in the database; nothing was changed.';
    END IF;
END
$preamble$;

COMMENT ON SCHEMA pgque IS 'pgque: PgQ-style queue engine installed by pgquectl';
