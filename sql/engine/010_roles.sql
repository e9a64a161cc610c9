-- 010_roles.sql: the three cluster-wide roles.
--
-- pgque_reader (consume) and pgque_writer (produce) are siblings; pgque_admin
-- is a member of both and manages queues. Creating them needs CREATEROLE; when
-- the installer may not create roles, an administrator creates them once (see
-- README "Install on a managed database") and the install finds them.
--
-- The installing role must be able to hand the roles out (GRANT pgque_writer
-- TO app): a superuser, a role with ADMIN OPTION on them, or, before
-- PostgreSQL 16 only, a role with CREATEROLE. On 16+ CREATEROLE is not
-- enough for roles another role created. Otherwise the install stops here,
-- having changed nothing, and says which GRANT ... WITH ADMIN OPTION to run
-- (SQLSTATE 42501, CONSTRAINT field 'pgque_roles_grantable', which
-- internal/install recognises).
DO $roles$
DECLARE
    v_role    text;
    v_missing text;
BEGIN
    FOREACH v_role IN ARRAY ARRAY['pgque_reader', 'pgque_writer', 'pgque_admin'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = v_role) THEN
            BEGIN
                EXECUTE format('CREATE ROLE %I NOLOGIN', v_role);
            EXCEPTION
                WHEN duplicate_object OR unique_violation THEN
                    NULL;  -- an install into another database of this cluster created it meanwhile
                WHEN insufficient_privilege THEN
                RAISE EXCEPTION 'pgque: role % does not exist and % may not create roles', v_role, current_user
                    USING HINT = 'Ask an administrator to run once: CREATE ROLE pgque_reader NOLOGIN; CREATE ROLE pgque_writer NOLOGIN; CREATE ROLE pgque_admin NOLOGIN; GRANT pgque_reader, pgque_writer TO pgque_admin; then run the install again.';
            END;
        END IF;
    END LOOP;
    -- Roles this installer could not grant to an application. (Roles it just
    -- created are grantable: 16+ gives their creator ADMIN OPTION.)
    SELECT pg_catalog.string_agg(pg_catalog.quote_ident(r.rolname), ', ' ORDER BY r.rolname)
      INTO v_missing
      FROM pg_catalog.pg_roles r
     WHERE r.rolname IN ('pgque_reader', 'pgque_writer', 'pgque_admin')
       AND NOT pg_catalog.pg_has_role(current_user, r.oid, 'MEMBER WITH ADMIN OPTION')
       AND NOT (pg_catalog.current_setting('server_version_num')::int < 160000
                AND NOT r.rolsuper
                AND (SELECT u.rolcreaterole FROM pg_catalog.pg_roles u WHERE u.rolname = current_user));
    IF v_missing IS NOT NULL THEN
        RAISE EXCEPTION 'pgque: role % cannot grant % to other roles, so it could not give applications access to pgque; nothing was changed', pg_catalog.quote_ident(current_user), v_missing
            USING ERRCODE = 'insufficient_privilege',
                  CONSTRAINT = 'pgque_roles_grantable',
                  DETAIL = CASE WHEN pg_catalog.current_setting('server_version_num')::int >= 160000
                           THEN 'The roles exist already, created by another role. From PostgreSQL 16 on, granting membership in a role needs ADMIN OPTION on it; CREATEROLE is not enough.'
                           ELSE 'The roles exist already, and this role has neither CREATEROLE nor ADMIN OPTION on them.' END,
                  HINT = pg_catalog.format('As a superuser (or a role holding ADMIN OPTION on them) run: GRANT %s TO %I WITH ADMIN OPTION; then run the install again.', v_missing, current_user);
    END IF;
    FOREACH v_role IN ARRAY ARRAY['pgque_reader', 'pgque_writer'] LOOP
        IF NOT EXISTS (
            SELECT 1
              FROM pg_catalog.pg_auth_members m
              JOIN pg_catalog.pg_roles r ON r.oid = m.roleid
              JOIN pg_catalog.pg_roles u ON u.oid = m.member
             WHERE r.rolname = v_role AND u.rolname = 'pgque_admin')
        THEN
            BEGIN
                EXECUTE format('GRANT %I TO pgque_admin', v_role);
            EXCEPTION WHEN duplicate_object OR unique_violation THEN
                NULL;  -- granted by a concurrent install into another database
            END;
        END IF;
    END LOOP;
END
$roles$;
