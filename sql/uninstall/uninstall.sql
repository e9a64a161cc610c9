-- uninstall.sql: remove the engine from this database: pgque's pg_cron jobs
-- (when pg_cron lives here; pgquectl uninstall also removes them from another
-- cron database) and the schema with everything in it. The cluster-wide
-- roles stay (pgquectl uninstall --drop-roles removes them).
-- pgquectl checks for unconsumed events before running this.
DO $uninstall$
BEGIN
    PERFORM pg_advisory_xact_lock(1885827445, 1);
    IF to_regprocedure('pgque.stop()') IS NOT NULL THEN
        PERFORM pgque.stop();
    END IF;
END
$uninstall$;
DROP SCHEMA IF EXISTS pgque CASCADE;
