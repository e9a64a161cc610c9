-- pgque.drain_retry_events(i_max_seconds): call maint_retry_events() until
-- it returns 0 or i_max_seconds (default 20) pass, committing after each
-- call so a burst of retries is redelivered in seconds without one long
-- transaction. ticker() also moves due retries on every call; this job is
-- the fallback when nothing ticks sub-second.
-- No SET clause (it COMMITs) and SECURITY INVOKER, run with pg_cron's
-- rights: so every name it uses - functions, operators, types - is
-- schema-qualified, and nothing resolves through the caller's search_path
-- (a planted public.make_interval(int) must never run).
-- Locks/writes: as maint_retry_events. Called by: pg_cron
-- ("CALL pgque.drain_retry_events()").
CREATE OR REPLACE PROCEDURE pgque.drain_retry_events(i_max_seconds pg_catalog.int4 DEFAULT 20)
LANGUAGE plpgsql
AS $$
DECLARE
    v_until pg_catalog.timestamptz := pg_catalog.clock_timestamp()
        OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs => pg_catalog.float8(coalesce(i_max_seconds, 20)));
BEGIN
    LOOP
        EXIT WHEN pgque.maint_retry_events() OPERATOR(pg_catalog.=) 0;
        COMMIT;
        EXIT WHEN pg_catalog.clock_timestamp() OPERATOR(pg_catalog.>=) v_until;
    END LOOP;
END;
$$;
