-- 01_roles.sql: the three cluster-wide roles.
--
-- pgque_reader (consume) and pgque_writer (produce) are siblings; pgque_admin
-- is a member of both and manages queues. Creating them needs CREATEROLE; when
-- the installer may not create roles, an administrator creates them once (see
-- README "Managed databases") and the install finds them.
DO $roles$
DECLARE
    v_role text;
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
