-- pgque.subscription_gen(): which child of pgque.subscription holds the live
-- cursor rows now (advanced by rotate_metadata through a sequence, so reading
-- it costs no row lock and writes nothing). Locks: none.
-- Called by: consumer registration, rotate_metadata.
CREATE OR REPLACE FUNCTION pgque.subscription_gen()
RETURNS smallint
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
BEGIN
    RETURN (SELECT (coalesce(pg_sequence_last_value('pgque.subscription_gen_seq'), 0) % 3)::smallint);
END;
$$;
