-- pgque.dedup_gen(i_at): which child of pgque.dedup receives transaction ids
-- recorded at i_at: the hour slot, modulo 3. A child is TRUNCATEd (by
-- group_rotate) only once its newest row is older than every queue's dedup
-- window, so a window longer than the slot is still honoured.
-- PL/pgSQL, not SQL: an SQL function with SET is parsed and planned on
-- every call (push calls it per transactionId row).
-- Returns: smallint. Locks: none. Called by: push, group_rotate.
CREATE OR REPLACE FUNCTION pgque.dedup_gen(i_at timestamptz)
RETURNS smallint
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pgque, pg_temp
AS $$
BEGIN
    RETURN (floor(extract(epoch FROM i_at) / 3600)::bigint % 3)::smallint;
END;
$$;
