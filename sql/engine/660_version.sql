-- pgque.version(): the engine version installed (keep in step with
-- internal/install.Version and 000_preamble.sql). Locks: none.
-- Called by: pgquectl version/install, clients.
CREATE OR REPLACE FUNCTION pgque.version()
RETURNS text
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pgque, pg_temp
AS $$
    SELECT '0.2.0'::text;
$$;
