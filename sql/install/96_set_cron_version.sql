-- pgque.set_cron_version(i_cron_version): prepare ticker_loop() for the
-- pg_cron version that will run it, and let it run (ticker_loop_enabled =
-- true; pgque.stop() sets it false). pg_cron >= 1.5 (two ticker jobs, the
-- idle one waiting on the loop lock): 60 s slots and a 2500 ms overrun -
-- the waiting run takes over 2.5 s past the minute, not in the second in
-- which pg_cron starts the '5 seconds' and '10 seconds' jobs (each a new
-- backend: CPU the new holder's first rounds would compete with); the
-- maintenance is pg_cron's (ticker_maint_ms = 0). Older versions (two
-- ticker jobs alternating minutes, no maintenance jobs): 60 s slots with a
-- 1500 ms overrun - the run pg_cron starts at the minute stands by and
-- warms up, then takes over 1.5 s later (should none be waiting, the
-- holder's own job starts again at the next minute) - and the loop runs
-- pgque.maint() every 10 s (ticker_maint_ms = 10000). Returns: the slot
-- in seconds.
-- Locks: settings rows. Writes: settings. Called by: start(), pgquectl tick.
CREATE OR REPLACE FUNCTION pgque.set_cron_version(i_cron_version text)
RETURNS int
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_seconds boolean;
BEGIN
    IF i_cron_version IS NULL OR i_cron_version !~ '^\d+\.\d+' THEN
        RAISE EXCEPTION 'pgque: pg_cron version "%" is not a version number', i_cron_version
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_seconds := (regexp_match(i_cron_version, '^(\d+)\.(\d+)'))::int[] >= ARRAY[1, 5];
    PERFORM pgque.set_setting('ticker_slot_seconds', '60');
    PERFORM pgque.set_setting('ticker_overrun_ms', CASE WHEN v_seconds THEN '2500' ELSE '1500' END);
    PERFORM pgque.set_setting('ticker_maint_ms', CASE WHEN v_seconds THEN '0' ELSE '10000' END);
    PERFORM pgque.set_setting('ticker_loop_enabled', 'true');
    RETURN 60;
END;
$$;
