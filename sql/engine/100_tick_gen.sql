-- pgque.tick_gen(i_at): which child of pgque.tick receives ticks made at
-- i_at: the time slot of length meta_rotation_ms(), modulo 3.
-- meta_rotation_ms() (settings and every queue's period: ~20 us) is read at
-- most once a second per session and kept in the session setting
-- pgque.meta_rotation_ms ('<ms>@<epoch ms it is good until>'): a tick
-- calls this on every tick (the broker after every push). A changed period
-- reaches a session within a second; meanwhile any child is correct for a
-- tick (rotate_metadata truncates a child only when no reader needs its
-- ticks, and moves the ones still needed).
-- Locks: none. Writes: nothing (a session setting).
-- Called by: the ticker (tick_prepare), broker_create_queue, rotate_metadata.
CREATE OR REPLACE FUNCTION pgque.tick_gen(i_at timestamptz)
RETURNS smallint
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_cache text := current_setting('pgque.meta_rotation_ms', true);
    v_now   float8 := extract(epoch FROM clock_timestamp()) * 1000;
    v_ms    int;
BEGIN
    IF coalesce(v_cache, '') <> '' AND split_part(v_cache, '@', 2)::float8 > v_now THEN
        v_ms := split_part(v_cache, '@', 1)::int;
    ELSE
        v_ms := pgque.meta_rotation_ms();
        PERFORM set_config('pgque.meta_rotation_ms', v_ms || '@' || (v_now + 1000), false);
    END IF;
    RETURN (floor(extract(epoch FROM i_at) * 1000 / v_ms)::bigint % 3)::smallint;
END;
$$;
