-- pgque.tick_gen(i_at): which child of pgque.tick receives ticks made at
-- i_at: the time slot of length meta_rotation_ms(), modulo 3.
-- Locks: none. Called by: the ticker (insert), rotate_metadata (truncate).
CREATE OR REPLACE FUNCTION pgque.tick_gen(i_at timestamptz)
RETURNS smallint
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
BEGIN
    RETURN (SELECT (floor(extract(epoch FROM i_at) * 1000 / pgque.meta_rotation_ms())::bigint % 3)::smallint);
END;
$$;
