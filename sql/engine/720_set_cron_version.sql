-- pgque.set_cron_version(i_cron_version): prepare ticker_loop() for the
-- pg_cron version that will run it, and let it run (ticker_loop_enabled =
-- true; pgque.stop() sets it false). 60 s slots on every version, and the
-- loop runs pgque.maint() every 10 s between its rounds (ticker_maint_ms =
-- 10000: cron_jobs() registers no maintenance jobs). pg_cron >= 1.5 (two
-- ticker jobs on '1 seconds', the idle one's run waiting on the loop lock):
-- a 2500 ms overrun - the waiting run takes over 2.5 s past the minute, away
-- from the hourly purge job's start at the minute. Older versions (two
-- ticker jobs alternating minutes): a 1500 ms overrun - the run pg_cron
-- starts at the minute stands by and warms up, then takes over 1.5 s later
-- (should none be waiting, the holder's own job starts again at the next
-- minute). Returns: the slot in seconds.
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
    PERFORM pgque.set_setting('ticker_maint_ms', '10000');
    PERFORM pgque.set_setting('ticker_loop_enabled', 'true');
    RETURN 60;
END;
$$;
