-- pgque.meta_rotation_ms(): the effective rotation period (ms) of the tick and
-- subscription tables: the setting, else clamp(300 x the shortest tick period
-- in use, 1 s, 30 s). Locks: none. Reads: settings, queue.
-- Called by: pgque.tick_gen, pgque.rotate_metadata, get_queue_info.
CREATE OR REPLACE FUNCTION pgque.meta_rotation_ms()
RETURNS int
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
BEGIN
    RETURN (SELECT coalesce(
        (SELECT value::int FROM pgque.settings WHERE name = 'meta_rotation_period_ms'),
        least(30000, greatest(1000, 300 * coalesce(
            (SELECT min(p) FROM (
                SELECT value::int AS p FROM pgque.settings WHERE name = 'tick_period_ms'
                UNION ALL
                SELECT queue_tick_period_ms FROM pgque.queue) s),
            1000)))));
END;
$$;
