-- 00_preamble.sql: serialize installs, refuse a downgrade, create the schema.
--
-- The whole install runs in one transaction (pgquectl install, or psql -1 -f).
-- The advisory lock (classid 0x70677175 'pgqu', objid 1) serializes concurrent
-- installs; it is released at commit.
SET LOCAL client_min_messages = warning;
DO $lock$ BEGIN PERFORM pg_advisory_xact_lock(1885827445, 1); END $lock$;

DO $preamble$
DECLARE
    -- Keep in step with pgque.version() and internal/install.Version.
    c_version_num constant int := 100;  -- 0.1.0
    v_installed int;
BEGIN
    IF current_setting('server_version_num')::int < 140000 THEN
        RAISE EXCEPTION 'pgque needs PostgreSQL 14 or newer (this is %)', current_setting('server_version');
    END IF;
    IF to_regclass('pgque.engine_version') IS NOT NULL THEN
        EXECUTE 'SELECT max(version_num) FROM pgque.engine_version' INTO v_installed;
        IF v_installed > c_version_num THEN
            RAISE EXCEPTION 'pgque: this database carries engine version_num % which is newer than the one being installed (%)', v_installed, c_version_num
                USING HINT = 'Use a pgquectl binary at least as new as the engine in the database; nothing was changed.';
        END IF;
    END IF;
END
$preamble$;

CREATE SCHEMA IF NOT EXISTS pgque;
COMMENT ON SCHEMA pgque IS 'pgque: PgQ-style queue engine installed by pgquectl';
