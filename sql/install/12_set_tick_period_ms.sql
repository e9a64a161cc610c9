-- pgque.set_tick_period_ms(p_period_ms): set the installation's default tick
-- period (queues without their own tick_period_ms use it); NULL returns to the
-- classic PgQ thresholds. Returns: the period. Locks: the settings row.
-- Writes: settings.
-- Called by: pgquectl tick, administrators.
CREATE OR REPLACE FUNCTION pgque.set_tick_period_ms(p_period_ms int)
RETURNS int
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
BEGIN
    PERFORM pgque.set_setting('tick_period_ms', p_period_ms::text);
    RETURN p_period_ms;
END;
$$;
