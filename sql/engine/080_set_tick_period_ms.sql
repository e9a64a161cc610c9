-- pgque.set_tick_period_ms(p_period_ms): set the installation's default tick
-- period (queues without their own tick_period_ms use it); NULL returns to the
-- classic PgQ thresholds. An invalid period raises set_setting's error with
-- SQLSTATE P0001, as PgQue; its hint gives the range (pgque.setting_spec()).
-- Returns: the period. Locks: the settings row. Writes: settings.
-- Called by: pgquectl tick, administrators.
CREATE OR REPLACE FUNCTION pgque.set_tick_period_ms(p_period_ms int)
RETURNS int
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
BEGIN
    BEGIN
        PERFORM pgque.set_setting('tick_period_ms', p_period_ms::text);
    EXCEPTION WHEN invalid_parameter_value THEN
        DECLARE
            v_msg text;
        BEGIN
            GET STACKED DIAGNOSTICS v_msg = MESSAGE_TEXT;
            RAISE EXCEPTION USING MESSAGE = v_msg, ERRCODE = 'raise_exception',
                                  HINT = (SELECT format('The period is %s..%s ms; NULL returns to the classic PgQ thresholds.',
                                                        s.min_value, s.max_value)
                                            FROM pgque.setting_spec() s
                                           WHERE s.name OPERATOR(pg_catalog.=) 'tick_period_ms');
        END;
    END;
    RETURN p_period_ms;
END;
$$;
