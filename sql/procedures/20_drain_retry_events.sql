-- pgque.drain_retry_events(i_max_seconds): call maint_retry_events() until
-- it returns 0 or i_max_seconds (default 20) pass, committing after each
-- call so a burst of retries is redelivered in seconds without one long
-- transaction. No SET clause (it COMMITs). Locks/writes: as
-- maint_retry_events. Called by: pg_cron ("CALL pgque.drain_retry_events()").
CREATE OR REPLACE PROCEDURE pgque.drain_retry_events(i_max_seconds int DEFAULT 20)
LANGUAGE plpgsql
AS $$
DECLARE
    v_until timestamptz := clock_timestamp() + make_interval(secs => coalesce(i_max_seconds, 20));
BEGIN
    LOOP
        EXIT WHEN pgque.maint_retry_events() = 0;
        COMMIT;
        EXIT WHEN clock_timestamp() >= v_until;
    END LOOP;
END;
$$;
