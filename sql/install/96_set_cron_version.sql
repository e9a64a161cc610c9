-- pgque.set_cron_version(i_cron_version): size ticker_loop()'s slot to the
-- schedule pg_cron can run it on: 1 s slots with a 500 ms overrun on
-- pg_cron >= 1.5, 60 s slots with a 1500 ms overrun on older versions. The
-- overrun makes each run end after pg_cron has queued the next one, which
-- then starts at once: no gap at the handover (it stays below the slot so
-- queued runs cannot pile up). Returns: the slot in seconds.
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
    PERFORM pgque.set_setting('ticker_slot_seconds', CASE WHEN v_seconds THEN '1' ELSE '60' END);
    PERFORM pgque.set_setting('ticker_overrun_ms', CASE WHEN v_seconds THEN '500' ELSE '1500' END);
    RETURN CASE WHEN v_seconds THEN 1 ELSE 60 END;
END;
$$;
