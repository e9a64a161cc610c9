-- pgque.maint(): one round of periodic maintenance: confirm pending event
-- table switches (step 2), switch tables that are due (step 1, per queue),
-- move due retries back (one call of maint_retry_events), rotate the tick
-- and subscription tables. Returns: actions taken.
-- Locks/writes: as the functions it calls. Called by: cron, the daemon.
CREATE OR REPLACE FUNCTION pgque.maint()
RETURNS int
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_n    int := 0;
    v_name text;
BEGIN
    v_n := v_n + pgque.maint_rotate_tables_step2();
    FOR v_name IN SELECT queue_name FROM pgque.queue ORDER BY queue_id LOOP
        v_n := v_n + pgque.maint_rotate_tables_step1(v_name);
    END LOOP;
    v_n := v_n + pgque.maint_retry_events();
    v_n := v_n + pgque.rotate_metadata();
    RETURN v_n;
END;
$$;
