-- pgque.group_cursor_gen(): which child of pgque.group_cursor holds the live
-- cursor rows now (advanced by rotate_family through a sequence, so reading
-- it costs no row lock and writes nothing). Locks: none.
-- Called by: group_seed, rotate_family.
CREATE OR REPLACE FUNCTION pgque.group_cursor_gen()
RETURNS smallint
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
BEGIN
    RETURN (SELECT (coalesce(pg_sequence_last_value('pgque.group_cursor_gen_seq'), 0) % 3)::smallint);
END;
$$;
